"""One confidence sequence per pair on P(i beats j), the state of the pairwise certificate.

:class:`PairSequences` keeps, per pair {a < b} in ``np.triu_indices(m, 1)`` order, the
weighted running sums of the debiased answers on it, whichever pair the data suggested
asking, and turns them into bounds that hold for all pairs and at all times together
(docs/uncertainty.md §9, "A pairwise certificate"). :mod:`app.stats.pairwise_goal` builds
the certified relation and the goal's status on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .adaptive import RHO_ANSWERS, mixture_radius
from .mechanisms import debias, validate_epsilon

__all__ = ["MAX_ITEMS", "PairSequences", "pair_index"]

#: Most items the pairwise certificate accepts: its state is C(m, 2) sums, and each
#: check fits BTL and builds an m × m relation in O(m²) (closed in O(m³) with
#: ``transitive``: a few hundredths of a second at m = 300).
MAX_ITEMS = 300


@cache
def _triu(m: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``np.triu_indices(m, 1)``, computed once per m (read-only)."""
    a, b = np.triu_indices(m, 1)
    a.flags.writeable = b.flags.writeable = False
    return a, b


def pair_index(i: ArrayLike, j: ArrayLike, m: int) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """The index of each pair {i, j} in ``np.triu_indices(m, 1)`` order, and whether i < j.

    Parameters
    ----------
    i, j : array_like of int
        Two different items in range per pair.
    m : int
        Items.

    Returns
    -------
    tuple of numpy.ndarray
        (index, forward): an answer z on (i, j) counts as z for the pair when i < j, as
        1 − z when not.

    Raises
    ------
    ValueError
        If a pair is not two different items in range.

    Examples
    --------
    >>> idx, forward = pair_index([0, 2, 3], [1, 0, 2], 4)
    >>> idx.tolist(), forward.tolist()
    ([0, 1, 5], [True, False, False])
    """
    i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    if np.any(i == j) or np.any((i < 0) | (j < 0) | (i >= m) | (j >= m)):
        raise ValueError("pairs must be two different items in range")
    a, b = np.minimum(i, j), np.maximum(i, j)
    return a * m - a * (a + 1) // 2 + (b - a - 1), i < j


@dataclass
class PairSequences:
    """Running sums of the counted answers, one confidence sequence per pair {a < b}
    on P(a beats b), indexed as ``np.triu_indices(m, 1)``."""

    n_items: int
    weighted: NDArray[np.float64] = field(init=False)  # Σ λ_t z_t (z: a won)
    weight: NDArray[np.float64] = field(init=False)  # Σ λ_t
    answers: NDArray[np.int64] = field(init=False)  # counted answers

    def __post_init__(self) -> None:
        if not 2 <= self.n_items <= MAX_ITEMS:
            raise ValueError(f"the pairwise certificate takes 2 to {MAX_ITEMS} items")
        pairs = self.n_items * (self.n_items - 1) // 2
        self.weighted = np.zeros(pairs)
        self.weight = np.zeros(pairs)
        self.answers = np.zeros(pairs, dtype=np.int64)

    @property
    def n_pairs(self) -> int:
        return self.weight.size

    def add(self, i: ArrayLike, j: ArrayLike, z: ArrayLike, epsilon: ArrayLike) -> None:
        """Add counted debiased answers z (1: i won, as in docs/estimator.md §3) on pairs (i, j)."""
        z = np.asarray(z, dtype=np.float64)
        idx, forward = pair_index(i, j, self.n_items)
        eps = np.broadcast_to(validate_epsilon(epsilon), z.shape)
        low, high = debias(np.zeros(eps.shape, np.int8), eps), debias(np.ones(eps.shape, np.int8), eps)
        if np.any((z < low - 1e-9) | (z > high + 1e-9)):
            raise ValueError("z must be debiased answers: within [−1/(e^ε−1), e^ε/(e^ε−1)]")
        lam = 1.0 / (high - low) ** 2  # the range's width is coth(ε/2)
        value = np.where(forward, z, 1.0 - z)
        p = self.n_pairs
        self.weighted += np.bincount(idx, lam * value, p)
        self.weight += np.bincount(idx, lam, p)
        self.answers += np.bincount(idx, minlength=p)

    def intervals(
        self, level: float, rho: float = RHO_ANSWERS
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Estimates of P(a beats b) and bounds (lower, upper) for every pair a < b,
        holding for all pairs and at all times together with probability ≥ ``level``
        (α/C(m, 2) per pair). Pairs without counted answers get ½ and [0, 1]."""
        alpha = (1.0 - level) / self.n_pairs
        radius = mixture_radius(self.weight / 4.0, alpha, rho / 4.0)
        seen = self.weight > 0
        est = np.full(self.n_pairs, 0.5)
        half = np.full(self.n_pairs, np.inf)
        est[seen] = self.weighted[seen] / self.weight[seen]
        half[seen] = radius[seen] / self.weight[seen]
        return est, np.clip(est - half, 0.0, 1.0), np.clip(est + half, 0.0, 1.0)
