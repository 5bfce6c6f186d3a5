"""Federated rank aggregation with secure aggregation: Borda FRA and Lehmer FRA (docs/federated.md).

Sima, Rana & Milenkovic (2024): L sites each hold rankings of the same N items and send
one message; the server learns only the sum of the messages (secure aggregation) and
turns it into a consensus ordering. Borda FRA (Algorithm 2) is docs/federated.md §3,
Lehmer FRA (Algorithm 3) §4 with the corrections to the printed paper (§3.1, §4.3), the
message encodings and the pairwise masks (X25519-agreed seeds expanded by SHAKE-256, in
Z_{2^{b_k}} so the masked sum never wraps) §5, failure probabilities §6. This module is
pure arithmetic: no network, no keys (:mod:`app.cli.site` exchanges them).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import entropy
from .rankings import (
    borda_aggregate,
    kendall_distance,
    lehmer_aggregate,
    lehmer_code,
    lehmer_decode,
    mallows_sample,
    orders_from_positions,
    positions_from_orders,
    ranking_stats,
    validate_orders,
)

__all__ = [
    "MAX_MESSAGE_BITS",
    "FederatedScheme",
    "borda_centroids",
    "borda_client_message",
    "borda_quantize",
    "borda_server_order",
    "competition_ranks",
    "fra_experiment",
    "lehmer_client_message",
    "lehmer_concentration",
    "lehmer_low_bits",
    "lehmer_mean_aggregate",
    "lehmer_server_order",
    "lehmer_tied_coordinates",
    "mask_message",
    "mask_stream",
    "pairwise_mask",
    "secure_sum",
    "tied_groups",
]

#: Message entries are at most this many bits (uint64 arithmetic with headroom).
MAX_MESSAGE_BITS = 62


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
    >>> from app.stats.federated import borda_centroids
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
    >>> from app.stats.federated import borda_client_message
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
    >>> from app.stats.federated import competition_ranks
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
    >>> from app.stats.federated import tied_groups
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
    >>> from app.stats.federated import lehmer_low_bits
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


# -- the scheme both sides agree on --------------------------------------------------------


def _bits_for(max_sum: NDArray[np.int64] | int) -> NDArray[np.int64]:
    x = np.atleast_1d(np.asarray(max_sum, dtype=np.int64))
    return np.array([max(1, int(v).bit_length()) for v in x], dtype=np.int64)


@dataclass(frozen=True)
class FederatedScheme:
    """Public parameters of one federated round: method, N items, L sites, φ and (Lehmer)
    the number of low bits I. Both sides derive the message layout from them."""

    method: str
    n_items: int
    n_sites: int
    phi: float
    low_bits: int | None = None

    def __post_init__(self) -> None:
        if self.method not in ("borda", "lehmer"):
            raise ValueError("method must be 'borda' or 'lehmer'")
        if self.n_items < 2 or self.n_sites < 1:
            raise ValueError("a round needs at least 2 items and 1 site")
        if self.method == "lehmer" and (self.low_bits is None or self.low_bits < 1):
            raise ValueError("Lehmer FRA needs low_bits >= 1")
        if self.method == "borda":
            borda_centroids(self.n_items, self.phi)  # validates φ
        if int(self.bits.max()) > MAX_MESSAGE_BITS:
            raise ValueError("too many sites for 64-bit message arithmetic")

    @classmethod
    def from_parameters(cls, parameters: dict) -> FederatedScheme:
        """The scheme of a round's public parameters (``method``, ``n_items``, ``n_sites``,
        ``phi``, ``low_bits``): what the server and every site derive the layout from."""
        return cls(
            str(parameters["method"]),
            int(parameters["n_items"]),
            int(parameters["n_sites"]),
            float(parameters["phi"]),
            None if parameters.get("low_bits") is None else int(parameters["low_bits"]),
        )

    @property
    def lehmer_bits(self) -> int:
        """I, the low bits of a Lehmer scheme (``__post_init__`` checked that it is set)."""
        if self.low_bits is None:
            raise ValueError("only a Lehmer scheme has low_bits")
        return int(self.low_bits)

    @property
    def exact_histogram(self) -> bool:
        """Lehmer: every k_i = 0, so the server sees exact histograms of the local majorities."""
        return self.method == "lehmer" and (self.n_items - 1).bit_length() <= self.lehmer_bits

    @cached_property
    def bits(self) -> NDArray[np.int64]:
        """b_k per message entry: 2^{b_k} exceeds the largest possible sum over the L sites."""
        big_l = self.n_sites
        if self.method == "borda":
            return np.full(self.n_items, _bits_for(self.n_items * big_l)[0], dtype=np.int64)
        k, h = _coordinate_split(self.n_items, self.lehmer_bits)
        out: list[int] = []
        onehot_bits = int(_bits_for(big_l)[0])
        for i in range(self.n_items):
            if k[i] > 0:
                out.append(int(_bits_for(big_l * ((1 << int(k[i])) - 1))[0]))
            out.extend([onehot_bits] * int(h[i]))
        return np.asarray(out, dtype=np.int64)

    @property
    def length(self) -> int:
        return int(self.bits.size)

    def message(self, orders: ArrayLike, rng: np.random.Generator | None = None) -> NDArray[np.int64]:
        """The site's plain message for its rankings (orderings of 0..N−1)."""
        arr = validate_orders(orders, self.n_items)
        if self.method == "borda":
            return borda_client_message(arr, self.phi)
        return lehmer_client_message(arr, self.lehmer_bits, rng)

    def consensus(self, total: ArrayLike, rng: np.random.Generator | int | None = None) -> dict:
        """The server's output from the sum of all L messages: ``order`` (items best first,
        exact ties in random order), ``rank`` per item (Borda: competition ranking, tied
        items share a rank), ``ties`` (Borda: the groups of items with equal sums, in rank
        order, size >= 2; Lehmer: none, the decoded consensus is a permutation) and per-item
        statistics — Borda ``mean_site_quantized_position`` S(i)/L, the average over sites
        of each site's quantized mean position (every site weighs 1/L, whatever its number
        of rankings); Lehmer ``lehmer_code`` and ``random_coordinates``, the coordinates
        whose plurality was tied and drawn at random."""
        s = np.asarray(total, dtype=np.int64)
        if s.size != self.length:
            raise ValueError("the aggregate does not fit this scheme's layout")
        if self.method == "borda":
            order = borda_server_order(s, rng)
            return {
                "order": order,
                "mean_site_quantized_position": s / self.n_sites,
                "rank": competition_ranks(s),
                "ties": tied_groups(s, order),
            }
        order, code = lehmer_server_order(s, self.n_items, self.n_sites, self.lehmer_bits, rng)
        return {
            "order": order,
            "lehmer_code": code,
            "rank": np.argsort(order).astype(np.int64) + 1,
            "ties": [],
            "random_coordinates": lehmer_tied_coordinates(s, self.n_items, self.lehmer_bits),
        }


# -- secure-aggregation masks ----------------------------------------------------------------


def _modulus_mask(bits: NDArray[np.int64]) -> NDArray[np.uint64]:
    b = np.asarray(bits, dtype=np.uint64)
    return (np.uint64(1) << b) - np.uint64(1)


def mask_stream(seed: bytes, bits: ArrayLike) -> NDArray[np.uint64]:
    """Pseudorandom mask: entry k uniform on Z_{2^{b_k}}.

    Parameters
    ----------
    seed : bytes
        At least 16 bytes.
    bits : array_like of int
        b_k per entry.

    Returns
    -------
    numpy.ndarray of uint64
        The low b_k bits of the k-th 64-bit little-endian word of SHAKE-256(seed).

    Raises
    ------
    ValueError
        If the seed is shorter than 128 bits.
    """
    b = np.asarray(bits, dtype=np.int64)
    if len(seed) < 16:
        raise ValueError("a mask seed needs at least 128 bits")
    words = np.frombuffer(hashlib.shake_256(seed).digest(8 * b.size), dtype="<u8")
    return words & _modulus_mask(b)


def pairwise_mask(own: int, seeds: dict[int, bytes], bits: ArrayLike) -> NDArray[np.uint64]:
    """z_own = Σ_{p > own} PRG(s_{own,p}) − Σ_{p < own} PRG(s_{p,own}) mod 2^{b_k}.

    Parameters
    ----------
    own : int
        This site's index.
    seeds : dict of int to bytes
        Each peer's index to the seed shared with it.
    bits : array_like of int
        b_k per entry.

    Returns
    -------
    numpy.ndarray of uint64
        The site's mask: the masks of all sites sum to 0 because every pair's stream is
        added once and subtracted once.

    Raises
    ------
    ValueError
        If ``seeds`` holds a seed for ``own``.
    """
    b = np.asarray(bits, dtype=np.int64)
    mod = _modulus_mask(b)
    z = np.zeros(b.size, dtype=np.uint64)
    for peer, seed in seeds.items():
        if peer == own:
            raise ValueError("a site shares no seed with itself")
        stream = mask_stream(seed, b)
        z = (z + stream) & mod if peer > own else (z - stream) & mod
    return z


def mask_message(message: ArrayLike, mask: ArrayLike, bits: ArrayLike) -> NDArray[np.uint64]:
    """(y + z) mod 2^{b_k}.

    Parameters
    ----------
    message : array_like of int
        y.
    mask : array_like of uint64
        z (:func:`pairwise_mask`).
    bits : array_like of int
        b_k per entry.

    Returns
    -------
    numpy.ndarray of uint64
        The masked message.

    Raises
    ------
    ValueError
        If y does not fit its entry.
    """
    y = np.asarray(message, dtype=np.int64)
    b = np.asarray(bits, dtype=np.int64)
    if y.shape != b.shape or np.any(y < 0) or np.any(y >= (np.int64(1) << b)):
        raise ValueError("the message does not fit the scheme's layout")
    return (y.astype(np.uint64) + np.asarray(mask, dtype=np.uint64)) & _modulus_mask(b)


def secure_sum(masked: Sequence[ArrayLike], bits: ArrayLike) -> NDArray[np.int64]:
    """Σ_ℓ (y_ℓ + z_ℓ) mod 2^{b_k} = Σ_ℓ y_ℓ once every site's masked message is in.

    Parameters
    ----------
    masked : sequence of array_like
        Every site's masked message.
    bits : array_like of int
        b_k per entry.

    Returns
    -------
    numpy.ndarray of int64
        The sum of the plain messages.

    Raises
    ------
    ValueError
        If a masked message does not fit the layout.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.federated import mask_message, pairwise_mask, secure_sum
    >>> bits = np.array([8, 8])
    >>> m0 = mask_message([3, 4], pairwise_mask(0, {1: bytes(16)}, bits), bits)
    >>> m1 = mask_message([1, 2], pairwise_mask(1, {0: bytes(16)}, bits), bits)
    >>> secure_sum([m0, m1], bits).tolist()  # the masks cancel
    [4, 6]
    """
    b = np.asarray(bits, dtype=np.int64)
    mod = _modulus_mask(b)
    total = np.zeros(b.size, dtype=np.uint64)
    for x in masked:
        arr = np.asarray(x, dtype=np.uint64)
        if arr.shape != b.shape:
            raise ValueError("a masked message does not fit the scheme's layout")
        total = (total + arr) & mod
    return total.astype(np.int64)


# -- the paper's synthetic experiments ---------------------------------------------------------


def fra_experiment(
    n_items: int,
    n_sites: int,
    per_site: int,
    phi: float,
    reps: int,
    random_center: bool,
    rng: np.random.Generator,
    low_bits: int | None = None,
    masked: bool = True,
) -> dict[str, NDArray[np.int64]]:
    """Kendall distances K(σ₀, σ̂) over ``reps`` replicates (paper §5; docs/federated.md §6–7).

    Parameters
    ----------
    n_items : int
        N.
    n_sites : int
        L.
    per_site : int
        Mallows(σ₀, φ) rankings drawn per site.
    phi : float
        Mallows dispersion φ.
    reps : int
        Replicates.
    random_center : bool
        Draw σ₀ uniformly (else the identity).
    rng : numpy.random.Generator
        The simulation's generator.
    low_bits : int, optional
        I; default exact-histogram mode.
    masked : bool, default True
        Run the masked protocol; ``False`` sums the plain messages instead.

    Returns
    -------
    dict of str to numpy.ndarray of int64
        The distances of Borda FRA and Lehmer FRA through the masked protocol (fresh random
        seeds), next to their centralized versions and the Lehmer mean.

    Notes
    -----
    Paper §5 and supplement §8.2. The masks cancel exactly in the sum (:func:`secure_sum`),
    so the server's output does not depend on them: ``masked=False`` gives the same
    distances at a fraction of the cost (no SHAKE-256 stream per pair of sites). The
    masking seeds come from a child of ``rng`` (:meth:`numpy.random.Generator.spawn`), so
    both modes draw the same rankings and tie-breaks and return identical distances.
    """
    bits_needed = (n_items - 1).bit_length()
    lb = bits_needed if low_bits is None else low_bits
    schemes = {
        "borda_fra": FederatedScheme("borda", n_items, n_sites, phi),
        "lehmer_fra": FederatedScheme("lehmer", n_items, n_sites, phi, lb),
    }
    out = {
        name: np.empty(reps, dtype=np.int64)
        for name in ("borda_fra", "lehmer_fra", "borda_central", "lehmer_central", "lehmer_mean")
    }
    seed_rng = rng.spawn(1)[0] if masked else None
    for r in range(reps):
        center = rng.permutation(n_items) if random_center else np.arange(n_items)
        sites = np.split(mallows_sample(center, phi, n_sites * per_site, rng), n_sites)
        for name, scheme in schemes.items():
            messages = [scheme.message(orders, rng) for orders in sites]
            if seed_rng is None:
                total = np.sum(messages, axis=0)
            else:
                total = _masked_sum(messages, scheme.bits, seed_rng)
            est = scheme.consensus(total, rng)["order"]
            out[name][r] = kendall_distance(center, est)
        pooled = np.concatenate(sites)
        stats = ranking_stats(pooled)
        out["borda_central"][r] = kendall_distance(center, borda_aggregate(stats, rng))
        out["lehmer_central"][r] = kendall_distance(center, lehmer_aggregate(stats, rng))
        out["lehmer_mean"][r] = kendall_distance(center, lehmer_mean_aggregate(pooled))
    return out


def _masked_sum(
    messages: Sequence[NDArray[np.int64]], bits: NDArray[np.int64], seed_rng: np.random.Generator
) -> NDArray[np.int64]:
    """One round of the masked protocol: fresh pairwise seeds (standing in for the X25519
    agreement), every site's masked message, and the server's :func:`secure_sum`."""
    n_sites = len(messages)
    seeds = {(a, b): seed_rng.bytes(32) for a in range(n_sites) for b in range(a + 1, n_sites)}
    masked = []
    for a, message in enumerate(messages):
        peers = {b: seeds[min(a, b), max(a, b)] for b in range(n_sites) if b != a}
        masked.append(mask_message(message, pairwise_mask(a, peers, bits), bits))
    return secure_sum(masked, bits)
