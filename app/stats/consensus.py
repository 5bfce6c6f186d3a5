"""Uncertainty for consensus rankings built from (synthetic) full rankings (docs/uncertainty.md §8).

Rankings are i.i.d. across respondents, but the pairs inside one ranking are not
independent, so the pairwise fits' standard errors do not apply; both summaries here
treat the ranking as the unit and need only the mergeable second moments of
:class:`~app.stats.rankings.RankingStats` (O(m²) per query whatever R): the Borda mean
position with its sample covariance, and BTL on the implied pairs (a composite
likelihood) with its cluster-robust covariance. Under the Mallows mechanism they
describe the *synthetic* population, whose narrow majorities can differ from the true
one's (docs/mechanisms.md §3.4).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from .btl import BTLFit, fit_btl
from .inference import Confidence, confidence_from_cov, laplacian, laplacian_pinv
from .rankings import RankingStats

__all__ = ["borda_confidence", "btl_confidence", "fit_ranking_btl", "position_covariance"]


def position_covariance(stats: RankingStats) -> NDArray[np.float64]:
    """Sample covariance (ddof 1) of the rankings' 0-based position vectors.

    Parameters
    ----------
    stats : RankingStats
        The rankings' mergeable moments (:func:`~app.stats.rankings.ranking_stats`).

    Returns
    -------
    numpy.ndarray (m, m)
        The covariance.

    Raises
    ------
    ValueError
        With fewer than two rankings.
    """
    r = stats.n
    if r < 2:
        raise ValueError("a covariance needs at least two rankings")
    mean = stats.position_sum / r
    cov = (stats.position_outer - r * np.outer(mean, mean)) / (r - 1)
    return 0.5 * (cov + cov.T)


def borda_confidence(stats: RankingStats, level: float = 0.95) -> Confidence:
    """Intervals for the mean Borda points m − A_i (A_i the mean 1-based position).

    Parameters
    ----------
    stats : RankingStats
        The rankings' mergeable moments.
    level : float, default 0.95
        Confidence level.

    Returns
    -------
    Confidence
        Intervals for the Borda points of the population the rankings were drawn from.

    Raises
    ------
    ValueError
        With fewer than two rankings.

    Notes
    -----
    The mean position is a mean of i.i.d. vectors; normal approximation with the sample
    covariance of positions over R (docs/uncertainty.md §8).

    Examples
    --------
    >>> from app.stats.rankings import ranking_stats
    >>> from app.stats.consensus import borda_confidence
    >>> stats = ranking_stats([[0, 1, 2], [0, 2, 1], [1, 0, 2], [0, 1, 2]], 3)
    >>> borda_confidence(stats).estimate.tolist()  # m − mean 1-based position
    [1.75, 1.0, 0.25]
    """
    m = stats.n_items
    score = m - stats.mean_position
    cov = position_covariance(stats) / stats.n
    comp = np.zeros(m, dtype=np.int64)
    return confidence_from_cov(score, cov, level, comp, "borda (normal approximation)", score)


def fit_ranking_btl(stats: RankingStats, lam: float = 1.0, theta0=None) -> BTLFit:
    """The BTL fit of the pairs the rankings imply.

    Parameters
    ----------
    stats : RankingStats
        The rankings' mergeable moments.
    lam : float, default 1.0
        The ridge of J, in the same per-comparison scaling as the pairwise surveys.
    theta0 : array_like, optional
        Warm start.

    Returns
    -------
    BTLFit
        The fit in which pair (i, j) is compared R times and i won ``before[i, j]`` of
        them (no privacy debiasing: the Mallows mechanism is not randomized response on
        pairs).

    Raises
    ------
    ValueError
        With no rankings.
    """
    m = stats.n_items
    if stats.n == 0:
        raise ValueError("no rankings to fit")
    i, j = np.triu_indices(m, 1)
    n = np.full(i.size, float(stats.n))
    s = stats.before[i, j].astype(np.float64)
    return fit_btl(m, i, j, n, s, lam, theta0=theta0, estimator="rankings")


def btl_confidence(stats: RankingStats, fit: BTLFit, level: float = 0.95) -> Confidence:
    """Cluster-robust sandwich for the implied-pairs BTL fit, rankings as clusters (docs/uncertainty.md §8).

    Parameters
    ----------
    stats : RankingStats
        The rankings' mergeable moments.
    fit : BTLFit
        :func:`fit_ranking_btl` of them.
    level : float, default 0.95
        Confidence level.

    Returns
    -------
    Confidence
        The intervals, from O(m²) work whatever R.

    Raises
    ------
    ValueError
        With fewer than two rankings.

    Notes
    -----
    H = Laplacian with weights R·σ'(θ_i − θ_j) (the ridge's 2λI is left out: it is
    negligible beside R·m and the intervals target the unpenalized fit);
    V = Σ_r (b_r − c)(b_r − c)ᵀ from the position moments, with b_r,i the number of items
    ranking r puts below i and c_i = Σ_{j≠i} σ(θ_i − θ_j).
    """
    m = stats.n_items
    r = stats.n
    if r < 2:
        raise ValueError("intervals need at least two rankings")
    theta = fit.theta
    d = theta[:, None] - theta[None, :]
    sig = expit(d)
    np.fill_diagonal(sig, 0.0)
    c = sig.sum(axis=1)
    i, j = np.triu_indices(m, 1)
    w = r * sig[i, j] * (1.0 - sig[i, j])
    h_pinv = laplacian_pinv(laplacian(m, i, j, w), np.zeros(m, dtype=np.int64))
    ones = np.ones(m)
    sum_b = r * (m - 1) - stats.position_sum.astype(np.float64)
    outer_b = (
        r * (m - 1) ** 2 * np.outer(ones, ones)
        - (m - 1) * (np.outer(ones, stats.position_sum) + np.outer(stats.position_sum, ones))
        + stats.position_outer
    )
    v = outer_b - np.outer(c, sum_b) - np.outer(sum_b, c) + r * np.outer(c, c)
    cov = h_pinv @ v @ h_pinv
    cov = 0.5 * (cov + cov.T)
    return confidence_from_cov(
        theta.copy(), cov, level, np.zeros(m, dtype=np.int64), "cluster-robust sandwich", theta
    )
