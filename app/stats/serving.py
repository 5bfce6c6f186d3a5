"""The service's assignment of pairs to new respondents, simulated in bulk for the planner.

The service serves each respondent the least-answered pairs it has not answered, ties at
random, never a pair twice (:mod:`app.respondents.assignment`). :func:`_serve` reproduces
that for many new respondents at once: the pair counts fill like water (:func:`_slots`),
each respondent taking the next run of the sequence (:func:`_distinct_runs`), in
O(P log total + total log total) whatever the counts (docs/how-to/plan.md).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__: list[str] = []


def _mix(x: NDArray[np.uint64]) -> NDArray[np.float64]:
    """Uniforms in [0, 1) from 64-bit keys (the splitmix64 finalizer; Steele et al. 2014)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _slots(c: NDArray[np.int64], target: int, seed: np.uint64) -> NDArray[np.int64]:
    """The first water-filling slots (pairs, in serving order) covering at least ``target`` answers.

    A pair at count c gets its next answers at levels c, c + 1, …; all slots below
    the water level L* (the smallest L with Σ_p max(0, L − c_p) ≥ target) are
    returned, ordered by level and then by a random key per slot. The key is a hash
    of (pair, level) and ``seed``, so a larger target extends a smaller one's sequence.
    """
    lo, hi = int(c.min()), int(c.min()) + target  # f(lo) = 0 < target ≤ f(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if int(np.maximum(0, mid - c).sum()) >= target:
            hi = mid
        else:
            lo = mid
    n_slots = np.maximum(0, hi - c)
    pair = np.repeat(np.arange(c.size), n_slots)
    start = np.cumsum(n_slots) - n_slots
    level = c[pair] + (np.arange(pair.size) - np.repeat(start, n_slots))
    slot_id = pair.astype(np.uint64) + np.uint64(c.size) * level.astype(np.uint64)
    return pair[np.argsort(level + _mix(slot_id ^ seed), kind="stable")]


def _distinct_runs(c, sizes, seed) -> NDArray[np.int64]:
    """Each respondent's run of the slot sequence, with no pair twice in one run.

    The service never serves a respondent a pair twice: it takes the least-answered
    pairs it has not answered. Where a run of the water-filling sequence repeats a
    pair (a pair far behind the others, or one at the end of a level and the start
    of the next), the repeat is deferred to the following respondents, who take
    deferred slots first (they are the least answered); once nothing is deferred
    the runs line up with the sequence again, so only the affected respondents are
    walked one by one. Every slot is looked at once: O(total) at worst.
    """
    total = int(sizes.sum())
    seq = _slots(c, total, seed)
    starts = np.cumsum(sizes) - sizes
    run = np.repeat(np.arange(sizes.size), sizes)
    head = seq[:total]
    order = np.lexsort((head, run))
    same = (run[order][1:] == run[order][:-1]) & (head[order][1:] == head[order][:-1])
    flagged = np.unique(run[order][1:][same])
    if flagged.size == 0:
        return head
    out = head.copy()
    deferred: dict[int, int] = {}  # pair → deferred slots, in order of first deferral
    ptr = 0
    r = int(flagged[0])
    next_flag = 1
    while r < sizes.size:
        if not deferred:
            ptr = int(starts[r])
        taken: list[int] = []
        seen: set[int] = set()
        for pair in list(deferred):
            if len(taken) == sizes[r]:
                break
            taken.append(pair)
            seen.add(pair)
            deferred[pair] -= 1
            if deferred[pair] == 0:
                del deferred[pair]
        while len(taken) < sizes[r]:
            if ptr >= seq.size:
                seq = _slots(c, 2 * seq.size + c.size, seed)  # extends the same sequence
            pair = int(seq[ptr])
            ptr += 1
            if pair in seen:
                deferred[pair] = deferred.get(pair, 0) + 1
            else:
                taken.append(pair)
                seen.add(pair)
        out[starts[r] : starts[r] + sizes[r]] = taken
        r += 1
        if not deferred and (r >= sizes.size or ptr == starts[r]):
            # Lined up again: skip to the next respondent whose own run repeats a pair.
            while next_flag < flagged.size and flagged[next_flag] < r:
                next_flag += 1
            if next_flag == flagged.size:
                break
            r = int(flagged[next_flag])
    return out


def _serve(counts: NDArray[np.int64], pi, pj, profiles_eps, rng):
    """Pairs for new respondents, least-answered first (the service's assignment).

    ``profiles_eps``: one array of ε values per new respondent, in arrival
    order; each respondent takes as many pairs as it has values. Serving the
    least-answered pairs to one respondent after another fills the pair counts
    like water (:func:`_slots`), each respondent taking the next run of the
    sequence, never a pair twice (:func:`_distinct_runs`). The cost is
    O(P log total + total log total) whatever the counts.
    """
    sizes = np.array([p.size for p in profiles_eps], dtype=np.int64)
    total = int(sizes.sum())
    if total == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64)
    seed = np.uint64(rng.integers(0, 2**63))
    seq = _distinct_runs(counts.astype(np.int64), sizes, seed)
    eps = np.concatenate(profiles_eps)
    who = np.repeat(np.arange(sizes.size), sizes)
    flip = rng.random(total) < 0.5
    a, b = pi[seq], pj[seq]
    return np.where(flip, b, a), np.where(flip, a, b), eps, who
