"""Graph Laplacians of comparison designs (shared by the fit's covariance in
:mod:`.btl` and the intervals of :mod:`.inference`, which re-exports them)."""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.linalg.lapack
from numpy.typing import NDArray

__all__ = ["MAX_ITEMS_COVARIANCE", "SingularLaplacian", "laplacian", "laplacian_pinv", "laplacian_solve"]

#: Dense m×m covariance is computed up to this many items (O(m³) time, O(m²) memory).
MAX_ITEMS_COVARIANCE = 2000


def laplacian(n_items: int, i: NDArray, j: NDArray, w: NDArray) -> NDArray[np.float64]:
    """Dense graph Laplacian Σ w_ij (e_i − e_j)(e_i − e_j)ᵀ over distinct pairs.

    Parameters
    ----------
    n_items : int
        m.
    i, j : numpy.ndarray of int
        Distinct pairs.
    w : numpy.ndarray
        Their weights.

    Returns
    -------
    numpy.ndarray of float64 (m, m)
        The Laplacian.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.laplacian import laplacian
    >>> laplacian(3, np.array([0, 1]), np.array([1, 2]), np.array([1.0, 1.0])).tolist()
    [[1.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 1.0]]
    """
    lap = np.zeros((n_items, n_items))
    lap[i, j] = -w
    lap[j, i] = -w
    lap[np.diag_indices(n_items)] = np.bincount(i, w, n_items) + np.bincount(j, w, n_items)
    return lap


class SingularLaplacian(np.linalg.LinAlgError):
    """A Laplacian whose null space is larger than its components' constant vectors.

    Its weights (n σ'(d) for a BTL fit) vanish to working precision across some cut
    inside a component, which happens once the scores on either side are far enough
    apart (σ'(d) underflows; with debiased data whose mean z exceeds 1 the scores of
    the ridge fit grow linearly in the number of answers, docs/estimator.md §4.3).
    The data then carry no information on that cut: a variance along it is unbounded,
    which no finite pseudo-inverse of the components' Laplacian can describe."""


def _factor(lap: NDArray[np.float64], component: NDArray[np.int64]) -> tuple[NDArray, NDArray, float]:
    """The Cholesky factor of L + ρP (lower), P and ρ (see :func:`laplacian_pinv`)."""
    m = lap.shape[0]
    sizes = np.bincount(component, minlength=int(component.max(initial=-1)) + 1).astype(float)
    proj = (component[:, None] == component[None, :]) / sizes[component][:, None]
    rho = max(float(np.mean(np.diag(lap))), 1.0)
    a = lap + rho * proj
    tol = m * np.finfo(float).eps * float(np.max(np.diag(a), initial=0.0))
    try:
        factor = scipy.linalg.cho_factor(a, lower=True, check_finite=False, overwrite_a=True)[0]
    except np.linalg.LinAlgError:
        factor = None
    if factor is None or float(np.min(np.diag(factor) ** 2, initial=np.inf)) <= tol:
        raise SingularLaplacian(
            "L + ρP is singular: the Laplacian's weights vanish across a cut inside a component"
        )
    return factor, proj, rho


def laplacian_pinv(lap: NDArray[np.float64], component: NDArray[np.int64]) -> NDArray[np.float64]:
    """Moore–Penrose inverse of a (possibly disconnected) Laplacian.

    Parameters
    ----------
    lap : numpy.ndarray (m, m)
        The Laplacian L.
    component : numpy.ndarray of int64 (m,)
        Connected component of each item.

    Returns
    -------
    numpy.ndarray of float64 (m, m)
        L⁺.

    Raises
    ------
    SingularLaplacian
        When some component is not connected by weights that are not negligible.

    Notes
    -----
    With P = Σ_c 1_c1_cᵀ/|c| the projector on its null space and ρ > 0,
    (L + ρP)⁻¹ = L⁺ + P/ρ, so L⁺ = (L + ρP)⁻¹ − P/ρ by one Cholesky factorization and
    LAPACK's inverse from it (``?potri``: a third of the work of solving for the identity).

    That identity needs L's null space to be exactly P's range, i.e. every component
    connected by weights that are not negligible. When it is not, L + ρP is singular: the
    factorization fails, or one of its pivots d_k has d_k² ≤ m·u·max_k a_kk (u the unit
    roundoff; the tolerance of LAPACK's rank-revealing ``?pstrf``). Then the error is
    raised rather than an inverse of rounding errors returned.
    """
    factor, proj, rho = _factor(lap, component)
    inv, info = scipy.linalg.lapack.dpotri(factor, lower=1, overwrite_c=1)
    if info != 0:  # pragma: no cover - the factor's pivots were checked above
        raise SingularLaplacian("L + ρP could not be inverted")
    inv = np.tril(inv)
    inv += np.tril(inv, -1).T
    inv -= proj / rho
    return inv


def laplacian_solve(lap: NDArray[np.float64], component: NDArray[np.int64], b: NDArray) -> NDArray:
    """L⁺b by one Cholesky factorization and two triangular solves (no dense inverse).

    Parameters
    ----------
    lap : numpy.ndarray (m, m)
        The Laplacian L.
    component : numpy.ndarray of int64 (m,)
        Connected component of each item.
    b : numpy.ndarray
        Right-hand side(s).

    Returns
    -------
    numpy.ndarray
        (L + ρP)⁻¹b − Pb/ρ (:func:`laplacian_pinv`).

    Raises
    ------
    SingularLaplacian
        As :func:`laplacian_pinv`.
    """
    factor, proj, rho = _factor(lap, component)
    return scipy.linalg.cho_solve((factor, True), b, check_finite=False) - proj @ b / rho
