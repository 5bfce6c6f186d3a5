"""Pairs as numbers: the m(m−1)/2 pairs of m items numbered 0 … M−1, never materialized.

Pair (i, j), i < j, is numbered row by row over the upper triangle (:func:`_keys`,
:func:`_pairs`); a uniform draw among the numbers outside a sorted exclusion list maps
ranks to numbers by binary search (:func:`_skip`, :func:`_draw`): no step costs O(M)
(the work per request is in :func:`app.respondents.assignment.next_pairs`).
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray


def _ints(rows, width: int) -> NDArray[np.int64]:
    """Integer result rows as an (n, width) array (numpy probes a SQLAlchemy ``Row`` for
    array attributes one by one: ``np.array(rows)`` is far slower)."""
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows) * width)
    return flat.reshape(-1, width)


def _row_starts(m: int) -> NDArray[np.int64]:
    """Number of the first pair (i, i+1) of each row i."""
    r = np.arange(m, dtype=np.int64)
    return r * m - r * (r + 1) // 2


def _keys(i: NDArray[np.int64], j: NDArray[np.int64], starts: NDArray[np.int64]) -> NDArray[np.int64]:
    """Pair numbers of i < j."""
    return starts[i] + (j - i - 1)


def _pairs(keys: NDArray[np.int64], starts: NDArray[np.int64]) -> tuple[NDArray, NDArray]:
    """(i, j) of pair numbers."""
    i = np.searchsorted(starts, keys, side="right") - 1
    return i, keys - starts[i] + i + 1


def _free_below(excluded: NDArray[np.int64]) -> NDArray[np.int64]:
    """For sorted distinct ``excluded`` ≥ 0: how many non-excluded integers lie below each."""
    return excluded - np.arange(excluded.size, dtype=np.int64)


def _skip(
    ranks: NDArray[np.int64], excluded: NDArray[np.int64], free_below: NDArray[np.int64] | None = None
) -> NDArray[np.int64]:
    """The ``ranks``-th integers (0-based) that are not in ``excluded`` (sorted, distinct,
    ≥ 0): the k-th excluded value has ``excluded[k] − k`` free values below it
    (``free_below``, when precomputed)."""
    if excluded.size == 0:
        return ranks
    if free_below is None:
        free_below = _free_below(excluded)
    return ranks + np.searchsorted(free_below, ranks, side="right")


def _draw(n: int, excluded: NDArray[np.int64], want: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Up to ``want`` distinct integers drawn uniformly from [0, n) minus ``excluded``
    (sorted, distinct, inside [0, n)), in random order."""
    free = n - excluded.size
    take = min(want, free)
    if take <= 0:
        return np.empty(0, dtype=np.int64)
    ranks = rng.choice(free, size=take, replace=False).astype(np.int64)
    return _skip(ranks, excluded)


def _member(sorted_keys: NDArray[np.int64], keys: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which ``keys`` are in ``sorted_keys``."""
    if sorted_keys.size == 0:
        return np.zeros(keys.size, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return sorted_keys[at] == keys
