"""Permutations: orderings and position vectors, Kendall distance, Lehmer codes and
insertion vectors, uniform draws (docs/federated.md §2).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .. import entropy


def _as_batch(orders: ArrayLike) -> tuple[NDArray[np.int64], bool]:
    arr = np.asarray(orders)
    if arr.ndim not in (1, 2):
        raise ValueError("give one ranking (1-d) or one ranking per row (2-d)")
    single = arr.ndim == 1
    arr = np.atleast_2d(arr)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError("rankings must hold integer item indices")
    return arr.astype(np.int64, copy=False), single


def validate_orders(orders: ArrayLike, n_items: int | None = None) -> NDArray[np.int64]:
    """Return ``orders`` as a 2-d int array after checking each row is a permutation of ``0..m-1``.

    Parameters
    ----------
    orders : array_like of int
        One ordering (1-d) or one per row (2-d).
    n_items : int, optional
        m (default: the rows' length).

    Returns
    -------
    numpy.ndarray of int64 (R, m)
        The orderings, one per row.

    Raises
    ------
    ValueError
        If a row is not a permutation of the items.

    Examples
    --------
    >>> from app.stats.rankings import validate_orders
    >>> validate_orders([2, 0, 1]).tolist()
    [[2, 0, 1]]
    """
    arr, _ = _as_batch(orders)
    m = arr.shape[1] if n_items is None else n_items
    if arr.shape[1] != m:
        raise ValueError(f"each ranking must list all {m} items")
    if arr.size and not np.array_equal(np.sort(arr, axis=1), np.broadcast_to(np.arange(m), arr.shape)):
        raise ValueError(f"each ranking must be a permutation of the items 0..{m - 1}")
    return arr


def positions_from_orders(orders: ArrayLike) -> NDArray[np.int64]:
    """Position vector(s): ``pos[item]`` = 0-based place of ``item`` in the ordering.

    Parameters
    ----------
    orders : array_like of int
        One ordering (1-d) or one per row (2-d).

    Returns
    -------
    numpy.ndarray of int64
        The inverse permutation(s), of the shape of ``orders``.

    Notes
    -----
    An ordering is the papers' φ⁻¹ / σ⁻¹; a position vector is the papers' rank vector
    φ(𝓘ᵢ) − 1. The two coincide only for involutions, so every test uses non-involutive
    examples (docs/README.md §2).

    Examples
    --------
    >>> from app.stats.rankings import positions_from_orders
    >>> positions_from_orders([2, 0, 1]).tolist()  # item 2 first, item 0 second, item 1 third
    [1, 2, 0]
    """
    arr, single = _as_batch(orders)
    pos = np.empty_like(arr)
    np.put_along_axis(pos, arr, np.broadcast_to(np.arange(arr.shape[1]), arr.shape), axis=1)
    return pos[0] if single else pos


def orders_from_positions(positions: ArrayLike) -> NDArray[np.int64]:
    """Ordering(s) from position vector(s) (the inverse permutation).

    Parameters
    ----------
    positions : array_like of int
        One position vector (1-d) or one per row (2-d).

    Returns
    -------
    numpy.ndarray of int64
        The ordering(s), best first.

    Examples
    --------
    >>> from app.stats.rankings import orders_from_positions
    >>> orders_from_positions([1, 2, 0]).tolist()
    [2, 0, 1]
    """
    return positions_from_orders(positions)  # inversion is an involution on S_m


def _greater_before(seq: NDArray[np.int64]) -> NDArray[np.int64]:
    """For each row and index k: #{t < k : seq[t] > seq[k]} (rows are permutations of 0..m-1)."""
    n, m = seq.shape
    if m <= 64:
        out = np.zeros((n, m), dtype=np.int64)
        step = max(1, 4_000_000 // max(1, m * m))
        earlier = np.tri(m, k=-1, dtype=bool).T  # earlier[t, k] = t < k
        for start in range(0, n, step):
            s = seq[start : start + step]
            out[start : start + step] = ((s[:, :, None] > s[:, None, :]) & earlier).sum(axis=1)
        return out
    # Fenwick tree per row, vectorized across rows: O(m log m) array operations.
    tree = np.zeros((n, m + 1), dtype=np.int64)
    rows = np.arange(n)
    out = np.empty((n, m), dtype=np.int64)
    for k in range(m):
        v = seq[:, k] + 1
        idx, below = v.copy(), np.zeros(n, dtype=np.int64)
        while True:
            live = idx > 0
            if not live.any():
                break
            below[live] += tree[rows[live], idx[live]]
            idx[live] -= idx[live] & -idx[live]
        out[:, k] = k - below
        idx = v.copy()
        while True:
            live = idx <= m
            if not live.any():
                break
            tree[rows[live], idx[live]] += 1
            idx[live] += idx[live] & -idx[live]
    return out


def kendall_distance(a: ArrayLike, b: ArrayLike) -> NDArray[np.int64] | int:
    """Kendall τ distance: the number of item pairs two orderings put in opposite order.

    Parameters
    ----------
    a, b : array_like of int
        Orderings of the same items (1-d, or 2-d with one per row; they broadcast).

    Returns
    -------
    int or numpy.ndarray of int64
        ``d_K = C(m,2) − C`` with C the concordant pairs of docs/mechanisms.md §3.2.

    Raises
    ------
    ValueError
        If the rankings have different lengths.

    Notes
    -----
    The federated paper's printed formula (its §3; docs/federated.md §2) is not this and
    is not used. O(m log m) per pair of rankings.

    Examples
    --------
    >>> from app.stats.rankings import kendall_distance
    >>> int(kendall_distance([0, 1, 2, 3], [1, 0, 3, 2]))
    2
    """
    aa, sa = _as_batch(a)
    bb, sb = _as_batch(b)
    if aa.shape[1] != bb.shape[1]:
        raise ValueError("rankings must have the same length")
    aa, bb = np.broadcast_arrays(aa, bb)
    pos_b = positions_from_orders(bb)
    relabelled = np.take_along_axis(pos_b, aa, axis=1)  # b-positions of a's items, in a's order
    d = _greater_before(relabelled).sum(axis=1)
    return int(d[0]) if (sa and sb) else d


def lehmer_code(positions: ArrayLike) -> NDArray[np.int64]:
    """Lehmer code of position vector(s): ``L[i] = #{t < i : pos[t] > pos[i]}``.

    Parameters
    ----------
    positions : array_like of int
        One position vector (1-d) or one per row (2-d).

    Returns
    -------
    numpy.ndarray of int64
        The code(s): the number of items with a smaller label ranked *below* item i;
        ``L[i] ∈ {0..i}``, ``L[0] = 0``; the identity has code 0 and the reverse
        (0, 1, …, m−1). Σ L = K(identity, σ).

    Notes
    -----
    docs/federated.md §2 (federated paper §3) with 0-based items.

    Examples
    --------
    >>> from app.stats.rankings import lehmer_code, lehmer_decode
    >>> code = lehmer_code([2, 0, 1])
    >>> code.tolist(), lehmer_decode(code).tolist()
    ([0, 1, 1], [2, 0, 1])
    """
    arr, single = _as_batch(positions)
    code = _greater_before(arr)
    return code[0] if single else code


def lehmer_decode(code: ArrayLike) -> NDArray[np.int64]:
    """Position vector(s) with the given Lehmer code (docs/federated.md §2, decoding).

    Parameters
    ----------
    code : array_like of int
        One Lehmer code (1-d) or one per row (2-d).

    Returns
    -------
    numpy.ndarray of int64
        The position vector(s).

    Raises
    ------
    ValueError
        Unless ``0 ≤ L[i] ≤ i`` for every item i.

    Notes
    -----
    Items are inserted in label order, item i at 0-based index ``i − L[i]`` of the
    ordering built so far, so that exactly ``L[i]`` earlier items end up below it.
    """
    arr, single = _as_batch(code)
    m = arr.shape[1]
    if arr.size and (np.any(arr < 0) or np.any(arr > np.arange(m))):
        raise ValueError("a Lehmer code needs 0 <= L[i] <= i for every item i")
    pos = _insert(np.arange(m) - arr)
    return pos[0] if single else pos


def _insert(index: NDArray[np.int64]) -> NDArray[np.int64]:
    """Final positions when element k (k = 0, 1, …) is inserted at 0-based index
    ``index[:, k]`` of a list holding elements 0..k-1 (index[:, k] ∈ 0..k)."""
    n, m = index.shape
    pos = np.empty((n, m), dtype=np.int64)
    for k in range(m):
        at = index[:, k : k + 1]
        head = pos[:, :k]
        head += head >= at
        pos[:, k] = at[:, 0]
    return pos


def insertion_decode(order: ArrayLike, v: ArrayLike) -> NDArray:
    """The repeated-insertion model's output (docs/mechanisms.md §3.2).

    Parameters
    ----------
    order : array_like
        The input ordering (1-d, or 2-d per row).
    v : array_like of int
        ``v[..., t-2]`` is V^(t) for t = 2..m: the t-th best item of the input is inserted
        after the first V^(t) items already placed (0-based index V^(t)), so V^(t) counts
        the concordant pairs it forms with them.

    Returns
    -------
    numpy.ndarray
        The output ordering(s). ``V^(t) = t − 1`` for all t reproduces the input.

    Raises
    ------
    ValueError
        If ``v`` does not give V^(t) for t = 2..m, or a V^(t) is outside 0..t−1.

    References
    ----------
    Xu, Sun & Cheng, *Ranking Differential Privacy*, §3.1, Algorithm 1, Lemma 2.

    Examples
    --------
    >>> from app.stats.rankings import insertion_decode
    >>> insertion_decode([0, 1, 2], [1, 2]).tolist(), insertion_decode([0, 1, 2], [0, 0]).tolist()
    ([0, 1, 2], [2, 1, 0])
    """
    arr = np.asarray(order)
    single = arr.ndim == 1
    arr = np.atleast_2d(arr)
    vv = np.atleast_2d(np.asarray(v, dtype=np.int64))
    n, m = arr.shape
    if vv.shape[1] != m - 1:
        raise ValueError("give V^(t) for t = 2..m")
    if np.any(vv < 0) or np.any(vv > np.arange(1, m)):
        raise ValueError("V^(t) must lie in 0..t-1")
    index = np.concatenate((np.zeros((vv.shape[0], 1), dtype=np.int64), vv), axis=1)
    pos = _insert(np.broadcast_to(index, (max(n, vv.shape[0]), m)).copy())
    arr = np.broadcast_to(arr, pos.shape)
    out = np.empty_like(arr)
    np.put_along_axis(out, pos, arr, axis=1)
    return out[0] if single and vv.shape[0] == 1 else out


def random_permutation(n: int, rng: np.random.Generator | None = None) -> NDArray[np.int64]:
    """A uniformly random permutation of 0..n-1.

    Parameters
    ----------
    n : int
        Length.
    rng : numpy.random.Generator, optional
        For reproducible simulations; ``None``: Fisher–Yates on
        :func:`app.stats.entropy.randbelow` (:func:`secrets.randbelow`: OS CSPRNG, exactly
        uniform).

    Returns
    -------
    numpy.ndarray of int64
        The permutation.
    """
    if rng is not None:
        return np.asarray(rng.permutation(n), dtype=np.int64)
    perm = list(range(n))
    for k in range(n - 1, 0, -1):
        r = entropy.randbelow(k + 1)
        perm[k], perm[r] = perm[r], perm[k]
    return np.asarray(perm, dtype=np.int64)


def complete_ranking(
    partial: ArrayLike, n_items: int, rng: np.random.Generator | None = None
) -> NDArray[np.int64]:
    """Complete a top-k list: the unranked items go below the ranked ones, in uniformly random order.

    Parameters
    ----------
    partial : array_like of int
        Distinct items, best → worst.
    n_items : int
        m.
    rng : numpy.random.Generator, optional
        For reproducible simulations; ``None`` draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray of int64
        A full ordering that starts with ``partial``.

    Raises
    ------
    ValueError
        If an item is out of range or ranked twice.

    Notes
    -----
    The federated paper's rule for incomplete ballots (its §5; docs/mechanisms.md §3.3,
    docs/federated.md §1). The randomness is part of the privatization: a respondent's
    unranked items are indistinguishable from a random tail.
    """
    head = np.asarray(partial, dtype=np.int64).ravel()
    if head.size and (head.min() < 0 or head.max() >= n_items):
        raise ValueError(f"items must be in 0..{n_items - 1}")
    if np.unique(head).size != head.size:
        raise ValueError("an item is ranked twice")
    rest = np.setdiff1d(np.arange(n_items), head)
    return np.concatenate((head, rest[random_permutation(rest.size, rng)]))
