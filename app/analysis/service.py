"""Rankings and win probabilities: the answers of ``GET …/ranking`` and ``GET …/pairwise``.

:func:`ranking` ranks a survey's items from the cached fit (:mod:`app.analysis.fits`)
with their intervals and rank summaries (:mod:`app.analysis.intervals`) and the
diagnostics (:mod:`app.analysis.diagnostics`); its docstring bounds the work of each
step. The parameters a client may ask for are checked here, the confidence levels
among :data:`LEVELS` (docs/uncertainty.md).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit
from sqlalchemy.orm import Session

from ..core.db.models import Survey
from ..core.deadline import Deadline
from ..core.errors import Invalid
from ..stats import competition_ranks
from ..stats.clusters import ClusterMoments
from ..stats.metrics import tie_groups
from ..surveys.items import active_item_count, active_items
from ..surveys.service import require_local
from .bootstrap import BOOTSTRAP_MAX_REPLICATES, BOOTSTRAP_MIN_REPLICATES, BOOTSTRAP_REPLICATES
from .diagnostics import _entry_graph, _spend, privacy_regime
from .fits import METHODS, FitCache, _fit
from .intervals import _randomization, _summaries, _Summary
from .results import (
    Diagnostics,
    PairwiseItem,
    PairwiseOut,
    RankedItem,
    RankingOut,
    UncertaintyInfo,
)

__all__ = [
    "LEVELS",
    "PAIRWISE_MAX_ITEMS",
    "check_ranking_parameters",
    "offered_level",
    "pairwise",
    "ranking",
]

UNCERTAINTY = ("sandwich", "bootstrap", "none")
COVARIANCE = ("cluster", "model")
PAIRWISE_MAX_ITEMS = 300
#: The confidence levels offered: two decimals from 0.50 to 0.99, and 0.995 and 0.999.
#: Each level of a fit is a rescaling of what is kept per fit, with its own cached rank
#: summaries (O(m²) each), so the set is finite (52 levels) rather than any number in [0.5, 1).
LEVELS = (*(round(0.5 + x / 100, 2) for x in range(50)), 0.995, 0.999)


def _check(
    method: str, lam: float | None, level: float, uncertainty: str, covariance: str = "cluster"
) -> float:
    """Validate the parameters; returns the confidence level as one of :data:`LEVELS`."""
    if method not in METHODS:
        raise Invalid(f"method must be one of {sorted(METHODS)}")
    if lam is not None and not (math.isfinite(lam) and 0 < lam <= 1e9):
        raise Invalid("lambda must be a number in (0, 1e9]")
    level = offered_level(level)
    if uncertainty not in UNCERTAINTY:
        raise Invalid(f"uncertainty must be one of {list(UNCERTAINTY)}")
    if covariance not in COVARIANCE:
        raise Invalid(f"covariance must be one of {list(COVARIANCE)}")
    return level


def check_ranking_parameters(
    method: str, lam: float | None, level: float, uncertainty: str, covariance: str, replicates: int
) -> None:
    """What :func:`ranking` refuses (422) before it fits: for checks made in advance (jobs)."""
    _check(method, lam, level, uncertainty, covariance)
    if uncertainty == "bootstrap" and method != "debiased_mle":
        raise Invalid("uncertainty=bootstrap is available for method=debiased_mle")
    if uncertainty == "bootstrap" and not BOOTSTRAP_MIN_REPLICATES <= replicates <= BOOTSTRAP_MAX_REPLICATES:
        raise Invalid(f"replicates must be between {BOOTSTRAP_MIN_REPLICATES} and {BOOTSTRAP_MAX_REPLICATES}")


def offered_level(level: float) -> float:
    """``level`` as one of :data:`LEVELS` (422 otherwise): every level is its own cached
    computation, so a client must not be able to mint unboundedly many."""
    if not (math.isfinite(level) and 0.5 <= level < 1):
        raise Invalid("confidence must be in [0.5, 1)")
    offered = [v for v in LEVELS if abs(v - level) < 1e-9]
    if not offered:
        raise Invalid("confidence must have at most two decimals (0.50, 0.51, …, 0.99), or be 0.995 or 0.999")
    return offered[0]


_ESTIMANDS = {
    "cluster": "the BTL scores of the population the respondents were drawn from; each respondent is one "
    "independent unit (cluster-robust sandwich over {g} respondents)",
    "cluster_cr2": "the BTL scores of the population the respondents were drawn from; each respondent is one "
    "independent unit (cluster-robust sandwich over {g} respondents with a small-sample correction and "
    "degrees of freedom for so few)",
    "cluster_bound": "the BTL scores of the population the respondents were drawn from; with only {g} "
    "respondents their spread cannot be estimated yet, so the intervals use an upper bound on how strongly "
    "one respondent's answers can go together (wider than needed, never narrower)",
    "cluster_bootstrap": "the BTL scores of the population the respondents were drawn from; intervals from "
    "resampling the {g} respondents with all their answers",
    "sandwich": "the BTL scores, treating every comparison as an independent answer (model-based sandwich); "
    "one respondent's answers usually go together, so these intervals can be too narrow",
    "bootstrap": "the BTL scores, treating every comparison as an independent answer (parametric bootstrap)",
}


def _uncertainty_info(summary: _Summary, level: float, covariance: str) -> UncertaintyInfo:
    conf, ranks = summary.conf, summary.ranks
    common = {"covariance": covariance, "level": level, "reason": summary.reason, "message": summary.message}
    if conf is None or ranks is None:  # ranks are summarized exactly when conf is
        return UncertaintyInfo(available=False, method=None, critical_value=None, **common)
    return UncertaintyInfo(
        available=True,
        method=conf.method,
        estimand=_ESTIMANDS[conf.method].format(g=conf.n_clusters),
        n_clusters=conf.n_clusters,
        interval_critical_value=float(conf.critical_value),
        critical_value=float(ranks.critical_value),
        corrections={
            name: (value if isinstance(value, bool) else float(value))
            for name, value in conf.corrections.items()
        },
        widened=int(np.count_nonzero(conf.widened)) if conf.widened is not None else 0,
        **common,
    )


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
    covariance: str = "cluster",
    replicates: int = BOOTSTRAP_REPLICATES,
    deadline: Deadline | None = None,
) -> RankingOut:
    """The ``GET …/ranking`` answer: items by rank with uncertainty, top-K, tied
    groups, and diagnostics. ``deadline`` bounds the long steps.

    **Bounded work.** With m items and N stored comparisons of a survey:

    * the fit reads the per-pair statistics (O(pairs)); the solver's work grows with the
      pairs. The cluster-robust sums come from the answer log, read from the last fold
      seen (:mod:`app.analysis.answer_log`: O(new answers × their respondents' earlier
      answers)); their meat costs O(P² m) up to ``MOMENTS_MAX_ITEMS`` items and O(N)
      beyond;
    * intervals (m ≤ ``MAX_ITEMS_COVARIANCE``) cost O(m³ + N) — a few m×m
      factorizations and at most m/2 second-order correction steps of O(m²) each; rank
      summaries O(m² + 4,000·m); the graph diagnostics O(m³) once per fit;
    * the bootstrap costs ``replicates`` × (N + a refit), plus O(m³) per replicate for
      ``covariance=model``; ``replicates`` is at most ``BOOTSTRAP_MAX_REPLICATES`` and a
      request whose predicted work (:func:`~app.analysis.bootstrap.bootstrap_seconds`) is
      far beyond the time budget is refused before it starts;
    * every long step runs under a :class:`~app.core.deadline.Deadline` (the
      ``PRIVRANK_ANALYSIS_SECONDS`` budget, the client's disconnection, shutdown),
      checked between replicates and between the interval computation's steps;
    * confidence levels are taken from :data:`LEVELS` (52 values), so a client cannot
      mint unboundedly many cached summaries per survey version, and the cache never
      holds more than its byte budget (``PRIVRANK_ANALYSIS_CACHE_MB``).
    """
    deadline = deadline or Deadline.none()
    require_local(survey)
    level = _check(method, lam, level, uncertainty, covariance)
    if uncertainty == "bootstrap" and not BOOTSTRAP_MIN_REPLICATES <= replicates <= BOOTSTRAP_MAX_REPLICATES:
        raise Invalid(f"replicates must be between {BOOTSTRAP_MIN_REPLICATES} and {BOOTSTRAP_MAX_REPLICATES}")
    n_before = active_item_count(session, survey)
    if k is not None and not 1 <= k <= n_before:
        raise Invalid(f"k must be between 1 and the number of items ({n_before})")
    entry, version, items = _fit(session, survey, cache, method, lam, deadline)
    deadline.check()
    summary = _summaries(
        session,
        survey,
        cache,
        entry,
        version,
        method,
        level,
        k,
        uncertainty,
        covariance,
        replicates,
        deadline,
    )
    conf, ranks = summary.conf, summary.ranks
    fit, stats = summary.entry.fit, summary.entry.stats
    items = items if fit.theta.size == len(items) else active_items(session, survey)
    m = len(items)
    theta = fit.theta
    rank = competition_ranks(theta)
    order = np.lexsort((np.arange(m), rank))  # rank order; ties keep the survey's order
    counts = stats.item_counts()
    out_items = []
    for x in order:
        row = RankedItem(
            item_id=items[x].id,
            label=items[x].label,
            position=items[x].position,
            score=float(theta[x]),
            rank=int(rank[x]),
            comparisons=int(counts[x]),
            added_at=items[x].created_at,
        )
        if conf is not None and ranks is not None:  # ranks are summarized exactly when conf is
            row.se = None if not math.isfinite(conf.se[x]) else float(conf.se[x])
            row.ci = _ci(conf.lower[x], conf.upper[x])
            row.rank_ci = [int(v) for v in ranks.rank_ci[x]]
            row.rank_ci_simultaneous = [int(v) for v in ranks.rank_ci_simultaneous[x]]
            if ranks.p_top_k is not None:
                row.p_top_k = float(ranks.p_top_k[x])
            if conf.interval_reason is not None and conf.interval_reason[x] is not None:
                row.interval_reason = conf.interval_reason[x]
                bound = conf.lower[x] if conf.interval_reason[x] == "wins_all" else conf.upper[x]
                row.score_bound = float(bound) if math.isfinite(bound) else None
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
    used = summary.entry.clusters
    spend, per_respondent = _spend(session, survey, cache, used if isinstance(used, ClusterMoments) else None)
    graph = _entry_graph(cache, summary.entry, deadline)
    diagnostics = Diagnostics(
        respondents=spend["respondents"],
        comparisons_per_respondent=per_respondent,
        comparisons=int(fit.n_comparisons),
        pairs_observed=int(stats.n_pairs),
        pairs_total=m * (m - 1) // 2,
        connected=bool(fit.connected),
        n_components=int(fit.n_components),
        components=components,
        algebraic_connectivity=graph.plain,
        algebraic_connectivity_normalized=graph.normalized,
        lambda_=float(fit.lam),
        lambda_source="query" if lam is not None else "default: G(epsilon)",
        iterations=int(fit.iterations),
        converged=bool(fit.converged),
        gradient_norm=float(fit.gradient_norm),
        solver=fit.solver,
        G=float(stats.G),
        H=float(stats.H) if stats.n_comparisons else None,
        epsilon_min=float(stats.epsilon_min) if stats.n_comparisons else None,
        respondent_epsilon_total=spend,
        privacy_regime=privacy_regime(m, int(fit.n_comparisons), float(stats.G)),
        ties=bool(np.unique(groups).size < m),
        top_k_boundary_tied=boundary_tied,
        data_version=int(version),
        randomization_p_value=_randomization(survey, summary.entry),
    )
    return RankingOut(
        survey_id=survey.id,
        method=method,
        items=out_items,
        top_k=top_k,
        top_k_certain=certain,
        tied_groups=tied,
        tiers=tiers,
        uncertainty=_uncertainty_info(summary, level, covariance),
        diagnostics=diagnostics,
    )


def pairwise(
    session: Session,
    survey: Survey,
    cache: FitCache,
    level: float = 0.95,
    method: str = "debiased_mle",
    lam: float | None = None,
    covariance: str = "cluster",
    deadline: Deadline | None = None,
) -> PairwiseOut:
    """Estimated P(row item beats column item) with confidence intervals (at most
    ``PAIRWISE_MAX_ITEMS`` items: O(m²) numbers in the answer)."""
    deadline = deadline or Deadline.none()
    require_local(survey)
    level = _check(method, lam, level, "sandwich", covariance)
    n_items = active_item_count(session, survey)
    if n_items > PAIRWISE_MAX_ITEMS:
        raise Invalid(f"the pairwise matrix is available for at most {PAIRWISE_MAX_ITEMS} items")
    entry, version, items = _fit(session, survey, cache, method, lam, deadline)
    deadline.check()
    summary = _summaries(
        session, survey, cache, entry, version, method, level, None, "sandwich", covariance, deadline=deadline
    )
    conf, fit = summary.conf, summary.entry.fit
    items = items if fit.theta.size == len(items) else active_items(session, survey)
    m = len(items)
    if conf is None:
        # The point estimates are still the fit's; only their intervals are missing.
        with np.errstate(invalid="ignore"):
            p = expit(fit.theta[:, None] - fit.theta[None, :])
        cross = fit.component[:, None] != fit.component[None, :]
        p[cross] = np.nan
        np.fill_diagonal(p, np.nan)
        lo = hi = np.full((m, m), np.nan)
    else:
        p, lo, hi = conf.win_probability()

    def rows(a: np.ndarray) -> list[list[float | None]]:
        return [[None if not math.isfinite(v) else round(float(v), 6) for v in r] for r in a]

    return PairwiseOut(
        survey_id=survey.id,
        method=method,
        level=level,
        items=[PairwiseItem(item_id=it.id, label=it.label) for it in items],
        probability=rows(p),
        lower=rows(lo),
        upper=rows(hi),
        available=conf is not None,
        reason=summary.reason,
        message=summary.message,
        method_intervals=None if conf is None else conf.method,
        data_version=int(version),
    )
