"""Borda FRA and Lehmer FRA: what a site sends, and how the server decodes the sum (docs/federated.md §3–4).

Sima, Rana & Milenkovic (2024), Algorithm 2 (Borda: quantized mean positions, the
centroids in closed form, §3) and Algorithm 3 (Lehmer: the plurality of each Lehmer-code
coordinate, high bits summed and low bits one-hot, §4, with the corrections to the printed
paper in §4.3), with the centralized Lehmer mean the paper compares them with. The round
that carries the messages (the scheme both sides agree on, the masks) is
:mod:`app.stats.federated`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import entropy
from .rankings import (
    lehmer_code,
    lehmer_decode,
    orders_from_positions,
    positions_from_orders,
    validate_orders,
)

__all__ = [
    "borda_centroids",
    "borda_client_message",
    "borda_quantize",
    "borda_server_order",
    "competition_ranks",
    "lehmer_client_message",
    "lehmer_concentration",
    "lehmer_low_bits",
    "lehmer_mean_aggregate",
    "lehmer_server_order",
    "lehmer_tied_coordinates",
    "tied_groups",
]


# -- Borda FRA -------------------------------------------------------------------------


def borda_centroids(n_items: int, phi: float) -> NDArray[np.float64]:
    """E_j = E[σ(σ₀⁻¹(j))], j = 1..N: the expected position, under Mallows(σ₀, φ), of the item σ₀ puts at j.

    Parameters
    ----------
    n_items : int
        N.
    phi : float
        Mallows dispersion φ ∈ (0, 0.95] (cancellation beyond).

    Returns
    -------
    numpy.ndarray of float64 (N,)
        The centroids, independent of σ₀ (paper Lemma 2).

    Raises
    ------
    ValueError
        If φ is outside (0, 0.95].

    Notes
    -----
    Exact closed form (docs/federated.md §3.2; the paper's Remark 1 recursion, supplement
    eqs. (19)–(20), is wrong): E_j = j − Σ_{d<j} q(d) + Σ_{d ≤ N−j} q(d), with
    q(d) = dφ^d/(1−φ^d) − (d+1)φ^{d+1}/(1−φ^{d+1}) the probability that two items at
    centroid distance d appear inverted.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.fra import borda_centroids
    >>> np.round(borda_centroids(3, 0.5), 4).tolist()
    [1.5714, 2.0, 2.4286]
    """
    if not 0 < phi <= 0.95:
        raise ValueError("phi must be in (0, 0.95]")
    d = np.arange(1, n_items + 1, dtype=np.float64)
    g = d * phi**d / -np.expm1(d * math.log(phi))  # dφ^d/(1−φ^d)
    q = g[:-1] - g[1:] if n_items > 1 else np.zeros(0)  # q(1..N−1)
    cq = np.concatenate(([0.0], np.cumsum(q)))  # cq[k] = Σ_{d ≤ k} q(d)
    j = np.arange(1, n_items + 1)
    return np.asarray(j - cq[j - 1] + cq[n_items - j], dtype=np.float64)


def borda_quantize(mean_position: ArrayLike, centroids: ArrayLike) -> NDArray[np.int64]:
    """Q(a) = argmin_j |a − E_j| ∈ 1..N, an exact midpoint going to the larger j.

    Parameters
    ----------
    mean_position : array_like
        Mean 1-based positions a.
    centroids : array_like (N,)
        :func:`borda_centroids`.

    Returns
    -------
    numpy.ndarray of int64
        The quantized positions (docs/federated.md §3.3, from eq. (30) of the proof of
        Theorem 2).
    """
    e = np.asarray(centroids, dtype=np.float64)
    thresholds = (e[:-1] + e[1:]) / 2.0  # t_2..t_N
    return np.searchsorted(thresholds, np.asarray(mean_position, dtype=np.float64), side="right") + 1


def borda_client_message(orders: ArrayLike, phi: float) -> NDArray[np.int64]:
    """Algorithm 2, client: σ̂_ℓ(i) = Q(A_ℓ(i)), A_ℓ(i) = mean 1-based position of item i.

    Parameters
    ----------
    orders : array_like of int
        The site's rankings, one ordering per row.
    phi : float
        Mallows dispersion φ (public).

    Returns
    -------
    numpy.ndarray of int64 (N,)
        The message: not a permutation in general (repeats are intended).

    Raises
    ------
    ValueError
        With no rankings, or invalid ones.

    Examples
    --------
    >>> from app.stats.fra import borda_client_message
    >>> borda_client_message([[0, 1, 2], [1, 0, 2]], 0.5).tolist()
    [1, 1, 3]
    """
    arr = validate_orders(orders)
    if arr.shape[0] == 0:
        raise ValueError("a site needs at least one ranking")
    mean_pos = positions_from_orders(arr).mean(axis=0) + 1.0
    return borda_quantize(mean_pos, borda_centroids(arr.shape[1], phi))


def _generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return entropy.generator() if rng is None else np.random.default_rng(rng)


def borda_server_order(total: ArrayLike, rng: np.random.Generator | int | None = None) -> NDArray[np.int64]:
    """Algorithm 2, server: items by Σ_ℓ σ̂_ℓ(i) ascending (every site weighs 1/L).

    Parameters
    ----------
    total : array_like of int
        The summed messages.
    rng : numpy.random.Generator or int, optional
        Breaks exact ties uniformly at random.

    Returns
    -------
    numpy.ndarray of int64
        The ordering (docs/federated.md §3.1, §3.3).
    """
    s = np.asarray(total, dtype=np.int64)
    gen = _generator(rng)
    return np.lexsort((gen.random(s.size), s)).astype(np.int64)


def competition_ranks(total: ArrayLike) -> NDArray[np.int64]:
    """Rank of each item by its aggregate, ascending, with ties sharing a rank ("1224").

    Parameters
    ----------
    total : array_like
        Each item's aggregate.

    Returns
    -------
    numpy.ndarray of int64
        1 + the number of items with a strictly smaller aggregate.

    Examples
    --------
    >>> from app.stats.fra import competition_ranks
    >>> competition_ranks([3, 5, 3]).tolist()
    [1, 3, 1]
    """
    s = np.asarray(total, dtype=np.int64)
    return np.searchsorted(np.sort(s), s, side="left").astype(np.int64) + 1


def tied_groups(total: ArrayLike, order: ArrayLike) -> list[list[int]]:
    """The groups (of size >= 2) of items with exactly equal aggregates, in rank order.

    Parameters
    ----------
    total : array_like
        Each item's aggregate.
    order : array_like of int
        The published ordering.

    Returns
    -------
    list of list of int
        Each group listed in the published ``order`` (whose order within a group was
        drawn at random).

    Examples
    --------
    >>> from app.stats.fra import tied_groups
    >>> tied_groups([3, 5, 3], [2, 0, 1])
    [[2, 0]]
    """
    s = np.asarray(total, dtype=np.int64)
    groups: list[list[int]] = []
    for x in np.asarray(order, dtype=np.int64):
        if groups and s[groups[-1][0]] == s[x]:
            groups[-1].append(int(x))
        else:
            groups.append([int(x)])
    return [g for g in groups if len(g) >= 2]


# -- Lehmer FRA ------------------------------------------------------------------------


def lehmer_concentration(n_items: int, phi: float) -> float:
    """p = Σ_{u=1}^{N−1} φ^u / (1 + Σ_{u=3}^{N} φ^u) (paper Theorem 3; docs/federated.md §4.2).

    Parameters
    ----------
    n_items : int
        N.
    phi : float
        Mallows dispersion φ.

    Returns
    -------
    float
        p. Lehmer FRA's guarantees need p < 1, i.e. φ + φ² < 1 + φ^N (about φ ≤ 0.618).
    """
    u = np.arange(1, n_items + 1, dtype=np.float64)
    powers = phi**u
    return float(powers[: n_items - 1].sum() / (1.0 + powers[2:].sum()))


def lehmer_low_bits(n_items: int, phi: float, max_rankings: int, failure_probability: float) -> int:
    """I = ⌈log₂(2·log(M N²/ε)/log(1/p) + 1)⌉ of eq. (5) (docs/federated.md §4.2).

    Parameters
    ----------
    n_items : int
        N.
    phi : float
        Mallows dispersion φ.
    max_rankings : int
        M, a public upper bound on the total number of rankings.
    failure_probability : float
        ε, in (0, 1).

    Returns
    -------
    int
        The number of low bits I, at least 1.

    Raises
    ------
    ValueError
        If p ≥ 1 (:func:`lehmer_concentration`), ε is outside (0, 1) or M < 1.

    Examples
    --------
    >>> from app.stats.fra import lehmer_low_bits
    >>> lehmer_low_bits(10, 0.5, 500, 0.01)  # docs/federated.md §4.2
    8
    """
    p = lehmer_concentration(n_items, phi)
    if not p < 1:
        raise ValueError(
            f"Lehmer FRA needs phi + phi^2 < 1 + phi^N (phi <= ~0.618); phi = {phi:g} gives p = {p:.3f}"
        )
    if not 0 < failure_probability < 1 or max_rankings < 1:
        raise ValueError("failure_probability must be in (0, 1) and max_rankings >= 1")
    a = 2.0 * math.log(max_rankings * n_items**2 / failure_probability) / math.log(1.0 / p)
    return max(1, math.ceil(math.log2(a + 1.0)))


def _coordinate_split(n_items: int, low_bits: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per coordinate i (0-based): k_i high bits, and the one-hot length min(2^I, i+1)."""
    i = np.arange(n_items)
    b = np.array([int(x).bit_length() for x in i], dtype=np.int64)  # bits for the values 0..i
    k = np.maximum(b - low_bits, 0)
    h = np.minimum(1 << low_bits, i + 1)
    return k, h


def _lehmer_mode(codes: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.int64]:
    _n, m = codes.shape
    hist = np.zeros((m, m), dtype=np.int64)
    np.add.at(hist, (np.broadcast_to(np.arange(m), codes.shape), codes), 1)
    hist = np.where(np.tri(m, dtype=bool), hist, -1)
    top = hist == hist.max(axis=1, keepdims=True)
    return np.where(top, rng.random(hist.shape), -1.0).argmax(axis=1)


def lehmer_client_message(
    orders: ArrayLike, low_bits: int, rng: np.random.Generator | None = None
) -> NDArray[np.int64]:
    """Algorithm 3, client: v(i) = mode of the site's Lehmer codes at coordinate i (ties at random).

    Parameters
    ----------
    orders : array_like of int
        The site's rankings, one ordering per row.
    low_bits : int
        I.
    rng : numpy.random.Generator, optional
        Breaks ties of the modes; ``None`` draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray of int64
        Per coordinate, the high part ⌊v/2^I⌋ (only when k_i > 0) followed by the one-hot
        vector of v mod 2^I (length min(2^I, i+1), indexed by value).

    Raises
    ------
    ValueError
        With no rankings, or invalid ones.
    """
    arr = validate_orders(orders)
    if arr.shape[0] == 0:
        raise ValueError("a site needs at least one ranking")
    gen = rng if rng is not None else entropy.generator()
    m = arr.shape[1]
    v = _lehmer_mode(lehmer_code(positions_from_orders(arr)), gen)
    k, h = _coordinate_split(m, low_bits)
    parts: list[NDArray[np.int64]] = []
    for i in range(m):
        if k[i] > 0:
            parts.append(np.array([v[i] >> low_bits], dtype=np.int64))
        onehot = np.zeros(h[i], dtype=np.int64)
        onehot[v[i] & ((1 << low_bits) - 1)] = 1
        parts.append(onehot)
    return np.concatenate(parts)


def lehmer_server_order(
    total: ArrayLike,
    n_items: int,
    n_sites: int,
    low_bits: int,
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Algorithm 3, server: decode the summed Lehmer messages into an ordering.

    Parameters
    ----------
    total : array_like of int
        The summed messages.
    n_items : int
        N.
    n_sites : int
        L.
    low_bits : int
        I.
    rng : numpy.random.Generator or int, optional
        Breaks ties of the low-part plurality uniformly at random.

    Returns
    -------
    tuple of numpy.ndarray
        (ordering, consensus Lehmer code).

    Raises
    ------
    ValueError
        If ``total`` does not fit the scheme's layout.

    Notes
    -----
    Per coordinate, V = round(S/L) (half up) and Maj = the most frequent low part (ties at
    random), L̂(i) = 2^I·V + Maj clamped to [0, i] (docs/federated.md §4.3, correction 3);
    then decoded.
    """
    s = np.asarray(total, dtype=np.int64)
    gen = _generator(rng)
    k, h = _coordinate_split(n_items, low_bits)
    if s.size != int((k > 0).sum() + h.sum()):
        raise ValueError("the aggregate does not fit this scheme's layout")
    code = np.empty(n_items, dtype=np.int64)
    at = 0
    for i in range(n_items):
        high = 0
        if k[i] > 0:
            high = math.floor(s[at] / n_sites + 0.5)
            at += 1
        hist = s[at : at + h[i]]
        at += h[i]
        top = np.flatnonzero(hist == hist.max())
        low = int(top[gen.integers(top.size)])
        code[i] = min(max((high << low_bits) + low, 0), i)
    return orders_from_positions(lehmer_decode(code)), code


def lehmer_tied_coordinates(total: ArrayLike, n_items: int, low_bits: int) -> list[int]:
    """The coordinates (0-based items) whose low-part plurality in the summed message was tied.

    Parameters
    ----------
    total : array_like of int
        The summed messages.
    n_items : int
        N.
    low_bits : int
        I.

    Returns
    -------
    list of int
        The coordinates at which :func:`lehmer_server_order` picked one of the tied values
        at random.
    """
    s = np.asarray(total, dtype=np.int64)
    k, h = _coordinate_split(n_items, low_bits)
    out: list[int] = []
    at = 0
    for i in range(n_items):
        at += int(k[i] > 0)
        hist = s[at : at + h[i]]
        at += h[i]
        if int((hist == hist.max()).sum()) > 1:
            out.append(i)
    return out


def lehmer_mean_aggregate(orders: ArrayLike) -> NDArray[np.int64]:
    """Centralized Lehmer *mean* (rounded, clamped).

    Parameters
    ----------
    orders : array_like of int
        Rankings, one ordering per row.

    Returns
    -------
    numpy.ndarray of int64
        The ordering decoded from the rounded, clamped mean Lehmer code.

    Notes
    -----
    The variant the paper reports as clearly worse than the majority (paper §4.2, citing
    Li, Mazumdar & Milenkovic 2017; docs/federated.md §4.1).
    """
    arr = validate_orders(orders)
    m = arr.shape[1]
    mean = lehmer_code(positions_from_orders(arr)).mean(axis=0)
    code = np.minimum(np.floor(mean + 0.5).astype(np.int64), np.arange(m))
    return orders_from_positions(lehmer_decode(code))
