"""Full rankings: permutations, the Mallows mechanism of ε-ranking DP, and rank aggregation.

Xu, Sun & Cheng, *Ranking Differential Privacy* (2023; docs/mechanisms.md §3) for the
mechanism; Sima, Rana & Milenkovic (docs/federated.md §2–4) for Borda and Lehmer-code
aggregation; Kemeny for the maximum-likelihood consensus. An **ordering** lists items
best → worst, a **position vector** gives each item's 0-based position (docs/README.md
§2); functions take one ranking as a 1-d array or a batch as a 2-d array, one per row.
``rng=None`` draws from the OS CSPRNG (:mod:`app.stats.entropy`); seeded generators are
for simulations and tests. Tie-breaking in the aggregators is not privacy-relevant and
takes any generator (the service seeds it from the data version: reproducible consensus).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import entropy
from .mechanisms import RandomSource, uniform_draws

#: 2⁻⁵³: one step of a 53-bit uniform.
_TWO_POW_MINUS_53 = 2.0**-53
#: Largest b·t for which a Mallows stage is drawn through expm1(bt) (it overflows at 709.78).
_LOG1P_FORM_MAX = 700.0

__all__ = [
    "KEMENY_EXACT_MAX_ITEMS",
    "KemenyResult",
    "RankingStats",
    "adjacent_flip_probability",
    "borda_aggregate",
    "borda_scores",
    "complete_ranking",
    "expected_concordant_pairs",
    "insertion_decode",
    "kemeny_aggregate",
    "kemeny_consensus",
    "kemeny_objective",
    "kendall_distance",
    "laplace_expected_concordant_pairs",
    "laplace_rank_privatize",
    "lehmer_aggregate",
    "lehmer_code",
    "lehmer_decode",
    "mallows_dispersion",
    "mallows_log_normalizer",
    "mallows_log_pmf",
    "mallows_privatize",
    "mallows_sample",
    "orders_from_positions",
    "pairwise_counts",
    "positions_from_orders",
    "random_permutation",
    "ranking_stats",
    "stage_moments",
    "stage_pmf",
    "validate_orders",
]

#: Largest m for which :func:`kemeny_consensus` runs the exact subset dynamic
#: programme by default (2^16 states × 16 items: ~5 MB, well under a second).
KEMENY_EXACT_MAX_ITEMS = 16
#: Largest m the exact programme accepts at all (2^20 × 20 int32 = 80 MB).
_KEMENY_EXACT_HARD_MAX = 20


# -- permutations ----------------------------------------------------------------------


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


# -- the Mallows mechanism -------------------------------------------------------------


def mallows_dispersion(n_items: int, epsilon: ArrayLike) -> NDArray[np.float64]:
    """b = ε/(m − 1): the weight per concordant pair that gives ε-ranking DP.

    Parameters
    ----------
    n_items : int
        m.
    epsilon : float or array_like
        ε > 0 (``inf`` for no privacy).

    Returns
    -------
    numpy.ndarray of float64
        b.

    Raises
    ------
    ValueError
        If ε is not positive.

    Notes
    -----
    Lemma 1 with the normalised T (docs/mechanisms.md §3.2, "Printed normalization").

    Examples
    --------
    >>> from app.stats.rankings import mallows_dispersion
    >>> float(mallows_dispersion(5, 2.0))
    0.5
    """
    eps = np.asarray(epsilon, dtype=np.float64)
    if np.any(np.isnan(eps)) or np.any(eps <= 0):
        raise ValueError("epsilon must be > 0 (inf for no privacy)")
    if n_items < 2:
        return np.full_like(eps, np.inf)
    return eps / (n_items - 1)


def stage_pmf(t: int, b: float) -> NDArray[np.float64]:
    """P(V^(t) = k), k = 0..t-1: the truncated geometric q^k (q−1)/(q^t−1), q = e^b.

    Parameters
    ----------
    t : int
        The stage, 2..m.
    b : float
        The weight per concordant pair; ``inf`` puts all mass on t − 1.

    Returns
    -------
    numpy.ndarray of float64 (t,)
        The probabilities.

    Notes
    -----
    Theorem 1(3) of *Ranking Differential Privacy*; docs/mechanisms.md §3.2.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.rankings import stage_pmf
    >>> np.round(stage_pmf(3, np.log(2)), 4).tolist()  # 1/7, 2/7, 4/7
    [0.1429, 0.2857, 0.5714]
    """
    k = np.arange(t, dtype=np.float64)
    if math.isinf(b):
        return (k == t - 1).astype(np.float64)
    if b == 0:
        return np.full(t, 1.0 / t)
    # e^{-b(t-1-k)} normalised; computed from the top to avoid overflow.
    w = np.exp(-b * (t - 1 - k))
    return w / w.sum()


def stage_moments(t: int, n_items: int, epsilon: float) -> tuple[float, float]:
    """Theorem 1(3): E V^(t) = t q^t/(q^t−1) − q/(q−1) and Var V^(t), q = e^{ε/(m−1)}.

    Parameters
    ----------
    t : int
        The stage, 2..m.
    n_items : int
        m.
    epsilon : float
        ε.

    Returns
    -------
    tuple of float
        (E V^(t), Var V^(t)).
    """
    b = float(mallows_dispersion(n_items, epsilon))
    if math.isinf(b):
        return float(t - 1), 0.0
    if b * t < 1e-5:  # second-order series: the closed forms cancel catastrophically
        return (t - 1) / 2 + b * (t * t - 1) / 12, (t * t - 1) / 12
    # In e^{-b} so that nothing overflows: 1 − q^{-t} = −expm1(−tb).
    d_t, d_1 = -math.expm1(-t * b), -math.expm1(-b)
    mean = t / d_t - 1 / d_1
    # Var = d²/db² log Σ_k e^{bk} = q/(q−1)² − t² q^t/(q^t−1)².
    var = math.exp(-b) / d_1**2 - t * t * math.exp(-t * b) / d_t**2
    return mean, var


def mallows_log_normalizer(n_items: int, b: float) -> float:
    """log Z(b), Z(b) = Σ_σ e^{−b d_K(σ₀, σ)} = Π_{t=1}^m (1 − e^{−tb})/(1 − e^{−b}).

    Parameters
    ----------
    n_items : int
        m.
    b : float
        The weight per discordant pair.

    Returns
    -------
    float
        log Z(b), independent of σ₀.

    Notes
    -----
    docs/mechanisms.md §3.2; docs/federated.md §2, eq. (1) of the federated paper with
    φ = e^{−b}.
    """
    if math.isinf(b):
        return 0.0
    t = np.arange(1, n_items + 1, dtype=np.float64)
    if b == 0:
        return float(np.sum(np.log(t)))
    return float(np.sum(np.log(-np.expm1(-t * b)) - math.log(-math.expm1(-b))))


def mallows_log_pmf(sample: ArrayLike, center: ArrayLike, epsilon: float) -> NDArray[np.float64] | float:
    """log P(𝒜_ε(center) = sample) = −b d_K(center, sample) − log Z(b), b = ε/(m−1).

    Parameters
    ----------
    sample : array_like of int
        Output ordering(s).
    center : array_like of int
        The input ordering.
    epsilon : float
        ε.

    Returns
    -------
    float or numpy.ndarray
        The log-probability of each sample.
    """
    s = np.asarray(sample)
    m = s.shape[-1]
    b = float(mallows_dispersion(m, epsilon))
    d = np.asarray(kendall_distance(center, sample), dtype=np.float64)
    out = np.where(d == 0, 0.0, -np.inf) if math.isinf(b) else -b * d - mallows_log_normalizer(m, b)
    return float(out) if out.ndim == 0 else out


def _survival_uniform(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """V = U₁ + U₂·2⁻⁵³ on [0, 1] from two 53-bit uniforms (last axis): with U₁ = K·2⁻⁵³,
    V = fl(K + U₂)·2⁻⁵³, nondecreasing in (K, U₂) taken in lexicographic order. Near 0
    its resolution is 2⁻¹⁰⁶ (K = 0) or one unit in the last place of V (K ≥ 1), so
    P(V ≤ s) = s to a relative 2⁻⁵² for every s ≥ 2⁻⁵³: a stage outcome of probability
    e^(−30) ≈ 10⁻¹³ gets its exact share, where one uniform would give it a whole number of
    2⁻⁵³ steps (docs/mechanisms.md §3.2, "Sampling")."""
    return u[..., 0] + u[..., 1] * _TWO_POW_MINUS_53


def _sample_stages(b: NDArray[np.float64], m: int, rng: RandomSource | None) -> NDArray[np.int64]:
    """V^(t), t = 2..m, for each row's dispersion b: the truncated geometric
    P(V^(t) = k) ∝ e^(bk), k = 0..t−1 (Algorithm 1 of *Ranking Differential Privacy* as
    the repeated-insertion model; docs/mechanisms.md §3.2, "Sampling"), two uniforms per
    stage.

    With J = t − 1 − V^(t) (discordant pairs) and V uniform on [0, 1],
    J ≥ j ⇔ V ≤ S_j = P(J ≥ j) = (e^(−bj) − e^(−bt))/(1 − e^(−bt)), so that the rarest
    outcome, J = t − 1, is the event V ≤ S_(t−1) ≈ e^(−b(t−1)) next to V = 0, where
    :func:`_survival_uniform` has full relative precision. Solved for V^(t):
    V^(t) ≥ k ⇔ V > S_(t−k) = expm1(bk)/expm1(bt) ⇔ log1p(V·expm1(bt)) > bk, i.e.

      V^(t) = ⌈log1p(V·expm1(bt))/b⌉ − 1,

    each operation exact to a relative rounding, so every boundary S_j is hit to a
    relative error of order (1 + bt)·2⁻⁵³ for every b (no cancellation for small b,
    none near V = 0 for large b). Where expm1(bt) would overflow (bt > 700, beyond the
    service's ε) the same function is V^(t) = t − 1 − ⌊−log(e^(−bt) + V·(1 − e^(−bt)))/b⌋.
    Limits: b = 0 gives ⌈V·t⌉ − 1 (uniform), b = ∞ gives t − 1 (the input order); V = 0
    (probability 2⁻¹⁰⁶) falls in the rarest outcome, V = 1 in the likeliest.
    """
    n = b.size
    t = np.arange(2, m + 1, dtype=np.float64)[None, :]
    v = _survival_uniform(uniform_draws(rng, (n, m - 1, 2)))
    bb = b[:, None]
    bt = bb * t
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = np.ceil(np.log1p(v * np.expm1(np.minimum(bt, _LOG1P_FORM_MAX))) / bb) - 1
        far = (t - 1) - np.floor(-np.log(np.exp(-bt) - v * np.expm1(-bt)) / bb)
    k = np.where(bt > _LOG1P_FORM_MAX, far, k)
    k = np.where(bb == 0, np.ceil(v * t) - 1, k)  # b = 0: uniform
    k = np.where(np.isinf(bb), t - 1, k)  # ε = ∞: the input order
    return np.clip(k, 0, t - 1).astype(np.int64)


def mallows_privatize(order: ArrayLike, epsilon: ArrayLike, rng: RandomSource | None = None) -> NDArray:
    """ε-ranking-DP synthetic ranking: Algorithm 1 of *Ranking Differential Privacy*.

    Parameters
    ----------
    order : array_like
        One ordering (1-d) or one per row, best → worst; its entries may be any item
        labels.
    epsilon : float or array_like
        A scalar or one value per row (``inf``: no privacy).
    rng : RandomSource, optional
        For reproducible simulations; ``None`` draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray
        An ordering (best → worst) per input, distributed as the Mallows model centred at
        ``order`` with weight b = ε/(m − 1) per concordant pair,
        P(σ̃) ∝ exp(−b·d_K(order, σ̃)) (Lemma 2).

    Raises
    ------
    ValueError
        If ``order`` is not 1-d or 2-d, or ``epsilon`` has neither one value nor one per row.

    Notes
    -----
    Implemented as the repeated-insertion model the algorithm reduces to
    (docs/mechanisms.md §3.2: τ(k, χ) = k, so V^(t) is a truncated geometric, independent
    across stages): O(m²).

    Guarantee: for orderings that differ by moving one item (the paper's neighbours,
    Definition 2; docs/mechanisms.md §3.1) the output probabilities differ by at most e^ε
    (Lemma 1; exact, attained). Against arbitrary changes of the ranking it is εm/2-LDP
    (docs/mechanisms.md §3.3) — not ε-LDP. Privatizing the same ranking twice composes.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.rankings import mallows_privatize
    >>> out = mallows_privatize([0, 1, 2, 3], 2.0, np.random.default_rng(0))  # the service: OS CSPRNG
    >>> sorted(out.tolist())  # a permutation of the same items
    [0, 1, 2, 3]
    """
    arr = np.asarray(order)
    if arr.ndim not in (1, 2):
        raise ValueError("give one ordering (1-d) or one ordering per row (2-d)")
    single = arr.ndim == 1
    arr = np.atleast_2d(arr)
    n, m = arr.shape
    eps = np.asarray(epsilon, dtype=np.float64)
    if eps.ndim > 1 or (eps.ndim == 1 and eps.size != n):
        raise ValueError("epsilon must be a scalar or one value per ranking")
    b = np.broadcast_to(mallows_dispersion(m, eps), (n,)).astype(np.float64)
    if m < 2:
        return arr[0].copy() if single else arr.copy()
    v = _sample_stages(b, m, rng)
    out = insertion_decode(arr, v)
    return out[0] if single else out


def mallows_sample(
    center: ArrayLike, phi: float, size: int, rng: RandomSource | None = None
) -> NDArray[np.int64]:
    """``size`` orderings from the Mallows model P(σ) ∝ φ^{d_K(center, σ)}, φ ∈ (0, 1].

    Parameters
    ----------
    center : array_like of int
        The central ordering.
    phi : float
        Dispersion φ ∈ (0, 1] (1: uniform).
    size : int
        Number of orderings.
    rng : RandomSource, optional
        For reproducible simulations; ``None`` draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray of int64 (size, m)
        The orderings.

    Raises
    ------
    ValueError
        If φ is outside (0, 1] or ``center`` is not one ordering.

    Notes
    -----
    docs/federated.md §2, federated paper eq. (1); the same sampler as
    :func:`mallows_privatize` with b = −log φ.
    """
    if not 0 < phi <= 1:
        raise ValueError("phi must be in (0, 1]")
    c = np.asarray(center)
    if c.ndim != 1:
        raise ValueError("center must be one ordering")
    b = np.full(size, -math.log(phi) if phi < 1 else 0.0)
    if c.size < 2:
        return np.broadcast_to(c, (size, c.size)).copy()
    v = _sample_stages(b, c.size, rng)
    return insertion_decode(np.broadcast_to(c, (size, c.size)), v)


def adjacent_flip_probability(n_items: int, epsilon: float) -> float:
    """P(two items adjacent in the input swap in 𝒜_ε) = 1/(1 + e^{ε/(m−1)}).

    Parameters
    ----------
    n_items : int
        m.
    epsilon : float
        ε.

    Returns
    -------
    float
        The probability (docs/mechanisms.md §3.2, §3.5).

    Examples
    --------
    >>> from app.stats.rankings import adjacent_flip_probability
    >>> round(adjacent_flip_probability(3, 2.0), 4)  # 1/(1 + e)
    0.2689
    """
    b = float(mallows_dispersion(n_items, epsilon))
    return 0.0 if math.isinf(b) else 1.0 / (1.0 + math.exp(b))


def expected_concordant_pairs(n_items: int, epsilon: float) -> float:
    """E C(φ, 𝒜_ε(φ)) = Σ_{t=2}^m E V^(t) (Theorem 1(3); docs/mechanisms.md §3.2).

    Parameters
    ----------
    n_items : int
        m.
    epsilon : float
        ε.

    Returns
    -------
    float
        The expected concordant pairs of input and output, C(m, 2) as ε → ∞.
    """
    return float(sum(stage_moments(t, n_items, epsilon)[0] for t in range(2, n_items + 1)))


def laplace_rank_privatize(order: ArrayLike, epsilon: float, rng: RandomSource | None = None) -> NDArray:
    """The paper's competitor (Lemma 3): Laplace(2(m−1)/ε) noise on each item's rank, re-sorted.

    Parameters
    ----------
    order : array_like
        One ordering (1-d) or one per row.
    epsilon : float
        ε.
    rng : RandomSource, optional
        For reproducible simulations; ``None`` draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray
        The re-sorted ordering(s) (post-processing of the noisy ranks).

    Notes
    -----
    A research baseline only: continuous noise from a floating-point inverse CDF is not
    hardened against floating-point attacks.
    """
    arr = np.asarray(order)
    single = arr.ndim == 1
    arr = np.atleast_2d(arr)
    n, m = arr.shape
    scale = 2.0 * (m - 1) / float(epsilon)
    u = (uniform_draws(rng, (n, m)) - 0.5) + 2.0**-54
    noisy = np.arange(m)[None, :] - np.sign(u) * np.log1p(-2.0 * np.abs(u)) * scale
    out = np.take_along_axis(arr, np.argsort(noisy, axis=1, kind="stable"), axis=1)
    return out[0] if single else out


def laplace_expected_concordant_pairs(n_items: int, epsilon: float) -> float:
    """E C under :func:`laplace_rank_privatize`.

    Parameters
    ----------
    n_items : int
        m.
    epsilon : float
        ε.

    Returns
    -------
    float
        Σ_d (m−d)[1 − (½ + dε/(8(m−1)))e^{−dε/(2(m−1))}] (Lemma 4's proof;
        docs/mechanisms.md §3.4, table).
    """
    m = n_items
    d = np.arange(1, m, dtype=np.float64)
    x = d * epsilon / (2.0 * (m - 1))
    return float(np.sum((m - d) * (1.0 - (0.5 + x / 4.0) * np.exp(-x))))


# -- sufficient statistics of a set of rankings --------------------------------------------


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


# -- aggregation -----------------------------------------------------------------------


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
