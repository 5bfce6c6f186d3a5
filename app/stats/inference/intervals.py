"""Intervals from a covariance: the bias-corrected, order-restricted centre, the refusals
when the data do not identify the scores, and the reasons they give
(docs/uncertainty.md §4–5).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, ndtri, stdtrit

from ..btl import BTLFit
from ..laplacian import SingularLaplacian, laplacian, laplacian_pinv, laplacian_solve

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
