"""Rank intervals and top-K probabilities, from draws of the scores kept per fit
(docs/uncertainty.md §6); the critical values of the pairwise differences are :mod:`.critical`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri, stdtrit

from .. import entropy
from ..metrics import competition_ranks
from .critical import _BLOCK_PAIR_STATS, _mvn_root, pair_difference_se
from .intervals import Check, Confidence, _check_level, _no_check, _precision, order_restricted


@dataclass(frozen=True)
class RankConfidence:
    """Rank intervals (1 = best) and top-K probabilities.

    Attributes
    ----------
    rank_ci : (m, 2) int, marginal intervals: each item's rank lies in [lo, hi]
        with probability ≥ ``level`` (from simultaneous intervals for the item's m − 1
        differences with the others: Mogstad, Romano, Shaikh & Wilhelm 2024).
    rank_ci_simultaneous : (m, 2) int, simultaneous intervals: all ranks lie in
        their intervals jointly with probability ≥ ``level`` (max-|t| over all
        pairwise differences: Klein, Wright & Wieczorek 2020; Mogstad et al. 2024;
        Bonferroni when that would be too costly).
    kind : "marginal" — the kind of ``rank_ci``.
    p_top_k : (m,) probability of being in the top-K (sums to K), given ``k``:
        drawn around the interval centre, non-increasing along the ranking.
    top_k_certain : (m,) bool, items in the top-K at the confidence level
        (simultaneous: their intervals end at or above K).
    tied_groups : list of index arrays, best first: the maximal runs of items,
        consecutive in estimated order, no two of which differ significantly
        (simultaneously at ``level``). Groups may overlap, like the letters of a
        compact letter display: in A > B > C with only A vs C significant, the
        groups are {A, B} and {B, C}.
    tiers : list of index arrays, best first: a partition, split only where every
        item above is significantly better than every item below.
    critical_value : the simultaneous critical value for pairwise differences.
    critical_values : (m,) the marginal critical value of each item's differences.
    """

    rank_ci: NDArray[np.int64]
    rank_ci_simultaneous: NDArray[np.int64]
    kind: str
    level: float
    p_top_k: NDArray[np.float64] | None
    top_k_certain: NDArray[np.bool_] | None
    tied_groups: list[NDArray[np.int64]]
    tiers: list[NDArray[np.int64]]
    critical_value: float
    critical_values: NDArray[np.float64] | None = field(default=None, repr=False)


def rank_confidence(
    theta: ArrayLike,
    cov: ArrayLike,
    level: float = 0.95,
    k: int | None = None,
    n_draws: int = 4000,
    rng: np.random.Generator | None = None,
    component: ArrayLike | None = None,
    point: ArrayLike | None = None,
    check: Check | None = None,
    df: float | None = None,
) -> RankConfidence:
    """Rank intervals and top-K probabilities from an estimate and its covariance.

    Parameters
    ----------
    theta : array_like (m,)
        The centre, e.g. ``Confidence.estimate``.
    cov : array_like (m, m)
        Its covariance, e.g. ``Confidence.cov``.
    level : float, default 0.95
        Confidence level.
    k : int, optional
        The top set whose membership probabilities and certain members are given.
    n_draws : int, default 4000
        Draws of the estimate's distribution.
    rng : numpy.random.Generator, optional
        Seeds the draws (they describe uncertainty; they do not protect anyone, so a
        seedable generator is fine; default: OS-seeded).
    component : array_like of int, optional
        Incomparable groups of items (default: all connected).
    point : array_like (m,), optional
        The ranking the summaries accompany (e.g. ``Confidence.theta``, the reported
        scores; default ``theta``): ``theta`` is first restricted to its order
        (:func:`order_restricted`, weights 1/se²; a no-op for ``Confidence.estimate``), so
        every summary has one centre that never reverses the ranking, and every rank
        interval contains the point's competition rank.
    check : callable, optional
        Called between the steps; it raises to stop the work.
    df : float, optional
        Degrees of freedom of the intervals' critical value (``Confidence.df``; None:
        normal): draws are multivariate t with those degrees of freedom.

    Returns
    -------
    RankConfidence
        Marginal and simultaneous rank intervals, tied groups, P(top-K) and the certain
        top-K members.

    Raises
    ------
    ValueError
        On an invalid level, k, ``cov``, ``df`` or ``point``.

    Notes
    -----
    Equal to ``rank_at(rank_draws(…), level, k)``: the draws (level- and k-free) can be
    kept and summarized at other levels and k for the cost of quantiles and counts.

    Intervals (docs/uncertainty.md §6): with T_ab = (Z_a − Z_b)/se_ab for the draws Z, the
    simultaneous critical value c is the ``level``-quantile of max_{a≠b} |T_ab| and item
    a's marginal one c_a that of max_{b≠a} |T_ab|; b is significantly above a when
    θ_b − θ_a > c·se_ab (c_a·se_ab for a's marginal interval), and a's rank lies between
    1 + #(items significantly above a) and m − #(items significantly below a).

    P(top-K) is the share of draws θ + Z in which the item is among the K best, made
    non-increasing along the ranking by :func:`order_restricted` (equal weights: it keeps
    the sum K). Draws put an item whose score is less certain at the extremes more often,
    so an uncertain item just below can be drawn into the top-K more often than a
    precisely measured one just above; the restriction pools such runs, which are always
    within a tied group.

    References
    ----------
    Klein, Wright & Wieczorek (2020); Mogstad, Romano, Shaikh & Wilhelm (2024), §3;
    docs/uncertainty.md §6 and §10.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.inference import rank_confidence
    >>> rc = rank_confidence([2.0, 0.0, -2.0], np.eye(3) * 0.01, rng=np.random.default_rng(0))
    >>> rc.rank_ci.tolist()  # well separated: each item's rank is certain
    [[1, 1], [2, 2], [3, 3]]
    """
    level = _check_level(level)
    draws = rank_draws(theta, cov, n_draws, rng, component, point, check, df)
    return rank_at(draws, level, k, check)


@dataclass(frozen=True, eq=False)
class RankDraws:
    """The level- and k-free part of :func:`rank_confidence`: the centre, and from one set
    of draws Z the statistics every level needs — per draw the largest |T_ab| over all
    pairs (``overall``) and per item over its pairs (``largest``), where their number is
    within budget (Bonferroni otherwise), and θ + Z for P(top-K) (``values``, float32:
    Monte Carlo shares need no more)."""

    estimate: NDArray[np.float64]
    cov: NDArray[np.float64] = field(repr=False)
    component: NDArray[np.int64]  # the components cov lives on
    ranking_component: NDArray[np.int64]  # the comparison graph's, for P(top-K)
    point: NDArray[np.float64]
    df: float | None
    n_draws: int
    largest: NDArray[np.float64] | None = field(repr=False)
    overall: NDArray[np.float64] | None = field(repr=False)
    values: NDArray[np.float32] | None = field(repr=False)


def rank_draws(
    theta: ArrayLike,
    cov: ArrayLike,
    n_draws: int = 4000,
    rng: np.random.Generator | None = None,
    component: ArrayLike | None = None,
    point: ArrayLike | None = None,
    check: Check | None = None,
    df: float | None = None,
    ranking_component: ArrayLike | None = None,
) -> RankDraws:
    """The draws of :func:`rank_confidence` (same arguments, without level and k).

    Parameters
    ----------
    theta : array_like (m,)
        The centre.
    cov : array_like (m, m)
        Its covariance.
    n_draws : int, default 4000
        Draws.
    rng : numpy.random.Generator, optional
        Seeds the draws (default: OS-seeded).
    component : array_like of int, optional
        Components on which ``cov`` lives (default: all connected).
    point : array_like (m,), optional
        The ranking the summaries accompany (default ``theta``).
    check : callable, optional
        Called between the steps; it raises to stop the work.
    df : float, optional
        Degrees of freedom of the multivariate t draws (None: normal).
    ranking_component : array_like of int, optional
        The comparison graph's components (default ``component``), where ``cov`` lives on
        finer ones (items set aside as unidentified on their own): P(top-K) is drawn only
        when it is connected.

    Returns
    -------
    RankDraws
        The draws, for :func:`rank_at` and :func:`with_k`.

    Raises
    ------
    ValueError
        If ``cov`` is not m×m, ``df`` is not positive, or ``point`` has the wrong length.
    """
    check = check or _no_check
    c = np.asarray(cov, dtype=np.float64)
    m = np.asarray(theta).size
    if c.shape != (m, m):
        raise ValueError("cov must be m×m")
    if df is not None and not df > 0:
        raise ValueError("df must be positive")
    comp = np.zeros(m, dtype=np.int64) if component is None else np.asarray(component, dtype=np.int64)
    rank_comp = comp if ranking_component is None else np.asarray(ranking_component, dtype=np.int64)
    pt = np.asarray(theta, dtype=np.float64) if point is None else np.asarray(point, dtype=np.float64)
    if pt.shape != (m,):
        raise ValueError("point must have one value per item")
    est = order_restricted(theta, pt, comp, _precision(np.sqrt(np.maximum(np.diag(c), 0.0))))
    gen = rng if rng is not None else entropy.generator()
    check()
    se_pair = pair_difference_se(c, comp)
    finite = np.isfinite(se_pair)
    np.fill_diagonal(finite, False)
    n_pairs = int(finite.sum()) // 2
    want_largest = finite.any() and m * m * n_draws <= 20_000_000
    want_overall = finite.any() and not want_largest and n_pairs * n_draws <= 20_000_000
    want_values = rank_comp.max(initial=0) == 0
    largest = np.empty((n_draws, m)) if want_largest else None
    overall = np.empty(n_draws) if want_overall else None
    values = np.empty((n_draws, m), dtype=np.float32) if want_values else None
    if want_largest or want_overall or want_values:
        draw = _sampler(c, comp)
        inv = np.where(finite, 1.0 / np.where(finite, se_pair, 1.0), 0.0)
        iu = np.triu_indices(m, 1)
        same = finite[iu]
        a, b, inv_same = iu[0][same], iu[1][same], inv[iu][same]
        block = max(1, _BLOCK_VALUES // m)
        if want_largest:
            block = max(1, min(block, _BLOCK_PAIR_STATS // (m * m)))
        elif want_overall:
            block = max(1, min(block, _BLOCK_PAIR_STATS // max(n_pairs, 1)))
        for start in range(0, n_draws, block):
            rows = min(block, n_draws - start)
            z = draw(gen, rows, df)
            if largest is not None:
                largest[start : start + rows] = (np.abs(z[:, :, None] - z[:, None, :]) * inv).max(axis=2)
            if overall is not None:
                overall[start : start + rows] = (np.abs(z[:, a] - z[:, b]) * inv_same).max(axis=1)
            if values is not None:
                values[start : start + rows] = est + z
            check()
    return RankDraws(est, c, comp, rank_comp, pt, df, n_draws, largest, overall, values)


def _sampler(cov: NDArray, component: NDArray) -> Callable[[np.random.Generator, int, float | None], NDArray]:
    """Draws of N(0, cov) (or the multivariate t with ``df``) up to a common shift per
    component, which no difference and no within-component rank sees: with P the
    projector on the components' constants, cov + ρP = R Rᵀ by Cholesky (m³/3), and a
    draw is (I − P) R ξ, whose covariance is (I − P) cov (I − P). Items alone in their
    component draw 0. Falls back to :func:`_mvn_root` (an eigendecomposition, ~20× the
    work) where the factorization fails."""
    m = component.size
    sizes = np.bincount(component, minlength=int(component.max(initial=-1)) + 1)
    alone = sizes[component] <= 1
    groups = [np.flatnonzero(component == g) for g in np.flatnonzero(sizes > 1)]
    rho = max(float(np.mean(np.diag(cov))), 1e-300) if m else 1.0
    a = 0.5 * (cov + cov.T)
    for g in groups:
        a[np.ix_(g, g)] += rho / g.size
    a[alone, alone] = rho
    try:
        root = scipy.linalg.cholesky(a, lower=True, check_finite=False)
        triangular = True
    except np.linalg.LinAlgError:
        root, triangular = _mvn_root(cov), False

    def draw(gen: np.random.Generator, rows: int, df: float | None) -> NDArray:
        xi = gen.standard_normal((rows, m))
        if triangular:
            z = scipy.linalg.blas.dtrmm(1.0, root, xi, side=1, lower=1, trans_a=1, overwrite_b=1)
            for g in groups:
                z[:, g] -= z[:, g].mean(axis=1, keepdims=True)
            z[:, alone] = 0.0
        else:
            z = xi @ root.T
        if df is not None:
            z *= np.sqrt(df / gen.chisquare(df, rows))[:, None]
        return z

    return draw


def rank_at(
    draws: RankDraws,
    level: float,
    k: int | None = None,
    check: Check | None = None,
    one_sided: tuple[NDArray, NDArray] | None = None,
) -> RankConfidence:
    """:func:`rank_confidence` at ``level`` and ``k`` from kept draws.

    Parameters
    ----------
    draws : RankDraws
        Draws from :func:`rank_draws`.
    level : float
        Confidence level.
    k : int, optional
        The top set.
    check : callable, optional
        Called between the steps; it raises to stop the work.
    one_sided : tuple of (ndarray, ndarray), optional
        (wins_all, loses_all) masks of items with one-sided intervals
        (:func:`rank_summaries`).

    Returns
    -------
    RankConfidence
        The summaries: quantiles, counts and m×m comparisons, no new draws.

    Raises
    ------
    ValueError
        On an invalid level or k.
    """
    check = check or _no_check
    level = _check_level(level)
    est, comp, pt, m = draws.estimate, draws.component, draws.point, draws.estimate.size
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= m):
        raise ValueError(f"k must be an integer between 1 and {m}")
    df = draws.df
    se_pair = pair_difference_se(draws.cov, comp)
    finite = np.isfinite(se_pair)
    np.fill_diagonal(finite, False)
    others = finite.sum(axis=1)
    n_pairs = int(others.sum()) // 2
    if not others.any():
        crit, crit_each = 0.0, np.zeros(m)
    elif draws.largest is not None:
        crit = float(np.quantile(draws.largest.max(axis=1), level))
        crit_each = np.where(others > 0, np.quantile(draws.largest, level, axis=0), 0.0)
    else:
        if draws.overall is not None:
            crit = float(np.quantile(draws.overall, level))
        else:
            q = 1.0 - (1.0 - level) / (2.0 * n_pairs)  # Bonferroni
            crit = float(ndtri(q) if df is None else stdtrit(df, q))
        q_each = 1.0 - (1.0 - level) / (2.0 * np.maximum(others, 1))
        each = ndtri(q_each) if df is None else stdtrit(df, q_each)
        crit_each = np.where(others > 0, np.minimum(each, crit), 0.0).astype(np.float64)
    check()
    diff = est[:, None] - est[None, :]
    above = diff > crit * se_pair  # a significantly above b (simultaneously)
    simultaneous = np.column_stack((1 + above.sum(axis=0), m - above.sum(axis=1))).astype(np.int64)
    # Item a's marginal interval: its own critical value for its m − 1 differences.
    with np.errstate(invalid="ignore"):
        half = np.where(finite, crit_each[:, None] * se_pair, np.inf)
    marginal = np.column_stack((1 + (-diff > half).sum(axis=1), m - (diff > half).sum(axis=1))).astype(
        np.int64
    )
    del half
    point_rank = competition_ranks(pt)
    certain = None if k is None else simultaneous[:, 1] <= k
    order = np.lexsort((np.arange(m), point_rank))  # the ranking's order: rank, then item
    tiers: list[NDArray[np.int64]] = []
    worst = simultaneous[order, 1]
    running = np.maximum.accumulate(worst)
    start = 0
    for r in range(1, m + 1):
        # Boundary after position r: every item above is significantly above every item below.
        if r == m or running[r - 1] <= r:
            tiers.append(order[start:r])
            start = r
    # Maximal runs of mutually indistinguishable items in estimated order.
    sig = above[np.ix_(order, order)]
    reach = np.empty(m, dtype=np.int64)  # last position e such that order[s..e] has no significant pair
    e = 0
    for s_ in range(m):
        e = max(e, s_)
        while e + 1 < m and not sig[s_ : e + 1, e + 1].any():
            e += 1
        reach[s_] = e
    tied = [order[s_ : reach[s_] + 1] for s_ in range(m) if s_ == 0 or reach[s_] > reach[s_ - 1]]
    return RankConfidence(
        marginal, simultaneous, "marginal", level, _p_top_k(draws, k), certain, tied, tiers, crit, crit_each
    )


def _p_top_k(draws: RankDraws, k: int | None) -> NDArray[np.float64] | None:
    """P(top-K) from kept draws (None without k or with several components)."""
    if k is None or draws.values is None:
        return None
    m = draws.estimate.size
    if k < m:
        best = np.argpartition(draws.values, m - k, axis=1)[:, m - k :]  # exactly k per draw
        inside = np.bincount(best.ravel(), minlength=m)
    else:
        inside = np.full(m, draws.n_draws)
    return order_restricted(inside / draws.n_draws, draws.point, draws.ranking_component)


def with_k(ranks: RankConfidence, draws: RankDraws, k: int | None) -> RankConfidence:
    """The summaries of ``ranks`` (any k) for another ``k``.

    Parameters
    ----------
    ranks : RankConfidence
        Summaries at some k.
    draws : RankDraws
        The draws they came from.
    k : int or None
        The new top set.

    Returns
    -------
    RankConfidence
        ``ranks`` with P(top-K) and the certain top-K members for ``k``: only they depend
        on it.

    Raises
    ------
    ValueError
        If ``k`` is not between 1 and m.
    """
    m = draws.estimate.size
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= m):
        raise ValueError(f"k must be an integer between 1 and {m}")
    certain = None if k is None else ranks.rank_ci_simultaneous[:, 1] <= k
    return dataclasses.replace(ranks, p_top_k=_p_top_k(draws, k), top_k_certain=certain)


def rank_summaries(
    conf: Confidence,
    draws: RankDraws,
    level: float,
    k: int | None = None,
    check: Check | None = None,
) -> RankConfidence:
    """:func:`rank_at` for a :class:`Confidence` with items set aside as unidentified.

    Parameters
    ----------
    conf : Confidence
        Intervals with items set aside (``interval_reason``).
    draws : RankDraws
        Draws from :func:`rank_draws`.
    level : float
        Confidence level.
    k : int, optional
        The top set.
    check : callable, optional
        Called between the steps; it raises to stop the work.

    Returns
    -------
    RankConfidence
        The summaries, every interval containing the reported rank.

    Notes
    -----
    The set-aside items' draws stay at their reported score (their spread is not
    identified), so P(top-K) counts them there, made non-increasing along the ranking like
    every item's. They are never significantly different from anything in the
    simultaneous intervals (one-sided at most: [1, m]). Their marginal rank interval is
    one-sided: an item that wins everything is above every item b with ``conf.rank_bound``
    (its score bound at one-sided level 1 − α/2) above b's upper end at one-sided level
    1 − α/(2(m − 1)) (Bonferroni over b; the end moved to contain θ̂_b and b's interval), so
    the statements hold jointly with probability ≥ ``level``; the identified items'
    intervals count the set-aside items as never significant (wider, never narrower).
    """
    rc = rank_at(draws, level, k, check)
    if conf.interval_reason is None or conf.rank_bound is None:
        return rc
    reason = conf.interval_reason
    top = np.array([r == "wins_all" for r in reason])
    bottom = np.array([r == "loses_all" for r in reason])
    m = conf.theta.size
    normal = ~(top | bottom) & np.isfinite(conf.se)
    q = 1.0 - (1.0 - level) / (2.0 * max(m - 1, 1))
    zq = float(ndtri(q) if conf.df is None else stdtrit(conf.df, q))
    with np.errstate(invalid="ignore"):
        ub = np.fmax(np.fmax(conf.estimate + zq * conf.se, conf.upper), conf.theta)
        lb = np.fmin(np.fmin(conf.estimate - zq * conf.se, conf.lower), conf.theta)
    marginal = rc.rank_ci.copy()
    same = conf.component
    for u in np.flatnonzero(top | bottom):
        mates = normal & (same == same[u])
        if top[u]:
            below = int(np.sum(mates & (conf.rank_bound[u] > ub)))
            marginal[u] = (1, m - below)
        else:
            above = int(np.sum(mates & (conf.rank_bound[u] < lb)))
            marginal[u] = (1 + above, m)
    return dataclasses.replace(rc, rank_ci=marginal)


#: Values per block of rank draws in :func:`rank_confidence` (8 MB of float64).
_BLOCK_VALUES = 1_000_000
