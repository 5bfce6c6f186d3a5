"""The intervals and rank summaries of a fit, or why there are none.

Sandwich intervals (cluster-robust over respondents by default, or model-based) and the
bootstrap's; the level-free part of a fit's intervals (centre, covariance) and the draws
of its rank summaries are computed once per fit and kept with it in the
:class:`~app.analysis.fits.FitCache`, the intervals per level and the rank summaries per
level and k (docs/uncertainty.md §6, "Cost"). Answers that look unrandomized get none.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
from scipy.special import expit
from sqlalchemy.orm import Session

from ..core.cache import nbytes
from ..core.db.models import Item, Survey
from ..core.deadline import Deadline, WorkSlots
from ..core.errors import Invalid
from ..stats import BTLFit, pair_stats
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
    rank_draws,
    rank_summaries,
    with_k,
)
from ..stats.inference import uncertainty as level_free_uncertainty
from ..stats.mechanisms import randomization_p_value
from ..stats.pairs import PairStats, reduce_by_pair
from ..surveys.items import active_items
from .bootstrap import BOOTSTRAP_REPLICATES, _bootstrap
from .fits import METHODS, FitCache, _Entry, _fit, _kept, _seed

__all__ = ["INTERVAL_REASONS", "UNRANDOMIZED_P_VALUE", "current_fit"]


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
    :class:`~app.analysis.fits.RowStore`). When answers arrived
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
