"""The sandwich covariance of a fit, computed once per fit and rescaled to any level
(:func:`uncertainty`, :meth:`Uncertainty.at`), and :func:`confidence`, the intervals
of a ranking (docs/uncertainty.md §2–5).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.sparse
from numpy.typing import NDArray
from scipy.special import ndtri, stdtrit

from ..btl import BTLFit
from ..laplacian import MAX_ITEMS_COVARIANCE, laplacian
from .intervals import (
    MIN_CLUSTERS,
    RIDGE_MAX_SE,
    SECOND_ORDER_MAX_SE,
    SECOND_ORDER_MAX_SHARE,
    Check,
    Confidence,
    IntervalsUnavailable,
    _check_level,
    _no_check,
    _refuse_flattened,
    _ridge_removed,
    confidence_from_cov,
)
from .sandwich import CLUSTER_VARIANCES, Clusters, ClusterSource, _cluster_variance, _cr2_affordable
from .set_aside import (
    MAX_UNIDENTIFIED_SHARE,
    MIN_ITEMS_SET_ASIDE,
    _Core,
    _score_bound,
    _separated_items,
    _set_aside,
    _SetAside,
    _without_items,
)


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
        The fit (:func:`~app.stats.mle.fit_debiased_mle` and the like).
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
