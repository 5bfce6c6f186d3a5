"""The balanced assignment (:func:`balanced_pairs`): least-answered pairs first, or uniform.

Local surveys: while at most half the pairs have been answered, candidates drawn outside
the respondent's pairs are looked up in ``pair_stats`` by key (:func:`_never_answered`);
beyond, the survey's per-pair counts are read into sorted arrays shared by the process's
requests (:func:`_counts`). Central surveys: uniform. The work per request is in the
docstring of :func:`app.respondents.assignment.next_pairs`.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from ..core.db.models import PairStat
from .pair_numbers import _draw, _free_below, _ints, _keys, _member, _pairs, _row_starts, _skip

__all__ = ["LOOKUP_ROUNDS", "REFRESH_SHARE", "SMALL_SURVEY_PAIRS", "balanced_pairs"]

#: Below this many possible pairs the counts are always read whole (a few kB).
SMALL_SURVEY_PAIRS = 1_000

#: Rounds of candidate look-ups before falling back to the per-pair counts.
LOOKUP_ROUNDS = 6

#: Rows fetched per round trip when the per-pair counts are streamed.
_STREAM_ROWS = 50_000

#: The clock the per-pair counts' age and read time are measured on (tests replace it
#: with a fake one).
_clock = time.monotonic


@dataclass(frozen=True, eq=False)
class _Counts:
    """A survey's answered pairs at (at least) one data version, as plain immutable arrays."""

    answered: NDArray[np.int64]  # pair numbers with n ≥ 1, sorted
    by_count: NDArray[np.int64]  # the same, sorted by (n, pair number)
    levels: NDArray[np.int64]  # start of each count level in by_count, then its end
    free_below: NDArray[np.int64]  # _free_below(answered), shared by every request
    version: int = 0  # the survey's data version read before the counts
    read_at: float = 0.0  # _clock() when they were read
    read_seconds: float = 0.0  # how long reading them took

    @property
    def nbytes(self) -> int:
        arrays = (self.answered, self.by_count, self.levels, self.free_below)
        return sum(int(a.nbytes) for a in arrays) + 200

    def usable_at(self, version: int, now: float) -> bool:
        """Current, or recent enough: counts older than the data are re-read at most once
        per ``read_seconds / REFRESH_SHARE`` (they steer balance only; the respondent's
        own pairs are always read fresh)."""
        return version == self.version or now - self.read_at < self.read_seconds / REFRESH_SHARE


#: Share of one core that re-reading a busy survey's per-pair counts may take: counts
#: that took t seconds to read are reused for 10·t seconds while new answers arrive.
REFRESH_SHARE = 0.1

#: One lock per (survey, m) while anyone reads or waits for its counts: a waiter holds a
#: strong reference, so the lock lives exactly as long as it is in use (weak values: no
#: entry outlives its last user, and none is replaced while a user holds it).
_READING: weakref.WeakValueDictionary[tuple, threading.Lock] = weakref.WeakValueDictionary()
_READING_LOCK = threading.Lock()


def _counts(session: Session, survey_id: str, m: int, version: int, cache) -> _Counts:
    """The per-pair counts of items < m, from the cache when usable at ``version``, else
    read (one request per process reads; the others wait for it, or serve from the
    previous counts meanwhile when there are some)."""
    key = ("pair-counts", survey_id, m)
    found = cache.lru.get(key) if cache is not None else None
    if found is not None and found.usable_at(version, _clock()):
        return found
    with _READING_LOCK:
        lock = _READING.get(key)
        if lock is None:
            lock = _READING[key] = threading.Lock()
    if found is None:
        lock.acquire()  # nothing to serve meanwhile: wait for the reader
    elif not lock.acquire(blocking=False):
        return found  # another request is reading newer counts
    try:
        again = cache.lru.get(key) if cache is not None else None
        if again is not None and again.usable_at(version, _clock()):
            return again
        counts = _read_counts(session, survey_id, m, version)
        if cache is not None:
            cache.lru.put(key, counts, counts.nbytes)
        return counts
    finally:
        lock.release()


def _read_counts(session: Session, survey_id: str, m: int, version: int) -> _Counts:
    started = _clock()
    starts = _row_starts(m)
    keys, ns = [], []
    result = session.connection().execute(  # Core: no ORM row processing per row
        select(PairStat.i, PairStat.j, PairStat.n)
        .where(PairStat.survey_id == survey_id, PairStat.j < m)
        .execution_options(yield_per=_STREAM_ROWS)
    )
    for part in result.partitions():
        block = _ints(part, 3)
        keys.append(_keys(block[:, 0], block[:, 1], starts))
        ns.append(block[:, 2])
    key = np.concatenate(keys) if keys else np.empty(0, dtype=np.int64)
    n = np.concatenate(ns) if ns else np.empty(0, dtype=np.int64)
    order = np.lexsort((key, n))
    n_sorted = n[order]
    levels = np.concatenate(([0], np.flatnonzero(np.diff(n_sorted)) + 1, [n_sorted.size])).astype(np.int64)
    now = _clock()
    answered = np.sort(key)
    return _Counts(answered, key[order], levels, _free_below(answered), version, now, now - started)


def _least_answered(
    counts: _Counts, n_pairs: int, mine: NDArray[np.int64], want: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Pairs outside ``mine`` (sorted), least-answered first, uniformly among ties."""
    # Level 0: pairs never answered = outside counts.answered. Exclude the respondent's
    # own pairs there too, in the rank space of the never-answered pairs.
    outside = mine[~_member(counts.answered, mine)]
    outside_ranks = outside - np.searchsorted(counts.answered, outside)
    ranks = _draw(n_pairs - counts.answered.size, outside_ranks, want, rng)
    out = [_skip(ranks, counts.answered, counts.free_below)]
    got = ranks.size
    for lo, hi in zip(counts.levels[:-1], counts.levels[1:], strict=True):
        if got >= want:
            break
        level = counts.by_count[lo:hi]  # sorted by pair number within a level
        at = np.searchsorted(level, mine)
        hit = at < level.size
        hit[hit] = level[at[hit]] == mine[hit]
        pos = _draw(level.size, at[hit], want - got, rng)
        out.append(level[pos])
        got += pos.size
    return np.concatenate(out)


def _never_answered(
    session: Session,
    survey_id: str,
    n_pairs: int,
    starts: NDArray[np.int64],
    mine: NDArray[np.int64],
    want: int,
    rng: np.random.Generator,
) -> NDArray[np.int64] | None:
    """``want`` pairs drawn uniformly among those nobody has answered and the respondent
    has not, by looking candidates up in ``pair_stats``; None when a few rounds did not
    find enough (the caller then reads the counts)."""
    excluded = mine
    picked: list[int] = []
    for _ in range(LOOKUP_ROUNDS):
        cand = _draw(n_pairs, excluded, 2 * (want - len(picked)) + 8, rng)
        ci, cj = _pairs(cand, starts)
        seen = session.execute(
            select(PairStat.i, PairStat.j).where(
                PairStat.survey_id == survey_id,
                tuple_(PairStat.i, PairStat.j).in_(list(zip(ci.tolist(), cj.tolist(), strict=True))),
            )
        ).all()
        answered = set()
        if seen:
            block = _ints(seen, 2)
            answered = set(_keys(block[:, 0], block[:, 1], starts).tolist())
        for k in cand.tolist():
            if k not in answered:
                picked.append(k)
                if len(picked) == want:
                    return np.array(picked, dtype=np.int64)
        excluded = np.union1d(excluded, cand)  # a few hundred values at most
    return None


def balanced_pairs(
    session: Session,
    survey_id: str,
    state,
    n_pairs: int,
    starts: NDArray[np.int64],
    mine: NDArray[np.int64],
    count: int,
    rng: np.random.Generator,
    cache,
) -> NDArray[np.int64]:
    """Up to ``count`` pair numbers outside ``mine`` (sorted): uniform (central model:
    ``state`` None), else least-answered first (``state``: the survey's data version and
    comparison count)."""
    m = starts.size
    if state is None:
        return _draw(n_pairs, mine, count, rng)
    chosen = None
    if n_pairs >= SMALL_SURVEY_PAIRS and 2 * (state.n_comparisons + mine.size) <= n_pairs:
        chosen = _never_answered(session, survey_id, n_pairs, starts, mine, count, rng)
    if chosen is None:
        counts = _counts(session, survey_id, m, state.version, cache)
        chosen = _least_answered(counts, n_pairs, mine, count, rng)
    return chosen
