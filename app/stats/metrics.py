"""Ranking and estimation errors of Xu, Sun & Cheng (paper §4.2, §4.3, §5.1; docs/estimator.md §6).

Rank 1 is the most preferred item (largest θ). The paper's metrics assume tie-free
scores, but θ̂ ties exactly whenever debiased Borda scores tie (docs/estimator.md §5),
which the solver renders as differences of ~1e-10. So scores closer than
``tol · max(1, ‖θ‖∞)`` (chained: a run of such neighbours is one group) are tied, and
every metric is the **expectation over a uniformly random tie-break**, independently in
θ̂ and θ*: a pair tied in either vector counts ½ in K, and a tie group straddling
position K puts each member in the top-K with probability (slots left)/(group size).
These values do not depend on how items are labelled (docs/estimator.md §6, "Ties").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "TIE_TOL",
    "competition_ranks",
    "kendall_tau_error",
    "l2_error",
    "linf_error",
    "tie_groups",
    "top_k_error",
    "top_k_membership",
]

#: Relative tolerance under which two scores count as tied.
TIE_TOL = 1e-9


def _as_vector(theta: ArrayLike) -> NDArray[np.float64]:
    x = np.asarray(theta, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("scores must be a non-empty finite 1-d array")
    return x


def tie_groups(theta: ArrayLike, tol: float = TIE_TOL) -> NDArray[np.int64]:
    """Group label per item: 0 for the best group, 1 for the next, … (ties share one).

    Parameters
    ----------
    theta : array_like (m,)
        Finite scores.
    tol : float, default TIE_TOL
        Scores closer than ``tol · max(1, ‖θ‖∞)`` are tied (chained: a run of such
        neighbours is one group).

    Returns
    -------
    numpy.ndarray of int64
        The group of each item, best first.

    Raises
    ------
    ValueError
        If ``theta`` is not a non-empty finite 1-d array.

    Examples
    --------
    >>> from app.stats import tie_groups
    >>> tie_groups([2.0, 3.0, 2.0, 1.0]).tolist()
    [1, 0, 1, 2]
    """
    x = _as_vector(theta)
    order = np.argsort(-x, kind="stable")
    gap = -np.diff(x[order])
    step = (gap > tol * max(1.0, float(np.abs(x).max()))).astype(np.int64)
    labels = np.empty(x.size, dtype=np.int64)
    labels[order] = np.concatenate(([0], np.cumsum(step)))
    return labels


def competition_ranks(theta: ArrayLike, tol: float = TIE_TOL) -> NDArray[np.int64]:
    """1-based ranks, tied items sharing the best rank of their group ("1224").

    Parameters
    ----------
    theta : array_like (m,)
        Finite scores; larger is better.
    tol : float, default TIE_TOL
        Relative tie tolerance, as in :func:`tie_groups`.

    Returns
    -------
    numpy.ndarray of int64
        Each item's rank.

    Raises
    ------
    ValueError
        If ``theta`` is not a non-empty finite 1-d array.

    Examples
    --------
    >>> from app.stats import competition_ranks
    >>> competition_ranks([2.0, 3.0, 2.0, 1.0]).tolist()  # ties share the better rank
    [2, 1, 2, 4]
    """
    groups = tie_groups(theta, tol)
    sizes = np.bincount(groups)
    first = np.concatenate(([0], np.cumsum(sizes)[:-1])) + 1
    return first[groups]


def top_k_membership(theta: ArrayLike, k: int, tol: float = TIE_TOL) -> NDArray[np.float64]:
    """Probability that each item is in the top-k under a random tie-break (sums to k).

    Parameters
    ----------
    theta : array_like (m,)
        Finite scores.
    k : int
        Size of the top set, 1 ≤ k ≤ m.
    tol : float, default TIE_TOL
        Relative tie tolerance, as in :func:`tie_groups`.

    Returns
    -------
    numpy.ndarray of float64
        1 for items certainly in, 0 for items certainly out, (slots left)/(group size)
        for the members of a tie group straddling position k.

    Raises
    ------
    ValueError
        If ``theta`` is invalid or ``k`` is out of range.

    Examples
    --------
    >>> from app.stats import top_k_membership
    >>> top_k_membership([0.5, 2.0, 1.0], k=2).tolist()
    [0.0, 1.0, 1.0]
    """
    x = _as_vector(theta)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= x.size:
        raise ValueError(f"k must be between 1 and the number of items ({x.size})")
    groups = tie_groups(x, tol)
    sizes = np.bincount(groups)
    before = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    slots = np.clip(k - before, 0, sizes)
    return (slots / sizes)[groups]


def top_k_error(theta_hat: ArrayLike, theta_true: ArrayLike, k: int, tol: float = TIE_TOL) -> float:
    """Normalized top-K Hamming error H_K(θ̂, θ*) of the paper.

    Parameters
    ----------
    theta_hat, theta_true : array_like (m,)
        Estimated and true scores.
    k : int
        Size K of the top set, 1 ≤ K ≤ m.
    tol : float, default TIE_TOL
        Relative tie tolerance, as in :func:`tie_groups`.

    Returns
    -------
    float
        H_K = (1/2K) (#{true top-K items outside the estimated top-K} + #{estimated
        top-K items outside the true top-K}), in {0, 1/K, …, min(K, m−K)/K} for tie-free
        scores; 0 iff the top-K sets agree.

    Raises
    ------
    ValueError
        If the vectors are invalid or of different lengths, or ``k`` is out of range.

    Notes
    -----
    With ties, the expectation over random tie-breaks (docs/estimator.md §6, "Ties").

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    §4.2; docs/estimator.md §6.

    Examples
    --------
    >>> from app.stats import top_k_error
    >>> top_k_error([3.0, 2.0, 1.0, 0.0], [3.0, 1.0, 2.0, 0.0], k=2)
    0.5
    """
    p_hat = top_k_membership(theta_hat, k, tol)
    p_true = top_k_membership(theta_true, k, tol)
    if p_hat.size != p_true.size:
        raise ValueError("score vectors must have equal length")
    return float(np.sum(p_hat * (1 - p_true) + (1 - p_hat) * p_true) / (2 * k))


def kendall_tau_error(theta_hat: ArrayLike, theta_true: ArrayLike, tol: float = TIE_TOL) -> float:
    """Full-ranking error K(θ̂, θ*): the fraction of item pairs ordered differently.

    Parameters
    ----------
    theta_hat, theta_true : array_like (m,)
        Estimated and true scores.
    tol : float, default TIE_TOL
        Relative tie tolerance, as in :func:`tie_groups`.

    Returns
    -------
    float
        K = 2/(m(m−1)) Σ_{i<j} 1{(σ̂_i − σ̂_j)(σ*_i − σ*_j) < 0}, with pairs tied in either
        vector counting ½.

    Raises
    ------
    ValueError
        If the vectors are invalid or of different lengths.

    Notes
    -----
    O(m log m): the discordant count is recovered exactly from SciPy's tau-b on integer
    tie-group ranks.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    §4.3; docs/estimator.md §6.

    Examples
    --------
    >>> from app.stats import kendall_tau_error
    >>> kendall_tau_error([3.0, 2.0, 1.0], [3.0, 1.0, 2.0])  # 1 of 3 pairs misordered
    0.3333333333333333
    """
    gh = tie_groups(theta_hat, tol)
    gt = tie_groups(theta_true, tol)
    if gh.size != gt.size:
        raise ValueError("score vectors must have equal length")
    m = gh.size
    if m < 2:
        return 0.0
    n0 = m * (m - 1) // 2

    def tied_pairs(labels: NDArray[np.int64]) -> int:
        c = np.unique(labels, return_counts=True)[1]
        return int(np.sum(c * (c - 1) // 2))

    n1, n2 = tied_pairs(gh), tied_pairs(gt)
    n3 = tied_pairs(gh * m + gt)
    tied_either = n1 + n2 - n3
    untied = n0 - tied_either
    if untied == 0:
        return 0.5
    from scipy.stats import kendalltau  # here: importing scipy.stats slows every start-up

    tau_b = kendalltau(gh, gt).statistic
    # tau_b = (C − D)/√((n0 − n1)(n0 − n2)) with C + D = pairs untied in both.
    c_minus_d = round(float(tau_b) * np.sqrt(float(n0 - n1) * float(n0 - n2)))
    discordant = (untied - c_minus_d) // 2
    # Both rankings put rank 1 first; tie_groups orders by decreasing score in both.
    return (discordant + 0.5 * tied_either) / n0


def _centered(theta_hat: ArrayLike, theta_true: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    a, b = _as_vector(theta_hat), _as_vector(theta_true)
    if a.size != b.size:
        raise ValueError("score vectors must have equal length")
    # θ̂ sums to 0 (Lemma 3) but θ* need not (e.g. Uniform(−2, 2) draws): compare
    # the identified, centered versions (docs/estimator.md §6).
    return a - a.mean(), b - b.mean()


def linf_error(theta_hat: ArrayLike, theta_true: ArrayLike) -> float:
    """‖θ̂ − θ*‖∞ after centering both.

    Parameters
    ----------
    theta_hat, theta_true : array_like (m,)
        Estimated and true scores.

    Returns
    -------
    float
        The largest absolute difference of the centred vectors.

    Raises
    ------
    ValueError
        If the vectors are invalid or of different lengths.

    Examples
    --------
    >>> from app.stats import linf_error
    >>> linf_error([1.0, 0.0, -1.0], [1.5, 0.0, -1.5])  # both centred first
    0.5
    """
    a, b = _centered(theta_hat, theta_true)
    return float(np.max(np.abs(a - b)))


def l2_error(theta_hat: ArrayLike, theta_true: ArrayLike) -> float:
    """‖θ̂ − θ*‖₂ / √m after centering both.

    Parameters
    ----------
    theta_hat, theta_true : array_like (m,)
        Estimated and true scores.

    Returns
    -------
    float
        The root mean squared difference of the centred vectors.

    Raises
    ------
    ValueError
        If the vectors are invalid or of different lengths.

    Examples
    --------
    >>> from app.stats import l2_error
    >>> round(l2_error([1.0, 0.0, -1.0], [1.5, 0.0, -1.5]), 4)
    0.4082
    """
    a, b = _centered(theta_hat, theta_true)
    return float(np.linalg.norm(a - b) / np.sqrt(a.size))
