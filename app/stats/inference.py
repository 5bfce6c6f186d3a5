"""Uncertainty of the debiased MLE: standard errors, intervals, rank intervals and top-K
probabilities under privacy noise, with respondents as the independent unit.

The model-based sandwich is docs/uncertainty.md §2; respondents as clusters (CR1, CR2
with Bell–McCaffrey degrees of freedom, the worst-case bound, the floor) §3; the
bias-corrected, order-restricted centre §4; refusals and items set aside §5; rank
intervals, top-K probabilities and their cost (:func:`uncertainty` once per fit,
:meth:`Uncertainty.at`, :func:`rank_draws`, :func:`rank_at`, :func:`with_k`) §6; the
bootstraps §7; references §10. Coverage is measured by
``python -m tests.benchmarks.bench_coverage`` and ``bench_small_sample``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, ndtri, stdtrit

from . import entropy
from .btl import BTLFit, fit_btl
from .laplacian import MAX_ITEMS_COVARIANCE, SingularLaplacian, laplacian, laplacian_pinv, laplacian_solve
from .mechanisms import (
    RandomSource,
    debias,
    privacy_noise_variance,
    privatize,
    system_uniform,
    validate_epsilon,
)
from .metrics import competition_ranks
from .pairs import pair_stats, reduce_by_pair, validate_comparisons

__all__ = [
    "MAX_ITEMS_COVARIANCE",
    "MIN_CLUSTERS",
    "REASONS",
    "ClusterSource",
    "Clusters",
    "Confidence",
    "IntervalsUnavailable",
    "RankConfidence",
    "RankDraws",
    "Uncertainty",
    "bootstrap_confidence",
    "cluster_bootstrap_confidence",
    "confidence",
    "confidence_from_cov",
    "laplacian",
    "laplacian_pinv",
    "rank_at",
    "rank_confidence",
    "rank_draws",
    "rank_summaries",
    "uncertainty",
    "with_k",
]

#: A callback that long computations call between units of work (a replicate, a
#: correction step); it raises to stop them (the service passes a deadline's check).
Check = Callable[[], None]


def _no_check() -> None:
    """No time budget: never stops the work."""


def _weights(theta: NDArray, stats_like: tuple[NDArray, NDArray, NDArray, NDArray]):
    i, j, n, v = stats_like
    s = expit(theta[i] - theta[j])
    sp = s * (1.0 - s)
    w = n * sp
    return s, sp, w, w + v


class IntervalsUnavailable(ValueError):
    """The data cannot support an interval; ``reason`` is a machine-readable code
    (one of :data:`REASONS`) and the message a plain sentence for people."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


#: Why intervals can be unavailable (``IntervalsUnavailable.reason``).
REASONS = (
    "no_comparisons",
    "too_few_respondents",
    "not_identified",
    "unstable_correction",
    "too_many_items",
)

#: CR1 cluster-robust covariances with t(G − 1) are used from this many respondents on
#: (and at least two per identified item); below, CR2 with Bell–McCaffrey degrees of
#: freedom or the worst-case-correlation bound, whichever is narrower under the working
#: model (docs/uncertainty.md §3; measured by tests/benchmarks/bench_small_sample.py).
MIN_CLUSTERS = 30

#: A bias correction is applied only when it is this small: the ridge removal by at
#: most RIDGE_MAX_SE standard errors per item, the second-order term by at most
#: SECOND_ORDER_MAX_SE (an expansion whose next term is not small is not trusted).
RIDGE_MAX_SE = 3.0
SECOND_ORDER_MAX_SE = 1.0
#: When more than this share of the identified items needs that fallback, the survey is
#: too thin for intervals at all. Measured: 0.1 refused 2% of 10-item surveys with 200
#: respondents at ε = 0.5 (and 9% with ε mixed over 0.25–1) whose intervals, given with
#: the per-item fallback, covered 95.8% (97.3%).
SECOND_ORDER_MAX_SHARE = 0.5
#: Separated data (an item winning or losing "everything" once the noise is removed) are
#: refused when the ridge removal multiplies some item's model-based se by more than this.
SEPARATED_MAX_SE_RATIO = 10.0

_NOT_IDENTIFIED = (
    "The answers so far do not determine the scores without the ridge penalty: intervals would only "
    "reflect the penalty. Collect more answers."
)
_SEPARATED = (
    "Once the privacy noise is removed, some items win (or lose) every comparison with the rest: the "
    "answers do not yet say how far apart they are, only the ridge penalty does. Collect more answers."
)


@dataclass(frozen=True, eq=False)
class Clusters:
    """Comparisons grouped by respondent, the independent unit of a survey.

    One row per comparison: items ``i``, ``j`` (any orientation), ``z`` its
    debiased value in that orientation (eq. (1): E z = σ(θ_i − θ_j)), ``v`` the
    variance randomized response added to it (e^ε/(e^ε−1)², 0 without privacy)
    and ``cluster`` the respondent's code in 0 … n_clusters − 1.
    """

    n_items: int
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    z: NDArray[np.float64]
    v: NDArray[np.float64]
    cluster: NDArray[np.int64]
    n_clusters: int

    @classmethod
    def from_answers(
        cls, n_items: int, i: ArrayLike, j: ArrayLike, y_tilde: ArrayLike, epsilon: ArrayLike, respondent
    ) -> Clusters:
        """From reported answers (``y_tilde`` = 1 when i won; privatized at ``epsilon``,
        ``inf`` for true answers) and any respondent labels (strings or numbers)."""
        ia, ja = validate_comparisons(n_items, i, j)
        eps = np.broadcast_to(validate_epsilon(epsilon), ia.shape)
        y = np.asarray(y_tilde, dtype=np.float64).reshape(-1)
        labels = np.asarray(respondent).reshape(-1)
        if y.shape != ia.shape or labels.shape != ia.shape:
            raise ValueError("y_tilde and respondent need one value per comparison")
        _, codes = np.unique(labels, return_inverse=True)
        codes = codes.astype(np.int64).reshape(-1)
        return cls(
            int(n_items),
            ia,
            ja,
            debias(y, eps),
            privacy_noise_variance(eps) * np.ones(ia.size),
            codes,
            int(codes.max(initial=-1)) + 1,
        )

    @property
    def sizes(self) -> NDArray[np.int64]:
        """Comparisons per respondent."""
        return np.bincount(self.cluster, minlength=self.n_clusters)

    def meat(self, theta: NDArray) -> NDArray[np.float64]:
        """Σ_r u_r u_rᵀ at ``theta`` (:func:`_cluster_meat`)."""
        return _cluster_meat(theta, self)

    def as_rows(self, n_items: int) -> Clusters:
        """These clusters (the interface of :class:`~app.stats.clusters.ClusterMoments`,
        whose rows are materialized on demand)."""
        return self

    def _check_matches(self, data) -> None:
        """Refuse clusters that are not the fit's data (counts and Σz per pair)."""
        m = self.n_items
        lo, hi = np.minimum(self.i, self.j), np.maximum(self.i, self.j)
        z = np.where(self.i < self.j, self.z, 1.0 - self.z)
        key = lo * m + hi
        fit_key = data.i * m + data.j
        if self.i.size != round(float(data.n.sum())):
            raise ValueError("the clusters are not the comparisons the fit used")
        if m * m <= 4 * max(key.size, 1):  # a direct lookup table of the fit's pairs
            table = np.full(m * m, -1, dtype=np.int64)
            table[fit_key] = np.arange(fit_key.size)
            pos = table[key]
        else:
            pos = np.searchsorted(fit_key, key)
            pos[pos >= fit_key.size] = 0
            pos[fit_key[pos] != key] = -1
        if np.any(pos < 0):
            raise ValueError("the clusters are not the comparisons the fit used")
        n = np.bincount(pos, minlength=fit_key.size)
        s = np.bincount(pos, z, minlength=fit_key.size)
        same_s = np.allclose(s, data.s, rtol=0.0, atol=1e-6 * (1.0 + np.abs(data.s).max(initial=0.0)))
        if not (np.array_equal(n, np.rint(data.n)) and same_s):
            raise ValueError("the clusters are not the comparisons the fit used")


class ClusterSource(Protocol):
    """Comparisons grouped by respondent, as :func:`confidence` uses them: :class:`Clusters`
    (the rows) or :class:`~app.stats.clusters.ClusterMoments` (sums kept as answers arrive)."""

    @property
    def n_clusters(self) -> int: ...

    def meat(self, theta: NDArray) -> NDArray[np.float64]:
        """Σ_r u_r u_rᵀ at ``theta``."""
        ...

    def as_rows(self, n_items: int) -> Clusters:
        """The rows, over ``n_items`` items."""
        ...

    def _check_matches(self, data) -> None: ...


@dataclass(frozen=True)
class Confidence:
    """Per-item estimates with standard errors and confidence intervals.

    Attributes
    ----------
    estimate : (m,) the interval centre θ̌ (bias-corrected when safe; docs/uncertainty.md §4)
    cov : (m, m) covariance of ``estimate`` on each component's sum-to-zero subspace
    se : (m,) standard errors (NaN for items never compared)
    level : confidence level of ``lower``/``upper``
    lower, upper : (m,) interval end points; they always contain ``theta``
    component : (m,) connected component of each item
    method : "sandwich" (model-based, answers independent), "cluster" (cluster-robust,
        respondents independent, CR1), "cluster_cr2" (few respondents: CR2 with
        Bell–McCaffrey degrees of freedom), "cluster_bound" (few respondents: worst-case
        within-respondent correlation), "bootstrap" (parametric), "cluster_bootstrap"
    theta : (m,) the point estimate θ̂ the intervals belong to
    critical_value : the multiplier of ``se`` (normal, or Student t with ``df``
        degrees of freedom for cluster-robust intervals)
    df : degrees of freedom of ``critical_value`` (None: normal); rank summaries draw
        from the multivariate t with these degrees of freedom, like the intervals
    n_clusters : respondents behind the covariance (None: not clustered)
    corrections : which bias corrections were applied ("ridge", "second_order")
        and the largest of each in standard errors
    widened : (m,) bool, items whose interval was extended to contain θ̂
    interval_reason : (m,) object or None: per item, why its interval is not the two-sided
        one — "wins_all" ([lower, +∞): it wins every debiased comparison with the rest,
        alone or with a few others), "loses_all" ((−∞, upper]), "not_identified" (no
        interval: only compared with such items); None for the others (docs/uncertainty.md §5)
    cov_component : the components ``cov`` lives on, when not ``component``
        (:attr:`variance_component`)
    rank_bound : (m,) the set-aside items' score bounds at one-sided level 1 − α/2, for
        their rank intervals (:func:`rank_summaries`)
    """

    estimate: NDArray[np.float64]
    cov: NDArray[np.float64]
    se: NDArray[np.float64]
    level: float
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    component: NDArray[np.int64]
    method: str
    theta: NDArray[np.float64]
    identified: NDArray[np.bool_] = field(repr=False)
    critical_value: float = float("nan")
    n_clusters: int | None = None
    corrections: dict = field(default_factory=dict)
    widened: NDArray[np.bool_] | None = field(default=None, repr=False)
    df: float | None = None
    interval_reason: NDArray[np.object_] | None = field(default=None, repr=False)
    cov_component: NDArray[np.int64] | None = field(default=None, repr=False)
    rank_bound: NDArray[np.float64] | None = field(default=None, repr=False)

    @property
    def variance_component(self) -> NDArray[np.int64]:
        """The components ``cov`` lives on: ``component``, with the items set aside as
        unidentified (and any item their removal cut off) on their own."""
        return self.component if self.cov_component is None else self.cov_component

    @property
    def z(self) -> float:
        return float(ndtri(0.5 + self.level / 2.0))

    def difference_se(self) -> NDArray[np.float64]:
        """se of θ_a − θ_b for every pair (∞ across components, NaN if unidentified)."""
        c = self.cov
        d = np.diag(c)
        var = d[:, None] + d[None, :] - 2.0 * c
        se = np.sqrt(np.maximum(var, 0.0))
        se[self.component[:, None] != self.component[None, :]] = np.inf
        se[~self.identified, :] = np.nan
        se[:, ~self.identified] = np.nan
        np.fill_diagonal(se, 0.0)
        return se

    def win_probability(self) -> tuple[NDArray, NDArray, NDArray]:
        """P(a beats b) = σ(θ̂_a − θ̂_b) with its interval, as (p, lower, upper) m×m arrays.

        The point is the fit's, so the matrix agrees in direction with the scores;
        the interval maps the difference's interval (centred like the items') through
        the increasing σ and is extended to contain the point where the bias
        correction moved it out. Pairs in different components get p = NaN and the
        vacuous interval [0, 1].
        """
        diff = self.estimate[:, None] - self.estimate[None, :]
        se = self.difference_se()
        half = self.critical_value * se
        with np.errstate(invalid="ignore"):
            p = expit(self.theta[:, None] - self.theta[None, :])
            lo = np.fmin(expit(diff - half), p)
            hi = np.fmax(expit(diff + half), p)
        cross = ~np.isfinite(se)
        p[cross] = np.nan
        lo[cross] = 0.0
        hi[cross] = 1.0
        np.fill_diagonal(p, np.nan)
        np.fill_diagonal(lo, np.nan)
        np.fill_diagonal(hi, np.nan)
        return p, lo, hi


def confidence_from_cov(
    estimate, cov, level, component, method, theta, crit=None, n_clusters=None, corrections=None, df=None
) -> Confidence:
    """Intervals estimate ± crit·se from a covariance.

    Parameters
    ----------
    estimate : array_like (m,)
        The interval centre before the order restriction.
    cov : array_like (m, m)
        Its covariance.
    level : float
        Confidence level.
    component : array_like of int (m,)
        Connected component of each item.
    method : str
        The covariance's name, recorded in the result.
    theta : array_like (m,)
        The reported scores: the centre is restricted to their order
        (:func:`order_restricted`, weights 1/se²) and each interval widened to contain them.
    crit : float, optional
        The critical value; default the normal quantile, or the Student t quantile with
        ``df`` degrees of freedom.
    n_clusters : int, optional
        Respondents behind the covariance (None: not clustered).
    corrections : dict, optional
        The bias corrections applied, to which the items the order restriction pooled are
        added (``order_pooled_items``).
    df : float, optional
        Degrees of freedom of the critical value (None: normal).

    Returns
    -------
    Confidence
        The intervals, NaN for items alone in their component.
    """
    sizes = np.bincount(component)
    identified = sizes[component] > 1
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    se[~identified] = np.nan
    raw = np.asarray(estimate, dtype=np.float64)
    estimate = order_restricted(raw, theta, component, _precision(se))
    if corrections is not None or not np.array_equal(estimate, raw):
        corrections = {**(corrections or {}), "order_pooled_items": int(np.sum(estimate != raw))}
    if crit is None:
        crit = float(ndtri(0.5 + level / 2.0)) if df is None else float(stdtrit(df, 0.5 + level / 2.0))
    crit = float(crit)
    lower, upper = estimate - crit * se, estimate + crit * se
    # The reported estimate always lies inside its own interval: where a bias
    # correction moved the centre further than the half-width, the interval is
    # extended to reach θ̂ (wider, never narrower).
    with np.errstate(invalid="ignore"):
        widened = identified & ((theta < lower) | (theta > upper))
    lower = np.where(widened, np.minimum(lower, theta), lower)
    upper = np.where(widened, np.maximum(upper, theta), upper)
    return Confidence(
        estimate,
        cov,
        se,
        level,
        lower,
        upper,
        component,
        method,
        theta,
        identified,
        crit,
        n_clusters,
        dict(corrections or {}),
        widened,
        None if df is None else float(df),
    )


def _precision(se: NDArray) -> NDArray[np.float64]:
    """Weights 1/se² for :func:`order_restricted` (finite: a zero se weighs 10³⁰⁰)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        w = 1.0 / np.maximum(np.square(se), 1e-300)
    return np.where(np.isfinite(w), w, 1.0)


def order_restricted(
    values: ArrayLike,
    order_by: ArrayLike,
    component: ArrayLike | None = None,
    weight: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """The weighted least-squares fit to ``values`` that is non-increasing along the order
    of ``order_by`` (descending) within each component, items tied in ``order_by`` pooled:
    the isotonic regression, by pool-adjacent-violators (Barlow, Bartholomew, Bremner &
    Brunk 1972, *Statistical Inference under Order Restrictions*, §1.2; Robertson, Wright
    & Dykstra 1988, *Order Restricted Statistical Inference*, §1.2).

    Where ``values`` already follow that order it returns them unchanged; elsewhere it
    averages the offending runs (weighted), which keeps each run's weighted mean. Used for
    the interval centre (a bias correction never reverses the reported order) and for
    P(top-K) along the ranking (docs/uncertainty.md §4 and §6).

    >>> order_restricted([1.0, 3.0, 0.0], [2.0, 1.0, 0.0]).tolist()
    [2.0, 2.0, 0.0]
    """
    v = np.asarray(values, dtype=np.float64).copy()
    key = np.asarray(order_by, dtype=np.float64)
    m = v.size
    comp = np.zeros(m, dtype=np.int64) if component is None else np.asarray(component, dtype=np.int64)
    w = np.ones(m) if weight is None else np.asarray(weight, dtype=np.float64)
    if key.shape != v.shape or comp.shape != v.shape or w.shape != v.shape:
        raise ValueError("values, order_by, component and weight need one value per item")
    order = np.lexsort((np.arange(m), -key, comp))
    finite = np.isfinite(v[order])
    wo = np.where(finite, w[order], 0.0)
    vo = np.where(finite, v[order], 0.0)
    # Groups of tied items (equal component and key), in order; then pool adjacent
    # violators over the groups of each component.
    new_group = np.ones(m, dtype=bool)
    new_group[1:] = (comp[order][1:] != comp[order][:-1]) | (key[order][1:] != key[order][:-1])
    first = np.flatnonzero(new_group)
    gw = np.add.reduceat(wo, first) if m else np.zeros(0)
    gs = np.add.reduceat(wo * vo, first) if m else np.zeros(0)
    gcomp = comp[order][first]
    # The stack's blocks: weight, weighted sum, first group.
    bw: list[float] = []
    bs: list[float] = []
    bstart: list[int] = []
    for g in range(first.size):
        bw.append(float(gw[g]))
        bs.append(float(gs[g]))
        bstart.append(g)
        while len(bw) > 1 and gcomp[bstart[-2]] == gcomp[g] and _mean(bs[-2], bw[-2]) < _mean(bs[-1], bw[-1]):
            last_w, last_s = bw.pop(), bs.pop()
            bstart.pop()
            bw[-1] += last_w
            bs[-1] += last_s
    ends = [*bstart[1:], first.size]
    item_ends = np.append(first, m)
    for start, end, total_w, total_s in zip(bstart, ends, bw, bs, strict=True):
        lo, hi = item_ends[start], item_ends[end]
        if hi - lo > 1 and total_w > 0:
            block = order[lo:hi]
            v[block] = np.where(np.isfinite(v[block]), total_s / total_w, v[block])
    return v


def _mean(total: float, weight: float) -> float:
    """A block's weighted mean (−∞ for a block without weight: never a violator)."""
    return total / weight if weight > 0 else -math.inf


def _check_level(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    return level


def _separated(theta: NDArray, data, component: NDArray) -> bool:
    """Whether the unpenalized objective has no minimizer along a cut the data suggest.

    J₀ is bounded below along moving a set A of items against the rest iff the
    debiased wins of A over the rest lie strictly between 0 and the number of
    comparisons across the cut (its slope at ±∞). Debiased values are not bounded
    by [0, 1], so with privacy noise this fails often for an item that wins or loses
    nearly everything. Checked for every single item and every top-t set in θ̂'s
    order within each component (the cuts along which separation happens in
    practice); then the one-step ridge removal would head to infinity.
    """
    i, j, n, s = data.i, data.j, data.n.astype(float), data.s
    m = theta.size
    wins = np.bincount(i, s, m) + np.bincount(j, n - s, m)
    total = np.bincount(i, n, m) + np.bincount(j, n, m)
    seen = total > 0
    if np.any(seen & ((wins <= 0) | (wins >= total))):
        return True
    order = np.lexsort((np.arange(m), -theta, component))  # by component, best first
    position = np.empty(m, dtype=np.int64)
    position[order] = np.arange(m)
    pi, pj = position[i], position[j]
    top_wins = np.where(pi < pj, s, n - s)  # wins of the better-placed item of the pair
    lo, hi = np.minimum(pi, pj), np.maximum(pi, pj)
    # Pair k crosses the cut "positions ≤ t | > t" for lo ≤ t < hi (same component only).
    cross_n = np.cumsum(np.bincount(lo, n, m) - np.bincount(hi, n, m))
    cross_w = np.cumsum(np.bincount(lo, top_wins, m) - np.bincount(hi, top_wins, m))
    cut = cross_n > 1e-9
    return bool(np.any(cut & ((cross_w <= 0) | (cross_w >= cross_n))))


def _flattened(lw_fit, lw_centre, v_fit, v_centre, design, identified) -> bool:
    """Whether the ridge removal went out along a flat direction: the model-based se at
    θ̃ exceeds SEPARATED_MAX_SE_RATIO times the one at θ̂ for some item (σ' → 0 there).
    With separated data the step heads to infinity and the se with it, so a guard in
    se units cannot see it; comparing the two curvatures can."""
    m, i, j = design
    se_fit = np.sqrt(np.maximum(((lw_fit @ laplacian(m, i, j, v_fit)) * lw_fit).sum(axis=1), 0.0))
    meat = laplacian(m, i, j, v_centre)
    se_c = np.sqrt(np.maximum(((lw_centre @ meat) * lw_centre).sum(axis=1), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(identified & (se_fit > 0), se_c / se_fit, 0.0)
    return bool(np.any(ratio > SEPARATED_MAX_SE_RATIO))


def _ridge_removed(fit: BTLFit, check: Check, dense_fit: bool = True):
    """Steps 1–2 of :func:`confidence`: the ridge-removed centre θ̃ (:func:`_unshrink`),
    L_W⁺ at θ̂ (None unless ``dense_fit``: :func:`_refuse_flattened` computes it where it
    needs it) and at θ̃, and the weights (σ, σ', W, V) at θ̃. Raises ``not_identified``
    where the step is not finite or σ' underflowed across a cut at θ̃."""
    data, comp, m = fit.fit_data, fit.component, fit.theta.size
    check()
    centre, lw_pinv_fit = _unshrink(fit.theta, fit.lam, data, comp, dense=dense_fit)
    check()
    if not np.all(np.isfinite(centre)):
        raise IntervalsUnavailable("not_identified", _NOT_IDENTIFIED)
    weights = _weights(centre, (data.i, data.j, data.n, data.v))
    try:
        lw_pinv = laplacian_pinv(laplacian(m, data.i, data.j, weights[2]), comp)
    except SingularLaplacian:
        # The step went so far out that σ' underflowed across a cut: the model se there
        # is unbounded, the limit of what _flattened measures (docs/uncertainty.md §5).
        separated = _separated(fit.theta, data, comp)
        raise IntervalsUnavailable("not_identified", _SEPARATED if separated else _NOT_IDENTIFIED) from None
    return centre, lw_pinv_fit, lw_pinv, weights


def _refuse_flattened(fit: BTLFit, lw_pinv_fit, lw_pinv, v_centre, identified) -> None:
    """Raise ``not_identified`` for separated data whose ridge removal went out along a
    flat direction (:func:`_separated` and :func:`_flattened`)."""
    data, m = fit.fit_data, fit.theta.size
    v_fit = _weights(fit.theta, (data.i, data.j, data.n, data.v))[3]
    if not _separated(fit.theta, data, fit.component):
        return
    if lw_pinv_fit is None:
        lw_pinv_fit = _unshrink(fit.theta, fit.lam, data, fit.component)[1]
    if _flattened(lw_pinv_fit, lw_pinv, v_fit, v_centre, (m, data.i, data.j), identified):
        raise IntervalsUnavailable("not_identified", _SEPARATED)


def _refuse_separated(fit: BTLFit) -> None:
    """Raise ``not_identified`` where :func:`confidence` would for separated data. A
    bootstrap cannot see this itself: every replicate is held by the same ridge, so their
    spread is near zero (standard errors of 10⁻¹³ on answers that were never randomized) —
    certainty the data do not give."""
    data, comp = fit.data, fit.component
    if data is None or data.i.size == 0 or not _separated(fit.theta, data, comp):
        return
    _, lw_pinv_fit, lw_pinv, weights = _ridge_removed(fit, _no_check)
    _refuse_flattened(fit, lw_pinv_fit, lw_pinv, weights[3], np.bincount(comp)[comp] > 1)


def _unshrink(
    theta: NDArray, lam: float, data, component: NDArray, dense: bool = True
) -> tuple[NDArray, NDArray | None]:
    """One Newton step of the unpenalized objective from θ̂: θ̃ = θ̂ + L_W(θ̂)⁺ 2λθ̂.

    Removes the ridge's pull towards 0 to first order. Returns θ̃ and L_W(θ̂)⁺ (None
    without ``dense``: the step is then one solve, :func:`~app.stats.laplacian.laplacian_solve`).

    Raises :class:`IntervalsUnavailable` ("not_identified") when L_W(θ̂) is singular
    beyond its components (:class:`~app.stats.laplacian.SingularLaplacian`): θ̂ lies
    where σ' has underflowed across some cut, so the step along that cut is unbounded.
    Separated debiased data (mean z above 1 across a cut) take θ̂ there: only the ridge
    holds θ̂ on that cut, and θ̂ grows linearly in the number of answers
    (docs/estimator.md §4.3–4.4).
    """
    m = theta.size
    _, _, w, _ = _weights(theta, (data.i, data.j, data.n, data.v))
    try:
        lap = laplacian(m, data.i, data.j, w)
        if not dense:
            return theta + laplacian_solve(lap, component, 2.0 * lam * theta), None
        lw_pinv = laplacian_pinv(lap, component)
    except SingularLaplacian:
        raise IntervalsUnavailable("not_identified", _NOT_IDENTIFIED) from None
    return theta + lw_pinv @ (2.0 * lam * theta), lw_pinv


def _cluster_meat(theta: NDArray, clusters: Clusters) -> NDArray[np.float64]:
    """Σ_r u_r u_rᵀ with u_r = Σ_{k ∈ r} (σ(θ_i − θ_j) − z_k)(e_i − e_j): the spread of
    the estimating equation over respondents (sparse: Σ_r (items of r)² work)."""
    m, c = clusters.n_items, clusters
    resid = expit(theta[c.i] - theta[c.j]) - c.z
    if c.n_clusters * m <= 20_000_000:  # dense G×m and one BLAS product: faster when it fits
        u = np.asarray(np.bincount(c.cluster * m + c.i, resid, c.n_clusters * m), dtype=np.float64)
        u -= np.bincount(c.cluster * m + c.j, resid, c.n_clusters * m)
        u = u.reshape(c.n_clusters, m)
        return u.T @ u
    rows = np.concatenate((c.cluster, c.cluster))
    cols = np.concatenate((c.i, c.j))
    vals = np.concatenate((resid, -resid))
    u = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(c.n_clusters, m))
    meat = (u.T @ u).toarray()
    return 0.5 * (meat + meat.T)


def _comparison_laplacian(m: int, i: NDArray, j: NDArray, w: NDArray) -> NDArray[np.float64]:
    """Σ_k w_k (e_i − e_j)(e_i − e_j)ᵀ over comparisons k, pairs repeated or in either
    orientation (summed per pair first: :func:`laplacian` takes distinct pairs)."""
    if i.size == 0:
        return np.zeros((m, m))
    lo, hi, _, (ws,) = reduce_by_pair(np.minimum(i, j), np.maximum(i, j), m, (np.asarray(w, dtype=float),))
    return laplacian(m, lo, hi, ws)


def _bound_meat(theta: NDArray, clusters: Clusters) -> NDArray[np.float64]:
    """An upper bound (in the PSD order) on E Σ_r u_r u_rᵀ whatever the correlation of
    one respondent's true answers: the privacy noise is independent across answers
    (drawn afresh from the CSPRNG), and for the true-answer part Cauchy–Schwarz
    gives Var(Σ_{k∈r} a_k) ⪯ L_r Σ_{k∈r} Var(a_k). So each comparison counts with
    variance v_k + L_r σ'(θ_i − θ_j), L_r its respondent's number of answers."""
    c = clusters
    s = expit(theta[c.i] - theta[c.j])
    weight = c.v + c.sizes[c.cluster] * s * (1.0 - s)
    return _comparison_laplacian(c.n_items, c.i, c.j, weight)


#: :func:`_cr2` is used while G·(n + m)² and m·G² stay within CR2_MAX_WORK (n: the most
#: answers of one respondent): it takes O(G·(n + m)² + m·G²) memory and
#: O(G·(n + m)³ + m²·G²) operations; beyond, the bound (:func:`_bound_meat`).
CR2_MAX_WORK = 4_000_000


def _cr2(
    theta: NDArray, clusters: Clusters, lw_pinv: NDArray, resid: NDArray | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The bias-reduced cluster-robust meat (CR2) and the Bell–McCaffrey degrees of freedom.

    Linearized at θ with x_k = e_i − e_j, W = diag(σ'_k), Φ = diag(σ'_k + v_k) (the
    working model: answers independent with Lemma 2's variance, privacy noise
    included), H = XᵀWX (``lw_pinv`` = H⁺): the residuals e = z − σ(Xθ) of a fit are
    ê ≈ (I − Q)e with Q = WXH⁺Xᵀ, so under the working model
    E ê_g ê_gᵀ = B_g = Φ_g − W_g X_g H⁺X_gᵀ Φ_g − Φ_g X_g H⁺X_gᵀ W_g + W_g X_g C X_gᵀ W_g,
    C = H⁺ L_Φ H⁺ the model-based covariance. With
    A_g = Φ_g^{1/2} (Φ_g^{-1/2} B_g Φ_g^{-1/2})^{-1/2} Φ_g^{-1/2} (pseudo-inverse roots),
    A_g B_g A_gᵀ = Φ_g, and the meat Σ_g X_gᵀ A_g ê_g ê_gᵀ A_gᵀ X_g is unbiased for
    XᵀΦX under the working model (Bell & McCaffrey 2002, *Survey Methodology* 28(2);
    Pustejovsky & Tipton 2018, *J. Business & Economic Statistics* 36(4), eq. (6)–(7)).

    Degrees of freedom (Satterthwaite on V̂ = Σ_g (p_gᵀ ê_g)², p_g = A_gᵀ X_g H⁺ c):
    with t_g = (I − Q)ᵀ p_g (p_g padded with zeros) and Ω_gh = t_gᵀ Φ t_h,
    df = (tr Ω)² / tr Ω² (Bell & McCaffrey 2002 §3; Imbens & Kolesár 2016,
    *Review of Economics and Statistics* 98(4), eq. (8)), for c = each identified item's
    score (NaN where Ω = 0: an item no cluster's residuals inform). Ω expands
    with r_g = H⁺X_gᵀW_g p_g and s_g = X_gᵀ Φ_g p_g into
    δ_gh p_gᵀΦ_g p_g − s_gᵀr_h − r_gᵀs_h + r_gᵀ L_Φ r_h, all in item space.

    ``resid`` replaces z − σ(Xθ) (tests feed residuals of the linear working model).
    Work: O(G·(n + m)³ + m²·G²), n the most answers of one respondent (rows padded to n).
    """
    c = clusters
    m, g_count = c.n_items, c.n_clusters
    s = expit(theta[c.i] - theta[c.j])
    w = s * (1.0 - s)
    phi = np.maximum(w + c.v, np.finfo(float).tiny)
    e = c.z - s if resid is None else np.asarray(resid, dtype=np.float64)
    l_phi = _comparison_laplacian(m, c.i, c.j, phi)
    c_model = lw_pinv @ l_phi @ lw_pinv
    # Every respondent's rows padded to the largest respondent's count: a padded row has
    # x = 0, w = 0, Φ = 1 and residual 0, so its block of B is the identity, A is the
    # identity there, and it adds nothing to the meat or to Ω. Batched over respondents.
    order = np.argsort(c.cluster, kind="stable")
    sizes = c.sizes
    width = int(sizes.max(initial=1))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    who = c.cluster[order]
    slot = np.full((g_count, width), -1, dtype=np.int64)
    slot[who, np.arange(order.size) - starts[who]] = order
    valid = slot >= 0
    take = np.where(valid, slot, 0)
    ig, jg = np.where(valid, c.i[take], 0), np.where(valid, c.j[take], 0)
    wg = np.where(valid, w[take], 0.0)
    pg = np.where(valid, phi[take], 1.0)
    eg = np.where(valid, e[take], 0.0)
    sq = np.sqrt(pg)
    x = np.zeros((g_count, width, m))  # X_g, zero rows for padding
    gi, ki = np.nonzero(valid)
    x[gi, ki, ig[gi, ki]] = 1.0
    x[gi, ki, jg[gi, ki]] -= 1.0
    xh = x @ lw_pinv  # X_g H⁺
    xhx = xh @ x.transpose(0, 2, 1)  # X_g H⁺ X_gᵀ
    xcx = (x @ c_model) @ x.transpose(0, 2, 1)  # X_g C X_gᵀ
    t = wg[:, :, None] * xhx * pg[:, None, :]  # W_g X_g H⁺X_gᵀ Φ_g
    b = -t - t.transpose(0, 2, 1) + wg[:, :, None] * xcx * wg[:, None, :]
    b[:, np.arange(width), np.arange(width)] += pg
    b = b / sq[:, :, None] / sq[:, None, :]
    vals, vecs = np.linalg.eigh(0.5 * (b + b.transpose(0, 2, 1)))
    keep = vals > 1e-10 * np.maximum(vals.max(axis=1, keepdims=True), 1.0)
    inv_root = np.where(keep, 1.0 / np.sqrt(np.where(keep, vals, 1.0)), 0.0)
    a = sq[:, :, None] * ((vecs * inv_root[:, None, :]) @ vecs.transpose(0, 2, 1)) / sq[:, None, :]
    u = (x.transpose(0, 2, 1) @ (a @ eg[:, :, None]))[:, :, 0]  # X_gᵀ A_g ê_g, (G, m)
    meat = u.T @ u
    p = a.transpose(0, 2, 1) @ xh  # p_g for each item's contrast (columns), (G, n, m)
    xt = x.transpose(0, 2, 1)
    r_all = lw_pinv @ (xt @ (wg[:, :, None] * p))  # r_g = H⁺X_gᵀW_g p_g, (G, m, m)
    s_all = xt @ (pg[:, :, None] * p)  # s_g = X_gᵀΦ_g p_g
    d_all = (pg[:, :, None] * p * p).sum(axis=1)  # p_gᵀΦ_g p_g, (G, m)
    meat = 0.5 * (meat + meat.T)
    # Ω for every contrast a at once, (m, G, G), by batched products.
    r_t = r_all.transpose(2, 0, 1)  # (a, g, i)
    cross = s_all.transpose(2, 0, 1) @ r_all.transpose(2, 1, 0)  # s_gᵀ r_h
    omega = (r_t @ l_phi) @ r_all.transpose(2, 1, 0) - cross - cross.transpose(0, 2, 1)
    diag = np.arange(g_count)
    omega[:, diag, diag] += d_all.T
    tr = np.trace(omega, axis1=1, axis2=2)
    tr2 = np.einsum("agh,ahg->a", omega, omega)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(tr2 > 0, tr * tr / tr2, np.nan)
    return meat, df


def _psd_max(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """An upper bound of both in the PSD order: a + (b − a)₊, the positive part by
    eigendecomposition (an upper bound, not the least one: two matrices that are not
    ordered have no least upper bound, Kadison 1951; docs/uncertainty.md §3). Used as
    cluster meat ∨ model meat: an item seen by only a handful of respondents has a
    cluster-robust variance estimated from that handful,
    which can be far too small (measured: se 0.10 where the model gives 1.9 for an
    item in 27 comparisons from 3 respondents); the model-based meat floors it, while
    items with many respondents keep their (larger) cluster-robust variance."""
    vals, vecs = np.linalg.eigh(0.5 * ((b - a) + (b - a).T))
    pos = vals > 0
    return a + (vecs[:, pos] * vals[pos]) @ vecs[:, pos].T


#: The cluster covariances :func:`confidence` can be asked for (``cluster_variance``):
#: "auto" chooses (docs/uncertainty.md §3, "Which one"); the others force one, for the comparison in
#: ``tests/benchmarks/bench_small_sample.py``.
CLUSTER_VARIANCES = ("auto", "cr1", "cr2", "cr2_unfloored", "bound")


def _cr2_affordable(clusters: Clusters) -> bool:
    """Whether :func:`_cr2` fits its budget (:data:`CR2_MAX_WORK`)."""
    g, m = clusters.n_clusters, clusters.n_items
    n = int(clusters.sizes.max(initial=0))
    return g * (n + m) ** 2 <= CR2_MAX_WORK and m * g * g <= CR2_MAX_WORK


def _cluster_variance(
    centre: NDArray,
    clusters: ClusterSource,
    lw_pinv: NDArray,
    model_meat: NDArray,
    identified: NDArray,
    min_clusters: int,
    choice: str,
    level: float,
) -> tuple[str, NDArray[np.float64], float | None]:
    """The cluster meat of :func:`confidence`, its method name and the degrees of freedom of
    its Student-t critical value (None: normal), as chosen by ``choice``.

    "auto": from max(``min_clusters``, 2 × identified items) respondents on, CR1 with
    t(G − 1). Below, CR2 with Bell–McCaffrey degrees of freedom or the worst-case bound,
    whichever is narrower *under the working model*: CR2's meat is then unbiased for the
    model meat L_Φ, so its expected half-width is t_df·se_model, against z·se_bound for the
    bound (means over the identified items). Both depend on the design and the centre
    only, not on the residuals whose spread the chosen interval then measures: the choice
    does not select the narrower of two realized intervals (which would undercover).
    """
    if choice not in CLUSTER_VARIANCES:
        raise ValueError(f"cluster_variance must be one of {', '.join(CLUSTER_VARIANCES)}")
    g = clusters.n_clusters
    if choice == "auto" and g >= max(min_clusters, 2 * int(identified.sum())):
        choice = "cr1"
    if choice == "cr1":
        cr1 = clusters.meat(centre) * (g / (g - 1.0))
        return "cluster", _psd_max(cr1, model_meat), float(g - 1)
    # The small-sample covariances need each respondent's answers.
    clusters = clusters.as_rows(centre.size)
    if choice == "auto" and not _cr2_affordable(clusters):
        choice = "bound"
    if choice == "bound":
        return "cluster_bound", _bound_meat(centre, clusters), None
    meat, dfs = _cr2(centre, clusters, lw_pinv)
    dfs = dfs[identified & np.isfinite(dfs)]
    # One critical value for every item: the smallest degrees of freedom of the items'
    # scores (the widest t quantile), at most G − 1 (the CR1 reference distribution).
    df = float(min(dfs.min(initial=np.inf), g - 1.0))
    if choice == "auto":
        bound = _bound_meat(centre, clusters)
        # diag(L_W⁺ M L_W⁺) as ((L_W⁺ M) ∘ L_W⁺)·1 (L_W⁺ is symmetric): one BLAS product.
        se_model = np.sqrt(np.maximum(((lw_pinv @ model_meat) * lw_pinv).sum(axis=1), 0.0))
        se_bound = np.sqrt(np.maximum(((lw_pinv @ bound) * lw_pinv).sum(axis=1), 0.0))
        t_width = float(stdtrit(df, 0.5 + level / 2.0)) * se_model[identified].mean()
        if t_width > float(ndtri(0.5 + level / 2.0)) * se_bound[identified].mean():
            return "cluster_bound", bound, None
    if choice != "cr2_unfloored":
        meat = _psd_max(meat, model_meat)
    return "cluster_cr2", meat, df


def _cox_snell(lw_pinv, cov, i, j, n, s, sp) -> NDArray[np.float64]:
    """b = −½ L_W⁺ Σ_{i<j} n σ''(d) Var(d̂)(e_i − e_j) (docs/uncertainty.md §4)."""
    m = lw_pinv.shape[0]
    var_d = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
    g = n * sp * (1.0 - 2.0 * s) * var_d
    return -0.5 * lw_pinv @ (np.bincount(i, g, m) - np.bincount(j, g, m))


def _largest_in_se(shift: NDArray, se: NDArray, identified: NDArray) -> float:
    if not identified.any():
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(shift[identified]) / se[identified]
    r = np.where(np.abs(shift[identified]) == 0, 0.0, r)
    return float(np.nan_to_num(r, nan=np.inf, posinf=np.inf).max())


def _in_se(ratio: float) -> str:
    """A shift in standard errors, in words: "4.2 standard errors", or, where a standard
    error is zero (no spread in the answers, e.g. ``variance="empirical"`` with every pair
    answered alike), that it is not measured in them at all."""
    if math.isfinite(ratio):
        return f"{ratio:.1f} standard errors"
    return "more than any number of standard errors (their answers show no spread: a standard error of zero)"


def confidence(
    fit: BTLFit,
    level: float = 0.95,
    variance: str = "model",
    clusters: ClusterSource | None = None,
    min_clusters: int = MIN_CLUSTERS,
    check: Check | None = None,
    cluster_variance: str = "auto",
) -> Confidence:
    """Sandwich confidence intervals for θ* from a fit (docs/uncertainty.md §2–5).

    Parameters
    ----------
    fit : BTLFit
        The fit (:func:`~app.stats.btl.fit_debiased_mle` and the like).
    level : float, default 0.95
        Confidence level, in (0, 1).
    variance : {"model", "empirical"}, default "model"
        Without ``clusters``: ``"model"`` uses Lemma 2's Var z = σ'(d) + e^ε/(e^ε−1)²,
        ``"empirical"`` the observed spread of z within each pair.
    clusters : ClusterSource, optional
        The fit's comparisons with their respondents; then the respondents are the
        independent unit. Without, the comparisons are taken as independent (the
        model-based sandwich).
    min_clusters : int, default 30
        CR1 with Student-t(G−1) critical values is used from
        ``max(min_clusters, 2 × identified items)`` respondents on.
    check : callable, optional
        Called between the steps; it raises to stop the work.
    cluster_variance : {"auto", "cr1", "cr2", "cr2_unfloored", "bound"}, default "auto"
        Forces one cluster covariance ("cr2_unfloored": CR2 without the model-meat floor);
        "auto" chooses as described in the Notes.

    Returns
    -------
    Confidence
        Centre, covariance, standard errors and intervals; items the data do not
        identify have a one-sided interval and a reason (``Confidence.interval_reason``).

    Raises
    ------
    IntervalsUnavailable
        When the data cannot support an interval: no comparisons, fewer than two
        respondents, no unpenalized fit to correct the ridge towards, or a bias correction
        too large to trust.
    ValueError
        On an invalid ``level``, ``variance`` or ``cluster_variance``, or an empirical
        variance without Σz² per pair.

    Notes
    -----
    With ``clusters`` the covariance is the cluster-robust sandwich
    L_W⁺ (G/(G−1) Σ_r u_r u_rᵀ) L_W⁺ with Student-t(G−1) critical values from
    ``max(min_clusters, 2 × identified items)`` respondents on; below that, CR2 with
    Bell–McCaffrey degrees of freedom (:func:`_cr2`) or the worst-case-correlation bound
    (:func:`_bound_meat`), whichever is narrower under the working model
    (:func:`_cluster_variance`).

    Items the data do not identify (:func:`_separated_items`: an item, or a small top or
    bottom set, winning or losing every debiased comparison with the rest) get a one-sided
    interval and a reason while the others keep theirs, up to ``MAX_UNIDENTIFIED_SHARE`` of
    the items (docs/uncertainty.md §5).

    Equal to ``uncertainty(fit, …).at(level)``: the level-free part (centre, covariance,
    standard errors) is :func:`uncertainty`'s, and a level only rescales. Work:
    O(m³ + comparisons) — a few m×m factorizations and products, and at most m/2
    second-order correction steps of O(m) each.
    """
    return uncertainty(fit, variance, clusters, min_clusters, check, cluster_variance).at(level)


#: When more than this share of the items of a survey is not identified (separated from
#: the rest, :func:`_separated_items`), the whole survey's intervals are refused (as
#: ``not_identified`` where the ridge removal heads into the flat direction); up to it, only
#: those items lose their two-sided intervals. A stated choice, not a measurement: the
#: others' scores are then located by the identified items, which should be most (at
#: ε = 1 with 50 comparisons per item, tests/benchmarks/bench_items.py sets aside about a
#: tenth: the single items and the small top and bottom sets winning or losing all).
MAX_UNIDENTIFIED_SHARE = 0.25
#: Below this many identified items not one item is set aside (a survey of a few items
#: is refused whole, as the small-sample coverage of tests/stats/test_inference.py needs).
MIN_ITEMS_SET_ASIDE = 20


def _separated_items(
    theta: NDArray, data, component: NDArray, cuts: bool = True
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(wins_all, loses_all): the items that win (lose) every debiased comparison with the
    rest, alone or as part of the smaller side of a top-t cut in θ̂'s order within their
    component (the cuts :func:`_separated` checks). Along such a cut the unpenalized
    objective has no minimizer: the data bound the score difference from one side only.
    Without ``cuts``, single items only (a single item's surplus would otherwise carry every
    top set containing it)."""
    i, j, n, s = data.i, data.j, data.n.astype(float), data.s
    m = theta.size
    wins = np.bincount(i, s, m) + np.bincount(j, n - s, m)
    total = np.bincount(i, n, m) + np.bincount(j, n, m)
    seen = total > 0
    wins_all = seen & (wins >= total)
    loses_all = seen & (wins <= 0)
    if not cuts:
        return wins_all, loses_all
    order = np.lexsort((np.arange(m), -theta, component))
    position = np.empty(m, dtype=np.int64)
    position[order] = np.arange(m)
    pi, pj = position[i], position[j]
    top_wins = np.where(pi < pj, s, n - s)
    lo, hi = np.minimum(pi, pj), np.maximum(pi, pj)
    cross_n = np.cumsum(np.bincount(lo, n, m) - np.bincount(hi, n, m))
    cross_w = np.cumsum(np.bincount(lo, top_wins, m) - np.bincount(hi, top_wins, m))
    comp_sorted = component[order]
    starts = np.searchsorted(comp_sorted, comp_sorted, side="left")
    ends = np.searchsorted(comp_sorted, comp_sorted, side="right")
    for t in np.flatnonzero((cross_n > 1e-9) & ((cross_w <= 0) | (cross_w >= cross_n))):
        top_side = t + 1 - starts[t] <= ends[t] - t - 1  # the top set is the smaller side
        top_wins_all = cross_w[t] >= cross_n[t]
        side = order[starts[t] : t + 1] if top_side else order[t + 1 : ends[t]]
        if top_side == top_wins_all:
            wins_all[side] = True
        else:
            loses_all[side] = True
    both = wins_all & loses_all  # on two separated cuts at once: bounded from neither side
    return wins_all & ~both, loses_all & ~both


def _without_items(fit: BTLFit, clusters: Clusters | None, keep: NDArray[np.bool_]):
    """The fit of the pairs between kept items only (the others left isolated), warm-started
    from θ̂, and those pairs' comparisons grouped by respondent."""
    d = fit.fit_data
    pk = keep[d.i] & keep[d.j]
    sub = fit_btl(
        fit.theta.size,
        d.i[pk],
        d.j[pk],
        d.n[pk],
        d.s[pk],
        fit.lam,
        v=d.v[pk],
        s2=None if d.s2 is None else d.s2[pk],
        estimator=fit.estimator,
        theta0=np.where(keep, fit.theta, 0.0),
    )
    if clusters is None:
        return sub, None
    c = clusters
    rk = keep[c.i] & keep[c.j]
    _, codes = np.unique(c.cluster[rk], return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    return sub, Clusters(c.n_items, c.i[rk], c.j[rk], c.z[rk], c.v[rk], codes, int(codes.max(initial=-1)) + 1)


@dataclass(frozen=True, eq=False)
class _SetAside:
    """Items whose scores the data bound from one side only, with their comparisons
    (padded per item) for the score bound of :meth:`Uncertainty.at`."""

    wins_all: NDArray[np.bool_]
    loses_all: NDArray[np.bool_]
    items: NDArray[np.int64]  # the set-aside items
    opponent: NDArray[np.int64]  # (items, width): the opponent of each comparison pair, −1 padding
    n: NDArray[np.float64]  # comparisons of the pair (0 padding)
    wins: NDArray[np.float64]  # the item's debiased wins in the pair
    v: NDArray[np.float64]  # privacy variance of the pair's comparisons
    kappa: NDArray[np.float64]  # per item: most of its comparisons made by one respondent


def _set_aside(fit: BTLFit, clusters: Clusters | None, wins_all, loses_all) -> _SetAside:
    d = fit.fit_data
    m = fit.theta.size
    items = np.flatnonzero(wins_all | loses_all)
    rows: list[tuple] = []
    for u in items:
        a, b = d.i == u, d.j == u
        opp = np.concatenate((d.j[a], d.i[b]))
        won = np.concatenate((d.s[a], d.n[b] - d.s[b]))
        rows.append((opp, np.concatenate((d.n[a], d.n[b])), won, np.concatenate((d.v[a], d.v[b]))))
    width = max((r[0].size for r in rows), default=0)
    shape = (items.size, max(width, 1))
    opponent = np.full(shape, -1, dtype=np.int64)
    n, wins, v = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for k, (opp, nn, won, vv) in enumerate(rows):
        opponent[k, : opp.size], n[k, : opp.size], wins[k, : opp.size], v[k, : opp.size] = opp, nn, won, vv
    kappa = np.ones(items.size)
    if clusters is not None and items.size:
        c = clusters
        flag = np.zeros(m, dtype=bool)
        flag[items] = True
        for side in (c.i, c.j):
            r = flag[side]
            counts = np.bincount(c.cluster[r] * m + side[r], minlength=c.n_clusters * m)
            per = counts.reshape(c.n_clusters, m).max(axis=0) if c.n_clusters else np.zeros(m)
            kappa = np.maximum(kappa, per[items])
        # An item in both columns of one respondent's rows: the counts add up.
        both = np.bincount(
            np.concatenate(
                (c.cluster[flag[c.i]] * m + c.i[flag[c.i]], c.cluster[flag[c.j]] * m + c.j[flag[c.j]])
            ),
            minlength=c.n_clusters * m,
        )
        if c.n_clusters:
            kappa = np.maximum(kappa, both.reshape(c.n_clusters, m).max(axis=0)[items])
    return _SetAside(wins_all, loses_all, items, opponent, n, wins, v, kappa)


def _score_bound(aside: _SetAside, theta: NDArray, opponent_at: NDArray, quantile: float) -> NDArray:
    """Per set-aside item, the one-sided score bound at one-sided normal ``quantile``: for an
    item that wins everything, the smallest t with (W − Σ n σ(t − a_j)) / sd(t) ≤ quantile,
    W its debiased wins and a_j its opponents' ``opponent_at`` (their interval ends on the
    conservative side); sd²(t) = Σ κ n σ'(t − a_j) + v (Lemma 2's variance, κ the most
    comparisons of the item by one respondent: Cauchy–Schwarz within a respondent). For
    one that loses everything, the largest t with (Σ n σ(t − a_j) − W) / sd(t) ≤ quantile.
    Each bound is moved to contain θ̂ (the reported score)."""
    k = aside.items.size
    if k == 0:
        return np.zeros(0)
    valid = aside.opponent >= 0
    a = np.where(valid, opponent_at[np.where(valid, aside.opponent, 0)], 0.0)
    top = aside.wins_all[aside.items]
    sign = np.where(top, 1.0, -1.0)[:, None]
    w_total = aside.wins.sum(axis=1)
    point = theta[aside.items]

    def stat(t: NDArray) -> NDArray:
        s = expit(t[:, None] - a)
        expected = (aside.n * s).sum(axis=1)
        var = (aside.kappa[:, None] * aside.n * s * (1.0 - s) + aside.v).sum(axis=1)
        return np.where(top, w_total - expected, expected - w_total) / np.sqrt(np.maximum(var, 1e-300))

    # Bisection between the point (where the statistic must be small enough to move) and a
    # point far on the bounded side, where it is not.
    near = point.copy()
    far = point - sign[:, 0] * 1.0
    for _ in range(60):  # widen until rejected (the statistic grows without bound there)
        reject = stat(far) > quantile
        if reject.all():
            break
        far = np.where(reject, far, point + 2.0 * (far - point))
    inside = stat(near) <= quantile
    for _ in range(60):
        mid = 0.5 * (near + far)
        ok = stat(mid) <= quantile
        near = np.where(ok, mid, near)
        far = np.where(ok, far, mid)
    bound = np.where(inside, near, point)
    return np.where(top, np.minimum(bound, point), np.maximum(bound, point))


@dataclass(frozen=True, eq=False)
class _Core:
    """The level-free part of one covariance of :class:`Uncertainty`."""

    method: str
    df: float | None
    estimate: NDArray[np.float64]
    cov: NDArray[np.float64]
    corrections: dict
    unsafe: NDArray[np.bool_]
    bias: NDArray[np.float64]


@dataclass(eq=False)
class Uncertainty:
    """The level-free part of :func:`confidence` for one fit: centre, covariance and
    standard errors (for both candidate covariances where the choice depends on the level),
    and the items set aside as unidentified. :meth:`at` gives the intervals at a level
    by rescaling (critical values, one-sided score bounds); built by :func:`uncertainty`."""

    fit: BTLFit
    component: NDArray[np.int64]  # the components the covariance lives on
    n_clusters: int | None
    aside: _SetAside | None
    _cores: dict[str, _Core | IntervalsUnavailable] = field(repr=False)
    _auto: tuple[float, float, float] | None = None  # (df, mean se_model, mean se_bound)

    def choice(self, level: float) -> str:
        """The covariance used at ``level`` (:func:`_cluster_variance`'s "auto" rule)."""
        if self._auto is None:
            return next(iter(self._cores))
        df, se_model, se_bound = self._auto
        t_width = float(stdtrit(df, 0.5 + level / 2.0)) * se_model
        return "bound" if t_width > float(ndtri(0.5 + level / 2.0)) * se_bound else "cr2"

    def core(self, choice: str) -> _Core:
        """The level-free centre and covariance of one choice."""
        found = self._cores[choice]
        if isinstance(found, IntervalsUnavailable):
            raise IntervalsUnavailable(found.reason, found.message)
        return found

    def at(self, level: float) -> Confidence:
        """The intervals at ``level`` (equal to a computation from scratch at that level)."""
        level = _check_level(level)
        core = self.core(self.choice(level))
        fit = self.fit
        if core.df is None:
            crit = float(ndtri(0.5 + level / 2.0))
        else:
            crit = float(stdtrit(core.df, 0.5 + level / 2.0))
        conf = confidence_from_cov(
            core.estimate,
            core.cov,
            level,
            self.component,
            core.method,
            fit.theta,
            crit,
            self.n_clusters,
            core.corrections,
            df=core.df,
        )
        if core.unsafe.any():
            # Span the interval with and without the correction for the items it skipped.
            lower = np.where(core.unsafe, np.minimum(conf.lower, conf.lower - core.bias), conf.lower)
            upper = np.where(core.unsafe, np.maximum(conf.upper, conf.upper - core.bias), conf.upper)
            conf = dataclasses.replace(conf, lower=lower, upper=upper)
        if self.aside is None:
            return conf
        return self._one_sided(conf, level)

    def _one_sided(self, conf: Confidence, level: float) -> Confidence:
        """The set-aside items' one-sided intervals and every item's reason code."""
        aside, fit = self.aside, self.fit
        assert aside is not None
        m = fit.theta.size
        full_identified = np.bincount(fit.component)[fit.component] > 1
        reason = np.full(m, None, dtype=object)
        reason[full_identified & ~conf.identified] = "not_identified"
        reason[aside.wins_all] = "wins_all"
        reason[aside.loses_all] = "loses_all"
        lower, upper = conf.lower.copy(), conf.upper.copy()
        # Opponents on the conservative side: their lower ends against an item above all
        # of them, their upper ends against one below; θ̂ where they have no interval.
        low = np.where(np.isfinite(lower), lower, fit.theta)
        high = np.where(np.isfinite(upper), upper, fit.theta)
        top = aside.wins_all[aside.items]
        q = float(ndtri(level))
        bound_top = _score_bound(aside, fit.theta, low, q)
        bound_bottom = _score_bound(aside, fit.theta, high, q)
        lower[aside.items] = np.where(top, bound_top, -np.inf)
        upper[aside.items] = np.where(top, np.inf, bound_bottom)
        q2 = float(ndtri(1.0 - (1.0 - level) / 2.0))
        rank_bound = np.full(m, np.nan)
        rank_bound[aside.items] = np.where(
            top, _score_bound(aside, fit.theta, low, q2), _score_bound(aside, fit.theta, high, q2)
        )
        return dataclasses.replace(
            conf,
            rank_bound=rank_bound,
            lower=lower,
            upper=upper,
            component=fit.component,
            interval_reason=reason,
            cov_component=self.component,
        )


def uncertainty(
    fit: BTLFit,
    variance: str = "model",
    clusters: ClusterSource | None = None,
    min_clusters: int = MIN_CLUSTERS,
    check: Check | None = None,
    cluster_variance: str = "auto",
) -> Uncertainty:
    """The level-free part of :func:`confidence` (same arguments but the level).

    Parameters
    ----------
    fit : BTLFit
        The fit.
    variance : {"model", "empirical"}, default "model"
        As in :func:`confidence`.
    clusters : ClusterSource, optional
        As in :func:`confidence`.
    min_clusters : int, default 30
        As in :func:`confidence`.
    check : callable, optional
        Called between the steps; it raises to stop the work.
    cluster_variance : str, default "auto"
        As in :func:`confidence`.

    Returns
    -------
    Uncertainty
        Everything that does not depend on the level, computed once: the ridge-removed
        centre, the covariance (for both candidates when the "auto" cluster covariance
        chooses by level: few respondents, small m), the second-order correction, and the
        items set aside. :meth:`Uncertainty.at` gives the intervals at a level.

    Raises
    ------
    IntervalsUnavailable
        Where :func:`confidence` would at every level.
    ValueError
        As :func:`confidence`.
    """
    check = check or _no_check
    m = fit.theta.size
    if m > MAX_ITEMS_COVARIANCE:
        raise IntervalsUnavailable(
            "too_many_items", f"Intervals are computed for at most {MAX_ITEMS_COVARIANCE} items."
        )
    if variance not in ("model", "empirical"):
        raise ValueError("variance must be 'model' or 'empirical'")
    if cluster_variance not in CLUSTER_VARIANCES:
        raise ValueError(f"cluster_variance must be one of {', '.join(CLUSTER_VARIANCES)}")
    data = fit.data
    if data is None or data.i.size == 0:
        raise IntervalsUnavailable("no_comparisons", "There are no comparisons yet.")
    if clusters is not None:
        clusters._check_matches(data)
        if clusters.n_clusters < 2:
            raise IntervalsUnavailable(
                "too_few_respondents",
                f"Only {clusters.n_clusters} respondent has answered. Intervals describe the population "
                "the respondents come from, and one person's answers say nothing about how others differ: "
                "not enough data yet.",
            )
    if variance == "empirical" and data.s2 is None:
        raise ValueError("the empirical variance needs Σz² per pair (fit from PairStats)")
    # 0. Items the data bound from one side only are set aside (their pairs left out), as
    # long as they are few; the rest is fitted again without them.
    full_identified = np.bincount(fit.component)[fit.component] > 1
    n_identified = int(full_identified.sum())
    limit = int(MAX_UNIDENTIFIED_SHARE * n_identified) if n_identified >= MIN_ITEMS_SET_ASIDE else 0
    target, target_clusters, aside = fit, clusters, None
    # Single items first: a top set is separated as a whole only without them.
    wins_all, loses_all = _separated_items(fit.theta, data, fit.component, cuts=False)
    if not (wins_all | loses_all).any():
        wins_all, loses_all = _separated_items(fit.theta, data, fit.component)
    if (wins_all | loses_all).any() and (wins_all | loses_all).sum() <= limit:
        # Setting items aside restricts each respondent's answers: the rows themselves.
        rows = None if clusters is None else clusters.as_rows(fit.theta.size)
        for _ in range(5):
            check()
            target, target_clusters = _without_items(fit, rows, ~(wins_all | loses_all))
            more_w, more_l = _separated_items(target.theta, target.fit_data, target.component)
            if not (more_w | more_l).any() or (wins_all | loses_all | more_w | more_l).sum() > limit:
                break
            wins_all, loses_all = wins_all | more_w, loses_all | more_l
        if (_separated_items(target.theta, target.fit_data, target.component)[0]).any() or (
            (wins_all | loses_all).sum() > limit
        ):
            target, target_clusters = fit, clusters  # too many: the whole survey, as below
        else:
            aside = _set_aside(fit, rows, wins_all, loses_all)
    return _uncertainty_of(
        target, fit, variance, target_clusters, min_clusters, check, cluster_variance, aside
    )


def _uncertainty_of(
    target: BTLFit,
    fit: BTLFit,
    variance: str,
    clusters: ClusterSource | None,
    min_clusters: int,
    check: Check,
    cluster_variance: str,
    aside: _SetAside | None,
) -> Uncertainty:
    """:func:`uncertainty` on ``target`` (``fit`` itself, or its fit without the set-aside
    items), centred on ``fit``'s scale."""
    data = target.fit_data
    m = target.theta.size
    i, j, n = data.i, data.j, data.n
    comp = target.component
    identified = np.bincount(comp)[comp] > 1
    # 1–2. Remove the ridge (one Newton step of the unpenalized objective from θ̂); the
    # sandwich at the corrected point.
    centre, lw_pinv_fit, lw_pinv, (s, sp, _, v_model) = _ridge_removed(target, check, dense_fit=False)
    ridge_shift = centre - target.theta
    if aside is not None:
        # The set-aside items' pairs are left out: the others' scores are located by their
        # own mean, placed on the reported scale (the mean of θ̂ over each component).
        sizes = np.bincount(comp).astype(float)
        shift = np.bincount(comp, fit.theta - centre) / sizes
        centre = np.where(identified, centre + shift[comp], fit.theta)
    check()
    spread = None
    if variance == "empirical" and data.s2 is not None:
        zbar = data.s / n
        spread = np.maximum(data.s2 - n * zbar**2, 0.0) * n / np.maximum(n - 1.0, 1.0)
    model_meat = laplacian(m, i, j, v_model) if clusters is not None else None
    choices: tuple[str, ...]
    rows: Clusters | None = None
    auto = None
    if clusters is None:
        choices = ("sandwich",)
    elif cluster_variance != "auto":
        choices = (cluster_variance,)
    elif clusters.n_clusters >= max(min_clusters, 2 * int(identified.sum())):
        choices = ("cr1",)
    elif not _cr2_affordable(rows := clusters.as_rows(m)):
        choices = ("bound",)
    else:
        choices = ("cr2", "bound")
    meats: dict[str, tuple[str, NDArray, float | None]] = {}

    def meat_of(choice: str) -> tuple[str, NDArray, float | None]:
        if choice not in meats:
            if choice == "sandwich":
                meats[choice] = (
                    "sandwich",
                    laplacian(m, i, j, spread if spread is not None else v_model),
                    None,
                )
            else:
                assert clusters is not None
                assert model_meat is not None
                # The small-sample covariances take the rows, materialized once above.
                source = rows if rows is not None and choice != "cr1" else clusters
                meats[choice] = _cluster_variance(
                    centre, source, lw_pinv, model_meat, identified, min_clusters, choice, 0.95
                )
        return meats[choice]

    if choices == ("cr2", "bound"):
        assert model_meat is not None
        df_cr2 = meat_of("cr2")[2]
        assert df_cr2 is not None
        bound = meat_of("bound")[1]
        se_model = np.sqrt(np.maximum(((lw_pinv @ model_meat) * lw_pinv).sum(axis=1), 0.0))
        se_bound = np.sqrt(np.maximum(((lw_pinv @ bound) * lw_pinv).sum(axis=1), 0.0))
        auto = (float(df_cr2), float(se_model[identified].mean()), float(se_bound[identified].mean()))

    def build(choice: str) -> _Core:
        method, meat, df = meat_of(choice)
        check()
        cov = _sandwich(lw_pinv, meat)
        check()
        se = np.sqrt(np.maximum(np.diag(cov), 0.0))
        if aside is None:
            _refuse_flattened(target, lw_pinv_fit, lw_pinv, v_model, identified)
        ridge_se = _largest_in_se(ridge_shift, se, identified)
        if ridge_se > RIDGE_MAX_SE:
            raise IntervalsUnavailable(
                "unstable_correction",
                f"Removing the ridge penalty would move some scores by {_in_se(ridge_se)}: the "
                "penalty, not the answers, dominates those scores. Collect more answers.",
            )
        unsafe, bias, _ = _second_order(lw_pinv, cov, se, data, s, sp, identified, check)
        if unsafe.sum() > max(1, int(SECOND_ORDER_MAX_SHARE * identified.sum())):
            worst = _largest_in_se(bias, se, identified)
            raise IntervalsUnavailable(
                "unstable_correction",
                f"The estimated small-sample bias reaches {_in_se(worst)} for "
                f"{int(unsafe.sum())} items: the normal approximation behind the intervals does not hold "
                "yet. Collect more answers, or use uncertainty=bootstrap.",
            )
        applied = np.where(unsafe, 0.0, bias)
        corrections = {
            "ridge": True,
            "second_order": bool((~unsafe).any()),
            "ridge_max_se": ridge_se,
            "second_order_max_se": _largest_in_se(applied, se, identified),
            "second_order_skipped_items": int(unsafe.sum()),
        }
        if aside is not None:
            corrections["unidentified_items"] = int(aside.items.size)
        return _Core(method, df, centre - applied, cov, corrections, unsafe, bias)

    cores: dict[str, _Core | IntervalsUnavailable] = {}
    for choice in choices:
        try:
            cores[choice] = build(choice)
        except IntervalsUnavailable as exc:
            cores[choice] = exc
    return Uncertainty(fit, comp, None if clusters is None else clusters.n_clusters, aside, cores, auto)


def _sandwich(lw_pinv: NDArray, meat: NDArray) -> NDArray[np.float64]:
    """L_W⁺ (meat) L_W⁺, symmetrized; a sparse meat (a Laplacian of the compared pairs)
    costs one dense product instead of two."""
    m = meat.shape[0]
    if np.count_nonzero(meat) <= 0.1 * m * m:
        half = np.asarray(scipy.sparse.csr_matrix(meat) @ lw_pinv)
    else:
        half = meat @ lw_pinv
    cov = lw_pinv @ half
    cov += cov.T
    cov *= 0.5
    return cov


def _second_order(lw_pinv, cov, se, data, s, sp, identified, check) -> tuple[NDArray, NDArray, NDArray]:
    """Correction 2 of docs/uncertainty.md §4: the second-order (Cox–Snell) bias of the unpenalized
    M-estimator. Where it is not small against the item's own se (an item seen in a
    handful of comparisons), the expansion is not trusted for that item: its centre stays
    uncorrected and its interval spans both the corrected and the uncorrected one. A thin
    item's huge terms reach every item through L_W⁺ and the centring, so the items with the
    largest second-order terms are set aside one at a time (their pairs left out of the
    others' correction) until the rest is safe. Each step updates the correction by the
    columns of L_W⁺ of the items the removed pairs touch (O(m·degree), not O(m²)).
    Returns (unsafe, bias, full bias)."""
    i, j, n = data.i, data.j, data.n
    m = lw_pinv.shape[0]
    var_d = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
    g = n * sp * (1.0 - 2.0 * s) * var_d
    g_abs = np.abs(g)
    source = np.bincount(i, g_abs, m) + np.bincount(j, g_abs, m)
    full_bias = -0.5 * lw_pinv @ (np.bincount(i, g, m) - np.bincount(j, g, m))
    bias = full_bias
    unsafe = np.zeros(m, dtype=bool)
    removed = np.zeros(i.size, dtype=bool)
    limit = max(1, int(SECOND_ORDER_MAX_SHARE * identified.sum()))
    while True:
        check()
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(bias == 0, 0.0, np.abs(bias) / se)
        bad = identified & ~unsafe & ~(ratio <= SECOND_ORDER_MAX_SE)
        if not bad.any() or unsafe.sum() > limit:
            break
        u = int(np.argmax(np.where(identified & ~unsafe, source, -np.inf)))
        unsafe[u] = True
        drop = ~removed & ((i == u) | (j == u))
        removed |= drop
        touched = np.unique(np.concatenate((i[drop], j[drop])))
        if touched.size:
            delta = np.bincount(i[drop], g[drop], m) - np.bincount(j[drop], g[drop], m)
            bias = bias + 0.5 * (delta[touched] @ lw_pinv[touched])  # rows: L_W⁺ is symmetric
    unsafe |= bad
    bias = np.where(unsafe, full_bias, bias)
    return unsafe, bias, full_bias


def bootstrap_confidence(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    epsilon: ArrayLike,
    fit: BTLFit,
    level: float = 0.95,
    n_boot: int = 200,
    rng: RandomSource | None = None,
    check: Check | None = None,
) -> Confidence:
    """Parametric bootstrap for small samples (answers independent given θ).

    Parameters
    ----------
    n_items : int
        Items m.
    i, j : array_like of int
        The fit's comparisons.
    epsilon : float or array_like
        Each comparison's ε.
    fit : BTLFit
        A debiased-MLE fit of those comparisons.
    level : float, default 0.95
        Confidence level.
    n_boot : int, default 200
        Replicates, at least 20.
    rng : RandomSource, optional
        As in :func:`~app.stats.mechanisms.privatize` (None: OS CSPRNG).
    check : callable, optional
        Called before every replicate; it raises to stop the work.

    Returns
    -------
    Confidence
        Intervals from the replicates' spread around the bias-corrected centre.

    Raises
    ------
    IntervalsUnavailable
        When the data are separated, or the ridge-removal step of the fit or of a replicate
        is unbounded (see :func:`_unshrink`).
    ValueError
        On fewer than 20 replicates, a fit that is not the debiased MLE, more than
        :data:`MAX_ITEMS_COVARIANCE` items, or invalid comparisons, ε or level.

    Notes
    -----
    The estimator bootstrapped is the one the sandwich intervals use before their
    analytic second-order correction: the fit followed by the ridge-removal step,
    θ̃ = θ̂ + L_W⁺2λθ̂. Answers are re-simulated from θ̃ through randomized response with
    the observed design (i, j) and each comparison's ε, refitted with the same λ, and
    unshrunk the same way. The spread of the replicates gives the covariance, and their
    mean offset from θ̃ estimates the bias, which is removed: centre = θ̃ − (mean θ̃* − θ̃).
    Respondents' answers are treated as independent: see
    :func:`cluster_bootstrap_confidence`. Work: ``n_boot`` × (comparisons + a refit + an
    m×m pseudo-inverse, O(m³)). docs/uncertainty.md §7.
    """
    check = check or _no_check
    level = _check_level(level)
    if n_boot < 20:
        raise ValueError("n_boot must be at least 20")
    if fit.estimator != "debiased":
        raise ValueError("the bootstrap re-simulates randomized response: it needs a debiased-MLE fit")
    if fit.theta.size > MAX_ITEMS_COVARIANCE:
        raise ValueError(f"covariances are computed for at most {MAX_ITEMS_COVARIANCE} items")
    ia, ja = validate_comparisons(n_items, i, j)
    eps = np.broadcast_to(validate_epsilon(epsilon), ia.shape)
    comp = fit.component
    _refuse_separated(fit)
    base, _ = _unshrink(fit.theta, fit.lam, fit.data, comp, dense=False)
    truth_p = expit(base[ia] - base[ja])
    reps = np.empty((n_boot, base.size))
    for b in range(n_boot):
        check()
        u = rng.random(ia.size) if rng is not None else system_uniform(ia.size)
        y = (u < truth_p).astype(np.int8)
        stats = pair_stats(n_items, ia, ja, privatize(y, eps, rng=rng), eps)
        refit = fit_btl(
            n_items, stats.i, stats.j, stats.n, stats.sum_z, fit.lam, v=stats.sum_v, theta0=fit.theta
        )
        reps[b] = _unshrink(refit.theta, fit.lam, refit.data, refit.component, dense=False)[0]
    cov = np.atleast_2d(np.cov(reps, rowvar=False))
    return confidence_from_cov(2.0 * base - reps.mean(axis=0), cov, level, comp, "bootstrap", fit.theta)


def cluster_bootstrap_confidence(
    fit: BTLFit,
    clusters: Clusters,
    level: float = 0.95,
    n_boot: int = 200,
    rng: np.random.Generator | None = None,
    check: Check | None = None,
) -> Confidence:
    """Nonparametric cluster bootstrap: resample respondents with replacement.

    Parameters
    ----------
    fit : BTLFit
        The fit.
    clusters : Clusters
        The fit's comparisons with their respondents.
    level : float, default 0.95
        Confidence level.
    n_boot : int, default 200
        Replicates, at least 20.
    rng : numpy.random.Generator, optional
        The resampling only describes uncertainty, so a seedable generator is fine
        (default: OS-seeded).
    check : callable, optional
        Called before every replicate; it raises to stop the work.

    Returns
    -------
    Confidence
        Intervals with normal quantiles, always containing θ̂.

    Raises
    ------
    IntervalsUnavailable
        With no comparisons, fewer than two respondents, or separated data.
    ValueError
        On fewer than 20 replicates or an invalid level.

    Notes
    -----
    Each replicate takes G respondents drawn with replacement from the G who answered,
    with all of their stored (already privatized) answers — nothing is privatized again —
    and refits with the same λ. The replicates' spread is the covariance; their mean
    offset from θ̂ estimates the estimator's bias (the ridge's pull included), which is
    removed: centre = 2θ̂ − mean θ̂*. This keeps whatever correlation one respondent's
    answers have. Work: ``n_boot`` × (comparisons + a refit). docs/uncertainty.md §7.
    """
    check = check or _no_check
    level = _check_level(level)
    if n_boot < 20:
        raise ValueError("n_boot must be at least 20")
    m = fit.theta.size
    if m > MAX_ITEMS_COVARIANCE:
        raise IntervalsUnavailable(
            "too_many_items", f"Intervals are computed for at most {MAX_ITEMS_COVARIANCE} items."
        )
    if fit.data is None or fit.data.i.size == 0:
        raise IntervalsUnavailable("no_comparisons", "There are no comparisons yet.")
    clusters._check_matches(fit.data)
    _refuse_separated(fit)
    g = clusters.n_clusters
    if g < 2:
        raise IntervalsUnavailable(
            "too_few_respondents",
            f"Only {g} respondent has answered: resampling respondents needs at least two.",
        )
    gen = rng if rng is not None else entropy.generator()
    c = clusters
    reps = np.empty((n_boot, m))
    for b in range(n_boot):
        check()
        weight = np.bincount(gen.integers(0, g, g), minlength=g).astype(np.float64)
        take = weight[c.cluster] > 0
        wk = weight[c.cluster][take]
        lo = np.minimum(c.i[take], c.j[take])
        hi = np.maximum(c.i[take], c.j[take])
        z = np.where(c.i[take] < c.j[take], c.z[take], 1.0 - c.z[take])
        lo, hi, _, (n_b, s_b, v_b) = reduce_by_pair(lo, hi, m, (wk, wk * z, wk * c.v[take]))
        refit = fit_btl(m, lo, hi, n_b, s_b, fit.lam, v=v_b, theta0=fit.theta)
        theta_b = refit.theta
        # Items a replicate never saw (or saw in another component) keep θ̂'s value.
        if refit.n_components != fit.n_components or not np.array_equal(refit.component, fit.component):
            theta_b = np.where(np.bincount(refit.component)[refit.component] > 1, theta_b, fit.theta)
        reps[b] = theta_b
    cov = np.atleast_2d(np.cov(reps, rowvar=False))
    comp = fit.component
    return confidence_from_cov(
        2.0 * fit.theta - reps.mean(axis=0),
        cov,
        level,
        comp,
        "cluster_bootstrap",
        fit.theta,
        n_clusters=g,
        corrections={"ridge": True, "second_order": False, "bootstrap_bias": True},
    )


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


def _draw(gen: np.random.Generator, root: NDArray, rows: int, df: float | None) -> NDArray:
    """``rows`` draws of N(0, R Rᵀ), or of the multivariate t with ``df`` degrees of
    freedom and that scale matrix (each normal draw divided by √(χ²_df/df))."""
    z = gen.standard_normal((rows, root.shape[0])) @ root.T
    if df is not None:
        z *= np.sqrt(df / gen.chisquare(df, rows))[:, None]
    return z


def _critical_values(
    cov: NDArray,
    level: float,
    component: NDArray,
    n_draws: int,
    gen: np.random.Generator,
    df: float | None,
    check: Check,
    root: NDArray | None = None,
) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
    """The simultaneous critical value c, each item's marginal one c_a and the pairs' se
    (``root``: :func:`_mvn_root` of ``cov``, when the caller has it).

    From one set of draws Z (normal, or t with ``df``) with T_ab = |Z_a − Z_b|/se_ab over
    same-component pairs: c is the ``level``-quantile of max_{a,b} T_ab and c_a that of
    max_{b≠a} T_ab (Mogstad et al. 2024, §3), so c_a ≤ c. Beyond 2·10⁷ pair-draws c comes
    from :func:`simultaneous_critical_value` and c_a is the Bonferroni quantile over a's
    comparable items (at most c)."""
    m = component.size
    se_pair = pair_difference_se(cov, component)
    finite = np.isfinite(se_pair)
    np.fill_diagonal(finite, False)
    others = finite.sum(axis=1)
    if not others.any():
        return 0.0, np.zeros(m), se_pair
    if m * m * n_draws > 20_000_000:
        crit, _ = simultaneous_critical_value(cov, level, component, n_draws, gen, df, root)
        q = 1.0 - (1.0 - level) / (2.0 * np.maximum(others, 1))
        each = ndtri(q) if df is None else stdtrit(df, q)
        return crit, np.where(others > 0, np.minimum(each, crit), 0.0).astype(np.float64), se_pair
    root = _mvn_root(cov) if root is None else root
    inv = np.where(finite, 1.0 / np.where(finite, se_pair, 1.0), 0.0)
    largest = np.empty((n_draws, m))
    block = max(1, _BLOCK_PAIR_STATS // (m * m))
    for start in range(0, n_draws, block):
        z = _draw(gen, root, min(block, n_draws - start), df)
        largest[start : start + z.shape[0]] = (np.abs(z[:, :, None] - z[:, None, :]) * inv).max(axis=2)
        check()
    crit = float(np.quantile(largest.max(axis=1), level))
    return crit, np.where(others > 0, np.quantile(largest, level, axis=0), 0.0), se_pair


def pair_difference_se(cov: NDArray, component: NDArray) -> NDArray[np.float64]:
    """se(θ̂_a − θ̂_b) from a covariance; ∞ across components (nothing compares them)."""
    c = np.asarray(cov, dtype=np.float64)
    comp = np.asarray(component, dtype=np.int64)
    diag = np.diag(c)
    se_pair = np.sqrt(np.maximum(diag[:, None] + diag[None, :] - 2.0 * c, 1e-300))
    se_pair[comp[:, None] != comp[None, :]] = np.inf
    return se_pair


def simultaneous_critical_value(
    cov: NDArray,
    level: float,
    component: NDArray,
    n_draws: int,
    rng: np.random.Generator,
    df: float | None = None,
    root: NDArray | None = None,
) -> tuple[float, NDArray[np.float64]]:
    """The simultaneous critical value for all pairwise differences, and their se
    (``root``: :func:`_mvn_root` of ``cov``, when the caller has it).

    The ``level``-quantile of max over same-component pairs of |Z_a − Z_b|/se_ab,
    Z ~ N(0, cov) (or the multivariate t with ``df`` degrees of freedom), from
    ``n_draws`` draws (Bonferroni beyond 2·10⁷ pair-draws).
    se_ab is ∞ across components. Used by :func:`rank_confidence` (and by the
    planner, which certifies exactly as the ranking does).
    """
    c = np.asarray(cov, dtype=np.float64)
    comp = np.asarray(component, dtype=np.int64)
    m = comp.size
    se_pair = pair_difference_se(c, comp)
    cross = comp[:, None] != comp[None, :]
    iu = np.triu_indices(m, 1)
    same = ~cross[iu]
    n_pairs = int(same.sum())
    if n_pairs == 0:
        return 0.0, se_pair
    if n_pairs * n_draws <= 20_000_000:
        zdraw = _draw(rng, _mvn_root(c) if root is None else root, n_draws, df)
        a, b, se_same = iu[0][same], iu[1][same], se_pair[iu][same]
        # The largest |t| of each draw, a block of draws at a time (4 MB of pair statistics).
        largest = np.empty(n_draws)
        block = max(1, _BLOCK_PAIR_STATS // n_pairs)
        for start in range(0, n_draws, block):
            z = zdraw[start : start + block]
            largest[start : start + block] = (np.abs(z[:, a] - z[:, b]) / se_same).max(axis=1)
        return float(np.quantile(largest, level)), se_pair
    q = 1.0 - (1.0 - level) / (2.0 * n_pairs)  # Bonferroni
    return float(ndtri(q) if df is None else stdtrit(df, q)), se_pair


#: Pair statistics per block of draws in :func:`simultaneous_critical_value` (4 MB of float64).
_BLOCK_PAIR_STATS = 500_000


#: Values per block of rank draws in :func:`rank_confidence` (8 MB of float64).
_BLOCK_VALUES = 1_000_000


def _mvn_root(cov: NDArray) -> NDArray:
    """R with R Rᵀ = cov, for a PSD (possibly singular) covariance."""
    vals, vecs = np.linalg.eigh(0.5 * (cov + cov.T))
    return vecs * np.sqrt(np.clip(vals, 0.0, None))
