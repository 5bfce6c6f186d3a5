"""Ranking surveys: one ε-ranking-DP synthetic ranking per respondent, and consensus rankings.

A respondent submits one ordering of the survey's items (best → worst), privatized by the
Mallows mechanism on the device or by the server (:func:`submit_ranking`); only the
synthetic ranking is stored. The privacy unit is the whole ranking (ε-ranking DP,
Definition 3 of *Ranking Differential Privacy*): a respondent may submit once (a second
synthetic copy would compose, docs/mechanisms.md §3.3), and the ranking costs ε of the
respondent budget.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from ..analysis.aggregation import encode_rankings, fold_pending, read_ranking_snapshot
from ..analysis.export import csv_chunks
from ..analysis.results import ConsensusItem, ConsensusOut, UncertaintyInfo
from ..analysis.service import offered_level
from ..core import idempotency
from ..core.cache import ByteLRU, nbytes
from ..core.db.models import Item, PendingBatch, Ranking, Respondent, Survey
from ..core.deadline import Deadline, WorkSlots
from ..core.errors import Conflict, Invalid
from ..core.idempotency import Receipt, Stored
from ..respondents.results import QuestionItem, QuestionOut
from ..respondents.service import answer_epsilon, budget_remaining, registered_epsilon
from ..respondents.spending import Purchase, spend_and_store
from ..stats.consensus import borda_confidence, btl_confidence, fit_ranking_btl
from ..stats.inference import Confidence, rank_confidence
from ..stats.rankings import (
    RankingStats,
    adjacent_flip_probability,
    borda_aggregate,
    complete_ranking,
    kemeny_consensus,
    kemeny_objective,
    lehmer_aggregate,
    mallows_privatize,
    random_permutation,
)
from ..surveys.items import survey_items

__all__ = [
    "CONSENSUS_METHODS",
    "RANKINGS_CSV_COLUMNS",
    "ConsensusCache",
    "consensus",
    "iter_ranking_rows",
    "iter_rankings_csv",
    "question",
    "submit_ranking",
]

log = logging.getLogger("privrank.rankings")

CONSENSUS_METHODS = ("borda", "lehmer", "kemeny", "btl")
#: Fewest rankings for which intervals are given: below it the normal approximation
#: undercovers (0.84 at 5 rankings, 0.92 at 10 in the review's simulation).
MIN_RANKINGS_FOR_INTERVALS = 30
#: Why a consensus has no intervals (``uncertainty.reason_code``): the method has no
#: standard errors (lehmer, kemeny), or fewer than MIN_RANKINGS_FOR_INTERVALS rankings.
CONSENSUS_REASONS = ("no_standard_errors", "too_few_rankings")
RANKINGS_CSV_COLUMNS = ("respondent", "epsilon", "source", "ranking", "created_at")
#: Separator of item ids in the ``ranking`` column of rankings.csv (ids never contain it).
RANKING_SEPARATOR = ">"


def _check_ranking_survey(survey_status: str, kind: str, model: str) -> None:
    if survey_status != "open":
        raise Conflict("the survey is closed")
    if kind != "ranking":
        raise Conflict("this survey asks for pairwise comparisons, not rankings")
    if model != "local":  # pragma: no cover - creation refuses central ranking surveys
        raise Conflict("ranking surveys use the local privacy model")


def _fingerprint(privatized: bool, epsilon: float | None) -> str:
    """Idempotency fingerprint: the mode and ε only — never the ranking, nor which or how
    many items it lists (a partial ranking's item set is itself a preference)."""
    return idempotency.fingerprint(kind="ranking", privatized=privatized, epsilon=epsilon)


def _positions(ranking: Sequence[str], items: list[Item], complete: bool) -> np.ndarray:
    """Item positions of the submitted ids; Invalid without naming any submitted item."""
    index = {item.id: item.position for item in items}
    m = len(items)
    if not ranking:
        raise Invalid("ranking must list at least one item")
    if len(ranking) > m:
        raise Invalid(f"ranking lists more entries than the survey's {m} items")
    try:
        pos = np.fromiter((index[x] for x in ranking), dtype=np.int64, count=len(ranking))
    except KeyError:
        raise Invalid("ranking contains an id that is not an item of this survey") from None
    if np.unique(pos).size != pos.size:
        raise Invalid("ranking lists an item more than once")
    if complete and pos.size != m:
        raise Invalid(
            f"a privatized ranking must list all {m} items: complete it on the device before "
            "privatizing (unranked items below, in random order)"
        )
    return pos


def submit_ranking(
    session: Session,
    survey: Survey,
    respondent: Respondent,
    ranking: Sequence[str],
    privatized: bool,
    epsilon: float | None,
    idempotency_key: str | None = None,
) -> Stored:
    """Validate, complete and privatize (unless the client did) and store one ranking
    (through the one write path, :func:`app.respondents.spending.spend_and_store`).

    With ``privatized: false`` the server completes a partial ranking (the unranked items
    go below the ranked ones, in uniformly random order) and privatizes it with the
    Mallows mechanism at the respondent's ε (:func:`app.stats.rankings.mallows_privatize`,
    OS CSPRNG); with ``privatized: true`` the device already did both and sends a full
    synthetic ranking with its ε. Only the synthetic ranking is stored; the given one
    exists in memory for the duration of the request and never reaches a log line or an
    error message (errors name no submitted item)."""
    shape = _fingerprint(privatized, epsilon)
    replayed = idempotency.replay(session, respondent.id, idempotency_key, shape)
    if replayed is not None:
        return replayed
    _check_ranking_survey(survey.status, survey.kind, survey.privacy_model)
    eps = answer_epsilon(survey, respondent, privatized, epsilon)
    items = survey_items(session, survey.id)
    m = len(items)
    pos = _positions(ranking, items, complete=privatized)
    if privatized:
        synthetic, source = pos, "client"
    else:
        # Completion and the Mallows draw both use the OS CSPRNG.
        synthetic, source = mallows_privatize(complete_ranking(pos, m), eps), "server"
    del pos

    def check_more(session: Session) -> None:
        if session.scalar(select(func.count()).select_from(Item).where(Item.survey_id == survey.id)) != m:
            raise Conflict("the survey's items changed while the ranking was sent; fetch them and retry")
        if session.scalar(select(Ranking.id).where(Ranking.respondent_id == respondent.id)) is not None:
            raise _second_ranking()

    def store(session: Session, receipt: Receipt) -> bool:
        # A second ranking of the respondent violates the unique respondent_id (a race).
        session.execute(
            insert(Ranking),
            [
                {
                    "survey_id": survey.id,
                    "respondent_id": respondent.id,
                    "ordering": [int(x) for x in synthetic],
                    "epsilon": eps,
                    "source": source,
                }
            ],
        )
        batch = encode_rankings(synthetic[None, :], np.array([eps]))
        session.add(PendingBatch(survey_id=survey.id, n=1, payload=batch))
        return False

    stored = spend_and_store(
        session,
        survey,
        respondent,
        Purchase(accepted=1, cost=eps, count=0, what="a ranking"),
        key=idempotency_key,
        shape=shape,
        check_survey=_check_ranking_survey,
        check_more=check_more,
        store=store,
        duplicate=lambda session: _second_ranking(),
    )
    if not stored.replayed:
        log.info("survey %s: stored a ranking (%s-privatized)", survey.id, source)
    return stored


def _second_ranking() -> Conflict:
    return Conflict("this respondent already submitted a ranking (one per respondent)")


def question(session: Session, survey: Survey, respondent: Respondent) -> QuestionOut:
    """What a respondent of a ranking survey is asked: the items in a fresh uniformly random
    order (so the presentation order carries no systematic bias), and what privacy it gets."""
    if survey.kind != "ranking":
        raise Conflict(f"this survey asks for pairwise comparisons: GET /v1/surveys/{survey.id}/pairs")
    items = survey_items(session, survey.id)
    shown = [items[k] for k in random_permutation(len(items))]
    answered = session.scalar(select(Ranking.id).where(Ranking.respondent_id == respondent.id)) is not None
    eps = float(registered_epsilon(respondent))  # ranking surveys are local-model surveys
    m = len(items)
    return QuestionOut(
        survey_id=survey.id,
        kind="ranking",
        status=survey.status,
        items=[QuestionItem(id=it.id, label=it.label) for it in shown],
        answered=answered,
        epsilon=eps,
        mallows_b=eps / (m - 1),
        adjacent_swap_probability=adjacent_flip_probability(m, eps),
        epsilon_whole_ranking=eps * m / 2,
        budget_remaining=budget_remaining(survey, respondent),
    )


# -- consensus ---------------------------------------------------------------------------


class ConsensusCache:
    """Consensus computations per (survey, method, λ, level, data version), per process,
    in a byte-bounded LRU: the analysis cache's when given (one memory budget per
    worker, ``PRIVRANK_ANALYSIS_CACHE_MB``), else one of its own; computed in turn with
    the other long computations (``work``)."""

    def __init__(
        self, lru: ByteLRU | None = None, work: WorkSlots | None = None, max_bytes: int = 64 * 2**20
    ) -> None:
        self.lru = lru if lru is not None else ByteLRU(max_bytes)
        self.work = work if work is not None else WorkSlots(2)

    def get(self, key: tuple) -> _Core | None:
        return self.lru.get(("consensus", *key))

    def put(self, key: tuple, value: _Core) -> None:
        self.lru.put(("consensus", *key), value, nbytes(value))

    def get_ranks(self, key: tuple, k: int | None):
        return self.lru.get(("consensus-ranks", *key, k))

    def put_ranks(self, key: tuple, k: int | None, ranks) -> None:
        """Rank summaries per k, dropped with the consensus they belong to."""
        self.lru.put(("consensus-ranks", *key, k), ranks, nbytes(ranks), parents=(("consensus", *key),))


def _seed(*parts) -> np.random.Generator:
    """Tie-breaking seeded by (survey, data version, method): the same data always gives
    the same consensus, on every worker."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


@dataclass(frozen=True, eq=False)
class _Core:
    """One consensus computation (cached per survey, method, λ, level and data version)."""

    order: np.ndarray  # item indices, best first
    objective: int  # its Kendall objective: total distance to the stored rankings
    score: np.ndarray | None  # borda points or btl θ̂; None for lehmer and kemeny
    conf: Confidence | None  # intervals (borda, btl), when there are enough rankings
    reason: str | None  # why conf is None, in a sentence
    reason_code: str | None  # the same as a code (:data:`CONSENSUS_REASONS`)
    extra: dict[str, Any]  # the method's own diagnostics (the answer's free-form ``diagnostics``)
    exact_ties: list[list[int]] | None  # borda: groups of items with equal position sums


def _compute(stats: RankingStats, method: str, lam: float, rng: np.random.Generator, level: float) -> _Core:
    m = stats.n_items
    score: np.ndarray | None = None
    conf: Confidence | None = None
    reason: str | None = None
    reason_code: str | None = None
    extra: dict[str, Any] = {}
    exact_ties = None
    if method == "borda":
        order = borda_aggregate(stats, rng)
        score = m - stats.mean_position
        sums = stats.position_sum
        groups = [np.flatnonzero(sums == v) for v in np.unique(sums)]
        exact_ties = [g.tolist() for g in groups if g.size > 1]
    elif method == "lehmer":
        order = lehmer_aggregate(stats, rng)
        reason = "the Lehmer majority has no standard errors"
        reason_code = "no_standard_errors"
    elif method == "kemeny":
        res = kemeny_consensus(stats, rng)
        order = res.order
        extra = {
            "exact": res.exact,
            "algorithm": res.method,
            "optimal_orders": res.n_optima,
            "lower_bound": res.lower_bound,
            "optimality_gap": res.gap,
        }
        reason = "the Kemeny consensus has no standard errors"
        reason_code = "no_standard_errors"
    else:
        fit = fit_ranking_btl(stats, lam)
        score = fit.theta
        order = np.lexsort((rng.random(m), -fit.theta))
        extra = {
            "lambda": float(fit.lam),
            "iterations": int(fit.iterations),
            "converged": bool(fit.converged),
            "gradient_norm": float(fit.gradient_norm),
        }
    order = np.asarray(order, dtype=np.int64)
    if method in ("borda", "btl"):
        if stats.n < MIN_RANKINGS_FOR_INTERVALS:
            reason = (
                f"intervals need at least {MIN_RANKINGS_FOR_INTERVALS} rankings (their normal approximation "
                "covers too little below that)"
            )
            reason_code = "too_few_rankings"
        else:
            conf = borda_confidence(stats, level) if method == "borda" else btl_confidence(stats, fit, level)
    objective = int(kemeny_objective(order, stats))
    return _Core(order, objective, score, conf, reason, reason_code, extra, exact_ties)


def consensus(
    session: Session,
    survey: Survey,
    cache: ConsensusCache,
    method: str = "borda",
    lam: float | None = None,
    k: int | None = None,
    level: float = 0.95,
    deadline: Deadline | None = None,
) -> ConsensusOut:
    """The ``GET …/ranking`` answer of a ranking survey. ``deadline`` bounds the work
    (the consensus and its intervals are O(m²)–O(m³) with m ≤ 256)."""
    deadline = deadline or Deadline.none()
    if method not in CONSENSUS_METHODS:
        raise Invalid(f"method must be one of {list(CONSENSUS_METHODS)} for a ranking survey")
    if lam is not None and (method != "btl" or not (math.isfinite(lam) and 0 < lam <= 1e9)):
        raise Invalid("lambda applies to method=btl and must be in (0, 1e9]")
    level = offered_level(level)
    items = survey_items(session, survey.id)
    m = len(items)
    if k is not None and not 1 <= k <= m:
        raise Invalid(f"k must be between 1 and the number of items ({m})")
    fold_pending(session, survey.id, wait=True)
    snap = read_ranking_snapshot(session, survey.id, m)
    stats = snap.stats
    if stats.n == 0:
        raise Conflict("no rankings yet")
    lam_used = 1.0 if lam is None else float(lam)
    key = (survey.id, method, lam_used, level, snap.version)
    core = cache.get(key)
    if core is None:
        deadline.check()
        with cache.work.hold(deadline):
            core = _compute(stats, method, lam_used, _seed(survey.id, snap.version, method), level)
        cache.put(key, core)
    order = core.order
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(1, m + 1)
    conf = core.conf
    ranks = None
    if conf is not None:
        ranks = cache.get_ranks(key, k)
    if conf is not None and ranks is None:
        with cache.work.hold(deadline):
            ranks = rank_confidence(
                conf.estimate,
                conf.cov,
                level,
                k,
                rng=_seed(survey.id, snap.version, method, level, k),
                check=deadline.check,
                df=conf.df,
            )
        cache.put_ranks(key, k, ranks)
    mean_pos = stats.mean_position
    score = core.score
    rows = []
    for x in order:
        row = ConsensusItem(
            item_id=items[x].id,
            label=items[x].label,
            position=items[x].position,
            rank=int(rank[x]),
            score=None if score is None else float(score[x]),
            mean_position=float(mean_pos[x]),
        )
        if conf is not None and ranks is not None:  # ranks are summarized exactly when conf is
            row.se = float(conf.se[x])
            row.ci = [float(conf.lower[x]), float(conf.upper[x])]
            row.rank_ci = [int(v) for v in ranks.rank_ci[x]]
            row.rank_ci_simultaneous = [int(v) for v in ranks.rank_ci_simultaneous[x]]
            if ranks.p_top_k is not None:
                row.p_top_k = float(ranks.p_top_k[x])
        rows.append(row)
    top_k = certain = None
    if k is not None:
        top_k = [items[x].id for x in order[:k]]
        if ranks is not None and ranks.top_k_certain is not None:
            certain = [items[x].id for x in order[:k] if ranks.top_k_certain[x]]
    pairs = m * (m - 1) // 2
    eps_min = snap.epsilon_min
    diagnostics: dict[str, Any] = {
        "rankings": int(stats.n),
        "items": m,
        "data_version": int(snap.version),
        "epsilon_min": eps_min,
        "mechanism": "Mallows (epsilon-ranking DP), b = epsilon/(m-1) per pair",
        "adjacent_swap_probability_max": None if eps_min is None else adjacent_flip_probability(m, eps_min),
        "kendall_objective": core.objective,
        "mean_kendall_distance": core.objective / stats.n,
        "normalized_kendall_distance": core.objective / (stats.n * pairs) if pairs else 0.0,
        "tie_break": "uniformly random, seeded by the survey and its data version",
        **core.extra,
    }
    if core.exact_ties is not None:
        diagnostics["exact_ties"] = [[items[x].id for x in g] for g in core.exact_ties]
    if method == "lehmer":
        diagnostics["label_dependent"] = (
            "Lehmer codes are taken in the survey's item order; relabelling items can change the result"
        )
    return ConsensusOut(
        survey_id=survey.id,
        method=method,
        items=rows,
        order=[items[x].id for x in order],
        top_k=top_k,
        top_k_certain=certain,
        tied_groups=None if ranks is None else [[items[x].id for x in g] for g in ranks.tied_groups],
        tiers=None if ranks is None else [[items[x].id for x in g] for g in ranks.tiers],
        uncertainty=UncertaintyInfo(
            available=conf is not None,
            method=None if conf is None else conf.method,
            level=level,
            reason=core.reason if conf is None else None,
            reason_code=core.reason_code if conf is None else None,
            min_rankings=MIN_RANKINGS_FOR_INTERVALS if core.reason_code == "too_few_rankings" else None,
            critical_value=None if ranks is None else float(ranks.critical_value),
        ),
        diagnostics=diagnostics,
    )


# -- export -------------------------------------------------------------------------------


def iter_ranking_rows(session: Session, survey_id: str, chunk: int = 2000) -> Iterator[list[tuple]]:
    """The rankings export's rows (:data:`RANKINGS_CSV_COLUMNS`), typed — ``epsilon`` a float,
    ``created_at`` a UTC datetime — in batches of at most ``chunk``, streaming from the database."""
    ids = [it.id for it in survey_items(session, survey_id)]
    query = (
        select(Ranking.respondent_id, Ranking.epsilon, Ranking.source, Ranking.ordering, Ranking.created_at)
        .where(Ranking.survey_id == survey_id)
        .order_by(Ranking.id)
        .execution_options(yield_per=chunk)
    )
    for part in session.execute(query).partitions():
        yield [
            (rid, float(eps), src, RANKING_SEPARATOR.join(ids[p] for p in order), ts)
            for rid, eps, src, order, ts in part
        ]


def iter_rankings_csv(session: Session, survey_id: str, chunk: int = 2000) -> Iterator[str]:
    """The synthetic rankings as CSV: respondent, epsilon, source, ranking (item ids best → worst,
    joined by ``>``), created_at. ``app.stats.rankings`` on these rows reproduces the consensus."""
    yield from csv_chunks(RANKINGS_CSV_COLUMNS, iter_ranking_rows(session, survey_id, chunk))
