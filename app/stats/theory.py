"""Privacy quantities of Xu, Sun & Cheng's theory (paper §4.1; docs/estimator.md §7).

G(ε) and H(ε) of Theorem 1, which govern the estimation error, and the three adaptive
privacy schemes of Scenarios II and IV, whose ε shrinks with m and L on either side of
the consistency dividing line ε ≍ 1/√(mL) (Corollaries 1–2, Table 1). The paper's
narrative swaps Schemes 1 and 3 relative to their formulas (docs/estimator.md §7,
"Printed scheme labels"), so the functions are keyed by the formulas:
``"log_over_sqrt"`` ε ∝ log(mL)/√(mL) (Scheme 1 as printed, consistent), ``"inv_sqrt"``
ε ∝ 1/√(mL) (Scheme 2, the dividing line), ``"inv_sqrt_log"`` ε ∝ 1/(√(mL)·log(mL))
(Scheme 3 as printed, inconsistent).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .mechanisms import validate_epsilon

__all__ = [
    "SCHEMES",
    "G",
    "H",
    "dividing_line_epsilon",
    "scheme_epsilon",
]


def G(epsilon: ArrayLike) -> float:
    """G(ε) = (1/L) Σ_l ((e^{ε_l}+1)/(e^{ε_l}−1))², the mean of coth²(ε_l/2) (Theorem 1).

    Parameters
    ----------
    epsilon : float or array_like
        One ε per respondent (or per comparison, for incomplete designs).

    Returns
    -------
    float
        G(ε): c_ε² ≍ ε⁻² for homogeneous small ε, → 1 as ε → ∞.

    Raises
    ------
    ValueError
        If ``epsilon`` is empty, below :data:`~app.stats.mechanisms.EPSILON_FLOOR` or NaN.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    Theorem 1; docs/estimator.md §7.

    Examples
    --------
    >>> from app.stats import G
    >>> round(G([1.0, 2.0]), 4)
    3.2034
    """
    eps = validate_epsilon(epsilon)
    if eps.size == 0:
        raise ValueError("G needs at least one epsilon")
    return float(np.mean(1.0 / np.tanh(eps / 2.0) ** 2))


def H(epsilon: ArrayLike) -> float:
    """H(ε) = max_l (e^{ε_l}+1)/(e^{ε_l}−1) = coth(min ε / 2) — not squared (Theorem 1).

    Parameters
    ----------
    epsilon : float or array_like
        One ε per respondent (or per comparison).

    Returns
    -------
    float
        H(ε).

    Raises
    ------
    ValueError
        If ``epsilon`` is empty, below :data:`~app.stats.mechanisms.EPSILON_FLOOR` or NaN.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    Theorem 1; docs/estimator.md §7.

    Examples
    --------
    >>> from app.stats import H
    >>> round(H([1.0, 2.0]), 4)
    2.164
    """
    eps = validate_epsilon(epsilon)
    if eps.size == 0:
        raise ValueError("H needs at least one epsilon")
    return float(1.0 / np.tanh(eps.min() / 2.0))


#: The three schemes, keyed by formula; values are the paper's scheme numbers.
SCHEMES = {"log_over_sqrt": 1, "inv_sqrt": 2, "inv_sqrt_log": 3}


def scheme_epsilon(
    scheme: str | int, n_items: ArrayLike, n_respondents: ArrayLike, reference_respondents: float = 100.0
) -> NDArray[np.float64] | float:
    """ε of an adaptive privacy scheme (Scenario II), normalized to 1 at L = L₀.

    Parameters
    ----------
    scheme : str or int
        The formula key (:data:`SCHEMES`) or the paper's printed number (1–3).
    n_items : float or array_like
        Items m.
    n_respondents : float or array_like
        Respondents L.
    reference_respondents : float, default 100.0
        L₀, where every scheme gives ε = 1.

    Returns
    -------
    float or numpy.ndarray
        ε, a float for scalar inputs.

    Raises
    ------
    ValueError
        If ``scheme`` is neither a key of :data:`SCHEMES` nor 1–3.

    Notes
    -----
    Closed forms (docs/estimator.md §7; the log base cancels):

    * ``"log_over_sqrt"`` (1): ε = √(L₀/L) · log(mL)/log(mL₀)
    * ``"inv_sqrt"`` (2):       ε = √(L₀/L)
    * ``"inv_sqrt_log"`` (3):   ε = √(L₀/L) · log(mL₀)/log(mL)

    The paper's narrative swaps Schemes 1 and 3 relative to these formulas
    (docs/estimator.md §7, "Printed scheme labels"); the keys name the formulas.

    Examples
    --------
    >>> from app.stats import scheme_epsilon
    >>> scheme_epsilon("inv_sqrt", 10, 400)  # √(100/400)
    0.5
    """
    key = _scheme_key(scheme)
    m = np.asarray(n_items, dtype=np.float64)
    L = np.asarray(n_respondents, dtype=np.float64)
    base = np.sqrt(reference_respondents / L)
    ratio = np.log(m * L) / np.log(m * reference_respondents)
    out = {"log_over_sqrt": base * ratio, "inv_sqrt": base, "inv_sqrt_log": base / ratio}[key]
    return float(out) if np.ndim(out) == 0 else out


def dividing_line_epsilon(n_items: float, n_respondents: float) -> float:
    """ε = 1/√(mL), the order at which consistency is lost (Corollaries 1–2).

    Parameters
    ----------
    n_items : float
        Items m.
    n_respondents : float
        Respondents L.

    Returns
    -------
    float
        1/√(mL).

    Notes
    -----
    Only an order of magnitude: Corollary 1 needs ε ≳ log(mL)/√(mL) for the errors to
    vanish, Corollary 2 shows ε ≍ 1/√(mL) leaves them bounded away from 0. Constants are
    unknown (docs/estimator.md §7).

    Examples
    --------
    >>> from app.stats import dividing_line_epsilon
    >>> round(dividing_line_epsilon(30, 400), 4)  # 1/√(mL)
    0.0091
    """
    return 1.0 / math.sqrt(float(n_items) * float(n_respondents))


def _scheme_key(scheme: str | int) -> str:
    if isinstance(scheme, str) and scheme in SCHEMES:
        return scheme
    for key, number in SCHEMES.items():
        if scheme == number or scheme == str(number):
            return key
    raise ValueError(f"unknown privacy scheme {scheme!r}; use one of {sorted(SCHEMES)} or 1-3")
