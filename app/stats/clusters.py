"""Cluster-robust statistics kept up to date as answers arrive (docs/uncertainty.md §3).

The cluster-robust meat Σ_r u_r u_rᵀ at any centre θ is a function of three sums over
respondents that do not depend on θ — NN (P × P: how many respondents answered both
pairs), Q (P × m) and W (m × m) — derived in docs/uncertainty.md §3, "Keeping the meat
up to date as answers arrive". :class:`ClusterMoments` keeps them, the per-pair sums of
the fit (:class:`~app.stats.pairs.PairStats`) and the answers themselves (for the
small-sample covariances), and adds new answers in O(new answers × their respondents'
earlier answers). The P × P sums are kept up to :data:`MOMENTS_MAX_ITEMS` items; beyond,
:func:`~app.stats.inference.confidence` sums the meat over :meth:`ClusterMoments.clusters`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import scipy.sparse
from numpy.typing import NDArray
from scipy.special import expit

from .inference import Clusters
from .inference.sandwich import _cluster_meat
from .mechanisms import debias, privacy_noise_variance, randomization_p_value
from .pairs import PairStats, reduce_by_pair

__all__ = ["MOMENTS_MAX_ITEMS", "ClusterMoments", "pair_ends", "pair_index"]

#: The P × P sums are kept up to this many items (P = 2,016 pairs: 32 MiB for NN);
#: beyond, the meat is summed over the stored rows at each read.
MOMENTS_MAX_ITEMS = 64
#: Respondents per block when the sums are updated: a block's dense P-wide matrices
#: stay within this many cells.
_BLOCK_CELLS = 4_000_000


def pair_index(i: NDArray[np.integer], j: NDArray[np.integer]) -> NDArray[np.int64]:
    """The pair (i, j), i < j, as one number b(b − 1)/2 + a (colexicographic).

    Parameters
    ----------
    i, j : numpy.ndarray of int
        Pairs with i < j.

    Returns
    -------
    numpy.ndarray of int64
        Their indices: adding items appends pairs, so an index never changes as a survey
        grows.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.clusters import pair_index
    >>> pair_index(np.array([0, 0, 1]), np.array([1, 2, 2])).tolist()
    [0, 1, 2]
    """
    a = np.asarray(i, dtype=np.int64)
    b = np.asarray(j, dtype=np.int64)
    return b * (b - 1) // 2 + a


def pair_ends(index: NDArray[np.integer]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The inverse of :func:`pair_index`: (i, j) with i < j.

    Parameters
    ----------
    index : numpy.ndarray of int
        Pair indices.

    Returns
    -------
    tuple of numpy.ndarray of int64
        (i, j).

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.clusters import pair_ends
    >>> [a.tolist() for a in pair_ends(np.array([0, 1, 2]))]
    [[0, 0, 1], [1, 2, 2]]
    """
    e = np.asarray(index, dtype=np.int64)
    b = np.floor((1.0 + np.sqrt(1.0 + 8.0 * e.astype(np.float64))) / 2.0).astype(np.int64)
    b -= b * (b - 1) // 2 > e  # rounding of the square root, either way
    b += (b + 1) * b // 2 <= e
    return e - b * (b - 1) // 2, b


class _Rows:
    """The answers in arrival order, append-only, as a few arrays (merged as they
    grow, so that there are O(log n) of them): respondent code, pair index, ỹ, ε.
    A prefix never changes, so a moment's rows are its first ``n`` rows."""

    __slots__ = ("_lock", "parts")

    def __init__(self) -> None:
        self.parts: tuple[tuple[NDArray, ...], ...] = ()
        self._lock = threading.Lock()

    def append(self, part: tuple[NDArray, ...]) -> None:
        with self._lock:
            parts = [*self.parts, part]
            while len(parts) > 1 and parts[-2][0].size <= 2 * parts[-1][0].size:
                last = parts.pop()
                parts[-1] = tuple(np.concatenate((a, b)) for a, b in zip(parts[-1], last, strict=True))
            self.parts = tuple(parts)

    def head(self, n: int) -> tuple[NDArray, ...]:
        """The first ``n`` rows as one array per column."""
        parts = self.parts  # one atomic read: appends replace the tuple
        cols = [np.concatenate(c) for c in zip(*parts, strict=True)] if parts else []
        if not cols:
            return (
                np.zeros(0, np.int32),
                np.zeros(0, np.int32),
                np.zeros(0, np.int8),
                np.zeros(0, np.float64),
            )
        return tuple(c[:n] for c in cols)

    def of(self, n: int, codes: NDArray[np.int64]) -> tuple[NDArray, ...]:
        """The rows among the first ``n`` whose respondent is in ``codes`` (sorted)."""
        found = []
        start = 0
        for part in self.parts:
            size = part[0].size
            stop = min(size, n - start)
            if stop <= 0:
                break
            resp = part[0][:stop]
            pos = np.searchsorted(codes, resp)
            pos[pos >= codes.size] = 0
            hit = np.flatnonzero(codes[pos] == resp) if codes.size else np.zeros(0, np.int64)
            found.append(tuple(c[:stop][hit] for c in part))
            start += size
        if not found:
            return self.head(0)
        return tuple(np.concatenate(c) for c in zip(*found, strict=True))

    @property
    def size(self) -> int:
        """Rows held."""
        return sum(part[0].size for part in self.parts)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for part in self.parts for a in part)


@dataclass(frozen=True, eq=False)
class ClusterMoments:
    """A survey's answers grouped by respondent, summed so that the cluster-robust
    meat at any θ costs O(P² m) (docs/uncertainty.md §3). Immutable: :meth:`added` returns the
    moments with more answers; the stored rows are shared between them.

    ``n_items`` is the number of item positions the answers reach (the survey may have
    more items; they have no answers). ``stats`` are the fit's per-pair sums and
    ``truthful`` Σ e^ε/(1 + e^ε) per pair in the same order (the randomization check);
    ``sizes`` and ``spent`` the answers and the total ε of each respondent.
    """

    n_items: int
    n_rows: int
    n_clusters: int
    sizes: NDArray[np.int64]
    spent: NDArray[np.float64]
    stats: PairStats
    truthful: NDArray[np.float64]
    nn: NDArray[np.float64] | None
    q: NDArray[np.float64] | None
    w: NDArray[np.float64] | None
    rows: _Rows

    @classmethod
    def empty(cls) -> ClusterMoments:
        return cls(
            0,
            0,
            0,
            np.zeros(0, np.int64),
            np.zeros(0),
            PairStats.empty(1),
            np.zeros(0),
            np.zeros((0, 0)),
            np.zeros((0, 0)),
            np.zeros((0, 0)),
            _Rows(),
        )

    @property
    def has_sums(self) -> bool:
        """Whether the P × P sums are kept (at most :data:`MOMENTS_MAX_ITEMS` items)."""
        return self.nn is not None

    def added(
        self,
        respondent: NDArray[np.integer],
        i: NDArray[np.integer],
        j: NDArray[np.integer],
        y_tilde: NDArray[np.integer],
        epsilon: NDArray[np.floating],
    ) -> ClusterMoments:
        """These moments with more answers: ``respondent`` codes (0, 1, … in order of
        first appearance across all calls), pairs (i < j), reported answers and ε."""
        code = np.asarray(respondent, dtype=np.int64)
        i = np.asarray(i, dtype=np.int64)
        j = np.asarray(j, dtype=np.int64)
        y = np.asarray(y_tilde, dtype=np.int8)
        eps = np.asarray(epsilon, dtype=np.float64)
        if code.size == 0:
            return self
        if np.any(i >= j) or np.any(i < 0):
            raise ValueError("pairs must be oriented i < j")
        m = max(self.n_items, int(j.max()) + 1)
        n_clusters = max(self.n_clusters, int(code.max()) + 1)
        sizes = np.bincount(code, minlength=n_clusters)
        sizes[: self.sizes.size] += self.sizes
        spent = np.asarray(np.bincount(code, eps, minlength=n_clusters), dtype=np.float64)
        spent[: self.spent.size] += self.spent
        z = debias(y, eps)
        stats, truthful = self._pair_sums(m, i, j, y, z, eps)
        nn = q = w = None
        if m <= MOMENTS_MAX_ITEMS and self.nn is not None:
            nn, q, w = self._grown(m)
            affected = np.unique(code)
            old_code, old_pair, old_y, old_eps = self.rows.of(self.n_rows, affected)
            old_z = debias(old_y, old_eps)
            _update(
                nn,
                q,
                w,
                m,
                affected,
                (old_code.astype(np.int64), old_pair.astype(np.int64), old_z),
                (code, pair_index(i, j), z),
            )
        rows = self.rows
        if rows.size != self.n_rows:  # moments that others extended already: their own rows
            rows = _Rows()
            rows.append(self.rows.head(self.n_rows))
        rows.append((code.astype(np.int32), pair_index(i, j).astype(np.int32), y, eps))
        return ClusterMoments(
            m, self.n_rows + code.size, n_clusters, sizes, spent, stats, truthful, nn, q, w, rows
        )

    def _pair_sums(self, m, i, j, y, z, eps) -> tuple[PairStats, NDArray[np.float64]]:
        old = self.stats
        ones = np.ones(i.size)
        cols = (ones, y.astype(np.float64), z, z * z, privacy_noise_variance(eps), expit(eps))
        if old.n_pairs:
            before = (old.n.astype(np.float64), old.sum_y, old.sum_z, old.sum_z2, old.sum_v, self.truthful)
            pi, pj, _, sums = reduce_by_pair(
                np.concatenate((old.i, i)),
                np.concatenate((old.j, j)),
                m,
                [np.concatenate((a, b)) for a, b in zip(before, cols, strict=True)],
            )
        else:
            pi, pj, _, sums = reduce_by_pair(i, j, m, list(cols))
        low = float(eps.min())
        stats = PairStats(
            m,
            pi,
            pj,
            np.rint(sums[0]).astype(np.int64),
            sums[1],
            sums[2],
            sums[3],
            sums[4],
            epsilon_min=min(old.epsilon_min, low) if old.n_pairs else low,
        )
        return stats, sums[5]

    def _grown(self, m: int) -> tuple[NDArray, NDArray, NDArray]:
        """Copies of the sums, padded to ``m`` items (new pairs are appended)."""
        p_old, p_new = self.n_items * (self.n_items - 1) // 2, m * (m - 1) // 2
        assert self.nn is not None
        assert self.q is not None
        assert self.w is not None
        nn = np.zeros((p_new, p_new))
        nn[:p_old, :p_old] = self.nn
        q = np.zeros((p_new, m))
        q[:p_old, : self.n_items] = self.q
        w = np.zeros((m, m))
        w[: self.n_items, : self.n_items] = self.w
        return nn, q, w

    def meat(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        """Σ_r u_r u_rᵀ at ``theta`` (its length: the survey's items, at least ``n_items``)."""
        m_all = theta.size
        if m_all < self.n_items:
            raise ValueError("theta must cover every item the answers reach")
        if self.nn is None or self.q is None or self.w is None:
            return _cluster_meat(theta, self.clusters(m_all))
        m = self.n_items
        out = np.zeros((m_all, m_all))
        if m < 2:
            return out
        a, b = pair_ends(np.arange(m * (m - 1) // 2))
        p = expit(theta[a] - theta[b])
        incidence = np.zeros((m, a.size))
        incidence[a, np.arange(a.size)] = 1.0
        incidence[b, np.arange(a.size)] = -1.0
        weighted = incidence * p  # D diag(p)
        first = weighted @ self.nn @ weighted.T
        cross = weighted @ self.q
        meat = first - cross - cross.T + self.w
        out[:m, :m] = 0.5 * (meat + meat.T)
        return out

    def clusters(self, n_items: int | None = None) -> Clusters:
        """The rows as :class:`~app.stats.inference.Clusters` (for the covariances that
        need each respondent's answers), respondents coded as here."""
        m = max(self.n_items, n_items or 0, 1)
        code, pair, y, eps = self.rows.head(self.n_rows)
        i, j = pair_ends(pair)
        return Clusters(
            m,
            i,
            j,
            debias(y, eps),
            privacy_noise_variance(eps) * np.ones(i.size),
            code.astype(np.int64),
            self.n_clusters,
        )

    def as_rows(self, n_items: int) -> Clusters:
        """:meth:`clusters` (the interface of :class:`~app.stats.inference.ClusterSource`)."""
        return self.clusters(n_items)

    def _check_matches(self, data) -> None:
        """Refuse a fit whose data are not these answers (counts and Σz per pair)."""
        st = self.stats
        same = (
            st.n_pairs == data.i.size
            and np.array_equal(st.i, data.i)
            and np.array_equal(st.j, data.j)
            and np.array_equal(st.n, np.rint(data.n))
        )
        scale = 1.0 + float(np.abs(data.s).max(initial=0.0))
        if not (same and np.allclose(st.sum_z, data.s, rtol=0.0, atol=1e-6 * scale)):
            raise ValueError("the clusters are not the comparisons the fit used")

    def randomization_p_value(self) -> float:
        """:func:`~app.stats.mechanisms.randomization_p_value` of the answers at their own ε."""
        st = self.stats
        if st.n_pairs == 0:
            return 1.0
        return randomization_p_value(st.n, st.sum_y, self.truthful)

    @property
    def nbytes(self) -> int:
        """Bytes of the sums (not the shared rows: :attr:`rows_nbytes`)."""
        st = self.stats
        pairs = (st.i, st.j, st.n, st.sum_y, st.sum_z, st.sum_z2, st.sum_v, self.truthful)
        arrays = (self.sizes, self.spent, self.nn, self.q, self.w)
        return sum(a.nbytes for a in (*pairs, *arrays) if a is not None)

    @property
    def rows_nbytes(self) -> int:
        return self.rows.nbytes


def _w_block(n_resp: int, m: int, r: NDArray, pair: NDArray, z: NDArray) -> NDArray[np.float64]:
    """w_r = Σ z_e d_e for each respondent r in 0 … n_resp − 1 of a block, (n_resp, m)."""
    a, b = pair_ends(pair)
    w = np.bincount(r * m + a, z, n_resp * m) - np.bincount(r * m + b, z, n_resp * m)
    return np.asarray(w, dtype=np.float64).reshape(n_resp, m)


def _gram_add(
    nn: NDArray, left: scipy.sparse.csr_matrix, right: scipy.sparse.csr_matrix, mirrored: bool = False
) -> None:
    """nn += leftᵀ right, and its transpose too when ``mirrored`` (0/1 matrices over
    respondents × pairs): dense BLAS when the rows are dense enough, otherwise a sparse
    product added at its entries."""
    rows, pairs = left.shape
    if left.nnz == 0 or right.nnz == 0:
        return
    if min(left.nnz, right.nnz) > rows * pairs / 16:
        prod = left.toarray().T @ right.toarray()
        nn += prod + prod.T if mirrored else prod
        return
    coo = (left.T @ right).tocoo()
    coo.sum_duplicates()
    nn[coo.row, coo.col] += coo.data
    if mirrored:
        nn[coo.col, coo.row] += coo.data


def _update(nn, q, w, m: int, affected: NDArray, old: tuple, new: tuple) -> None:
    """Add the new answers of the ``affected`` respondents (sorted codes) to the sums
    in place, given their earlier answers ``old`` (code, pair, z) (docs/uncertainty.md §3)."""
    p = nn.shape[0]
    block = max(1, _BLOCK_CELLS // max(p, m * m // 8, 1))
    old_code, old_pair, old_z = old
    new_code, new_pair, new_z = new
    old_at = np.searchsorted(affected, old_code)
    new_at = np.searchsorted(affected, new_code)
    old_order = np.argsort(old_at, kind="stable")
    new_order = np.argsort(new_at, kind="stable")
    old_at, old_pair, old_z = old_at[old_order], old_pair[old_order], old_z[old_order]
    new_at, new_pair, new_z = new_at[new_order], new_pair[new_order], new_z[new_order]
    for start in range(0, affected.size, block):
        stop = min(start + block, affected.size)
        size = stop - start
        lo, hi = np.searchsorted(old_at, [start, stop])
        r_old, e_old, z_old = old_at[lo:hi] - start, old_pair[lo:hi], old_z[lo:hi]
        lo, hi = np.searchsorted(new_at, [start, stop])
        r_new, e_new, z_new = new_at[lo:hi] - start, new_pair[lo:hi], new_z[lo:hi]
        n_old = scipy.sparse.csr_matrix((np.ones(r_old.size), (r_old, e_old)), shape=(size, p))
        n_new = scipy.sparse.csr_matrix((np.ones(r_new.size), (r_new, e_new)), shape=(size, p))
        # NN: (Old + New)ᵀ(Old + New) − OldᵀOld = NewᵀOld + OldᵀNew + NewᵀNew.
        _gram_add(nn, n_new, n_old, mirrored=True)
        _gram_add(nn, n_new, n_new)
        w_old = _w_block(size, m, r_old, e_old, z_old)
        w_all = w_old + _w_block(size, m, r_new, e_new, z_new)
        w += w_all.T @ w_all - w_old.T @ w_old
        q += n_new.T @ w_all + n_old.T @ (w_all - w_old)
