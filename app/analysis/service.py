"""Rankings, uncertainty and diagnostics from the folded statistics.

Fits are cached by (survey, method, λ, number of items, data version) and warm-started
from the previous θ̂ of the same survey when new answers arrive; the level-free part of
their intervals (centre, covariance: docs/uncertainty.md §6, "Cost") and the draws of
their rank summaries once per fit, the intervals per (confidence level, uncertainty,
covariance) and their rank summaries per level and k, all in one memory budget
(:class:`FitCache`, least recently used evicted first, by bytes). :func:`ranking` answers
``GET …/ranking``; its docstring bounds the work of each step.
"""

from __future__ import annotations

import hashlib
import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from scipy.special import expit
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..core.cache import OBJECT_BYTES, ByteLRU, nbytes
from ..core.db.models import Comparison, Item, Respondent, Survey
from ..core.deadline import Deadline, WorkSlots
from ..core.errors import Conflict, Invalid
from ..stats import BTLFit, competition_ranks, fit_debiased_mle_stats, fit_naive_mle_stats, pair_stats
from ..stats.clusters import ClusterMoments
from ..stats.inference import (
    MAX_ITEMS_COVARIANCE,
    REASONS,
    Clusters,
    ClusterSource,
    Confidence,
    IntervalsUnavailable,
    RankConfidence,
    Uncertainty,
    bootstrap_confidence,
    cluster_bootstrap_confidence,
    rank_draws,
    rank_summaries,
    with_k,
)
from ..stats.inference import uncertainty as level_free_uncertainty
from ..stats.mechanisms import randomization_p_value
from ..stats.metrics import tie_groups
from ..stats.pairs import PairStats, reduce_by_pair
from ..stats.theory import dividing_line_epsilon
from ..surveys.items import active_item_count, active_items, archived_positions, survey_items
from ..surveys.service import require_local
from .aggregation import fold_pending, read_snapshot
from .answer_log import AnswerLogStore
from .results import (
    Diagnostics,
    PairwiseItem,
    PairwiseOut,
    PrivacyRegime,
    RankedItem,
    RankingOut,
    UncertaintyInfo,
)

__all__ = [
    "BOOTSTRAP_MAX_COMPARISONS",
    "BOOTSTRAP_MAX_REPLICATES",
    "BOOTSTRAP_MIN_REPLICATES",
    "BOOTSTRAP_REPLICATES",
    "CACHE_BYTES",
    "LEVELS",
    "METHODS",
    "PAIRWISE_MAX_ITEMS",
    "FitCache",
    "bootstrap_seconds",
    "check_ranking_parameters",
    "current_fit",
    "eps_of",
    "offered_level",
    "pairwise",
    "privacy_regime",
    "ranking",
]

METHODS = {"debiased_mle": fit_debiased_mle_stats, "naive_mle": fit_naive_mle_stats}
UNCERTAINTY = ("sandwich", "bootstrap", "none")
COVARIANCE = ("cluster", "model")
#: The bootstrap refits on every stored comparison: reserved for small samples.
BOOTSTRAP_MAX_COMPARISONS = 200_000
#: Replicates of the bootstrap: the default, and the range a client may ask for.
BOOTSTRAP_REPLICATES = 200
BOOTSTRAP_MIN_REPLICATES = 20
BOOTSTRAP_MAX_REPLICATES = 2000
#: Predicted cost of one bootstrap replicate with one BLAS thread, fitted to replicates
#: at 2,000 items and 100,000 comparisons from 1,000 respondents. Per comparison
#: (resampling, reduction to pairs, the warm-started refit) and per m³ (the m×m
#: pseudo-inverse of each parametric replicate). They are lower bounds in practice,
#: and a request is refused only when the prediction exceeds
#: ``BOOTSTRAP_REFUSE_FACTOR`` × the budget; anything closer is left to the deadline.
BOOTSTRAP_SECONDS_PER_COMPARISON = 2.0e-7
BOOTSTRAP_SECONDS_PER_CUBE = 6.0e-11
BOOTSTRAP_REFUSE_FACTOR = 2.0
PAIRWISE_MAX_ITEMS = 300
#: The confidence levels offered: two decimals from 0.50 to 0.99, and 0.995 and 0.999.
#: Each level of a fit is a rescaling of what is kept per fit, with its own cached rank
#: summaries (O(m²) each), so the set is finite (52 levels) rather than any number in [0.5, 1).
LEVELS = (*(round(0.5 + x / 100, 2) for x in range(50)), 0.995, 0.999)
#: Default memory budget of a :class:`FitCache` (PRIVRANK_ANALYSIS_CACHE_MB sets the service's).
CACHE_BYTES = 512 * 2**20


def bootstrap_seconds(n_items: int, n_comparisons: int, replicates: int, covariance: str) -> float:
    """Predicted seconds of a bootstrap (see ``BOOTSTRAP_SECONDS_PER_COMPARISON``)."""
    per = n_comparisons * BOOTSTRAP_SECONDS_PER_COMPARISON
    if covariance == "model":
        per += float(n_items) ** 3 * BOOTSTRAP_SECONDS_PER_CUBE
    return replicates * per


@dataclass(eq=False)
class _Entry:
    fit: BTLFit
    stats: PairStats
    key: tuple | None = None  # its key in the cache (None: not cached)
    clusters: ClusterSource | None = None
    graph: _Connectivity | None = None  # _graph(stats), computed on first use
    #: :func:`~app.stats.mechanisms.randomization_p_value` of the stored answers, from
    #: their own ε (set with ``clusters``, which reads them).
    randomization: float | None = None
    #: Positions of the archived items left out of ``stats`` (the others renumbered 0 … m−1).
    archived: tuple[int, ...] = ()


@dataclass(frozen=True, eq=False)
class _Intervals:
    """The intervals of one fit at one (level, uncertainty, covariance[, replicates])."""

    conf: Confidence | None
    reason: str | None  # machine-readable, when conf is None
    message: str | None  # a plain sentence, when conf is None
    entry: _Entry  # the fit the intervals belong to


@dataclass(frozen=True, eq=False)
class _Summary:
    """The uncertainty of one fit at one (level, k, uncertainty, covariance[, replicates])."""

    conf: Confidence | None
    ranks: RankConfidence | None
    reason: str | None  # machine-readable, when conf is None
    message: str | None  # a plain sentence, when conf is None
    entry: _Entry  # the fit the summary belongs to


class _Rows:
    """One survey's comparisons as arrays, in id order, with respondents coded 0 … G−1."""

    def __init__(self) -> None:
        self.last_id = 0
        self.codes: dict[str, int] = {}
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.n = 0

    def add(self, rows) -> None:
        if not rows:
            return
        ids, resp, i, j, y, eps = zip(*rows, strict=True)
        codes = self.codes
        c = np.fromiter((codes.setdefault(r, len(codes)) for r in resp), dtype=np.int64, count=len(resp))
        part = (
            c,
            np.asarray(i, dtype=np.int64),
            np.asarray(j, dtype=np.int64),
            np.asarray(y, dtype=np.int8),
            np.asarray(eps, dtype=np.float64),
        )
        self.parts.append(part)
        self.last_id = max(self.last_id, int(max(ids)))
        self.n += len(ids)

    def arrays(self) -> tuple[np.ndarray, ...]:
        if len(self.parts) > 1:
            self.parts = [tuple(np.concatenate(col) for col in zip(*self.parts, strict=True))]
        if not self.parts:
            return (np.zeros(0, dtype=np.int64),) * 3 + (np.zeros(0, dtype=np.int8), np.zeros(0))
        return self.parts[0]

    def size(self) -> int:
        """Bytes held: the arrays, and each respondent code (a string key and an int)."""
        return sum(a.nbytes for part in self.parts for a in part) + len(self.codes) * (2 * OBJECT_BYTES)


class RowStore:
    """Each survey's stored comparisons (respondent, i, j, ỹ, ε), read incrementally.

    Comparisons are append-only, so a read fetches only the rows with an id above the
    last one seen, then checks the survey's row count: a row with a smaller id that
    committed late (or rows removed with their survey) makes the counts differ, and
    the survey is read again whole. Kept in the :class:`FitCache`'s memory budget.
    """

    def __init__(self, lru: ByteLRU) -> None:
        self._lru = lru

    def read(self, session: Session, survey_id: str) -> tuple[np.ndarray, ...]:
        """(respondent codes, i, j, ỹ, ε) of every stored comparison of the survey."""
        key = ("rows", survey_id)
        rows = self._lru.pop(key) or _Rows()  # taken out while read: one reader extends it
        cols = (
            Comparison.id,
            Comparison.respondent_id,
            Comparison.i,
            Comparison.j,
            Comparison.y_tilde,
            Comparison.epsilon,
        )
        for attempt in range(3):
            if attempt == 2:
                rows = _Rows()  # read whole: one statement, consistent by itself
            new = session.execute(
                select(*cols)
                .where(Comparison.survey_id == survey_id, Comparison.id > rows.last_id)
                .order_by(Comparison.id)
            ).all()
            rows.add(new)
            if attempt == 2:
                break
            total = session.scalar(select(func.count()).where(Comparison.survey_id == survey_id))
            if total == rows.n:
                break
            rows = _Rows()
        arrays = rows.arrays()
        self._lru.put(key, rows, rows.size())
        return arrays


class FitCache:
    """Fits per (survey, method, λ, items, data version), their intervals and rank
    summaries, the respondents' rows, and the latest θ̂ per (survey, method, λ) to
    warm-start the next fit when new answers arrive — all within ``max_bytes``
    (least recently used evicted first; a fit's summaries go with it).

    Per process; each worker keeps its own (the API is stateless otherwise).
    """

    def __init__(self, max_bytes: int = CACHE_BYTES, computations: int = 2) -> None:
        self.lru = ByteLRU(max_bytes)
        self.rows = RowStore(self.lru)
        self.log = AnswerLogStore(self.lru)
        #: Long computations (fits, intervals, rank summaries) at once in this process.
        self.work = WorkSlots(computations)

    @property
    def max_bytes(self) -> int:
        return self.lru.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self.lru.max_bytes = int(value)

    @property
    def bytes(self) -> int:
        """Bytes held now (never above ``max_bytes``)."""
        return self.lru.bytes

    def get(self, key: tuple) -> _Entry | None:
        return self.lru.get(("fit", key))

    def put(self, key: tuple, entry: _Entry) -> None:
        entry.key = key
        self.lru.put(("fit", key), entry, nbytes(entry))
        self.lru.put(self._warm(key), entry.fit.theta, nbytes(entry.fit.theta))

    def grew(self, entry: _Entry) -> None:
        """The entry gained a part (its clusters, its graph): count it."""
        if entry.key is not None:
            self.lru.resize(("fit", entry.key), nbytes(entry))

    @staticmethod
    def _warm(key: tuple) -> tuple:
        """Where a fit's scores are kept to start the next one: per (survey, method, λ) and
        archived items (a key of :func:`_fit`: survey, method, λ, m, archived, version), so
        that a start is never one of a different item set."""
        return ("warm", key[:3], key[4])

    def warm_start(self, key: tuple, n_items: int) -> np.ndarray | None:
        theta = self.lru.get(self._warm(key))
        if theta is None:
            return None
        if theta.size < n_items:  # items were added since: they start at 0
            theta = np.concatenate((theta, np.zeros(n_items - theta.size)))
        return theta[:n_items]


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


def _kept(
    archived: tuple[int, ...], i: np.ndarray, j: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Pairs (i, j) of positions without the archived items: which rows are kept (None:
    all) and their items renumbered in position order, as if the archived items had
    never been there."""
    if not archived:
        return None, i, j
    gone = np.asarray(archived, dtype=np.int64)
    keep = ~(np.isin(i, gone) | np.isin(j, gone))
    ki, kj = i[keep], j[keep]
    return keep, ki - np.searchsorted(gone, ki), kj - np.searchsorted(gone, kj)


def _without_archived(stats: PairStats, archived: tuple[int, ...]) -> PairStats:
    """The statistics of the items that are not archived (docs/how-to/moderate.md, "Archiving an item").
    Their answers are simply not part of them: the fit is the one of a survey that never
    had those items. ``epsilon_min`` stays the survey's (an upper bound on H, never lower)."""
    keep, i, j = _kept(archived, stats.i, stats.j)
    if keep is None:
        return stats
    part = stats.subset(keep)
    return PairStats(
        stats.n_items - sum(1 for a in archived if a < stats.n_items),
        i,
        j,
        part.n,
        part.sum_y,
        part.sum_z,
        part.sum_z2,
        part.sum_v,
        epsilon_min=stats.epsilon_min,
    )


def _fit(
    session: Session,
    survey: Survey,
    cache: FitCache,
    method: str,
    lam: float | None,
    deadline: Deadline | None = None,
) -> tuple[_Entry, int, list[Item]]:
    """The cached fit at the current data version (folding pending answers first),
    with the version and the survey's items."""
    fold_pending(session, survey.id, wait=True)
    archived = archived_positions(survey)
    for _ in range(10):
        every = survey_items(session, survey.id)
        m = len(every)
        gone = set(archived)
        items = [it for it in every if it.position not in gone]
        base_key = (survey.id, method, lam, m, archived)
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
            stats = snap.stats
            if stats is None:  # the snapshot was read without them
                stats = read_snapshot(session, survey.id, m).loaded_stats
            stats = _without_archived(stats, archived)
            key = (*base_key, snap.version)
            with cache.work.hold(deadline or Deadline.none()):
                fit = METHODS[method](stats, lam, theta0=cache.warm_start(key, len(items)))
            entry = _Entry(fit, stats, archived=archived)
            cache.put(key, entry)
        return entry, snap.version, items
    raise Conflict("the survey's items changed while reading; retry")


def _seed(*parts) -> int:
    """A fixed seed per (survey, version, …): repeated reads draw the same rank samples."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


def _summaries(
    session: Session,
    survey: Survey,
    cache: FitCache,
    entry: _Entry,
    version: int,
    method: str,
    level: float,
    k: int | None,
    uncertainty: str,
    covariance: str = "cluster",
    replicates: int = BOOTSTRAP_REPLICATES,
    deadline: Deadline | None = None,
) -> _Summary:
    """The intervals and rank summaries of a fit (cached with it), or why there are none.

    The intervals (an m×m covariance: the expensive, large part) are cached per
    (level, uncertainty, covariance[, replicates]); the rank summaries on top of
    them per k as well, so another k costs only the rank summaries.

    With ``covariance="cluster"`` (default) respondents are the independent unit:
    their comparisons are read from the store (cached with the fit) and the fit the
    summary belongs to is the one of exactly those comparisons (refitted when new
    answers arrived after the cached fit was made).
    """
    deadline = deadline or Deadline.none()
    reps = replicates if uncertainty == "bootstrap" else None
    fit_key = ("fit", entry.key)
    conf_key = ("intervals", entry.key, level, uncertainty, covariance, reps)
    rank_key = ("ranks", entry.key, level, k, uncertainty, covariance, reps)
    if entry.key is not None:
        found = cache.lru.get(rank_key)
        if found is not None:
            return found
    intervals = cache.lru.get(conf_key) if entry.key is not None else None
    if intervals is None:
        fit = entry.fit
        # Only a real covariance takes a turn; the refusals below are immediate.
        cheap = uncertainty == "none" or fit.theta.size > MAX_ITEMS_COVARIANCE or fit.n_comparisons == 0
        with nullcontext() if cheap else cache.work.hold(deadline):
            intervals = _intervals(
                session, survey, cache, entry, method, level, uncertainty, covariance, replicates, deadline
            )
        if entry.key is not None:
            # The covariance is shared with the fit's level-free part (kept under it): a
            # level's intervals count only their own arrays.
            base = cache.lru.get(("uncertainty", entry.key, covariance))
            shared: set[int] = set()
            nbytes(base, shared)
            extra = 0 if intervals.entry is entry or base is not None else nbytes(intervals.entry)
            parents = (fit_key,) if base is None else (fit_key, ("uncertainty", entry.key, covariance))
            cache.lru.put(conf_key, intervals, nbytes(intervals.conf, shared) + extra, parents=parents)
    conf = intervals.conf
    if conf is None:
        result = _Summary(None, None, intervals.reason, intervals.message, intervals.entry)
    else:
        draws_key = ("draws", entry.key, uncertainty, covariance, reps, conf.method, conf.df)
        draws = cache.lru.get(draws_key) if entry.key is not None else None
        with cache.work.hold(deadline):
            if draws is None:
                seed = _seed(survey.id, version, method, uncertainty, covariance, conf.method, conf.df)
                draws = rank_draws(
                    conf.estimate,
                    conf.cov,
                    rng=np.random.default_rng(seed),
                    component=conf.variance_component,
                    point=conf.theta,
                    check=deadline.check,
                    df=conf.df,
                    ranking_component=conf.component,
                )
                if entry.key is not None:
                    shared = set()
                    nbytes(conf.cov, shared)
                    cache.lru.put(draws_key, draws, nbytes(draws, shared), parents=(fit_key,))
            level_key = ("ranks", entry.key, level, "any k", uncertainty, covariance, reps)
            at_level = cache.lru.get(level_key) if entry.key is not None else None
            if at_level is None:
                at_level = rank_summaries(conf, draws, level, None, check=deadline.check)
                if entry.key is not None:
                    cache.lru.put(level_key, at_level, nbytes(at_level), parents=(fit_key, conf_key))
            ranks = with_k(at_level, draws, k)
        result = _Summary(conf, ranks, None, None, intervals.entry)
    if entry.key is not None:
        cache.lru.put(rank_key, result, nbytes(result.ranks), parents=(fit_key, conf_key))
    return result


def _intervals(
    session: Session,
    survey: Survey,
    cache: FitCache,
    entry: _Entry,
    method: str,
    level: float,
    uncertainty: str,
    covariance: str,
    replicates: int,
    deadline: Deadline,
) -> _Intervals:
    """The intervals of ``entry``'s fit, or why there are none (``replicates``: of a bootstrap)."""
    fit = entry.fit
    m = fit.theta.size
    if uncertainty == "none":
        return _Intervals(None, "not_requested", "Intervals were not requested.", entry)
    if m > MAX_ITEMS_COVARIANCE:
        return _Intervals(
            None,
            "too_many_items",
            f"Intervals are computed for at most {MAX_ITEMS_COVARIANCE} items (they need dense "
            f"{MAX_ITEMS_COVARIANCE}×{MAX_ITEMS_COVARIANCE} matrices); scores and ranks are given.",
            entry,
        )
    if fit.n_comparisons == 0:
        return _Intervals(None, "no_comparisons", "There are no comparisons yet.", entry)
    if uncertainty == "bootstrap" and method != "debiased_mle":
        raise Invalid("uncertainty=bootstrap is available for method=debiased_mle")
    target, clusters = entry, None
    if covariance == "cluster" or uncertainty == "bootstrap":
        target, clusters = _with_clusters(session, survey, entry, method, cache, deadline)
    deadline.check()
    p = _randomization(survey, target)
    if p is not None and p < UNRANDOMIZED_P_VALUE:
        return _Intervals(None, "unrandomized_answers", _UNRANDOMIZED.format(p=UNRANDOMIZED_P_VALUE), target)
    try:
        if uncertainty == "bootstrap":
            if clusters is None:  # pragma: no cover - read above for every bootstrap
                raise RuntimeError("the bootstrap needs the comparisons grouped by respondent")
            rows = clusters.as_rows(target.fit.theta.size)
            conf = _bootstrap(survey, target, level, covariance, rows, replicates, deadline)
        else:
            conf = _level_free(
                cache, entry, target, clusters if covariance == "cluster" else None, covariance, deadline
            ).at(level)
    except IntervalsUnavailable as exc:
        return _Intervals(None, exc.reason, exc.message, target)
    return _Intervals(conf, None, None, target)


def _level_free(
    cache: FitCache,
    entry: _Entry,
    target: _Entry,
    clusters: ClusterSource | None,
    covariance: str,
    deadline: Deadline,
) -> Uncertainty:
    """The level-free part of the sandwich intervals of ``target``'s fit (centre,
    covariance, standard errors: :func:`~app.stats.inference.uncertainty`), computed once
    per fit and kept with it; a level then only rescales. A refusal is kept as well."""
    key = ("uncertainty", entry.key, covariance)
    found = cache.lru.get(key) if entry.key is not None else None
    if found is None or found[0] is not target.fit:
        try:
            value: Uncertainty | IntervalsUnavailable = level_free_uncertainty(
                target.fit, clusters=clusters, check=deadline.check
            )
        except IntervalsUnavailable as exc:
            value = exc
        found = (target.fit, value)
        if entry.key is not None:
            shared: set[int] = set()
            nbytes(entry, shared)  # the fit and its clusters are counted with the fit
            size = nbytes(value, shared) + (0 if target is entry else nbytes(target, shared))
            cache.lru.put(key, found, size, parents=(("fit", entry.key),))
    value = found[1]
    if isinstance(value, IntervalsUnavailable):
        raise IntervalsUnavailable(value.reason, value.message)
    return value


def _with_clusters(
    session: Session,
    survey: Survey,
    entry: _Entry,
    method: str,
    cache: FitCache,
    deadline: Deadline | None = None,
) -> tuple[_Entry, ClusterSource]:
    """The fit's comparisons grouped by respondent, and the fit they belong to.

    Reads (respondent, i, j, ỹ, ε) of every stored comparison (incrementally, see
    :class:`RowStore`). When answers arrived
    after the cached fit's snapshot, the statistics are rebuilt from exactly the rows
    read and refitted (warm-started), so that the covariance and the fit always
    describe the same data.
    """
    if entry.clusters is not None:
        return entry, entry.clusters
    if method == "debiased_mle" and not entry.archived:
        logged = cache.log.read(session, survey.id, (deadline or Deadline.none()).check)
        if logged is not None:
            return _with_moments(entry, logged[1], method)
    resp, i, j, y, eps = cache.rows.read(session, survey.id)
    keep, i, j = _kept(entry.archived, i, j)
    if keep is not None:
        resp, y, eps = resp[keep], y[keep], eps[keep]
    m = entry.fit.theta.size
    m = max(m, int(j.max(initial=-1)) + 1)
    # The naive (classic RR) fit's estimating equation uses ỹ itself: z = ỹ, no privacy term.
    eps_for_z = np.full(i.size, np.inf) if method == "naive_mle" else eps
    clusters = Clusters.from_answers(m, i, j, y, eps_for_z, resp)
    randomization = _randomization_from_rows(m, i, j, y, eps)
    if i.size == entry.fit.n_comparisons and m == entry.fit.theta.size:
        entry.clusters = clusters
        entry.randomization = randomization
        cache.grew(entry)
        return entry, clusters
    stats = pair_stats(m, i, j, y, eps)
    theta0 = np.concatenate((entry.fit.theta, np.zeros(m - entry.fit.theta.size)))
    fit = METHODS[method](stats, entry.fit.lam if entry.fit.lam else None, theta0=theta0)
    return (
        _Entry(fit, stats, clusters=clusters, randomization=randomization, archived=entry.archived),
        clusters,
    )


def _with_moments(entry: _Entry, moments: ClusterMoments, method: str) -> tuple[_Entry, ClusterMoments]:
    """:func:`_with_clusters` from the logged answers' moments (:mod:`app.analysis.answer_log`):
    the fit of exactly the folds the moments hold (the entry's own when they are the same
    folds, otherwise a refit, warm-started, of the moments' pair statistics)."""
    fit = entry.fit
    m = max(fit.theta.size, moments.n_items)
    if moments.n_rows == fit.n_comparisons and m == fit.theta.size:
        entry.clusters = moments
        entry.randomization = moments.randomization_p_value()
        return entry, moments
    st = moments.stats
    stats = PairStats(
        m, st.i, st.j, st.n, st.sum_y, st.sum_z, st.sum_z2, st.sum_v, epsilon_min=st.epsilon_min
    )
    theta0 = np.concatenate((fit.theta, np.zeros(m - fit.theta.size)))
    refit = METHODS[method](stats, fit.lam if fit.lam else None, theta0=theta0)
    target = _Entry(refit, stats, clusters=moments, randomization=moments.randomization_p_value())
    return target, moments


#: Why a pairwise ranking or its win probabilities have no intervals (``uncertainty.reason``):
#: the fit's own (:data:`app.stats.inference.REASONS`) and the service's (the dashboard
#: has a message for each).
INTERVAL_REASONS = (*REASONS, "unrandomized_answers", "not_requested")

#: Below this p-value the stored answers are taken to be unrandomized (Hoeffding's bound
#: combined over the pairs: a survey whose answers were randomized at their declared ε is
#: flagged with probability at most this, whatever its true answers).
UNRANDOMIZED_P_VALUE = 1e-6

_UNRANDOMIZED = (
    "The answers agree with each other more often than randomized response at their declared ε allows "
    "(p < {p:.0e}): they look unrandomized, for example true answers sent with privatized: true. Scores and "
    "intervals that remove privacy noise are wrong for such answers; check how the answers were collected."
)


def _randomization_from_rows(m: int, i, j, y, eps) -> float:
    """The randomization check of stored answers (one row each) at their own ε."""
    if i.size == 0:
        return 1.0
    won_lo = np.where(i < j, y, 1 - y).astype(np.float64)
    truthful = expit(np.asarray(eps, dtype=np.float64))
    _, _, n, (wins, top) = reduce_by_pair(np.minimum(i, j), np.maximum(i, j), m, (won_lo, truthful))
    return randomization_p_value(n, wins, top)


def _randomization(survey: Survey, entry: _Entry) -> float | None:
    """The stored answers' randomization check: from their own ε where they were read,
    otherwise bounded with the survey's largest allowed ε (None: no local ε, central)."""
    if entry.randomization is None and survey.epsilon_max is not None and entry.stats.n_comparisons:
        st = entry.stats
        entry.randomization = randomization_p_value(st.n, st.sum_y, st.n * float(expit(survey.epsilon_max)))
    return entry.randomization


def current_fit(
    session: Session,
    survey: Survey,
    cache: FitCache,
    deadline: Deadline | None = None,
    work: WorkSlots | None = None,
) -> tuple[BTLFit, Clusters, list[Item], int]:
    """The default fit (debiased MLE, default λ) of exactly the stored comparisons,
    those comparisons grouped by respondent, the items and the data version (the
    planner starts from these). Fits take turns in ``work`` (default: the cache's)."""
    deadline = deadline or Deadline.none()
    entry, version, items = _fit(session, survey, cache, "debiased_mle", None, deadline)
    with (work or cache.work).hold(deadline):  # a refit when answers arrived meanwhile
        target, clusters = _with_clusters(session, survey, entry, "debiased_mle", cache, deadline)
    if target.fit.theta.size != len(items):  # items were added meanwhile
        items = active_items(session, survey)
    return target.fit, clusters.as_rows(target.fit.theta.size), items, version


def _check_bootstrap(fit: BTLFit, covariance: str, replicates: int, budget: float) -> None:
    """Refuse, before any work, a bootstrap that cannot finish: too many comparisons,
    replicates out of range, or a predicted run time far beyond the time budget."""
    if not BOOTSTRAP_MIN_REPLICATES <= replicates <= BOOTSTRAP_MAX_REPLICATES:
        raise Invalid(f"replicates must be between {BOOTSTRAP_MIN_REPLICATES} and {BOOTSTRAP_MAX_REPLICATES}")
    if fit.n_comparisons > BOOTSTRAP_MAX_COMPARISONS:
        raise Invalid(
            f"uncertainty=bootstrap is for small samples (at most {BOOTSTRAP_MAX_COMPARISONS} "
            "comparisons); use the default sandwich intervals"
        )
    predicted = bootstrap_seconds(fit.theta.size, fit.n_comparisons, replicates, covariance)
    if math.isfinite(budget) and predicted > BOOTSTRAP_REFUSE_FACTOR * budget:
        raise Invalid(
            f"uncertainty=bootstrap with {replicates} replicates would take about {predicted:.0f} s here "
            f"({fit.theta.size} items, {fit.n_comparisons} comparisons), beyond the analysis time budget "
            f"of {budget:g} s; ask for fewer replicates"
            + (" or use covariance=cluster" if covariance == "model" else "")
            + ", or use the default sandwich intervals"
        )


def _bootstrap(
    survey: Survey,
    entry: _Entry,
    level: float,
    covariance: str,
    clusters: Clusters,
    replicates: int,
    deadline: Deadline,
) -> Confidence:
    """``covariance=cluster``: the nonparametric bootstrap over respondents (nothing is
    privatized again); ``model``: the parametric bootstrap of independent answers."""
    fit = entry.fit
    _check_bootstrap(fit, covariance, replicates, deadline.seconds)
    rng = np.random.default_rng(_seed(survey.id, fit.n_comparisons, "bootstrap", covariance))
    if covariance == "cluster":
        return cluster_bootstrap_confidence(
            fit, clusters, level, n_boot=replicates, rng=rng, check=deadline.check
        )
    return bootstrap_confidence(
        fit.theta.size,
        clusters.i,
        clusters.j,
        eps_of(clusters.v),
        fit,
        level,
        n_boot=replicates,
        rng=rng,
        check=deadline.check,
    )


def eps_of(v: np.ndarray) -> np.ndarray:
    """ε from the privacy variance v = 1/(4 sinh²(ε/2))."""
    with np.errstate(divide="ignore"):
        return 2.0 * np.arcsinh(0.5 / np.sqrt(v))


def privacy_regime(n_items: int, n_comparisons: int, g: float) -> PrivacyRegime:
    """Where the survey's ε sits relative to the consistency dividing line.

    Corollaries 1–2: with m items and n_pair comparisons per pair (the paper's L),
    ε ≍ 1/√(m·n_pair) is the line below which estimates stop improving with more respondents, and
    ε ≳ log(m·n_pair)/√(m·n_pair) guarantees consistency. In incomplete designs n_pair is the mean
    number of comparisons per pair; ε is the effective level whose coth²(ε/2)
    equals G(ε).
    """
    n_pairs = n_items * (n_items - 1) // 2
    if n_comparisons == 0 or n_pairs == 0:
        return PrivacyRegime(verdict="no data", explanation="No comparisons yet.")
    per_pair = n_comparisons / n_pairs
    eps_eff = 2.0 * math.atanh(1.0 / math.sqrt(g)) if g > 1.0 else math.inf
    line = dividing_line_epsilon(n_items, per_pair)
    mL = n_items * per_pair
    consistent = math.log(mL) / math.sqrt(mL) if mL > 1 else math.inf
    if eps_eff >= consistent:
        verdict: Literal["above", "near", "below"] = "above"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) is above the consistency "
            f"threshold log(m·n_pair)/√(m·n_pair) ≈ {consistent:.2g} of the paper's Corollary 1 "
            f"(m = {n_items} items, n_pair ≈ {per_pair:.3g} comparisons per pair): more respondents keep "
            "sharpening the ranking."
        )
    elif eps_eff > line:
        verdict = "near"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) lies between the dividing line "
            f"1/√(m·n_pair) ≈ {line:.2g} (n_pair ≈ {per_pair:.3g} comparisons per pair) and the "
            f"consistency threshold ≈ {consistent:.2g}: estimates improve only slowly as respondents are "
            "added; a larger ε would help more than more respondents."
        )
    else:
        verdict = "below"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) is at or below the dividing line "
            f"1/√(m·n_pair) ≈ {line:.2g} (Corollary 2; n_pair ≈ {per_pair:.3g} comparisons per pair): "
            "the privacy noise dominates and more respondents will not make the ranking reliable; raise ε."
        )
    return PrivacyRegime(
        verdict=verdict,
        explanation=words,
        effective_epsilon=eps_eff,
        dividing_line_epsilon=line,
        consistency_epsilon=consistent,
        comparisons_per_pair=per_pair,
    )


@dataclass(frozen=True)
class _Connectivity:
    plain: float | None
    normalized: float | None


def _graph(stats: PairStats) -> _Connectivity:
    """Algebraic connectivity of the comparison graph (edge weights n_ij), and of its
    normalized Laplacian D^{-1/2} L D^{-1/2} (scale-free, in [0, 2]; near 0: a bottleneck).

    Both are second-smallest eigenvalues of sparse matrices (0 for a disconnected graph):
    Lanczos (ARPACK's ``eigsh``, the smallest algebraic pair) on the sparse Laplacian, with
    the dense eigenvalue problem for small graphs or where Lanczos does not converge."""
    m = stats.n_items
    if m > MAX_ITEMS_COVARIANCE or stats.n_pairs == 0:
        return _Connectivity(None, None)
    if m < 2:
        return _Connectivity(0.0, 0.0)
    w = stats.n.astype(float)
    adj = scipy.sparse.coo_matrix((w, (stats.i, stats.j)), shape=(m, m)).tocsr()
    adj = adj + adj.T
    n_comp, _ = scipy.sparse.csgraph.connected_components(adj, directed=False)
    if n_comp > 1:
        return _Connectivity(0.0, 0.0)
    deg = np.asarray(adj.sum(axis=1)).ravel()
    lap = scipy.sparse.diags(deg) - adj
    inv = 1.0 / np.sqrt(deg)
    norm = scipy.sparse.diags(inv) @ lap @ scipy.sparse.diags(inv)
    return _Connectivity(_second_smallest(lap), _second_smallest(norm))


def _second_smallest(lap) -> float:
    """The second-smallest eigenvalue of a connected graph's (sparse) Laplacian, ≥ 0."""
    m = lap.shape[0]
    if m > GRAPH_DENSE_ITEMS:
        try:
            vals = scipy.sparse.linalg.eigsh(lap, k=2, which="SA", tol=1e-10, return_eigenvectors=False)
            return float(max(np.sort(vals)[1], 0.0))
        except scipy.sparse.linalg.ArpackError:
            pass
    return float(max(np.linalg.eigvalsh(lap.toarray())[1], 0.0))


#: Up to this many items the graph diagnostics use the dense eigenvalue problem.
GRAPH_DENSE_ITEMS = 200


def _entry_graph(cache: FitCache, entry: _Entry, deadline: Deadline) -> _Connectivity:
    """:func:`_graph` of the entry's statistics, computed once per fit (two sparse
    eigenvalue problems)."""
    if entry.graph is None:
        deadline.check()
        with cache.work.hold(deadline):
            if entry.graph is None:  # another request may have computed it while this one waited
                entry.graph = _graph(entry.stats)
                cache.grew(entry)
    return entry.graph


def _spend(
    session: Session, survey: Survey, cache: FitCache, moments: ClusterMoments | None = None
) -> tuple[dict, dict]:
    """The distribution of respondents' total ε, and of their numbers of comparisons:
    from the answer log's sums where the survey has one (``moments``: those the intervals
    used, else read; every answer's ε is what its respondent spent on it; kept per number of
    answers), otherwise from the respondents' rows."""
    if moments is None and survey.privacy_model == "local":
        logged = cache.log.read(session, survey.id)
        moments = None if logged is None else logged[1]
    if moments is None:
        rows = session.execute(
            select(Respondent.epsilon_spent, Respondent.n_comparisons).where(
                Respondent.survey_id == survey.id, Respondent.n_comparisons > 0
            )
        ).all()
        return _spend_summary(
            np.array([r[0] for r in rows], dtype=float), np.array([r[1] for r in rows], dtype=float)
        )
    key = ("spend", survey.id, moments.n_rows)
    found = cache.lru.get(key)
    if found is None:
        found = _spend_summary(moments.spent, moments.sizes.astype(float))
        cache.lru.put(key, found, nbytes(found))
    return found


def _spend_summary(values: np.ndarray, counts: np.ndarray) -> tuple[dict, dict]:
    """:func:`_spend` of the respondents' total ε and numbers of comparisons."""
    if counts.size == 0:
        return {"respondents": 0}, {"respondents": 0}
    c = np.quantile(counts, [0.0, 0.5, 1.0])
    per_respondent = {
        "respondents": int(counts.size),
        "mean": float(counts.mean()),
        "min": int(c[0]),
        "median": float(c[1]),
        "max": int(c[2]),
    }
    q = np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])
    spend = {
        "respondents": int(values.size),
        "mean": float(values.mean()),
        "min": float(q[0]),
        "p25": float(q[1]),
        "median": float(q[2]),
        "p75": float(q[3]),
        "max": float(q[4]),
    }
    return spend, per_respondent


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
      request whose predicted work (:func:`bootstrap_seconds`) is far beyond the time
      budget is refused before it starts;
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
