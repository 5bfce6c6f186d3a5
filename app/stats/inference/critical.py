"""Critical values for all pairwise differences of the scores (docs/uncertainty.md §6).

se(θ̂_a − θ̂_b) from a covariance, and the simultaneous critical value: the level-quantile
of the largest |t| over the pairs of each component, from draws of N(0, cov) or of the
multivariate t (Bonferroni beyond 2·10⁷ pair-draws). :mod:`.ranks` builds the rank
intervals on the same standard errors; the survey planner (:mod:`app.stats.survey_plan`)
certifies with the critical value exactly as the ranking does.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri, stdtrit

from .intervals import Check

__all__ = ["pair_difference_se", "simultaneous_critical_value"]


def _draw(gen: np.random.Generator, root: NDArray, rows: int, df: float | None) -> NDArray:
    """``rows`` draws of N(0, R Rᵀ), or of the multivariate t with ``df`` degrees of
    freedom and that scale matrix (each normal draw divided by √(χ²_df/df))."""
    z = gen.standard_normal((rows, root.shape[0])) @ root.T
    if df is not None:
        z *= np.sqrt(df / gen.chisquare(df, rows))[:, None]
    return z


def _critical_values(
    cov: NDArray,
    level: float,
    component: NDArray,
    n_draws: int,
    gen: np.random.Generator,
    df: float | None,
    check: Check,
    root: NDArray | None = None,
) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
    """The simultaneous critical value c, each item's marginal one c_a and the pairs' se
    (``root``: :func:`_mvn_root` of ``cov``, when the caller has it).

    From one set of draws Z (normal, or t with ``df``) with T_ab = |Z_a − Z_b|/se_ab over
    same-component pairs: c is the ``level``-quantile of max_{a,b} T_ab and c_a that of
    max_{b≠a} T_ab (Mogstad et al. 2024, §3), so c_a ≤ c. Beyond 2·10⁷ pair-draws c comes
    from :func:`simultaneous_critical_value` and c_a is the Bonferroni quantile over a's
    comparable items (at most c)."""
    m = component.size
    se_pair = pair_difference_se(cov, component)
    finite = np.isfinite(se_pair)
    np.fill_diagonal(finite, False)
    others = finite.sum(axis=1)
    if not others.any():
        return 0.0, np.zeros(m), se_pair
    if m * m * n_draws > 20_000_000:
        crit, _ = simultaneous_critical_value(cov, level, component, n_draws, gen, df, root)
        q = 1.0 - (1.0 - level) / (2.0 * np.maximum(others, 1))
        each = ndtri(q) if df is None else stdtrit(df, q)
        return crit, np.where(others > 0, np.minimum(each, crit), 0.0).astype(np.float64), se_pair
    root = _mvn_root(cov) if root is None else root
    inv = np.where(finite, 1.0 / np.where(finite, se_pair, 1.0), 0.0)
    largest = np.empty((n_draws, m))
    block = max(1, _BLOCK_PAIR_STATS // (m * m))
    for start in range(0, n_draws, block):
        z = _draw(gen, root, min(block, n_draws - start), df)
        largest[start : start + z.shape[0]] = (np.abs(z[:, :, None] - z[:, None, :]) * inv).max(axis=2)
        check()
    crit = float(np.quantile(largest.max(axis=1), level))
    return crit, np.where(others > 0, np.quantile(largest, level, axis=0), 0.0), se_pair


def pair_difference_se(cov: NDArray, component: NDArray) -> NDArray[np.float64]:
    """se(θ̂_a − θ̂_b) from a covariance; ∞ across components (nothing compares them)."""
    c = np.asarray(cov, dtype=np.float64)
    comp = np.asarray(component, dtype=np.int64)
    diag = np.diag(c)
    se_pair = np.sqrt(np.maximum(diag[:, None] + diag[None, :] - 2.0 * c, 1e-300))
    se_pair[comp[:, None] != comp[None, :]] = np.inf
    return se_pair


def simultaneous_critical_value(
    cov: NDArray,
    level: float,
    component: NDArray,
    n_draws: int,
    rng: np.random.Generator,
    df: float | None = None,
    root: NDArray | None = None,
) -> tuple[float, NDArray[np.float64]]:
    """The simultaneous critical value for all pairwise differences, and their se
    (``root``: :func:`_mvn_root` of ``cov``, when the caller has it).

    The ``level``-quantile of max over same-component pairs of |Z_a − Z_b|/se_ab,
    Z ~ N(0, cov) (or the multivariate t with ``df`` degrees of freedom), from
    ``n_draws`` draws (Bonferroni beyond 2·10⁷ pair-draws).
    se_ab is ∞ across components. Used by :func:`rank_confidence` (and by the
    planner, which certifies exactly as the ranking does).
    """
    c = np.asarray(cov, dtype=np.float64)
    comp = np.asarray(component, dtype=np.int64)
    m = comp.size
    se_pair = pair_difference_se(c, comp)
    cross = comp[:, None] != comp[None, :]
    iu = np.triu_indices(m, 1)
    same = ~cross[iu]
    n_pairs = int(same.sum())
    if n_pairs == 0:
        return 0.0, se_pair
    if n_pairs * n_draws <= 20_000_000:
        zdraw = _draw(rng, _mvn_root(c) if root is None else root, n_draws, df)
        a, b, se_same = iu[0][same], iu[1][same], se_pair[iu][same]
        # The largest |t| of each draw, a block of draws at a time (4 MB of pair statistics).
        largest = np.empty(n_draws)
        block = max(1, _BLOCK_PAIR_STATS // n_pairs)
        for start in range(0, n_draws, block):
            z = zdraw[start : start + block]
            largest[start : start + block] = (np.abs(z[:, a] - z[:, b]) / se_same).max(axis=1)
        return float(np.quantile(largest, level)), se_pair
    q = 1.0 - (1.0 - level) / (2.0 * n_pairs)  # Bonferroni
    return float(ndtri(q) if df is None else stdtrit(df, q)), se_pair


#: Pair statistics per block of draws in :func:`simultaneous_critical_value` (4 MB of float64).
_BLOCK_PAIR_STATS = 500_000


def _mvn_root(cov: NDArray) -> NDArray:
    """R with R Rᵀ = cov, for a PSD (possibly singular) covariance."""
    vals, vecs = np.linalg.eigh(0.5 * (cov + cov.T))
    return vecs * np.sqrt(np.clip(vals, 0.0, None))
