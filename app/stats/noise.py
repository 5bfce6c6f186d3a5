"""The noise of the central-model releases: discrete Laplace, discrete Gaussian and Laplace.

Integer noise is added to integer statistics inside one OpenDP measurement (exact samplers
on a CSPRNG, any clamping applied to the noisy sum); real Laplace noise comes from OpenDP's
float sampler. A NumPy ``Generator`` is for reproducible simulations only
(docs/mechanisms.md §2.1, "Noise"; the discrete Gaussian §2.6). :mod:`app.stats.central`
builds the releases on them.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "MAX_INTEGER_SCALE",
    "add_discrete_gaussian",
    "add_discrete_laplace",
    "discrete_gaussian",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "laplace",
]

#: Largest integer-noise scale: i64 noise of this scale reaches ±2⁶³ with probability e^{-8192}.
MAX_INTEGER_SCALE = 2.0**50


def _opendp():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


def _integer_measurement(kind: str, scale: float):
    """OpenDP's exact integer mechanism on i64 vectors: "laplace" (ℓ1) or "gaussian" (ℓ2)."""
    dp = _opendp()
    make, distance = (
        (dp.m.make_laplace, dp.l1_distance) if kind == "laplace" else (dp.m.make_gaussian, dp.l2_distance)
    )
    return make(dp.vector_domain(dp.atom_domain(T="i64")), distance(T="i64"), scale=float(scale))


def _add_integer_noise(
    kind: str, values: ArrayLike, scale: float, name: str, simulate, rng
) -> NDArray[np.int64]:
    """``values`` + integer noise of ``kind`` at ``scale`` (called ``name`` in errors), inside
    one OpenDP measurement; with ``rng``, ``simulate(scale, size, rng)`` on NumPy draws."""
    v = np.asarray(values, dtype=np.int64)
    if not 0 < scale <= MAX_INTEGER_SCALE:
        raise ValueError(f"{name} must be in (0, {MAX_INTEGER_SCALE:g}]")
    if v.size == 0:
        return v.copy()
    if rng is not None:
        return v + simulate(scale, v.size, rng)
    return np.asarray(_integer_measurement(kind, scale)(v.tolist()), dtype=np.int64)


def _geometric_difference(scale: float, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    q = -math.expm1(-1.0 / scale)
    return (rng.geometric(q, size) - rng.geometric(q, size)).astype(np.int64)


def add_discrete_laplace(
    values: ArrayLike, scale: float, rng: np.random.Generator | None = None
) -> NDArray[np.int64]:
    """``values`` + discrete Laplace noise, P(k) ∝ exp(−|k|/scale), as one OpenDP measurement.

    Parameters
    ----------
    values : array_like of int
        Integer statistics.
    scale : float
        Noise scale, in (0, 2⁵⁰].
    rng : numpy.random.Generator, optional
        For reproducible simulations only (NumPy geometric differences); ``None`` (the
        service) uses OpenDP's exact sampler on a CSPRNG.

    Returns
    -------
    numpy.ndarray of int64
        The noisy values.

    Raises
    ------
    ValueError
        If ``scale`` is out of range.

    Notes
    -----
    The integers are handed *to* OpenDP's 64-bit mechanism, so any clamping at the type's
    bounds applies to the noisy sum and can never expose a value (adding clamped noise
    outside the mechanism would: noise saturated at a known bound subtracts back out).
    """
    return _add_integer_noise("laplace", values, scale, "scale", _geometric_difference, rng)


def discrete_laplace(scale: float, size: int, rng: np.random.Generator | None = None) -> NDArray[np.int64]:
    """Integer noise with P(k) ∝ exp(−|k|/scale) (the discrete Laplace / two-sided geometric).

    Parameters
    ----------
    scale : float
        Noise scale s, in (0, 2⁵⁰].
    size : int
        Number of draws.
    rng : numpy.random.Generator, optional
        For reproducible simulations only; ``None`` uses OpenDP's sampler.

    Returns
    -------
    numpy.ndarray of int64
        The draws.

    Raises
    ------
    ValueError
        If ``scale`` is out of range.

    Notes
    -----
    Adding it to integer-valued statistics of ℓ1 sensitivity Δ with scale = Δ/ε is ε-DP
    (Ghosh, Roughgarden & Sundararajan 2012). Its variance is 2e^{−1/s}/(1 − e^{−1/s})²,
    which is 2s² − 1/6 + O(s⁻²). Releases use :func:`add_discrete_laplace`, which adds it
    inside the mechanism.
    """
    return add_discrete_laplace(np.zeros(size, dtype=np.int64), scale, rng)


def add_discrete_gaussian(
    values: ArrayLike, sigma: float, rng: np.random.Generator | None = None
) -> NDArray[np.int64]:
    """``values`` + discrete Gaussian noise, P(k) ∝ exp(−k²/(2σ²)), as one OpenDP measurement.

    Parameters
    ----------
    values : array_like of int
        Integer statistics.
    sigma : float
        σ, in (0, 2⁵⁰].
    rng : numpy.random.Generator, optional
        For reproducible simulations only: CKS Algorithm 3 (a discrete Laplace of scale
        t = ⌊σ⌋ + 1, kept with probability exp(−(|Y| − σ²/t)²/(2σ²))) on NumPy draws, whose
        floating-point acceptance test is not hardened. ``None`` uses OpenDP's exact
        integer Gaussian sampler on a CSPRNG.

    Returns
    -------
    numpy.ndarray of int64
        The noisy values.

    Raises
    ------
    ValueError
        If ``sigma`` is out of range.

    Notes
    -----
    The discrete Gaussian N_ℤ(0, σ²) added to integer statistics of ℓ₂ sensitivity Δ₂ is
    Δ₂²/(2σ²)-zCDP. As in :func:`add_discrete_laplace`, the integers are handed to OpenDP's
    64-bit mechanism, so any clamping applies to the noisy sum.

    References
    ----------
    Canonne, Kamath & Steinke (2020), *The Discrete Gaussian for Differential Privacy*,
    Definition 1, Theorem 4 and Algorithm 3; docs/mechanisms.md §2.6.
    """
    return _add_integer_noise("gaussian", values, sigma, "sigma", _cks_discrete_gaussian, rng)


def _cks_discrete_gaussian(sigma: float, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    t = math.floor(sigma) + 1
    q = -math.expm1(-1.0 / t)
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        batch = max(2 * need, 16)
        y = rng.geometric(q, batch) - rng.geometric(q, batch)
        keep = rng.random(batch) < np.exp(-((np.abs(y) - sigma * sigma / t) ** 2) / (2.0 * sigma * sigma))
        got = y[keep][:need]
        out[filled : filled + got.size] = got
        filled += got.size
    return out


def discrete_gaussian(sigma: float, size: int, rng: np.random.Generator | None = None) -> NDArray[np.int64]:
    """Integer noise with P(k) ∝ exp(−k²/(2σ²)) (:func:`add_discrete_gaussian` on zeros).

    Parameters
    ----------
    sigma : float
        σ, in (0, 2⁵⁰].
    size : int
        Number of draws.
    rng : numpy.random.Generator, optional
        For reproducible simulations only; ``None`` uses OpenDP's sampler.

    Returns
    -------
    numpy.ndarray of int64
        The draws, of variance :func:`discrete_gaussian_variance`: below σ² [Canonne,
        Kamath & Steinke 2020, §2], and within 10⁻⁶·σ² of it once σ ≥ 1.

    Raises
    ------
    ValueError
        If ``sigma`` is out of range.
    """
    return add_discrete_gaussian(np.zeros(size, dtype=np.int64), sigma, rng)


def discrete_gaussian_variance(sigma: float) -> float:
    """Var N_ℤ(0, σ²) = Σ k² e^{−k²/(2σ²)} / Σ e^{−k²/(2σ²)}.

    Parameters
    ----------
    sigma : float
        σ > 0.

    Returns
    -------
    float
        The variance, summed over |k| ≤ 40σ + 40 (the terms left out are below e^{−800} of
        the largest).

    Raises
    ------
    ValueError
        If ``sigma`` is not positive.

    Examples
    --------
    >>> from app.stats.noise import discrete_gaussian_variance
    >>> round(discrete_gaussian_variance(3.0), 4)  # σ² once σ ≥ 1
    9.0
    """
    if not sigma > 0:
        raise ValueError("sigma must be positive")
    k = np.arange(0, math.ceil(40 * sigma) + 41, dtype=np.float64)
    w = np.exp(-(k * k) / (2.0 * sigma * sigma))
    w[1:] *= 2.0  # ±k
    return float(np.sum(k * k * w) / np.sum(w))


def laplace(scale: float, size: int, rng: np.random.Generator | None = None) -> NDArray[np.float64]:
    """Real noise ~ Laplace(0, scale).

    Parameters
    ----------
    scale : float
        Noise scale > 0.
    size : int
        Number of draws.
    rng : numpy.random.Generator, optional
        For reproducible simulations only; ``None``: OpenDP's float Laplace sampler
        (exact discrete sampling on a fine grid, CSPRNG), immune to the floating-point
        attacks on inverse-CDF samplers.

    Returns
    -------
    numpy.ndarray of float64
        The draws.

    Raises
    ------
    ValueError
        If ``scale`` is not positive.
    """
    if not scale > 0:
        raise ValueError("scale must be positive")
    if size == 0:
        return np.zeros(0)
    if rng is not None:
        return rng.laplace(0.0, scale, size)
    dp = _opendp()
    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=float(scale)
    )
    return np.asarray(meas([0.0] * size), dtype=np.float64)
