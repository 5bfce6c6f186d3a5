"""Rankings, uncertainty and diagnostics from the folded statistics.

Fits are cached by (survey, method, λ, number of items, data version) and
warm-started from the previous θ̂ of the same survey when new answers arrive;
their uncertainty summaries are cached with them per confidence level and k.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import Comparison, Item, Respondent, Survey
from ..stats import BTLFit, competition_ranks, fit_debiased_mle_stats, fit_naive_mle_stats
from ..stats.inference import (
    MAX_ITEMS_COVARIANCE,
    Confidence,
    RankConfidence,
    bootstrap_confidence,
    confidence,
    laplacian,
    rank_confidence,
)
from ..stats.metrics import tie_groups
from ..stats.pairs import PairStats
from ..stats.theory import dividing_line_epsilon
from .aggregation import fold_pending, read_snapshot
from .errors import Conflict, Invalid
from .surveys import require_local, survey_items

__all__ = [
    "BOOTSTRAP_MAX_COMPARISONS",
    "METHODS",
    "PAIRWISE_MAX_ITEMS",
    "FitCache",
    "pairwise",
    "privacy_regime",
    "ranking",
]

METHODS = {"debiased_mle": fit_debiased_mle_stats, "naive_mle": fit_naive_mle_stats}
UNCERTAINTY = ("sandwich", "bootstrap", "none")
#: The bootstrap refits on every stored comparison: reserved for small samples.
BOOTSTRAP_MAX_COMPARISONS = 200_000
BOOTSTRAP_REPLICATES = 200
PAIRWISE_MAX_ITEMS = 300


@dataclass
class _Entry:
    fit: BTLFit
    stats: PairStats
    summaries: dict = field(default_factory=dict)


class FitCache:
    """Fits per (survey, method, λ, items, data version), and the latest θ̂ per
    (survey, method, λ) to warm-start the next fit when new answers arrive.

    Per process; each worker keeps its own (the API is stateless otherwise).
    """

    def __init__(self, size: int = 256) -> None:
        self._fits: OrderedDict[tuple, _Entry] = OrderedDict()
        self._warm: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple) -> _Entry | None:
        with self._lock:
            entry = self._fits.get(key)
            if entry is not None:
                self._fits.move_to_end(key)
            return entry

    def put(self, key: tuple, entry: _Entry) -> None:
        with self._lock:
            self._fits[key] = entry
            self._fits.move_to_end(key)
            self._warm[key[:3]] = entry.fit.theta
            self._warm.move_to_end(key[:3])
            for store in (self._fits, self._warm):
                while len(store) > self._size:
                    store.popitem(last=False)

    def warm_start(self, key: tuple, n_items: int) -> np.ndarray | None:
        with self._lock:
            theta = self._warm.get(key[:3])
        if theta is None:
            return None
        if theta.size < n_items:  # items were added since: they start at 0
            theta = np.concatenate((theta, np.zeros(n_items - theta.size)))
        return theta[:n_items]


def _check(method: str, lam: float | None, level: float, uncertainty: str) -> None:
    if method not in METHODS:
        raise Invalid(f"method must be one of {sorted(METHODS)}")
    if lam is not None and not (math.isfinite(lam) and 0 < lam <= 1e9):
        raise Invalid("lambda must be a number in (0, 1e9]")
    if not (math.isfinite(level) and 0.5 <= level < 1):
        raise Invalid("confidence must be in [0.5, 1)")
    if uncertainty not in UNCERTAINTY:
        raise Invalid(f"uncertainty must be one of {list(UNCERTAINTY)}")


def _fit(
    session: Session, survey: Survey, cache: FitCache, method: str, lam: float | None
) -> tuple[_Entry, int, list[Item]]:
    """The cached fit at the current data version (folding pending answers first),
    with the version and the survey's items."""
    fold_pending(session, survey.id, wait=True)
    for _ in range(10):
        items = survey_items(session, survey.id)
        m = len(items)
        base_key = (survey.id, method, lam, m)
        found: dict[int, _Entry | None] = {}

        def need_stats(version: int, base_key=base_key, found=found) -> bool:
            found[version] = cache.get((*base_key, version))
            return found[version] is None

        snap = read_snapshot(session, survey.id, m, need_stats=need_stats)
        if snap.stats is not None and snap.stats.n_pairs and int(snap.stats.j.max()) >= m:
            continue  # items were added (and answered) after we read them: read them again
        # The entry found while reading (not a second lookup: it may be evicted meanwhile).
        entry = found.get(snap.version) if snap.stats is None else None
        if entry is None:
            stats = snap.stats if snap.stats is not None else read_snapshot(session, survey.id, m).stats
            key = (*base_key, snap.version)
            fit = METHODS[method](stats, lam, theta0=cache.warm_start(key, m))
            entry = _Entry(fit, stats)
            cache.put(key, entry)
        return entry, snap.version, items
    raise Conflict("the survey's items changed while reading; retry")


def _seed(*parts) -> int:
    """A fixed seed per (survey, version, …): repeated reads draw the same rank samples."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


def _summaries(
    session: Session,
    survey: Survey,
    entry: _Entry,
    version: int,
    method: str,
    level: float,
    k: int | None,
    uncertainty: str,
) -> tuple[Confidence | None, RankConfidence | None, str | None]:
    """(interval summary, rank summary, reason when unavailable), cached on the entry."""
    key = (level, k, uncertainty)
    if key in entry.summaries:
        return entry.summaries[key]
    fit = entry.fit
    m = fit.theta.size
    result: tuple = (None, None, None)
    if uncertainty == "none":
        result = (None, None, "not requested")
    elif m > MAX_ITEMS_COVARIANCE:
        result = (None, None, f"uncertainty is computed for at most {MAX_ITEMS_COVARIANCE} items")
    elif fit.n_comparisons == 0:
        result = (None, None, "no comparisons yet")
    else:
        if uncertainty == "bootstrap":
            if method != "debiased_mle":
                raise Invalid("uncertainty=bootstrap is available for method=debiased_mle")
            conf = _bootstrap(session, survey, fit, level)
        else:
            conf = confidence(fit, level)
        ranks = rank_confidence(
            conf.estimate,
            conf.cov,
            level,
            k,
            rng=np.random.default_rng(_seed(survey.id, version, method, level, k, uncertainty)),
            component=conf.component,
        )
        result = (conf, ranks, None)
    entry.summaries[key] = result
    return result


def _bootstrap(session: Session, survey: Survey, fit: BTLFit, level: float) -> Confidence:
    rows = session.execute(
        select(Comparison.i, Comparison.j, Comparison.epsilon).where(Comparison.survey_id == survey.id)
    ).all()
    if len(rows) > BOOTSTRAP_MAX_COMPARISONS:
        raise Invalid(
            f"uncertainty=bootstrap is for small samples (at most {BOOTSTRAP_MAX_COMPARISONS} "
            "comparisons); use the default sandwich intervals"
        )
    i, j, eps = (np.asarray(c) for c in zip(*rows, strict=True))
    # Answers that arrived after the fit's snapshot are left out of the design.
    if i.size != fit.n_comparisons:
        raise Invalid("new answers arrived while computing the bootstrap; retry")
    return bootstrap_confidence(
        fit.theta.size,
        i,
        j,
        eps.astype(float),
        fit,
        level,
        n_boot=BOOTSTRAP_REPLICATES,
        rng=np.random.default_rng(_seed(survey.id, fit.n_comparisons, "bootstrap")),
    )


def privacy_regime(n_items: int, n_comparisons: int, g: float) -> dict:
    """Where the survey's ε sits relative to the consistency dividing line.

    Corollaries 1–2: with m items and L comparisons per pair, ε ≍ 1/√(mL) is the
    line below which estimates stop improving with more respondents, and
    ε ≳ log(mL)/√(mL) guarantees consistency. In incomplete designs L is the mean
    number of comparisons per pair; ε is the effective level whose coth²(ε/2)
    equals G(ε).
    """
    n_pairs = n_items * (n_items - 1) // 2
    if n_comparisons == 0 or n_pairs == 0:
        return {"verdict": "no data", "explanation": "No comparisons yet."}
    per_pair = n_comparisons / n_pairs
    eps_eff = 2.0 * math.atanh(1.0 / math.sqrt(g)) if g > 1.0 else math.inf
    line = dividing_line_epsilon(n_items, per_pair)
    mL = n_items * per_pair
    consistent = math.log(mL) / math.sqrt(mL) if mL > 1 else math.inf
    if eps_eff >= consistent:
        verdict = "above"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) is above the consistency "
            f"threshold log(mL)/√(mL) ≈ {consistent:.2g} of the paper's Corollary 1 (m = {n_items} items, "
            f"L ≈ {per_pair:.3g} comparisons per pair): more respondents keep sharpening the ranking."
        )
    elif eps_eff > line:
        verdict = "near"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) lies between the dividing line "
            f"1/√(mL) ≈ {line:.2g} and the consistency threshold ≈ {consistent:.2g}: estimates improve only "
            "slowly as respondents are added; a larger ε would help more than more respondents."
        )
    else:
        verdict = "below"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) is at or below the dividing line "
            f"1/√(mL) ≈ {line:.2g} (Corollary 2): the privacy noise dominates and more respondents will not "
            "make the ranking reliable; raise ε."
        )
    return {
        "effective_epsilon": eps_eff,
        "dividing_line_epsilon": line,
        "consistency_epsilon": consistent,
        "comparisons_per_pair": per_pair,
        "verdict": verdict,
        "explanation": words,
    }


def _graph(stats: PairStats) -> dict:
    """Algebraic connectivity of the comparison graph (edge weights n_ij), and of its
    normalized Laplacian D^{-1/2} L D^{-1/2} (scale-free, in [0, 2]; near 0: a bottleneck)."""
    m = stats.n_items
    if m > MAX_ITEMS_COVARIANCE or stats.n_pairs == 0:
        return {"algebraic_connectivity": None, "algebraic_connectivity_normalized": None}
    lap = laplacian(m, stats.i, stats.j, stats.n.astype(float))
    vals = np.linalg.eigvalsh(lap)
    deg = np.diag(lap).copy()
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    norm_vals = np.linalg.eigvalsh(inv[:, None] * lap * inv[None, :])
    return {
        "algebraic_connectivity": float(max(vals[1], 0.0)) if m > 1 else 0.0,
        "algebraic_connectivity_normalized": float(max(norm_vals[1], 0.0)) if m > 1 else 0.0,
    }


def _spend(session: Session, survey_id: str) -> dict:
    values = np.array(
        session.scalars(
            select(Respondent.epsilon_spent).where(
                Respondent.survey_id == survey_id, Respondent.n_comparisons > 0
            )
        ).all(),
        dtype=float,
    )
    if values.size == 0:
        return {"respondents": 0}
    q = np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])
    return {
        "respondents": int(values.size),
        "mean": float(values.mean()),
        "min": float(q[0]),
        "p25": float(q[1]),
        "median": float(q[2]),
        "p75": float(q[3]),
        "max": float(q[4]),
    }


def _ci(lo: float, hi: float) -> list[float] | None:
    return None if not (math.isfinite(lo) and math.isfinite(hi)) else [float(lo), float(hi)]


def ranking(
    session: Session,
    survey: Survey,
    cache: FitCache,
    method: str = "debiased_mle",
    lam: float | None = None,
    k: int | None = None,
    level: float = 0.95,
    uncertainty: str = "sandwich",
) -> dict:
    """The ``GET …/ranking`` answer: items by rank with uncertainty, top-K, tied
    groups, and diagnostics."""
    require_local(survey)
    _check(method, lam, level, uncertainty)
    n_before = len(survey_items(session, survey.id))
    if k is not None and not 1 <= k <= n_before:
        raise Invalid(f"k must be between 1 and the number of items ({n_before})")
    entry, version, items = _fit(session, survey, cache, method, lam)
    m = len(items)
    fit, stats = entry.fit, entry.stats
    conf, ranks, reason = _summaries(session, survey, entry, version, method, level, k, uncertainty)
    theta = fit.theta
    rank = competition_ranks(theta)
    order = np.lexsort((np.arange(m), rank))  # rank order; ties keep the survey's order
    counts = stats.item_counts()
    out_items = []
    for x in order:
        row = {
            "item_id": items[x].id,
            "label": items[x].label,
            "position": items[x].position,
            "score": float(theta[x]),
            "rank": int(rank[x]),
            "comparisons": int(counts[x]),
        }
        if conf is not None:
            row["se"] = None if not math.isfinite(conf.se[x]) else float(conf.se[x])
            row["ci"] = _ci(conf.lower[x], conf.upper[x])
            row["rank_ci"] = [int(v) for v in ranks.rank_ci[x]]
            row["rank_ci_simultaneous"] = [int(v) for v in ranks.rank_ci_simultaneous[x]]
            if ranks.p_top_k is not None:
                row["p_top_k"] = float(ranks.p_top_k[x])
        out_items.append(row)
    groups = tie_groups(theta)
    top_k = boundary_tied = certain = None
    if k is not None:
        top_k = [items[x].id for x in order[:k]]
        boundary_tied = bool(k < m and groups[order[k - 1]] == groups[order[k]])
        if ranks is not None and ranks.top_k_certain is not None:
            certain = [items[x].id for x in order[:k] if ranks.top_k_certain[x]]
    tied = None if ranks is None else [[items[x].id for x in g] for g in ranks.tied_groups]
    tiers = None if ranks is None else [[items[x].id for x in g] for g in ranks.tiers]
    components = None
    if not fit.connected:
        components = [
            [items[x].id for x in np.flatnonzero(fit.component == c)] for c in range(fit.n_components)
        ]
    spend = _spend(session, survey.id)
    diagnostics = {
        "respondents": spend["respondents"],
        "comparisons": int(fit.n_comparisons),
        "pairs_observed": int(stats.n_pairs),
        "pairs_total": m * (m - 1) // 2,
        "connected": bool(fit.connected),
        "n_components": int(fit.n_components),
        "components": components,
        **_graph(stats),
        "lambda": float(fit.lam),
        "lambda_source": "query" if lam is not None else "default: G(epsilon)",
        "iterations": int(fit.iterations),
        "converged": bool(fit.converged),
        "gradient_norm": float(fit.gradient_norm),
        "solver": fit.solver,
        "G": float(stats.G),
        "H": float(stats.H) if stats.n_comparisons else None,
        "epsilon_min": float(stats.epsilon_min) if stats.n_comparisons else None,
        "respondent_epsilon_total": spend,
        "privacy_regime": privacy_regime(m, int(fit.n_comparisons), float(stats.G)),
        "ties": bool(np.unique(groups).size < m),
        "top_k_boundary_tied": boundary_tied,
        "data_version": int(version),
    }
    uncertainty_info = {
        "available": conf is not None,
        "method": None if conf is None else conf.method,
        "level": level,
        "reason": reason,
        "critical_value": None if ranks is None else float(ranks.critical_value),
    }
    return {
        "survey_id": survey.id,
        "method": method,
        "items": out_items,
        "top_k": top_k,
        "top_k_certain": certain,
        "tied_groups": tied,
        "tiers": tiers,
        "uncertainty": uncertainty_info,
        "diagnostics": diagnostics,
    }


def pairwise(
    session: Session,
    survey: Survey,
    cache: FitCache,
    level: float = 0.95,
    method: str = "debiased_mle",
    lam: float | None = None,
) -> dict:
    """Estimated P(row item beats column item) with confidence intervals."""
    require_local(survey)
    _check(method, lam, level, "sandwich")
    if len(survey_items(session, survey.id)) > PAIRWISE_MAX_ITEMS:
        raise Invalid(f"the pairwise matrix is available for at most {PAIRWISE_MAX_ITEMS} items")
    entry, version, items = _fit(session, survey, cache, method, lam)
    m = len(items)
    conf, _, reason = _summaries(session, survey, entry, version, method, level, None, "sandwich")
    if conf is None:
        nan = np.full((m, m), np.nan)
        p = lo = hi = nan
    else:
        p, lo, hi = conf.win_probability()

    def rows(a: np.ndarray) -> list[list[float | None]]:
        return [[None if not math.isfinite(v) else round(float(v), 6) for v in r] for r in a]

    return {
        "survey_id": survey.id,
        "method": method,
        "level": level,
        "items": [{"item_id": it.id, "label": it.label} for it in items],
        "probability": rows(p),
        "lower": rows(lo),
        "upper": rows(hi),
        "available": conf is not None,
        "reason": reason,
        "data_version": int(version),
    }
