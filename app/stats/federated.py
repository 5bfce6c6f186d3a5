"""A federated round with secure aggregation: its scheme, masks and experiments (docs/federated.md).

Sima, Rana & Milenkovic (2024): L sites each hold rankings of the same N items and send
one message; the server learns only their sum and turns it into a consensus ordering.
The messages and their decoding (Borda and Lehmer FRA, §3–4) are :mod:`app.stats.fra`;
here are the layout both sides derive from the round's public parameters, the pairwise
masks (X25519-agreed seeds expanded by SHAKE-256, in Z_{2^{b_k}} so the masked sum never
wraps) §5 and the experiments §6–7. Pure arithmetic: no network, no keys (:mod:`app.cli.site`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .fra import (
    _coordinate_split,
    borda_centroids,
    borda_client_message,
    borda_server_order,
    competition_ranks,
    lehmer_client_message,
    lehmer_mean_aggregate,
    lehmer_server_order,
    lehmer_tied_coordinates,
    tied_groups,
)
from .rankings import (
    borda_aggregate,
    kendall_distance,
    lehmer_aggregate,
    mallows_sample,
    ranking_stats,
    validate_orders,
)

__all__ = [
    "MAX_MESSAGE_BITS",
    "FederatedScheme",
    "fra_experiment",
    "mask_message",
    "mask_stream",
    "pairwise_mask",
    "secure_sum",
]

#: Message entries are at most this many bits (uint64 arithmetic with headroom).
MAX_MESSAGE_BITS = 62


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
