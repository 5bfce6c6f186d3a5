"""Bootstrap intervals: resampling respondents with all their answers, or re-simulating
independent randomized answers (docs/uncertainty.md §7).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit

from .. import entropy
from ..btl import BTLFit, fit_btl
from ..laplacian import MAX_ITEMS_COVARIANCE
from ..mechanisms import (
    RandomSource,
    privatize,
    system_uniform,
    validate_epsilon,
)
from ..pairs import pair_stats, reduce_by_pair, validate_comparisons
from .intervals import (
    Check,
    Confidence,
    IntervalsUnavailable,
    _check_level,
    _no_check,
    _refuse_separated,
    _unshrink,
    confidence_from_cov,
)
from .sandwich import Clusters


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
