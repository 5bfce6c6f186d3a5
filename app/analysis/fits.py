"""The fits of a survey's answers and the memory that keeps them (:class:`FitCache`).

Fits are cached by (survey, method, λ, number of items, archived items, data version)
and warm-started from the previous θ̂ of the same survey when new answers arrive. The
cache also keeps what is computed on top of a fit (its intervals and rank summaries:
:mod:`app.analysis.intervals`) and the survey's stored comparisons, all in one memory
budget, least recently used evicted first, by bytes (docs/uncertainty.md §6, "Cost").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..core.cache import OBJECT_BYTES, ByteLRU, nbytes
from ..core.db.models import Comparison, Item, Survey
from ..core.deadline import Deadline, WorkSlots
from ..core.errors import Conflict
from ..stats import BTLFit, fit_debiased_mle_stats, fit_naive_mle_stats
from ..stats.inference import ClusterSource
from ..stats.pairs import PairStats
from ..surveys.items import archived_positions, survey_items
from .aggregation import fold_pending, read_snapshot
from .answer_log import AnswerLogStore

__all__ = ["CACHE_BYTES", "METHODS", "FitCache", "RowStore"]

METHODS = {"debiased_mle": fit_debiased_mle_stats, "naive_mle": fit_naive_mle_stats}
#: Default memory budget of a :class:`FitCache` (PRIVRANK_ANALYSIS_CACHE_MB sets the service's).
CACHE_BYTES = 512 * 2**20


def _seed(*parts) -> int:
    """A fixed seed per (survey, version, …): repeated reads draw the same rank samples."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


@dataclass(eq=False)
class _Entry:
    fit: BTLFit
    stats: PairStats
    key: tuple | None = None  # its key in the cache (None: not cached)
    clusters: ClusterSource | None = None
    graph: _Connectivity | None = None  # diagnostics._graph(stats), computed on first use
    #: :func:`~app.stats.mechanisms.randomization_p_value` of the stored answers, from
    #: their own ε (set with ``clusters``, which reads them).
    randomization: float | None = None
    #: Positions of the archived items left out of ``stats`` (the others renumbered 0 … m−1).
    archived: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Connectivity:
    """The comparison graph's algebraic connectivity (:mod:`app.analysis.diagnostics`)."""

    plain: float | None
    normalized: float | None


class _Rows:
    """One survey's comparisons as arrays, in id order, with respondents coded 0 … G−1."""

    def __init__(self) -> None:
        self.last_id = 0
        self.codes: dict[str, int] = {}
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.n = 0

    def add(self, rows) -> None:
        if not rows:
            return
        ids, resp, i, j, y, eps = zip(*rows, strict=True)
        codes = self.codes
        c = np.fromiter((codes.setdefault(r, len(codes)) for r in resp), dtype=np.int64, count=len(resp))
        part = (
            c,
            np.asarray(i, dtype=np.int64),
            np.asarray(j, dtype=np.int64),
            np.asarray(y, dtype=np.int8),
            np.asarray(eps, dtype=np.float64),
        )
        self.parts.append(part)
        self.last_id = max(self.last_id, int(max(ids)))
        self.n += len(ids)

    def arrays(self) -> tuple[np.ndarray, ...]:
        if len(self.parts) > 1:
            self.parts = [tuple(np.concatenate(col) for col in zip(*self.parts, strict=True))]
        if not self.parts:
            return (np.zeros(0, dtype=np.int64),) * 3 + (np.zeros(0, dtype=np.int8), np.zeros(0))
        return self.parts[0]

    def size(self) -> int:
        """Bytes held: the arrays, and each respondent code (a string key and an int)."""
        return sum(a.nbytes for part in self.parts for a in part) + len(self.codes) * (2 * OBJECT_BYTES)


class RowStore:
    """Each survey's stored comparisons (respondent, i, j, ỹ, ε), read incrementally.

    Comparisons are append-only, so a read fetches only the rows with an id above the
    last one seen, then checks the survey's row count: a row with a smaller id that
    committed late (or rows removed with their survey) makes the counts differ, and
    the survey is read again whole. Kept in the :class:`FitCache`'s memory budget.
    """

    def __init__(self, lru: ByteLRU) -> None:
        self._lru = lru

    def read(self, session: Session, survey_id: str) -> tuple[np.ndarray, ...]:
        """(respondent codes, i, j, ỹ, ε) of every stored comparison of the survey."""
        key = ("rows", survey_id)
        rows = self._lru.pop(key) or _Rows()  # taken out while read: one reader extends it
        cols = (
            Comparison.id,
            Comparison.respondent_id,
            Comparison.i,
            Comparison.j,
            Comparison.y_tilde,
            Comparison.epsilon,
        )
        for attempt in range(3):
            if attempt == 2:
                rows = _Rows()  # read whole: one statement, consistent by itself
            new = session.execute(
                select(*cols)
                .where(Comparison.survey_id == survey_id, Comparison.id > rows.last_id)
                .order_by(Comparison.id)
            ).all()
            rows.add(new)
            if attempt == 2:
                break
            total = session.scalar(select(func.count()).where(Comparison.survey_id == survey_id))
            if total == rows.n:
                break
            rows = _Rows()
        arrays = rows.arrays()
        self._lru.put(key, rows, rows.size())
        return arrays


class FitCache:
    """Fits per (survey, method, λ, items, data version), their intervals and rank
    summaries, the respondents' rows, and the latest θ̂ per (survey, method, λ) to
    warm-start the next fit when new answers arrive — all within ``max_bytes``
    (least recently used evicted first; a fit's summaries go with it).

    Per process; each worker keeps its own (the API is stateless otherwise).
    """

    def __init__(self, max_bytes: int = CACHE_BYTES, computations: int = 2) -> None:
        self.lru = ByteLRU(max_bytes)
        self.rows = RowStore(self.lru)
        self.log = AnswerLogStore(self.lru)
        #: Long computations (fits, intervals, rank summaries) at once in this process.
        self.work = WorkSlots(computations)

    @property
    def max_bytes(self) -> int:
        return self.lru.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self.lru.max_bytes = int(value)

    @property
    def bytes(self) -> int:
        """Bytes held now (never above ``max_bytes``)."""
        return self.lru.bytes

    def get(self, key: tuple) -> _Entry | None:
        return self.lru.get(("fit", key))

    def put(self, key: tuple, entry: _Entry) -> None:
        entry.key = key
        self.lru.put(("fit", key), entry, nbytes(entry))
        self.lru.put(self._warm(key), entry.fit.theta, nbytes(entry.fit.theta))

    def grew(self, entry: _Entry) -> None:
        """The entry gained a part (its clusters, its graph): count it."""
        if entry.key is not None:
            self.lru.resize(("fit", entry.key), nbytes(entry))

    @staticmethod
    def _warm(key: tuple) -> tuple:
        """Where a fit's scores are kept to start the next one: per (survey, method, λ) and
        archived items (a key of :func:`_fit`: survey, method, λ, m, archived, version), so
        that a start is never one of a different item set."""
        return ("warm", key[:3], key[4])

    def warm_start(self, key: tuple, n_items: int) -> np.ndarray | None:
        theta = self.lru.get(self._warm(key))
        if theta is None:
            return None
        if theta.size < n_items:  # items were added since: they start at 0
            theta = np.concatenate((theta, np.zeros(n_items - theta.size)))
        return theta[:n_items]


def _kept(
    archived: tuple[int, ...], i: np.ndarray, j: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Pairs (i, j) of positions without the archived items: which rows are kept (None:
    all) and their items renumbered in position order, as if the archived items had
    never been there."""
    if not archived:
        return None, i, j
    gone = np.asarray(archived, dtype=np.int64)
    keep = ~(np.isin(i, gone) | np.isin(j, gone))
    ki, kj = i[keep], j[keep]
    return keep, ki - np.searchsorted(gone, ki), kj - np.searchsorted(gone, kj)


def _without_archived(stats: PairStats, archived: tuple[int, ...]) -> PairStats:
    """The statistics of the items that are not archived (docs/how-to/moderate.md, "Archiving an item").
    Their answers are simply not part of them: the fit is the one of a survey that never
    had those items. ``epsilon_min`` stays the survey's (an upper bound on H, never lower)."""
    keep, i, j = _kept(archived, stats.i, stats.j)
    if keep is None:
        return stats
    part = stats.subset(keep)
    return PairStats(
        stats.n_items - sum(1 for a in archived if a < stats.n_items),
        i,
        j,
        part.n,
        part.sum_y,
        part.sum_z,
        part.sum_z2,
        part.sum_v,
        epsilon_min=stats.epsilon_min,
    )


def _fit(
    session: Session,
    survey: Survey,
    cache: FitCache,
    method: str,
    lam: float | None,
    deadline: Deadline | None = None,
) -> tuple[_Entry, int, list[Item]]:
    """The cached fit at the current data version (folding pending answers first),
    with the version and the survey's items."""
    fold_pending(session, survey.id, wait=True)
    archived = archived_positions(survey)
    for _ in range(10):
        every = survey_items(session, survey.id)
        m = len(every)
        gone = set(archived)
        items = [it for it in every if it.position not in gone]
        base_key = (survey.id, method, lam, m, archived)
        found: dict[int, _Entry | None] = {}

        def need_stats(version: int, base_key=base_key, found=found) -> bool:
            found[version] = cache.get((*base_key, version))
            return found[version] is None

        snap = read_snapshot(session, survey.id, m, need_stats=need_stats)
        if snap.stats is not None and snap.stats.n_pairs and int(snap.stats.j.max()) >= m:
            continue  # items were added (and answered) after we read them: read them again
        # The entry found while reading (not a second lookup: it may be evicted meanwhile).
        entry = found.get(snap.version) if snap.stats is None else None
        if entry is None:
            stats = snap.stats
            if stats is None:  # the snapshot was read without them
                stats = read_snapshot(session, survey.id, m).loaded_stats
            stats = _without_archived(stats, archived)
            key = (*base_key, snap.version)
            with cache.work.hold(deadline or Deadline.none()):
                fit = METHODS[method](stats, lam, theta0=cache.warm_start(key, len(items)))
            entry = _Entry(fit, stats, archived=archived)
            cache.put(key, entry)
        return entry, snap.version, items
    raise Conflict("the survey's items changed while reading; retry")
