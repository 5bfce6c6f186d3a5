"""Central-model differentially private releases from pairwise comparisons (docs/mechanisms.md §2).

The mechanisms of Cai, Chakraborty & Wang (2025), on the operator's true answers, under
the edge or the individual unit of privacy (§2.1): :func:`noisy_counts`, Algorithms 2
and 3 with the corrected individual scale 2L/ε (§2.2); :func:`gaussian_noisy_counts`,
the same counts with discrete Gaussian noise for zCDP surveys (§2.6);
:func:`perturbed_mle`, the objective-perturbed MLE with the logistic link's constants,
γ at its privacy floor, the exact minimizer centred over all items (§2.3). The noise
(:mod:`app.stats.noise`): with ``rng=None`` OpenDP's exact samplers on a CSPRNG (§2.1,
"Noise"); a NumPy ``Generator`` is for reproducible simulations only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .btl import FitOptions, fit_btl
from .noise import add_discrete_gaussian, add_discrete_laplace, laplace
from .pairs import validate_comparisons

__all__ = [
    "EPSILON_MIN",
    "KAPPA1",
    "KAPPA2",
    "Release",
    "gaussian_noisy_counts",
    "gaussian_noisy_counts_sigma",
    "noisy_counts",
    "noisy_counts_scale",
    "perturbed_mle",
    "perturbed_mle_parameters",
    "solve_perturbed",
    "win_counts",
]

#: (A1) and (A2) constants of the logistic link that the privacy proofs use.
KAPPA1 = 1.0
KAPPA2 = 0.25
UNITS = ("edge", "individual")


#: Smallest ε a release accepts (below it the noise scales are astronomically large).
EPSILON_MIN = 1e-6


def _check(epsilon: float, unit: str, L: int | None) -> int:
    if not (math.isfinite(epsilon) and epsilon >= EPSILON_MIN):
        raise ValueError(f"epsilon must be a finite number >= {EPSILON_MIN:g}")
    if unit not in UNITS:
        raise ValueError("unit must be 'edge' or 'individual'")
    if unit == "individual":
        if L is None or int(L) != L or L < 1:
            raise ValueError("individual DP needs the contribution bound L ≥ 1 (comparisons per person)")
        return int(L)
    return 1


def win_counts(
    n_items: int, i: ArrayLike, j: ArrayLike, n: ArrayLike, wins_i: ArrayLike
) -> NDArray[np.int64]:
    """N_a: comparisons won by each item, from per-pair counts n_ij and wins of i.

    Parameters
    ----------
    n_items : int
        Items m.
    i, j : array_like of int
        The pairs.
    n : array_like of int
        Comparisons per pair.
    wins_i : array_like of int
        Wins of each pair's ``i``.

    Returns
    -------
    numpy.ndarray of int64
        Each item's wins (each comparison counted once, for its winner).

    Raises
    ------
    ValueError
        On invalid pairs.

    Examples
    --------
    >>> from app.stats.central import win_counts
    >>> win_counts(3, [0, 0], [1, 2], [4, 2], [3, 1]).tolist()  # wins of each item
    [4, 1, 1]
    """
    ia, ja = validate_comparisons(n_items, i, j)
    n_arr = np.asarray(n, dtype=np.int64)
    w_arr = np.rint(np.asarray(wins_i, dtype=np.float64)).astype(np.int64)
    return np.bincount(ia, w_arr, n_items).astype(np.int64) + np.bincount(ja, n_arr - w_arr, n_items).astype(
        np.int64
    )


def _up(x: float) -> float:
    """x rounded up by two ulps: a noise scale computed as Δ/ε in floating point may land
    an ulp below the exact quotient (a privacy loss an ulp above ε); never below it here."""
    return float(np.nextafter(np.nextafter(x, np.inf), np.inf))


def noisy_counts_scale(epsilon: float, unit: str, L: int | None = None) -> float:
    """Laplace scale of the noisy counts: 2/ε (edge), 2L/ε (individual), rounded up.

    Parameters
    ----------
    epsilon : float
        Pure ε of the release, in ``unit``.
    unit : {"edge", "individual"}
        Unit of privacy (docs/mechanisms.md §2.1).
    L : int, optional
        Contribution bound (comparisons per person); required for ``"individual"``.

    Returns
    -------
    float
        The scale, rounded up so that rounding never makes it smaller than required.

    Raises
    ------
    ValueError
        On an invalid ε, unit or L.

    Examples
    --------
    >>> from app.stats.central import noisy_counts_scale
    >>> round(noisy_counts_scale(0.5, "individual", L=3), 6)  # 2L/ε
    12.0
    """
    return _up(2.0 * _check(epsilon, unit, L) / epsilon)


def gaussian_noisy_counts_sigma(rho: float, unit: str, L: int | None = None) -> float:
    """σ of the discrete Gaussian noisy counts at ρ-zCDP in ``unit``.

    Parameters
    ----------
    rho : float
        ρ of the release, in ``unit``, > 0.
    unit : {"edge", "individual"}
        Unit of privacy.
    L : int, optional
        Contribution bound; required for ``"individual"``.

    Returns
    -------
    float
        Δ₂/√(2ρ) with Δ₂ = √2 (edge) or √2·L (individual), i.e. L/√ρ (L = 1 for edge),
        rounded up.

    Raises
    ------
    ValueError
        On an invalid ρ, unit or L.

    Examples
    --------
    >>> from app.stats.central import gaussian_noisy_counts_sigma
    >>> round(gaussian_noisy_counts_sigma(0.5, "individual", L=2), 4)  # L/√ρ
    2.8284
    """
    if not (math.isfinite(rho) and rho > 0):
        raise ValueError("rho must be a positive number")
    L_ = _check(1.0, unit, L)
    return _up(L_ / math.sqrt(rho))


@dataclass(frozen=True)
class Release:
    """A differentially private release: per-item values, their order, and how."""

    values: NDArray[np.float64]  # noisy win counts, or centred perturbed-MLE scores
    order: NDArray[np.int64]  # item indices, best first
    method: str
    unit: str
    #: Pure ε-DP releases: their ε in ``unit``; None for a ρ-zCDP release.
    epsilon: float | None
    parameters: dict
    #: Perturbed MLE: the exact minimizer before centring (for verification; not released).
    minimizer: NDArray[np.float64] | None = None
    #: zCDP releases (:func:`gaussian_noisy_counts`): their ρ in ``unit``.
    rho: float | None = None

    def ranks(self) -> NDArray[np.int64]:
        r = np.empty(self.order.size, dtype=np.int64)
        r[self.order] = np.arange(1, self.order.size + 1)
        return r

    def top_k(self, k: int) -> NDArray[np.int64]:
        return self.order[:k]


def _order(values: NDArray, tiebreak: NDArray) -> NDArray[np.int64]:
    return np.lexsort((tiebreak, -values)).astype(np.int64)


def _tiebreak(m: int, rng: np.random.Generator | None) -> NDArray:
    # Data-independent random tie-break (post-processing): noisy integer counts can tie.
    if rng is not None:
        return rng.permutation(m)
    from .mechanisms import system_uniform

    return np.argsort(system_uniform(m))


def noisy_counts(
    wins: ArrayLike,
    epsilon: float,
    unit: str = "edge",
    L: int | None = None,
    rng: np.random.Generator | None = None,
) -> Release:
    """Algorithms 2 and 3: integer win counts plus discrete Laplace(2/ε or 2L/ε) noise.

    Parameters
    ----------
    wins : array_like of int
        Each item's wins (:func:`win_counts`).
    epsilon : float
        Pure ε of the release, in ``unit``.
    unit : {"edge", "individual"}, default "edge"
        Unit of privacy.
    L : int, optional
        Contribution bound; required for ``"individual"``.
    rng : numpy.random.Generator, optional
        For reproducible simulations only; ``None`` uses OpenDP's sampler.

    Returns
    -------
    Release
        The noisy counts and their order (by noisy count, ties broken uniformly at
        random), with the scale and sensitivity in ``parameters``.

    Raises
    ------
    ValueError
        On an invalid ε, unit or L.

    Notes
    -----
    The individual scale is 2L/ε: the paper prints L/ε for Algorithm 3, which is only
    2ε-DP (docs/mechanisms.md §2.2).

    References
    ----------
    Cai, Chakraborty & Wang, *Optimal Differentially Private Ranking from Pairwise
    Comparisons* (2025), Algorithms 2 and 3.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.central import noisy_counts
    >>> r = noisy_counts([30, 12, 3], 1.0, unit='edge', rng=np.random.default_rng(0))
    >>> r.order.tolist()[0], r.parameters['noise']
    (0, 'discrete Laplace')
    """
    counts = np.asarray(wins, dtype=np.int64)
    scale = noisy_counts_scale(epsilon, unit, L)
    noisy = add_discrete_laplace(counts, scale, rng)
    return Release(
        noisy.astype(np.float64),
        _order(noisy, _tiebreak(counts.size, rng)),
        "noisy_counts",
        unit,
        float(epsilon),
        {
            "scale": scale,
            "sensitivity_l1": 2.0 * _check(epsilon, unit, L),  # 1 per edge, L per person
            "noise": "discrete Laplace",
        },
    )


def gaussian_noisy_counts(
    wins: ArrayLike,
    rho: float,
    unit: str = "edge",
    L: int | None = None,
    rng: np.random.Generator | None = None,
) -> Release:
    """Win counts plus discrete Gaussian noise: ρ-zCDP in ``unit`` (docs/mechanisms.md §2.6).

    Parameters
    ----------
    wins : array_like of int
        Each item's wins.
    rho : float
        ρ of the release, in ``unit``.
    unit : {"edge", "individual"}, default "edge"
        Unit of privacy.
    L : int, optional
        Contribution bound; required for ``"individual"``.
    rng : numpy.random.Generator, optional
        For reproducible simulations only; ``None`` uses OpenDP's sampler.

    Returns
    -------
    Release
        The noisy counts and their order (by noisy count, ties broken uniformly at
        random), with σ and the ℓ₂ sensitivity in ``parameters``.

    Raises
    ------
    ValueError
        On an invalid ρ, unit or L.

    Notes
    -----
    One comparison replaced moves at most one win from one item to another (ℓ₂ sensitivity
    √2); one person's ≤ L comparisons replaced move at most L wins off and L wins on,
    ‖Δ‖₂² ≤ ‖Δ⁺‖₁² + ‖Δ⁻‖₁² ≤ 2L² (ℓ₂ sensitivity √2·L). σ = Δ₂/√(2ρ) makes Δ₂²/(2σ²) = ρ.

    References
    ----------
    Bun & Steinke (2016), Prop. 1.6; Canonne, Kamath & Steinke (2020), Theorem 4.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.central import gaussian_noisy_counts
    >>> r = gaussian_noisy_counts([30, 12, 3], 0.5, unit='individual', L=2, rng=np.random.default_rng(0))
    >>> r.parameters['sigma'], r.parameters['sensitivity_l2'], r.parameters['noise']
    (2.8284271247461907, 2.8284271247461903, 'discrete Gaussian')
    """
    counts = np.asarray(wins, dtype=np.int64)
    sigma = gaussian_noisy_counts_sigma(rho, unit, L)
    L_ = _check(1.0, unit, L)
    noisy = add_discrete_gaussian(counts, sigma, rng)
    return Release(
        noisy.astype(np.float64),
        _order(noisy, _tiebreak(counts.size, rng)),
        "noisy_counts",
        unit,
        None,
        {"sigma": sigma, "sensitivity_l2": math.sqrt(2.0) * L_, "noise": "discrete Gaussian"},
        rho=float(rho),
    )


def perturbed_mle_parameters(
    n_items: int,
    epsilon: float,
    unit: str,
    *,
    n_comparisons: int = 0,
    n_respondents: int = 0,
    L: int | None = None,
    c0: float = 0.0,
) -> dict:
    """λ (noise scale) and γ (ridge) of the perturbed MLE, with the privacy floors.

    Parameters
    ----------
    n_items : int
        Items n.
    epsilon : float
        Pure ε of the release, in ``unit``.
    unit : {"edge", "individual"}
        Unit of privacy.
    n_comparisons : int, default 0
        Comparisons (only with ``c0`` > 0).
    n_respondents : int, default 0
        Respondents (only with ``c0`` > 0).
    L : int, optional
        Contribution bound; required for ``"individual"``.
    c0 : float, default 0.0
        The accuracy constant c₀ of γ.

    Returns
    -------
    dict
        ``lambda``, ``gamma``, ``gamma_privacy_floor``, ``kappa1``, ``kappa2``, ``c0``,
        ``L`` (and ``gamma_accuracy`` with c₀ > 0).

    Raises
    ------
    ValueError
        On an invalid ε, unit or L.

    Notes
    -----
    Edge: λ = 8κ₁/ε, γ = max(4κ₂/ε, c₀√(d log n)), d = 2·(comparisons)/n. Individual:
    λ = 8Lκ₁/ε, γ = max(8Lκ₂/ε, c₀√(S log n)), S = 2·(respondents)·L/n. The default c₀ = 0
    makes γ the floor: public values only. With c₀ > 0 the counts enter γ; they are
    invariant under replace-one adjacency (of a comparison, or of a respondent) but not
    under a person adding or removing answers, so the service never uses them
    (docs/mechanisms.md §2.3).

    Examples
    --------
    >>> from app.stats.central import perturbed_mle_parameters
    >>> p = perturbed_mle_parameters(10, 1.0, "edge")  # λ = 8/ε, γ = 1/ε (κ₁ = 1, κ₂ = ¼)
    >>> round(p["lambda"], 6), round(p["gamma"], 6)
    (8.0, 1.0)
    """
    L_ = _check(epsilon, unit, L)
    n = max(int(n_items), 2)
    if unit == "edge":
        lam = _up(8.0 * KAPPA1 / epsilon)
        floor = _up(4.0 * KAPPA2 / epsilon)
        degree = 2.0 * n_comparisons / n
    else:
        lam = _up(8.0 * L_ * KAPPA1 / epsilon)
        floor = _up(8.0 * L_ * KAPPA2 / epsilon)
        degree = 2.0 * n_respondents * L_ / n
    out = {
        "lambda": lam,
        "gamma": floor,
        "gamma_privacy_floor": floor,
        "kappa1": KAPPA1,
        "kappa2": KAPPA2,
        "c0": c0,
        "L": L_ if unit == "individual" else None,
    }
    if c0 > 0:
        accuracy = c0 * math.sqrt(max(degree, 0.0) * math.log(n))
        out.update({"gamma": max(floor, accuracy), "gamma_accuracy": accuracy})
    return out


#: Stopping threshold on ‖∇‖∞ of the perturbed objective, relative to max(1, λ): public
#: values only (w's entries are of order λ, so this is ~1e-10 of the gradient's terms).
SOLVE_RTOL = 1e-10
#: Released scores are rounded to this many decimals (far below their noise).
SCORE_DECIMALS = 6


def perturbed_mle(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    n: ArrayLike,
    wins_i: ArrayLike,
    epsilon: float,
    unit: str = "edge",
    *,
    L: int | None = None,
    n_respondents: int = 0,
    c0: float = 0.0,
    rng: np.random.Generator | None = None,
) -> Release:
    """Algorithm 1 / estimator (3.2): the objective-perturbed BTL MLE.

    Parameters
    ----------
    n_items : int
        Items n.
    i, j : array_like of int
        The pairs.
    n : array_like of int
        Comparisons per pair.
    wins_i : array_like of int
        Wins of each pair's ``i``.
    epsilon : float
        Pure ε of the release, in ``unit``.
    unit : {"edge", "individual"}, default "edge"
        Unit of privacy.
    L : int, optional
        Contribution bound; required for ``"individual"``.
    n_respondents : int, default 0
        Respondents (only with ``c0`` > 0).
    c0 : float, default 0.0
        The accuracy constant of γ (:func:`perturbed_mle_parameters`).
    rng : numpy.random.Generator, optional
        For reproducible simulations only; ``None`` uses OpenDP's float Laplace sampler.

    Returns
    -------
    Release
        The minimizer centred over all items, rounded to 1e-6 (post-processing), and its
        order; the uncentred minimizer stays in ``Release.minimizer`` for verification.

    Raises
    ------
    ValueError
        On an invalid ε, unit, L or pairs.
    RuntimeError
        If the objective was not solved exactly (the release is withheld).

    Notes
    -----
    Solves min_θ 𝓛(θ; y) + (γ/2)‖θ‖² + wᵀθ exactly (𝓛 the BTL negative log-likelihood of
    the per-pair counts, each comparison once), w ~ Laplace(λ)ⁿ, to ‖∇‖∞ ≤
    :data:`SOLVE_RTOL` · max(1, λ), a data-independent threshold (docs/mechanisms.md §2.3).

    References
    ----------
    Cai, Chakraborty & Wang, *Optimal Differentially Private Ranking from Pairwise
    Comparisons* (2025), Algorithm 1 and estimator (3.2).
    """
    m = int(n_items)
    n_arr = np.asarray(n, dtype=np.float64)
    n_comparisons = round(float(n_arr.sum()))
    params = perturbed_mle_parameters(
        m, epsilon, unit, n_comparisons=n_comparisons, n_respondents=n_respondents, L=L, c0=c0
    )
    w = laplace(params["lambda"], m, rng)
    atol = SOLVE_RTOL * max(1.0, params["lambda"])
    theta, _ = solve_perturbed(m, i, j, n_arr, wins_i, params["gamma"], w, atol=atol)
    released = np.round(theta - theta.mean(), SCORE_DECIMALS) + 0.0  # + 0.0: no negative zeros
    return Release(
        released,
        _order(released, _tiebreak(m, rng)),
        "perturbed_mle",
        unit,
        float(epsilon),
        {**params, "noise": "Laplace", "solver_tolerance": atol},
        minimizer=theta,
    )


def solve_perturbed(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    n: ArrayLike,
    wins_i: ArrayLike,
    gamma: float,
    w: ArrayLike,
    atol: float = 1e-9,
) -> tuple[NDArray[np.float64], float]:
    """The exact argmin_θ 𝓛(θ; y) + (γ/2)‖θ‖² + wᵀθ, and ‖∇‖∞ there.

    Parameters
    ----------
    n_items : int
        Items n.
    i, j : array_like of int
        The pairs.
    n : array_like of int
        Comparisons per pair.
    wins_i : array_like of int
        Wins of each pair's ``i``.
    gamma : float
        Ridge γ.
    w : array_like (n,)
        The linear perturbation.
    atol : float, default 1e-9
        Absolute tolerance on ‖∇‖∞.

    Returns
    -------
    tuple of (numpy.ndarray, float)
        The minimizer (not centred) and ‖∇‖∞ there.

    Raises
    ------
    RuntimeError
        When the solver did not reach ``atol``: the privacy proof assumes the exact
        minimizer, so an inexact one is never released.

    Notes
    -----
    :func:`~app.stats.btl.fit_btl` solves on each connected component's sum-to-zero
    subspace; since 1_cᵀ∇𝓛 = 0 on a component c, the minimizer's mean there is
    −1_cᵀw/(γ|c|), added back here (an item never compared gets −w_a/γ).

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.central import solve_perturbed
    >>> theta, grad = solve_perturbed(2, [0], [1], [10], [7], 1.0, [0.0, 0.0])
    >>> np.round(theta, 4).tolist(), bool(grad < 1e-9)
    ([0.3441, -0.3441], True)
    """
    wv = np.asarray(w, dtype=np.float64)
    fit = fit_btl(
        n_items, i, j, n, wins_i, gamma / 2.0, linear=wv, options=FitOptions(atol=atol, max_iter=200)
    )
    if not fit.converged:  # pragma: no cover - Newton on a strongly convex objective
        raise RuntimeError("the perturbed objective was not solved exactly; the release is withheld")
    labels = fit.component
    sizes = np.bincount(labels, minlength=fit.n_components).astype(np.float64)
    means = -np.bincount(labels, wv, fit.n_components) / (gamma * sizes)
    return fit.theta + means[labels], fit.gradient_norm
