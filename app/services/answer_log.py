"""The cluster-robust sums of each survey, kept up to date from the answer log.

Every fold logs its answers with their respondents (:class:`~app.db.models.AnswerLog`,
at the version the fold gives the survey). :class:`AnswerLogStore` keeps, per survey,
the :class:`~app.stats.clusters.ClusterMoments` of the folds it has read and, when
asked for a version, reads only the folds after the last one it has: the moments are
then exactly those of the pair statistics at that version (same folds), and reading a
ranking's cluster-robust covariance costs O(new answers × their respondents' earlier
answers + P² m) rather than a pass over every stored answer (docs/uncertainty.md §3,
"Keeping the meat up to date as answers arrive"; capacity in docs/capacity.md).

Kept in the :class:`~app.services.analysis.FitCache`'s memory budget, one state per
survey, updated by one request at a time (a per-survey lock); the moments handed out
are immutable, so a request keeps using the version it read while another advances
the state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import AnswerLog, SurveyStats
from ..stats.clusters import ClusterMoments
from .aggregation import decode_batch
from .cache import OBJECT_BYTES, ByteLRU

__all__ = ["AnswerLogStore"]

#: Log rows read per statement when catching up (a fold's payload holds its answers).
_READ_CHUNK = 2_000


@dataclass(eq=False)
class _State:
    version: int = 0
    moments: ClusterMoments = field(default_factory=ClusterMoments.empty)
    codes: dict[str, int] = field(default_factory=dict)

    def size(self) -> int:
        m = self.moments
        return m.nbytes + m.rows_nbytes + len(self.codes) * (2 * OBJECT_BYTES + 48)


class AnswerLogStore:
    """Per survey, the :class:`~app.stats.clusters.ClusterMoments` of the logged folds."""

    def __init__(self, lru: ByteLRU) -> None:
        self._lru = lru
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, survey_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(survey_id, threading.Lock())

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
            if row is None or not row.answer_log:
                return None
            target, total = int(row.version), int(row.n_comparisons)
            state = self._lru.pop(key) or _State()
            try:
                self._catch_up(session, survey_id, state, target, check)
            finally:
                self._lru.put(key, state, state.size())
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
            parts = []
            for _, payload in rows:
                batch = decode_batch(payload)
                if batch.respondents is None or batch.who is None:  # pragma: no cover - the fold writes PRB3
                    raise ValueError("an answer log entry without respondents")
                local = np.fromiter(
                    (codes.setdefault(r, len(codes)) for r in batch.respondents),
                    dtype=np.int64,
                    count=len(batch.respondents),
                )
                parts.append((local[batch.who], batch.i, batch.j, batch.y_tilde, batch.epsilon))
            cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
            state.moments = state.moments.added(*cols)
            state.version = int(rows[-1][0])
