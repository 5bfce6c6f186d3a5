"""Graph Laplacians of comparison designs (shared by the fit's covariance in
:mod:`.btl` and the intervals of :mod:`.inference`, which re-exports them)."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

__all__ = ["MAX_ITEMS_COVARIANCE", "laplacian", "laplacian_pinv"]

#: Dense m×m covariance is computed up to this many items (O(m³) time, O(m²) memory).
MAX_ITEMS_COVARIANCE = 2000


def laplacian(n_items: int, i: NDArray, j: NDArray, w: NDArray) -> NDArray[np.float64]:
    """Dense graph Laplacian Σ w_ij (e_i − e_j)(e_i − e_j)ᵀ over distinct pairs."""
    lap = np.zeros((n_items, n_items))
    lap[i, j] = -w
    lap[j, i] = -w
    lap[np.diag_indices(n_items)] = np.bincount(i, w, n_items) + np.bincount(j, w, n_items)
    return lap


def laplacian_pinv(lap: NDArray[np.float64], component: NDArray[np.int64]) -> NDArray[np.float64]:
    """Moore–Penrose inverse of a (possibly disconnected) Laplacian.

    With P = Σ_c 1_c1_cᵀ/|c| the projector on its null space and ρ > 0,
    (L + ρP)⁻¹ = L⁺ + P/ρ, so L⁺ = (L + ρP)⁻¹ − P/ρ by one Cholesky factorization.
    """
    m = lap.shape[0]
    sizes = np.bincount(component, minlength=int(component.max(initial=-1)) + 1).astype(float)
    proj = (component[:, None] == component[None, :]) / sizes[component][:, None]
    rho = max(float(np.mean(np.diag(lap))), 1.0)
    factor = scipy.linalg.cho_factor(lap + rho * proj, lower=True, check_finite=False)
    return scipy.linalg.cho_solve(factor, np.eye(m), check_finite=False) - proj / rho
