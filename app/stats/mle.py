"""The debiased regularized MLE of Xu, Sun & Cheng, eq. (3), and the baselines of Scenario V.

Each is :func:`~app.stats.btl.fit_btl` on one kind of per-pair sums: the debiased z
(docs/estimator.md §4), the raw privatized ỹ of classic RR (§8.1) or the Laplace
mechanism's outputs (§8.2), from comparisons or from :class:`~app.stats.pairs.PairStats`,
with λ = :func:`~app.stats.btl.default_lambda` unless given.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .btl import BTLFit, FitOptions, default_lambda, fit_btl
from .mechanisms import validate_epsilon
from .pairs import PairStats, pair_stats, validate_comparisons

__all__ = [
    "fit_debiased_mle",
    "fit_debiased_mle_stats",
    "fit_laplace_mle",
    "fit_naive_mle",
    "fit_naive_mle_stats",
]


def _fit_stats(
    stats: PairStats, sums, lam, estimator: str, v, s2, theta0: ArrayLike | None, options: FitOptions | None
) -> BTLFit:
    lam = default_lambda(stats) if lam is None else lam
    return fit_btl(
        stats.n_items,
        stats.i,
        stats.j,
        stats.n,
        sums,
        lam,
        theta0=theta0,
        v=v,
        s2=s2,
        estimator=estimator,
        options=options,
    )


def fit_debiased_mle_stats(
    stats: PairStats,
    lam: float | None = None,
    *,
    theta0: ArrayLike | None = None,
    options: FitOptions | None = None,
) -> BTLFit:
    """The debiased regularized MLE (eq. (3)) from sufficient statistics.

    Parameters
    ----------
    stats : PairStats
        Per-pair sufficient statistics (:func:`~app.stats.pairs.pair_stats`).
    lam : float, optional
        Ridge λ; ``None`` uses :func:`~app.stats.btl.default_lambda` (λ = G(ε)).
    theta0 : array_like (m,), optional
        Warm start, as in :func:`~app.stats.btl.fit_btl`.
    options : FitOptions, optional
        The solver's settings (:class:`~app.stats.btl.FitOptions`); default ``FitOptions()``.

    Returns
    -------
    BTLFit
        The fit, with the privacy variance and Σz² kept for its uncertainty.

    Raises
    ------
    ValueError
        As :func:`~app.stats.btl.fit_btl`.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    eq. (3); docs/estimator.md §4.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import fit_debiased_mle_stats, pair_stats
    >>> stats = pair_stats(3, [0, 0, 1, 1], [1, 2, 2, 2], [1, 1, 0, 1], 1.0)
    >>> np.round(fit_debiased_mle_stats(stats).theta, 4).tolist()
    [0.2141, -0.107, -0.107]
    """
    return _fit_stats(stats, stats.sum_z, lam, "debiased", stats.sum_v, stats.sum_z2, theta0, options)


def fit_naive_mle_stats(
    stats: PairStats,
    lam: float | None = None,
    *,
    theta0: ArrayLike | None = None,
    options: FitOptions | None = None,
) -> BTLFit:
    """Classic-RR baseline: the same fit on the raw privatized ỹ, no debiasing.

    Parameters
    ----------
    stats : PairStats
        Per-pair sufficient statistics.
    lam : float, optional
        Ridge λ; ``None``: the same default λ as the debiased fit.
    theta0 : array_like (m,), optional
        Warm start, as in :func:`~app.stats.btl.fit_btl`.
    options : FitOptions, optional
        The solver's settings (:class:`~app.stats.btl.FitOptions`); default ``FitOptions()``.

    Returns
    -------
    BTLFit
        The fit of the privatized answers taken as BTL data.

    Raises
    ------
    ValueError
        As :func:`~app.stats.btl.fit_btl`.

    Notes
    -----
    The paper's Scenario V comparator (paper §5.3; docs/estimator.md §8.1): its scores
    converge to the BTL fit of q_ij = p_ε + (1−2p_ε)σ(θ*_i−θ*_j), attenuated towards 0 by
    about tanh(ε/2), so it is inconsistent for θ* (its ranking is not, in complete
    homogeneous designs).

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import fit_naive_mle_stats, pair_stats
    >>> stats = pair_stats(3, [0, 0, 1, 1], [1, 2, 2, 2], [1, 1, 0, 1], 1.0)
    >>> np.round(fit_naive_mle_stats(stats).theta, 4).tolist()  # shrunk towards 0
    [0.0989, -0.0494, -0.0494]
    """
    # ỹ² = ỹ; the classic-RR model treats ỹ as BTL data, so it adds no variance term.
    return _fit_stats(stats, stats.sum_y, lam, "naive", None, stats.sum_y, theta0, options)


def fit_debiased_mle(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    y_tilde: ArrayLike,
    epsilon: ArrayLike,
    lam: float | None = None,
    *,
    theta0: ArrayLike | None = None,
    options: FitOptions | None = None,
) -> BTLFit:
    """Debiased regularized MLE of Xu, Sun & Cheng, eq. (3), from comparisons.

    Parameters
    ----------
    n_items : int
        Number of items m (indices 0 .. m−1).
    i, j : int arrays (N,)
        The compared items of each comparison.
    y_tilde : {0, 1} array (N,)
        Privatized outcome, 1 if i was reported the winner.
    epsilon : float or array (N,)
        The RR privacy level each comparison was randomized with (∞: not).
    lam : float, optional
        Ridge λ in the scaling of J; default :func:`~app.stats.btl.default_lambda`.
    theta0 : array_like (m,), optional
        Warm start, as in :func:`~app.stats.btl.fit_btl`.
    options : FitOptions, optional
        The solver's settings (:class:`~app.stats.btl.FitOptions`); default ``FitOptions()``.

    Returns
    -------
    BTLFit
        θ̂ centred per connected component, with the solver's diagnostics.

    Raises
    ------
    ValueError
        On invalid comparisons, answers or ε, and as :func:`~app.stats.btl.fit_btl`.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    eq. (3); docs/estimator.md §4.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import fit_debiased_mle, privatize
    >>> rng = np.random.default_rng(1)
    >>> theta = np.array([1.0, 0.0, -1.0])
    >>> i, j = rng.integers(0, 3, 3000), rng.integers(0, 3, 3000)
    >>> keep = i != j; i, j = i[keep], j[keep]
    >>> y = (rng.random(i.size) < 1 / (1 + np.exp(theta[j] - theta[i]))).astype(int)
    >>> fit = fit_debiased_mle(3, i, j, privatize(y, 2.0, rng), 2.0)
    >>> fit.converged, np.argsort(-fit.theta).tolist()
    (True, [0, 1, 2])
    >>> bool(np.abs(fit.theta - theta).max() < 0.2)
    True
    """
    return fit_debiased_mle_stats(
        pair_stats(n_items, i, j, y_tilde, epsilon), lam, theta0=theta0, options=options
    )


def fit_naive_mle(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    y_tilde: ArrayLike,
    epsilon: ArrayLike,
    lam: float | None = None,
    *,
    theta0: ArrayLike | None = None,
    options: FitOptions | None = None,
) -> BTLFit:
    """Classic-RR baseline from comparisons; see :func:`fit_naive_mle_stats`.

    Parameters
    ----------
    n_items : int
        Number of items m.
    i, j : int arrays (N,)
        The compared items of each comparison.
    y_tilde : {0, 1} array (N,)
        Privatized outcome, 1 if i was reported the winner.
    epsilon : float or array (N,)
        The ε each comparison was randomized with (for the default λ).
    lam : float, optional
        Ridge λ; default :func:`~app.stats.btl.default_lambda`.
    theta0 : array_like (m,), optional
        Warm start, as in :func:`~app.stats.btl.fit_btl`.
    options : FitOptions, optional
        The solver's settings (:class:`~app.stats.btl.FitOptions`); default ``FitOptions()``.

    Returns
    -------
    BTLFit
        The fit of the privatized answers taken as BTL data.

    Raises
    ------
    ValueError
        On invalid comparisons, answers or ε, and as :func:`~app.stats.btl.fit_btl`.
    """
    return fit_naive_mle_stats(
        pair_stats(n_items, i, j, y_tilde, epsilon), lam, theta0=theta0, options=options
    )


def fit_laplace_mle(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    y_noisy: ArrayLike,
    epsilon: ArrayLike,
    lam: float | None = None,
    *,
    theta0: ArrayLike | None = None,
    options: FitOptions | None = None,
) -> BTLFit:
    """Laplace baseline of Scenario V: eq. (3) with z replaced by y + Lap(1/ε).

    Parameters
    ----------
    n_items : int
        Number of items m.
    i, j : int arrays (N,)
        The compared items of each comparison.
    y_noisy : array (N,)
        The Laplace mechanism's outputs (:func:`~app.stats.mechanisms.laplace_privatize`).
    epsilon : float or array (N,)
        The ε of each comparison.
    lam : float, optional
        Ridge λ; default the same G(ε) as for RR at that ε, for a like-for-like comparison.
    theta0 : array_like (m,), optional
        Warm start, as in :func:`~app.stats.btl.fit_btl`.
    options : FitOptions, optional
        The solver's settings (:class:`~app.stats.btl.FitOptions`); default ``FitOptions()``.

    Returns
    -------
    BTLFit
        The fit, with the Laplace variance 2/ε² per comparison kept for its uncertainty.

    Raises
    ------
    ValueError
        On invalid comparisons or ε, and as :func:`~app.stats.btl.fit_btl`.

    Notes
    -----
    The Laplace output is already unbiased, so it enters J as is (docs/estimator.md §8.2).
    """
    eps = validate_epsilon(epsilon)
    ia, ja = validate_comparisons(n_items, i, j)
    y = np.broadcast_to(np.asarray(y_noisy, dtype=np.float64), ia.shape)
    stats = PairStats.from_values(n_items, ia, ja, y, y, np.broadcast_to(2.0 / eps**2, ia.shape))
    lam = default_lambda(np.broadcast_to(eps, ia.shape)) if lam is None else lam
    return _fit_stats(stats, stats.sum_z, lam, "laplace", stats.sum_v, stats.sum_z2, theta0, options)
