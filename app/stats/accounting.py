"""Privacy accounting in zero-concentrated differential privacy (zCDP), shown as (ε, δ).

A central-model survey either sums pure ε (basic composition) or, with zCDP accounting,
sums ρ. This module holds the arithmetic of the second (docs/mechanisms.md §2.6): ρ of
the (discrete) Gaussian mechanism (:func:`gaussian_rho`) and of a pure ε-DP one
(:func:`pure_rho`), and the tight ρ-zCDP → (ε, δ) conversion of Canonne, Kamath &
Steinke (2020, Corollary 13): :func:`zcdp_epsilon` the smallest ε over the orders α it
finds (conservative), :func:`zcdp_rho_for` the largest ρ within a budget,
:func:`zcdp_epsilon_classical` the looser ρ + 2√(ρ·log(1/δ)). Pure NumPy/SciPy; no
randomness.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

__all__ = [
    "DEFAULT_DELTA",
    "gaussian_rho",
    "pure_rho",
    "zcdp_epsilon",
    "zcdp_epsilon_classical",
    "zcdp_rho_for",
]

#: The δ a zCDP survey states its (ε, δ) at unless it chooses one: below 1/(8.2·10⁹),
#: one over the world's population, so no survey's population reaches 1/δ
#: (docs/mechanisms.md §2.6).
DEFAULT_DELTA = 1e-10

# The search runs over t = log(α − 1): α − 1 from e^-12 to e^40 covers every ρ and δ a
# survey can hold (the best α is near 1 + √(log(1/δ)/ρ)).
_T_LO, _T_HI = -12.0, 40.0
_GRID = np.linspace(_T_LO, _T_HI, 1041)


def _check_delta(delta: float) -> float:
    if not (math.isfinite(delta) and 0.0 < delta < 1.0):
        raise ValueError("delta must be in (0, 1)")
    return float(delta)


def _penalty(t: np.ndarray | float, delta: float):
    """(log(1/δ) + (α − 1)·log(1 − 1/α) − log α)/(α − 1) at α = 1 + e^t."""
    am1 = np.exp(t)
    alpha = 1.0 + am1
    return (-math.log(delta) + am1 * np.log1p(-1.0 / alpha) - np.log(alpha)) / am1


def _eps_at(t, rho: float, delta: float):
    return (1.0 + np.exp(t)) * rho + _penalty(t, delta)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The ε at which ρ-zCDP is (ε, δ)-DP.

    Parameters
    ----------
    rho : float
        The zCDP parameter (≥ 0); 0 gives ε = 0.
    delta : float
        In (0, 1).

    Returns
    -------
    float
        min over α > 1 of αρ + (log(1/δ) + (α − 1)log(1 − 1/α) − log α)/(α − 1), at
        least 0: every α gives a valid ε, so a numerical minimum is conservative.

    Raises
    ------
    ValueError
        If ρ is negative or not finite, or δ is outside (0, 1).

    References
    ----------
    Canonne, Kamath & Steinke (2020), *The Discrete Gaussian for Differential Privacy*,
    Corollary 13; docs/mechanisms.md §2.6.

    Examples
    --------
    >>> from app.stats.accounting import zcdp_epsilon
    >>> round(zcdp_epsilon(0.5, 1e-6), 4)  # classical ρ + 2√(ρ log(1/δ)) gives 5.7565
    5.2215
    """
    delta = _check_delta(delta)
    if not (math.isfinite(rho) and rho >= 0.0):
        raise ValueError("rho must be a finite number >= 0")
    if rho == 0.0:
        return 0.0
    values = _eps_at(_GRID, rho, delta)
    k = int(np.argmin(values))
    lo, hi = _GRID[max(k - 1, 0)], _GRID[min(k + 1, _GRID.size - 1)]
    res = minimize_scalar(lambda t: float(_eps_at(t, rho, delta)), bounds=(lo, hi), method="bounded")
    best = min(float(values[k]), float(res.fun))
    return max(0.0, best)


def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """The largest ρ whose (ε, δ) conversion stays within ``epsilon`` at ``delta``.

    Parameters
    ----------
    epsilon : float
        The budget's ε, > 0.
    delta : float
        In (0, 1).

    Returns
    -------
    float
        ρ, so that ``zcdp_epsilon(zcdp_rho_for(ε, δ), δ) ≤ ε`` (up to rounding).

    Raises
    ------
    ValueError
        If ε is not positive, δ is outside (0, 1), or no positive ρ meets (ε, δ).

    Notes
    -----
    For each α, ρ ≤ (ε − penalty(α))/α keeps ε(α) ≤ ε; this returns the maximum over the
    α searched (attained at one α, so the guarantee holds exactly for that α).

    Examples
    --------
    >>> from app.stats.accounting import zcdp_epsilon, zcdp_rho_for
    >>> rho = zcdp_rho_for(4.0, 1e-10)
    >>> zcdp_epsilon(rho, 1e-10) <= 4.0 + 1e-9
    True
    """
    delta = _check_delta(delta)
    if not (math.isfinite(epsilon) and epsilon > 0.0):
        raise ValueError("epsilon must be a positive number")

    def rho_at(t):
        return (epsilon - _penalty(t, delta)) / (1.0 + np.exp(t))

    values = rho_at(_GRID)
    k = int(np.argmax(values))
    lo, hi = _GRID[max(k - 1, 0)], _GRID[min(k + 1, _GRID.size - 1)]
    res = minimize_scalar(lambda t: -float(rho_at(t)), bounds=(lo, hi), method="bounded")
    best = max(float(values[k]), -float(res.fun))
    if not best > 0.0:  # pragma: no cover - ρ > 0 for every ε > 0 at a large enough α
        raise ValueError("no positive rho meets this (epsilon, delta)")
    # One ulp down: the sum and quotient above may round a hair above the exact bound.
    return float(np.nextafter(best, 0.0))


def zcdp_epsilon_classical(rho: float, delta: float) -> float:
    """ρ + 2√(ρ·log(1/δ)): valid, looser than :func:`zcdp_epsilon`; for comparison only.

    Parameters
    ----------
    rho : float
        The zCDP parameter.
    delta : float
        In (0, 1).

    Returns
    -------
    float
        The classical ε.

    Raises
    ------
    ValueError
        If δ is outside (0, 1).

    References
    ----------
    Bun & Steinke (2016), *Concentrated Differential Privacy*, Prop. 1.3.

    Examples
    --------
    >>> from app.stats.accounting import zcdp_epsilon_classical
    >>> round(zcdp_epsilon_classical(0.5, 1e-6), 4)
    5.7565
    """
    delta = _check_delta(delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def gaussian_rho(sensitivity_l2: float, sigma: float) -> float:
    """Δ₂²/(2σ²): the zCDP of (discrete) Gaussian noise of scale σ on a statistic of ℓ₂ sensitivity Δ₂.

    Parameters
    ----------
    sensitivity_l2 : float
        Δ₂ ≥ 0.
    sigma : float
        σ > 0.

    Returns
    -------
    float
        ρ.

    Raises
    ------
    ValueError
        If σ is not positive or Δ₂ is negative.

    References
    ----------
    Bun & Steinke (2016), Prop. 1.6; Canonne, Kamath & Steinke (2020), Theorem 4.

    Examples
    --------
    >>> from app.stats.accounting import gaussian_rho
    >>> gaussian_rho(1.0, 1.0)
    0.5
    """
    if not (sigma > 0 and sensitivity_l2 >= 0):
        raise ValueError("sigma must be positive and the sensitivity non-negative")
    return sensitivity_l2**2 / (2.0 * sigma**2)


def pure_rho(epsilon: float) -> float:
    """ε²/2: what a pure ε-DP mechanism costs in zCDP.

    Parameters
    ----------
    epsilon : float
        ε ≥ 0, finite.

    Returns
    -------
    float
        ρ.

    Raises
    ------
    ValueError
        If ε is negative or not finite.

    References
    ----------
    Bun & Steinke (2016), Prop. 1.4.

    Examples
    --------
    >>> from app.stats.accounting import pure_rho
    >>> pure_rho(1.0)
    0.5
    """
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError("epsilon must be a finite number >= 0")
    return epsilon * epsilon / 2.0
