"""The cluster-robust sums of each survey, kept up to date from the answer log.

Every fold logs its answers with their respondents (:class:`~app.core.db.models.AnswerLog`, at
the version the fold gives the survey). :class:`AnswerLogStore` keeps, per survey, the
:class:`~app.stats.clusters.ClusterMoments` of the folds it has read and reads only the
folds after the last one it has: the moments are exactly those of the pair statistics at
that version, and a ranking's cluster-robust covariance costs O(new answers × their
respondents' earlier answers + P² m) rather than a pass over every stored answer
(docs/uncertainty.md §3, "Keeping the meat up to date as answers arrive"; docs/capacity.md).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import delete, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from ..core.cache import OBJECT_BYTES, ByteLRU
from ..core.db.models import AnswerLog, Comparison, PendingBatch, SurveyStats
from ..core.db.session import begin_write
from ..stats.clusters import MOMENTS_MAX_ITEMS, ClusterMoments
from .aggregation import RANKINGS_MAGIC, decode_batch, encode_batch

__all__ = ["RESPONDENT_BYTES", "ROW_BYTES", "AnswerLogStore", "start_log", "state_bytes"]

log = logging.getLogger("privrank.analysis")

#: Log rows read per statement when catching up (a fold's payload holds its answers).
_READ_CHUNK = 2_000


#: Bytes a survey's state holds per answer (respondent code, pair index, ỹ, ε) and per
#: respondent (id, code, answers, total ε): :meth:`_State.size` counts them.
ROW_BYTES = 17
RESPONDENT_BYTES = 64


def state_bytes(n_items: int, answers: int, respondents: int) -> int:
    """The memory one survey's state takes in each worker that has read it (docs/capacity.md
    §4): its rows and respondents, and the P × P, P × m and m × m sums up to
    ``MOMENTS_MAX_ITEMS`` items."""
    p = n_items * (n_items - 1) // 2
    sums = 8 * (p * p + p * n_items + n_items**2) if n_items <= MOMENTS_MAX_ITEMS else 0
    return ROW_BYTES * answers + RESPONDENT_BYTES * respondents + sums


class _Codes:
    """Respondent ids → codes 0, 1, … in order of first appearance, as a sorted array of
    the ids (fixed-width bytes) beside their codes: 48 bytes per respondent, where a dict
    of strings takes about four times that."""

    __slots__ = ("codes", "ids")

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype="S40")
        self.codes = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return self.ids.size

    def of(self, ids: list[str]) -> NDArray[np.int64]:
        """The codes of ``ids``, giving the new ones the next codes in order of appearance."""
        keys = np.array(ids, dtype="S40")
        if any(len(r) > 40 for r in ids):  # pragma: no cover - ids are String(40)
            raise ValueError("a respondent id longer than 40 characters")
        pos = np.searchsorted(self.ids, keys)
        found = pos < self.ids.size
        found[found] = self.ids[pos[found]] == keys[found]
        if not found.all():
            new, first = np.unique(keys[~found], return_index=True)
            order = np.argsort(first, kind="stable")
            fresh = np.empty(new.size, dtype=np.int64)
            fresh[order] = np.arange(len(self), len(self) + new.size)
            every = np.concatenate((self.ids, new))
            codes = np.concatenate((self.codes, fresh))
            sort = np.argsort(every, kind="stable")
            self.ids, self.codes = every[sort], codes[sort]
            pos = np.searchsorted(self.ids, keys)
        return self.codes[pos]

    @property
    def nbytes(self) -> int:
        return self.ids.nbytes + self.codes.nbytes


@dataclass(eq=False)
class _State:
    version: int = 0
    moments: ClusterMoments = field(default_factory=ClusterMoments.empty)
    codes: _Codes = field(default_factory=_Codes)

    def size(self) -> int:
        m = self.moments
        return m.nbytes + m.rows_nbytes + self.codes.nbytes + OBJECT_BYTES


class AnswerLogStore:
    """Per survey, the :class:`~app.stats.clusters.ClusterMoments` of the logged folds.

    Kept in the :class:`~app.analysis.fits.FitCache`'s memory budget, one state per
    survey, updated by one request at a time (a per-survey lock); the moments handed out
    are immutable, so a request keeps using the version it read while another advances
    the state."""

    def __init__(self, lru: ByteLRU) -> None:
        self._lru = lru
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()
        #: The version at which :func:`start_log` last failed, per survey (not tried again there).
        self._tried: dict[str, int] = {}
        self._warned: set[str] = set()

    def _lock(self, survey_id: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(survey_id, threading.RLock())

    def read(
        self, session: Session, survey_id: str, check: Callable[[], None] = lambda: None
    ) -> tuple[int, ClusterMoments] | None:
        """The survey's version and the moments of every answer folded by it, or None
        when the log does not hold all of them (answers folded before it existed).

        ``check`` is called between chunks of folds read (it raises to stop: a deadline);
        the folds added by then are kept, so the next read goes on from there."""
        key = ("answer_log", survey_id)
        with self._lock(survey_id):
            row = session.execute(
                select(SurveyStats.version, SurveyStats.answer_log, SurveyStats.n_comparisons).where(
                    SurveyStats.survey_id == survey_id
                )
            ).one_or_none()
            if row is None:
                return None
            if not row.answer_log:
                if self._tried.get(survey_id) == row.version or not start_log(session, survey_id):
                    self._tried[survey_id] = int(row.version)
                    return None
                return self.read(session, survey_id, check)
            target, total = int(row.version), int(row.n_comparisons)
            state = self._lru.pop(key) or _State()
            try:
                self._catch_up(session, survey_id, state, target, check)
            finally:
                size = state.size()
                self._lru.put(key, state, size)
                if size > self._lru.max_bytes and survey_id not in self._warned:
                    self._warned.add(survey_id)
                    log.warning(
                        "the answer log sums of survey %s take %d MiB, more than the analysis cache "
                        "(PRIVRANK_ANALYSIS_CACHE_MB = %d): every ranking read rebuilds them; raise it "
                        "(docs/capacity.md)",
                        survey_id,
                        size // 2**20,
                        self._lru.max_bytes // 2**20,
                    )
            # A state ahead of this read's snapshot (another request read a newer one) is
            # used as it is: the caller refits to the answers it holds.
            if state.version == target and state.moments.n_rows != total:
                # The log misses folds (the column says otherwise): never use it.
                self._lru.pop(key)
                return None
            return state.version, state.moments

    def _catch_up(
        self, session: Session, survey_id: str, state: _State, target: int, check: Callable[[], None]
    ) -> None:
        """Add the folds after ``state.version`` up to ``target``, a chunk at a time."""
        codes = state.codes
        while state.version < target:
            check()
            rows = session.execute(
                select(AnswerLog.version, AnswerLog.payload)
                .where(AnswerLog.survey_id == survey_id)
                .where(AnswerLog.version > state.version, AnswerLog.version <= target)
                .order_by(AnswerLog.version)
                .limit(_READ_CHUNK)
            ).all()
            if not rows:  # folds missing from the log: the row count tells (read)
                state.version = target
                break
            parts: list[tuple[NDArray, ...]] = []
            ids: list[str] = []
            for _, payload in rows:
                batch = decode_batch(payload)
                if batch.respondents is None or batch.who is None:  # pragma: no cover - the fold writes PRB3
                    raise ValueError("an answer log entry without respondents")
                # Respondents numbered across the chunk: the batch's own index plus those before.
                parts.append((batch.who + len(ids), batch.i, batch.j, batch.y_tilde, batch.epsilon))
                ids.extend(batch.respondents)
            cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
            cols[0] = codes.of(ids)[cols[0]]
            state.moments = state.moments.added(*cols)
            state.version = int(rows[-1][0])


def start_log(session: Session, survey_id: str) -> bool:
    """Start the answer log of a survey whose answers were folded before the log existed:
    one entry, at the survey's current version, with every folded answer and its
    respondent (from ``comparisons``, less the answers still pending). Returns whether the
    log was started; not while a pending batch does not say who answered (written before
    batches did: the next fold takes it, and a later read starts the log).

    One snapshot for everything read (PostgreSQL: REPEATABLE READ; SQLite: the write lock),
    under the survey's fold lock: the answers read are exactly the folded ones plus the
    pending batches seen. Ends the caller's open transaction. Reads every stored answer of
    the survey once.
    """
    session.commit()
    if session.get_bind().dialect.name == "postgresql":
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    else:
        begin_write(session)
    try:
        state = session.scalars(
            select(SurveyStats).where(SurveyStats.survey_id == survey_id).with_for_update()
        ).first()
        if state is None or state.answer_log:
            session.rollback()
            return state is not None
        pending = [
            decode_batch(p)
            for p in session.scalars(select(PendingBatch.payload).where(PendingBatch.survey_id == survey_id))
            if p[:4] != RANKINGS_MAGIC
        ]
        waiting: set[tuple[str, int, int]] = set()
        for b in pending:
            if b.respondents is None or b.who is None:
                session.rollback()
                return False
            who = np.asarray(b.respondents, dtype=object)[b.who]
            waiting.update(zip(who.tolist(), b.i.tolist(), b.j.tolist(), strict=True))
        rows = session.execute(
            select(
                Comparison.respondent_id, Comparison.i, Comparison.j, Comparison.y_tilde, Comparison.epsilon
            )
            .where(Comparison.survey_id == survey_id)
            .order_by(Comparison.id)
        ).all()
        folded = [r for r in rows if (r[0], r[1], r[2]) not in waiting] if waiting else rows
        if len(folded) != state.n_comparisons or any(r[4] is None for r in folded):
            session.rollback()  # not the folded answers (or a central survey's): no log
            return False
        session.execute(delete(AnswerLog).where(AnswerLog.survey_id == survey_id))
        if folded:
            ids: dict[str, int] = {}
            who = np.fromiter((ids.setdefault(r[0], len(ids)) for r in folded), np.int64, len(folded))
            i, j, y, eps = (np.array([r[k] for r in folded]) for k in (1, 2, 3, 4))
            payload = encode_batch(i, j, y, eps.astype(np.float64), respondents=list(ids), who=who)
            session.add(AnswerLog(survey_id=survey_id, version=state.version, n=len(folded), payload=payload))
        state.answer_log = True
        session.commit()
        return True
    except DBAPIError:
        # A fold committed after this snapshot (PostgreSQL refuses the lock): a later read tries again.
        session.rollback()
        return False
