"""Per-pair sufficient statistics of privatized comparisons (docs/estimator.md §4.1).

The debiased objective depends on the data only through, for each observed pair i < j,
the count n_ij and S_ij = Σ z (oriented "i beat j"); the uncertainty summaries also need
Σz² and the privacy part of Var(z) (Σ e^ε/(e^ε−1)², Lemma 2), and the classic-RR
baseline Σỹ. :class:`PairStats` holds these for the observed pairs only (memory
O(pairs observed) whatever the number of items), and two batches' statistics add up
(:meth:`PairStats.merge`, ``+``) — the form the service keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .mechanisms import debias, flip_probability, privacy_noise_variance, validate_binary, validate_epsilon

__all__ = ["PairStats", "pair_stats", "validate_comparisons"]

_FIELDS = ("n", "sum_y", "sum_z", "sum_z2", "sum_v")


def item_count(n_items) -> int:
    try:
        m = int(n_items)
    except (TypeError, ValueError):
        raise ValueError("n_items must be a positive integer") from None
    if m != n_items or m < 1:
        raise ValueError("n_items must be a positive integer")
    return m


def validate_comparisons(
    n_items: int, i: ArrayLike, j: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Check item indices (integers in [0, m), i ≠ j, equal lengths); return int64 arrays.

    Parameters
    ----------
    n_items : int
        Items m.
    i, j : array_like of int
        The compared items of each comparison.

    Returns
    -------
    tuple of numpy.ndarray of int64
        ``i`` and ``j``.

    Raises
    ------
    ValueError
        If ``n_items`` is invalid, the arrays are not 1-d of equal length, or an index is
        not an integer in [0, m) or equals its partner.
    """
    n_items = item_count(n_items)
    ia = np.asarray(i)
    ja = np.asarray(j)
    if ia.ndim != 1 or ja.shape != ia.shape:
        raise ValueError("i and j must be 1-d arrays of equal length")
    if ia.size and not (np.issubdtype(ia.dtype, np.integer) and np.issubdtype(ja.dtype, np.integer)):
        raise ValueError("item indices must be integers")
    ia = ia.astype(np.int64, copy=False)
    ja = ja.astype(np.int64, copy=False)
    if ia.size:
        if min(ia.min(), ja.min()) < 0 or max(ia.max(), ja.max()) >= n_items:
            raise ValueError(f"item indices must lie in [0, {n_items})")
        if np.any(ia == ja):
            raise ValueError("a comparison needs two different items (i == j found)")
    return ia, ja


@dataclass(frozen=True, eq=False)
class PairStats:
    """Sufficient statistics of comparisons, one entry per observed pair i < j.

    Attributes
    ----------
    n_items : int
        Number of items m.
    i, j : int64 arrays
        The observed pairs, i < j, sorted lexicographically, no repeats.
    n : int64 array
        n_ij, comparisons of the pair.
    sum_y : float array
        Σ ỹ (reported "i beat j"); the classic-RR baseline's data.
    sum_z : float array
        S_ij = Σ z, the debiased data of the objective J(θ).
    sum_z2 : float array
        Σ z², for the empirical variance of z.
    sum_v : float array
        Σ e^ε/(e^ε − 1)², the variance the mechanism adds (Lemma 2).
    epsilon_min : float
        The smallest ε among the comparisons (∞ if none); H(ε) = coth(ε_min/2).
    """

    n_items: int
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    n: NDArray[np.int64]
    sum_y: NDArray[np.float64]
    sum_z: NDArray[np.float64]
    sum_z2: NDArray[np.float64]
    sum_v: NDArray[np.float64]
    epsilon_min: float = field(default=float("inf"))

    def __post_init__(self) -> None:
        # Normalize types so that keys built from i, j never overflow (int32 would
        # wrap for m > 65,536) and float-typed item counts behave.
        object.__setattr__(self, "n_items", item_count(self.n_items))
        for name, dtype in (("i", np.int64), ("j", np.int64), ("n", np.int64)):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype))
        for name in _FIELDS[1:]:
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        sizes = {a.shape for a in (self.i, self.j, *(getattr(self, f) for f in _FIELDS))}
        if len(sizes) != 1 or self.i.ndim != 1:
            raise ValueError("PairStats arrays must be 1-d with equal lengths")

    # -- construction -------------------------------------------------------

    @classmethod
    def empty(cls, n_items: int) -> PairStats:
        z_i = np.zeros(0, dtype=np.int64)
        z_f = np.zeros(0, dtype=np.float64)
        return cls(n_items, z_i, z_i, z_i, z_f, z_f, z_f, z_f)

    @classmethod
    def from_values(
        cls,
        n_items: int,
        i: ArrayLike,
        j: ArrayLike,
        y: ArrayLike,
        z: ArrayLike,
        v: ArrayLike,
        epsilon_min: float = float("inf"),
    ) -> PairStats:
        """Aggregate per-comparison values (y: reported outcome, z: its debiased
        value, v: its privacy variance), each oriented "i beat j".

        Comparisons with i > j are re-oriented (y → 1 − y, z → 1 − z). Cost is
        O(N) and vectorized: a bincount over the dense pair index when the
        number of possible pairs is at most 8N, otherwise a two-key radix sort
        (``lexsort`` on 16-bit keys, m ≤ 65,536; a comparison sort beyond that).
        """
        n_items = item_count(n_items)
        ia, ja = validate_comparisons(n_items, i, j)
        n_obs = ia.size
        if n_obs == 0:
            return cls.empty(n_items)
        y = np.broadcast_to(np.asarray(y, dtype=np.float64), (n_obs,))
        z = np.broadcast_to(np.asarray(z, dtype=np.float64), (n_obs,))
        v = np.asarray(v, dtype=np.float64)
        swap = ia > ja
        lo = np.where(swap, ja, ia)
        hi = np.where(swap, ia, ja)
        y = np.where(swap, 1.0 - y, y)
        z = np.where(swap, 1.0 - z, z)
        constant_v = v.ndim == 0
        values = (y, z, z * z) if constant_v else (y, z, z * z, np.broadcast_to(v, (n_obs,)))
        pi, pj, n, sums = reduce_by_pair(lo, hi, n_items, values)
        if constant_v:
            sum_y, sum_z, sum_z2 = sums
            sum_v = np.asarray(n * float(v), dtype=np.float64)
        else:
            sum_y, sum_z, sum_z2, sum_v = sums
        return cls(n_items, pi, pj, n, sum_y, sum_z, sum_z2, sum_v, epsilon_min=float(epsilon_min))

    @classmethod
    def _from_homogeneous_rr(
        cls, n_items: int, i: ArrayLike, j: ArrayLike, y_tilde: ArrayLike, epsilon: float
    ) -> PairStats:
        """Fast path for one ε: z is affine in ỹ, so counts and Σỹ determine the rest.

        With p = p_ε, t = tanh(ε/2) and ỹ² = ỹ: Σz = (Σỹ − n p)/t and
        Σz² = (Σỹ(1 − 2p) + n p²)/t².
        """
        n_items = item_count(n_items)
        ia, ja = validate_comparisons(n_items, i, j)
        if ia.size == 0:
            return cls.empty(n_items)
        y = np.broadcast_to(np.asarray(y_tilde), ia.shape)
        # Orient i < j: a swapped row reports 1 − ỹ, i.e. ỹ XOR swap.
        y_oriented = np.not_equal(y, 0) ^ (ia > ja)
        pi, pj, n, (sum_y,) = reduce_by_pair(np.minimum(ia, ja), np.maximum(ia, ja), n_items, (y_oriented,))
        p = float(flip_probability(epsilon))
        t = float(np.tanh(epsilon / 2.0))
        return cls(
            n_items,
            pi,
            pj,
            n,
            sum_y,
            (sum_y - n * p) / t,
            (sum_y * (1.0 - 2.0 * p) + n * p * p) / (t * t),
            np.asarray(n * float(privacy_noise_variance(epsilon)), dtype=np.float64),
            epsilon_min=float(epsilon),
        )

    # -- algebra -------------------------------------------------------------

    def merge(self, other: PairStats) -> PairStats:
        """Statistics of the union of both batches of comparisons."""
        if other.n_items != self.n_items:
            raise ValueError("cannot merge statistics over different item sets")
        if self.n_pairs == 0:
            return other
        if other.n_pairs == 0:
            return self
        pi, pj, _, sums = reduce_by_pair(
            np.concatenate((self.i, other.i)),
            np.concatenate((self.j, other.j)),
            self.n_items,
            [np.concatenate((getattr(self, f), getattr(other, f))) for f in _FIELDS],
        )
        n, sum_y, sum_z, sum_z2, sum_v = sums
        return PairStats(
            self.n_items,
            pi,
            pj,
            np.rint(n).astype(np.int64),
            sum_y,
            sum_z,
            sum_z2,
            sum_v,
            epsilon_min=min(self.epsilon_min, other.epsilon_min),
        )

    __add__ = merge

    def subset(self, mask: NDArray[np.bool_]) -> PairStats:
        """The statistics of the selected pairs only."""
        return PairStats(
            self.n_items,
            self.i[mask],
            self.j[mask],
            self.n[mask],
            self.sum_y[mask],
            self.sum_z[mask],
            self.sum_z2[mask],
            self.sum_v[mask],
            epsilon_min=self.epsilon_min,
        )

    # -- summaries -------------------------------------------------------------

    @property
    def n_pairs(self) -> int:
        """Number of distinct pairs observed."""
        return int(self.i.size)

    @property
    def n_comparisons(self) -> int:
        """Total number of comparisons N."""
        return int(self.n.sum())

    @property
    def G(self) -> float:
        """G(ε) of Theorem 1 over the comparisons: the mean of coth²(ε/2).

        Uses coth²(ε/2) = 1 + 4e^ε/(e^ε−1)², so it is exact from ``sum_v``. In the
        paper's complete design it is the mean over respondents, as printed. 1.0
        when there are no comparisons (the non-private value).
        """
        total = self.n_comparisons
        return 1.0 + 4.0 * float(self.sum_v.sum()) / total if total else 1.0

    @property
    def H(self) -> float:
        """H(ε) of Theorem 1: max over comparisons of coth(ε/2) (not squared)."""
        return float(1.0 / np.tanh(self.epsilon_min / 2.0))

    def item_counts(self) -> NDArray[np.int64]:
        """Comparisons each item took part in."""
        m = self.n_items
        return (np.bincount(self.i, self.n, m) + np.bincount(self.j, self.n, m)).astype(np.int64)

    def to_dense(self) -> dict[str, NDArray[np.float64]]:
        """m×m antisymmetrically oriented matrices, for small m and for tests:
        ``n`` symmetric, ``sum_z[a, b]`` = Σ z oriented "a beat b"."""
        m = self.n_items
        out: dict[str, NDArray[np.float64]] = {}
        n = np.zeros((m, m))
        n[self.i, self.j] = self.n
        n[self.j, self.i] = self.n
        out["n"] = n
        for f in ("sum_y", "sum_z"):
            a = np.zeros((m, m))
            a[self.i, self.j] = getattr(self, f)
            a[self.j, self.i] = self.n - getattr(self, f)
            out[f] = a
        return out


def pair_stats(n_items: int, i: ArrayLike, j: ArrayLike, y_tilde: ArrayLike, epsilon: ArrayLike) -> PairStats:
    """Sufficient statistics of RR-privatized comparisons (i, j, ỹ, ε).

    Parameters
    ----------
    n_items : int
        Items m.
    i, j : array_like of int (N,)
        The compared items of each comparison.
    y_tilde : array_like of {0, 1} (N,)
        ỹ = 1 means i was reported the winner.
    epsilon : float or array_like (N,)
        A scalar or one value per comparison.

    Returns
    -------
    PairStats
        Counts and sums per observed pair i < j (a reversed pair is flipped: ỹ becomes
        1 − ỹ and z is oriented accordingly).

    Raises
    ------
    ValueError
        On invalid comparisons, answers or ε, or an ``epsilon`` of another length.

    Notes
    -----
    z is computed by :func:`~app.stats.mechanisms.debias` (eq. (1)); docs/estimator.md §4.1.

    Examples
    --------
    >>> from app.stats import pair_stats
    >>> s = pair_stats(3, [0, 1, 0], [1, 0, 2], [1, 1, 0], [1.0, 1.0, 2.0])
    >>> s.i.tolist(), s.j.tolist(), s.n.tolist(), s.sum_y.tolist()  # (1, 0) becomes (0, 1) with ỹ flipped
    ([0, 0], [1, 2], [2, 1], [1.0, 0.0])
    """
    yt = validate_binary(y_tilde, "privatized answers")
    eps = validate_epsilon(epsilon)
    if eps.ndim != 0 and eps.shape != np.shape(i):
        raise ValueError("epsilon must be a scalar or have one value per comparison")
    if eps.ndim == 0 or (eps.size and np.all(eps == eps.flat[0])):
        one = float(eps.flat[0]) if eps.size else float("inf")
        return PairStats._from_homogeneous_rr(n_items, i, j, yt, one)
    return PairStats.from_values(
        n_items,
        i,
        j,
        yt,
        debias(yt, eps),
        privacy_noise_variance(eps),
        epsilon_min=float(eps.min()),
    )


def reduce_by_pair(
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    n_items: int,
    weights: tuple[NDArray[np.float64], ...] | list[NDArray[np.float64]],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], list[NDArray[np.float64]]]:
    """Group rows by pair (lo < hi): the distinct pairs in lexicographic order,
    the rows per pair, and the per-pair sum of each weight array.

    O(N + m²) by bincount over k = lo·m + hi when m² ≤ 16N; otherwise a stable two-key radix sort (numpy's
    ``lexsort`` on 16-bit keys is a radix sort, O(N)), or for m > 65,536 a
    comparison sort, then one bincount per weight array over the group numbers.
    """
    n_obs = lo.size
    if n_items * n_items <= 16 * n_obs:
        # Few possible pairs: bins k = lo·m + hi, a single O(N + m²) pass each.
        k = lo * n_items + hi
        counts = np.bincount(k, minlength=n_items * n_items)
        keep = np.flatnonzero(counts)
        # A weighted bincount is float64 (numpy's stubs type every bincount as intp).
        sums = [
            np.asarray(np.bincount(k, weights=w, minlength=n_items * n_items)[keep], dtype=np.float64)
            for w in weights
        ]
        return (
            np.asarray(keep // n_items, dtype=np.int64),
            np.asarray(keep % n_items, dtype=np.int64),
            counts[keep].astype(np.int64),
            sums,
        )
    if n_items <= 1 << 16:
        order = np.lexsort((hi.astype(np.uint16), lo.astype(np.uint16)))
    else:
        order = np.argsort(lo * n_items + hi, kind="stable")
    lo_s, hi_s = lo[order], hi[order]
    new = np.empty(n_obs, dtype=bool)
    new[0] = True
    np.not_equal(lo_s[1:], lo_s[:-1], out=new[1:])
    new[1:] |= hi_s[1:] != hi_s[:-1]
    starts = np.flatnonzero(new)
    # Group number of every row, in input order; bincount then sums each weight
    # array in one sequential pass (faster than gathering + reduceat).
    group = np.empty(n_obs, dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    sums = [
        np.asarray(np.bincount(group, weights=w, minlength=starts.size), dtype=np.float64) for w in weights
    ]
    counts = np.diff(np.append(starts, n_obs)).astype(np.int64)
    return lo_s[starts], hi_s[starts], counts, sums
