"""Aggregating rankings: RankingStats, Borda, Lehmer-code and Kemeny consensus
(docs/federated.md §3–4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import entropy
from .permutations import (
    lehmer_code,
    lehmer_decode,
    orders_from_positions,
    positions_from_orders,
    validate_orders,
)

#: Largest m for which :func:`kemeny_consensus` runs the exact subset dynamic
#: programme by default (2^16 states × 16 items: ~5 MB, well under a second).
KEMENY_EXACT_MAX_ITEMS = 16


#: Largest m the exact programme accepts at all (2^20 × 20 int32 = 80 MB).
_KEMENY_EXACT_HARD_MAX = 20


@dataclass(frozen=True)
class RankingStats:
    """Mergeable sufficient statistics of a set of full rankings of m items.

    ``n`` rankings; ``position_sum[i]`` = Σ 0-based positions of item i (Borda);
    ``before[i, j]`` = number of rankings with i above j (Kemeny, BTL);
    ``lehmer[i, v]`` = number of rankings whose Lehmer code has ``L[i] = v``
    (Lehmer majority); ``position_outer`` = Σ pos pos^T over the rankings (the
    spread of positions, for standard errors). Statistics of two sets of rankings
    add up.
    """

    n_items: int
    n: int
    position_sum: NDArray[np.int64]
    before: NDArray[np.int64]
    lehmer: NDArray[np.int64]
    position_outer: NDArray[np.int64]

    FIELDS = ("position_sum", "before", "lehmer", "position_outer")

    @classmethod
    def empty(cls, n_items: int) -> RankingStats:
        m = n_items
        z = np.zeros((m, m), np.int64)
        return cls(m, 0, np.zeros(m, np.int64), z, z.copy(), z.copy())

    def __add__(self, other: RankingStats) -> RankingStats:
        if self.n_items != other.n_items:
            raise ValueError("statistics of different item sets")
        return RankingStats(
            self.n_items,
            self.n + other.n,
            *(getattr(self, f) + getattr(other, f) for f in self.FIELDS),
        )

    @property
    def mean_position(self) -> NDArray[np.float64]:
        """Mean 1-based position of each item (the Borda statistic A of the federated paper's Algorithm 1;
        docs/federated.md §3.1)."""
        if self.n == 0:
            return np.full(self.n_items, np.nan)
        return self.position_sum / self.n + 1.0


def pairwise_counts(orders: ArrayLike) -> NDArray[np.int64]:
    """W[i, j] = number of orderings that put item i above item j.

    Parameters
    ----------
    orders : array_like of int (R, m)
        Orderings, one per row.

    Returns
    -------
    numpy.ndarray of int64 (m, m)
        W.

    Examples
    --------
    >>> from app.stats.rankings import pairwise_counts
    >>> pairwise_counts([[0, 1, 2], [0, 2, 1], [1, 0, 2]]).tolist()
    [[0, 2, 3], [1, 0, 2], [0, 1, 0]]
    """
    return ranking_stats(orders).before


def ranking_stats(orders: ArrayLike, n_items: int | None = None) -> RankingStats:
    """The :class:`RankingStats` of a batch of orderings (validated), in O(R·m²).

    Parameters
    ----------
    orders : array_like of int
        Orderings, one per row.
    n_items : int, optional
        m (default: the rows' length).

    Returns
    -------
    RankingStats
        Their mergeable sufficient statistics.

    Raises
    ------
    ValueError
        If a row is not a permutation of the items.
    """
    arr = validate_orders(orders, n_items)
    n, m = arr.shape
    if n == 0:
        return RankingStats.empty(m)
    pos = positions_from_orders(arr)
    before = np.zeros((m, m), dtype=np.int64)
    step = max(1, 2_000_000 // (m * m))
    for start in range(0, n, step):
        p = pos[start : start + step]
        before += (p[:, :, None] < p[:, None, :]).sum(axis=0)
    code = lehmer_code(pos)
    lehmer = np.bincount((np.arange(m) * m + code).ravel(), minlength=m * m).reshape(m, m)
    return RankingStats(m, n, pos.sum(axis=0), before, lehmer.astype(np.int64), pos.T @ pos)


def _stats(data: ArrayLike | RankingStats) -> RankingStats:
    return data if isinstance(data, RankingStats) else ranking_stats(data)


def _tie_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return entropy.generator() if rng is None else np.random.default_rng(rng)


def _sort_random_ties(key: NDArray, rng: np.random.Generator) -> NDArray[np.int64]:
    """Indices sorting ``key`` ascending, exact ties in uniformly random order."""
    return np.lexsort((rng.random(key.size), key)).astype(np.int64)


def borda_scores(data: ArrayLike | RankingStats) -> NDArray[np.float64]:
    """Mean 1-based position of each item (smaller is better).

    Parameters
    ----------
    data : array_like or RankingStats
        Orderings, one per row, or their statistics.

    Returns
    -------
    numpy.ndarray of float64
        The Borda statistic A_i of the federated paper's Algorithm 1 (docs/federated.md
        §3.1; the same order as classic Borda points m − A_i).

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.rankings import borda_scores
    >>> np.round(borda_scores([[0, 1, 2], [0, 2, 1], [1, 0, 2]]), 4).tolist()
    [1.3333, 2.0, 2.6667]
    """
    return _stats(data).mean_position


def borda_aggregate(
    data: ArrayLike | RankingStats, rng: np.random.Generator | int | None = None
) -> NDArray[np.int64]:
    """Algorithm 1 of the federated paper (centralized Borda): the ordering by mean position.

    Parameters
    ----------
    data : array_like or RankingStats
        Orderings, one per row, or their statistics.
    rng : numpy.random.Generator or int, optional
        Breaks exact ties (frequent: the sums are integers) uniformly at random.

    Returns
    -------
    numpy.ndarray of int64
        The ordering, by mean position ascending. The output is an ordering — the paper's
        printed σ̂₀(j) = i_j is that, although its own convention calls for positions
        (docs/federated.md §3.1).

    Raises
    ------
    ValueError
        With no rankings.
    """
    s = _stats(data)
    if s.n == 0:
        raise ValueError("no rankings to aggregate")
    return _sort_random_ties(s.position_sum, _tie_generator(rng))


def _mode_with_random_ties(hist: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.int64]:
    """Per row, a uniformly random index among the maxima."""
    top = hist == hist.max(axis=1, keepdims=True)
    keys = np.where(top, rng.random(hist.shape), -1.0)
    return keys.argmax(axis=1)


def lehmer_aggregate(
    data: ArrayLike | RankingStats, rng: np.random.Generator | int | None = None
) -> NDArray[np.int64]:
    """Centralized Lehmer majority (federated paper Theorem 3; docs/federated.md §4.1).

    Parameters
    ----------
    data : array_like or RankingStats
        Orderings, one per row, or their statistics.
    rng : numpy.random.Generator or int, optional
        Breaks ties of the modes uniformly at random.

    Returns
    -------
    numpy.ndarray of int64
        The coordinate-wise mode of the rankings' Lehmer codes, decoded to an ordering.

    Raises
    ------
    ValueError
        With no rankings.

    Notes
    -----
    After Li, Mazumdar & Milenkovic (2017). The codes are taken in item-label order, so
    the result depends on how items are labelled (docs/federated.md §4.1).
    """
    s = _stats(data)
    if s.n == 0:
        raise ValueError("no rankings to aggregate")
    m = s.n_items
    hist = np.where(np.tri(m, dtype=bool), s.lehmer, -1)  # L[i] ≤ i
    code = _mode_with_random_ties(hist, _tie_generator(rng))
    return orders_from_positions(lehmer_decode(code))


def kemeny_objective(order: ArrayLike, data: ArrayLike | RankingStats) -> int:
    """Σ_r d_K(order, σ_r): the total Kendall distance of ``order`` to the rankings.

    Parameters
    ----------
    order : array_like of int
        A candidate ordering.
    data : array_like or RankingStats
        Orderings, one per row, or their statistics.

    Returns
    -------
    int
        The objective.

    Examples
    --------
    >>> from app.stats.rankings import kemeny_objective
    >>> kemeny_objective([0, 1, 2], [[0, 1, 2], [0, 2, 1], [1, 0, 2]])
    2
    """
    s = _stats(data)
    o = np.asarray(order, dtype=np.int64)
    w = s.before[np.ix_(o, o)]  # w[a, b]: rankings with o[a] above o[b]
    return int(np.tril(w, -1).sum())  # pairs the order puts a above b but rankings b above a


@dataclass(frozen=True)
class KemenyResult:
    """A Kemeny consensus and its certificate.

    ``objective`` = Σ_r d_K(order, σ_r); ``lower_bound`` = Σ_{i<j} min(W_ij, W_ji),
    which no ordering beats, so ``objective − lower_bound`` bounds the excess over
    the optimum. ``exact``: proved optimal (then ``n_optima`` counts the optimal
    orderings, and ``order`` is uniform among them).
    """

    order: NDArray[np.int64]
    objective: int
    lower_bound: int
    exact: bool
    n_optima: int | None
    method: str

    @property
    def gap(self) -> float:
        """Bound on the relative excess over the optimum: 0 when proved optimal, else
        (objective − lower_bound)/objective (the lower bound can be loose, e.g. on a
        Condorcet cycle, so a positive gap does not mean the order is suboptimal)."""
        if self.exact or self.objective == 0:
            return 0.0
        return (self.objective - self.lower_bound) / self.objective


def _kemeny_exact(w: NDArray[np.int64], rng: np.random.Generator) -> tuple[NDArray[np.int64], int, int]:
    """Subset dynamic programme over top-sets, O(2^m m²) (the Kemeny MLE of docs/mechanisms.md §3.4).

    f[T] = least disagreement of an arrangement of the set T as the top |T|
    items: placing item i last in T costs the rankings that put some j ∉ T above
    i, ``col[i] − Σ_{j ∈ T∖i} W[j, i]``. Counting optimal paths lets the
    backward pass pick an optimal ordering uniformly at random.
    """
    m = w.shape[0]
    full = (1 << m) - 1
    n_states = 1 << m
    # a[S, i] = Σ_{j ∈ S} W[j, i], built by doubling.
    a = np.zeros((n_states, m), dtype=np.int64 if w.max(initial=0) * m >= 2**31 else np.int32)
    for k in range(m):
        a[1 << k : 1 << (k + 1)] = a[: 1 << k] + w[k]
    col = w.sum(axis=0)
    popcount = np.zeros(n_states, dtype=np.int64)
    for k in range(m):
        popcount[1 << k : 1 << (k + 1)] = popcount[: 1 << k] + 1
    big = np.iinfo(np.int64).max // 4
    f = np.full(n_states, big, dtype=np.int64)
    count = np.zeros(n_states, dtype=np.int64)
    f[0], count[0] = 0, 1
    for size in range(1, m + 1):
        layer = np.flatnonzero(popcount == size)
        best = np.full(layer.size, big, dtype=np.int64)
        ways = np.zeros(layer.size, dtype=np.int64)
        for i in range(m):
            has = (layer >> i) & 1 == 1
            prev = layer[has] ^ (1 << i)
            cand = f[prev] + (col[i] - a[prev, i])
            cur = best[has]
            better = cand < cur
            same = cand == cur
            ways_has = ways[has]
            ways_has = np.where(better, count[prev], np.where(same, ways_has + count[prev], ways_has))
            best[has] = np.minimum(cur, cand)
            ways[has] = ways_has
        f[layer], count[layer] = best, ways
    # Backward pass: choose the bottom item of T among optimal predecessors ∝ their path counts.
    order = np.empty(m, dtype=np.int64)
    t = full
    for place in range(m - 1, -1, -1):
        items = [i for i in range(m) if (t >> i) & 1]
        prevs = np.array([t ^ (1 << i) for i in items])
        cand = f[prevs] + (col[items] - a[prevs, items])
        ok = cand == f[t]
        weights = np.where(ok, count[prevs], 0).astype(np.float64)
        pick = int(rng.choice(len(items), p=weights / weights.sum()))
        order[place] = items[pick]
        t = int(prevs[pick])
    return order, int(f[full]), int(count[full])


def _kemeny_local_search(w: NDArray[np.int64], start: NDArray[np.int64]) -> NDArray[np.int64]:
    """Best-improvement single-item moves (take one item out, reinsert it elsewhere)
    until none lowers the objective: a local Kemeny optimum, O(m²) per move."""
    order = start.copy()
    m = order.size
    upper = np.triu(np.ones((m, m), dtype=bool), 1)
    while True:
        mw = w[np.ix_(order, order)]  # mw[a, b]: rankings with order[a] above order[b]
        d = mw - mw.T  # change when the a-above-b pair is reversed
        # Moving the item at p up to q < p reverses it with rows q..p-1: Σ_{k=q}^{p-1} d[k, p].
        du = np.where(upper, d, 0)
        up = np.flip(np.cumsum(np.flip(du, 0), 0), 0)  # up[q, p] = Σ_{k ≥ q} du[k, p]
        # Moving p down to q > p reverses it with p+1..q: Σ_{k=p+1}^{q} d[p, k].
        down = np.cumsum(du, 1)  # down[p, q] = Σ_{k ≤ q} du[p, k]
        up = np.where(upper, up, 0)
        down = np.where(upper, down, 0)
        best_up = np.unravel_index(np.argmin(up), up.shape)
        best_down = np.unravel_index(np.argmin(down), down.shape)
        if min(up[best_up], down[best_down]) >= 0:
            return order
        lst = order.tolist()
        if up[best_up] <= down[best_down]:
            q, p = (int(x) for x in best_up)
            lst.insert(q, lst.pop(p))
        else:
            p, q = (int(x) for x in best_down)
            lst.insert(q, lst.pop(p))
        order = np.asarray(lst, dtype=np.int64)


def kemeny_consensus(
    data: ArrayLike | RankingStats,
    rng: np.random.Generator | int | None = None,
    exact_max_items: int = KEMENY_EXACT_MAX_ITEMS,
) -> KemenyResult:
    """Kemeny consensus argmin_σ Σ_r d_K(σ, σ_r).

    Parameters
    ----------
    data : array_like or RankingStats
        Orderings, one per row, or their statistics.
    rng : numpy.random.Generator or int, optional
        Draws the ordering among the optima (or breaks ties of the heuristic's starts).
    exact_max_items : int, default 16
        Up to this many items (at most 20) the optimum is exact.

    Returns
    -------
    KemenyResult
        The ordering, its objective and the lower bound that certifies its excess.

    Raises
    ------
    ValueError
        With no rankings.

    Notes
    -----
    The Mallows MLE of the centre, and the attacker's estimator of Ranking DP §4,
    Theorem 2 (docs/mechanisms.md §3.4; the paper's printed eq. (1) has its sign wrong).
    m ≤ ``exact_max_items``: exact, by a dynamic programme over subsets, with an ordering
    drawn uniformly among all optima. Larger m (NP-hard): the best of the Borda, Copeland
    and Lehmer-majority orders improved by single-item moves to a local optimum, with the
    certificate ``objective − lower_bound`` on its excess.

    Examples
    --------
    >>> from app.stats.rankings import kemeny_consensus
    >>> r = kemeny_consensus([[0, 1, 2], [0, 2, 1], [1, 0, 2]], rng=0)
    >>> r.order.tolist(), r.objective, r.exact
    ([0, 1, 2], 2, True)
    """
    s = _stats(data)
    if s.n == 0:
        raise ValueError("no rankings to aggregate")
    gen = _tie_generator(rng)
    w = s.before
    m = s.n_items
    lower = int(np.minimum(w, w.T)[np.triu_indices(m, 1)].sum())
    if m <= min(exact_max_items, _KEMENY_EXACT_HARD_MAX):
        order, obj, n_opt = _kemeny_exact(w, gen)
        return KemenyResult(order, obj, lower, True, n_opt, "exact dynamic programme")
    copeland = (np.sign(w - w.T)).sum(axis=1)  # majority wins minus losses
    starts = [
        borda_aggregate(s, gen),
        _sort_random_ties(-copeland, gen),
        lehmer_aggregate(s, gen),
    ]
    searched = [_kemeny_local_search(w, start) for start in starts]
    # min() keeps the first of equal objectives, as the strict ``<`` of a running best did.
    order, obj = min(((cand, kemeny_objective(cand, s)) for cand in searched), key=lambda t: t[1])
    return KemenyResult(order, obj, lower, obj == lower, None, "local search (single-item moves)")


def kemeny_aggregate(
    data: ArrayLike | RankingStats,
    rng: np.random.Generator | int | None = None,
    exact_max_items: int = KEMENY_EXACT_MAX_ITEMS,
) -> NDArray[np.int64]:
    """The ordering of :func:`kemeny_consensus`.

    Parameters
    ----------
    data : array_like or RankingStats
        Orderings, one per row, or their statistics.
    rng : numpy.random.Generator or int, optional
        As in :func:`kemeny_consensus`.
    exact_max_items : int, default 16
        As in :func:`kemeny_consensus`.

    Returns
    -------
    numpy.ndarray of int64
        The consensus ordering.

    Raises
    ------
    ValueError
        With no rankings.
    """
    return kemeny_consensus(data, rng, exact_max_items).order
