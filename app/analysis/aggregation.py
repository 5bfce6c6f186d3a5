"""Per-pair sufficient statistics kept in the database.

Writers append each accepted batch to ``pending_batches`` in the same
transaction as its comparisons. Readers fold pending batches into ``pair_stats``
under the survey's ``survey_stats`` row lock, deleting exactly the batch rows
they read (``DELETE … RETURNING``): a batch committed while a fold runs is not
in that statement's snapshot and stays for the next fold, so every comparison is
counted exactly once. The fold builds the statistics with
:func:`app.stats.pair_stats` — the same code that analysts run on the exported
CSV — so the service's ranking and the library's agree to rounding.
"""

from __future__ import annotations

import logging
import math
import struct
import threading
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from ..core.db.models import AnswerLog, PairStat, PendingBatch, RankingStatsRow, Survey, SurveyStats, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid
from ..goals.service import GoalSpec, fold_goal
from ..stats import PairStats, debias, pair_stats
from ..stats.rankings import RankingStats, ranking_stats
from ..surveys.items import item_count, survey_items
from ..surveys.results import CoverageItem, CoverageOut
from ..surveys.service import require_local, require_pairwise

log = logging.getLogger("privrank.aggregation")

__all__ = [
    "RANKINGS_MAGIC",
    "Batch",
    "RankingSnapshot",
    "Snapshot",
    "coverage",
    "decode_batch",
    "decode_rankings",
    "encode_batch",
    "encode_rankings",
    "fold_pending",
    "fold_soon",
    "item_counts",
    "read_ranking_snapshot",
    "read_snapshot",
]

_HEADER = struct.Struct("<4sI")
_MAGIC = b"PRB1"
_HEADER2 = struct.Struct("<4sII")
_MAGIC2 = b"PRB2"
_HEADER3 = struct.Struct("<4sIIII")
_MAGIC3 = b"PRB3"
_RANKINGS_HEADER = struct.Struct("<4sII")
RANKINGS_MAGIC = b"PRR1"
_STATS_HEADER = struct.Struct("<4sIQ")
_STATS_MAGIC = b"PRS1"


def encode_batch(
    i: NDArray[np.integer],
    j: NDArray[np.integer],
    y_tilde: NDArray[np.integer],
    epsilon: NDArray[np.floating],
    flags: NDArray[np.integer] | None = None,
    ticket_m: int = 0,
    respondents: Sequence[str] = (),
    who: NDArray[np.integer] | None = None,
) -> bytes:
    """Pack a batch: header, then i, j (int32), ỹ (int8), ε (float64), little-endian.

    A goal survey's batch also carries, per answer, which of its items the certificate
    counts it for (``flags``, :mod:`app.goals.service`), and the number of items its
    tickets were issued for (``ticket_m``): format PRB2.

    With ``respondents`` (their ids) and ``who`` (per answer, its respondent's index in
    ``respondents``; None: all the first one's), the batch says who gave each answer, so
    that the fold can log the answers by respondent (:class:`~app.core.db.models.AnswerLog`):
    format PRB3, with flags (zeros when there are none), then ``who`` (uint32), then the
    ids, newline-separated (UTF-8)."""
    n = int(np.size(i))
    if respondents:
        ids = "\n".join(respondents).encode()
        if any("\n" in r for r in respondents):
            raise ValueError("a respondent id cannot contain a newline")
        index = np.zeros(n, dtype="<u4") if who is None else np.asarray(who, dtype="<u4")
        return b"".join(
            (
                _HEADER3.pack(_MAGIC3, n, ticket_m, len(respondents), len(ids)),
                np.asarray(i, dtype="<i4").tobytes(),
                np.asarray(j, dtype="<i4").tobytes(),
                np.asarray(y_tilde, dtype="i1").tobytes(),
                np.asarray(epsilon, dtype="<f8").tobytes(),
                (np.zeros(n, dtype="u1") if flags is None else np.asarray(flags, dtype="u1")).tobytes(),
                index.tobytes(),
                ids,
            )
        )
    parts = [
        _HEADER.pack(_MAGIC, n) if flags is None else _HEADER2.pack(_MAGIC2, n, ticket_m),
        np.asarray(i, dtype="<i4").tobytes(),
        np.asarray(j, dtype="<i4").tobytes(),
        np.asarray(y_tilde, dtype="i1").tobytes(),
        np.asarray(epsilon, dtype="<f8").tobytes(),
    ]
    if flags is not None:
        parts.append(np.asarray(flags, dtype="u1").tobytes())
    return b"".join(parts)


@dataclass(frozen=True)
class Batch:
    """A decoded pending batch (cf. :func:`encode_batch`)."""

    i: NDArray[np.int64]
    j: NDArray[np.int64]
    y_tilde: NDArray[np.int8]
    epsilon: NDArray[np.float64]
    flags: NDArray[np.uint8]
    ticket_m: int
    #: The ids of the batch's respondents and, per answer, its respondent's index among
    #: them (None: a batch that does not say; formats PRB1 and PRB2).
    respondents: tuple[str, ...] | None = None
    who: NDArray[np.int64] | None = None


def decode_batch(payload: bytes) -> Batch:
    magic = payload[:4]
    if magic == _MAGIC3:
        _, n, ticket_m, n_resp, n_ids = _HEADER3.unpack_from(payload)
        off = _HEADER3.size
        if len(payload) != off + 22 * n + n_ids:
            raise ValueError("corrupt pending batch")
        ids = payload[off + 22 * n :].decode()
        respondents = tuple(ids.split("\n")) if n_resp else ()
        who = np.frombuffer(payload, "<u4", n, off + 18 * n).astype(np.int64)
        if len(respondents) != n_resp or (n and int(who.max()) >= n_resp):
            raise ValueError("corrupt pending batch")
        size = 18
    elif magic == _MAGIC2:
        _, n, ticket_m = _HEADER2.unpack_from(payload)
        off, size = _HEADER2.size, 18
        respondents, who = None, None
    else:
        _, n = _HEADER.unpack_from(payload)
        off, size, ticket_m = _HEADER.size, 17, 0
        respondents, who = None, None
        if magic != _MAGIC or len(payload) != off + size * n:
            raise ValueError("corrupt pending batch")
    if magic == _MAGIC2 and len(payload) != off + size * n:
        raise ValueError("corrupt pending batch")
    i = np.frombuffer(payload, "<i4", n, off)
    j = np.frombuffer(payload, "<i4", n, off + 4 * n)
    y = np.frombuffer(payload, "i1", n, off + 8 * n)
    eps = np.frombuffer(payload, "<f8", n, off + 9 * n)
    flags = np.frombuffer(payload, "u1", n, off + 17 * n) if size == 18 else np.zeros(n, np.uint8)
    return Batch(i.astype(np.int64), j.astype(np.int64), y, eps, flags, ticket_m, respondents, who)


def encode_rankings(orderings: NDArray[np.integer], epsilon: NDArray[np.floating]) -> bytes:
    """Pack synthetic orderings (n × m item positions, best first) and their ε."""
    arr = np.atleast_2d(np.asarray(orderings, dtype="<i4"))
    n, m = arr.shape
    return b"".join(
        (
            _RANKINGS_HEADER.pack(RANKINGS_MAGIC, n, m),
            arr.tobytes(),
            np.asarray(epsilon, dtype="<f8").reshape(n).tobytes(),
        )
    )


def decode_rankings(payload: bytes) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    magic, n, m = _RANKINGS_HEADER.unpack_from(payload)
    if magic != RANKINGS_MAGIC or len(payload) != _RANKINGS_HEADER.size + (4 * m + 8) * n:
        raise ValueError("corrupt pending rankings")
    off = _RANKINGS_HEADER.size
    orders = np.frombuffer(payload, "<i4", n * m, off).reshape(n, m).astype(np.int64)
    eps = np.frombuffer(payload, "<f8", n, off + 4 * n * m)
    return orders, eps


def _pack_stats(stats: RankingStats) -> bytes:
    body = b"".join(np.asarray(getattr(stats, f), dtype="<i8").tobytes() for f in RankingStats.FIELDS)
    return _STATS_HEADER.pack(_STATS_MAGIC, stats.n_items, stats.n) + zlib.compress(body, 1)


def _unpack_stats(payload: bytes) -> RankingStats:
    magic, m, n = _STATS_HEADER.unpack_from(payload)
    body = zlib.decompress(payload[_STATS_HEADER.size :])
    if magic != _STATS_MAGIC or len(body) != 8 * (m + 3 * m * m):
        raise ValueError("corrupt ranking statistics")
    arr = np.frombuffer(body, "<i8").astype(np.int64)
    mats = arr[m:].reshape(3, m, m)
    return RankingStats(m, n, arr[:m], mats[0], mats[1], mats[2])


def _upsert(session: Session):
    return pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert


def fold_pending(session: Session, survey_id: str, wait: bool = True) -> int:
    """Fold the survey's pending batches into ``pair_stats``; returns comparisons folded.

    ``wait=False`` gives up at once when another fold holds the lock (PostgreSQL;
    SQLite serializes writers itself). Runs in its own transaction
    (:func:`~app.core.db.session.begin_write` closes a read transaction first).
    """
    pending = session.scalar(select(PendingBatch.id).where(PendingBatch.survey_id == survey_id).limit(1))
    if pending is None:
        return 0
    begin_write(session)
    lock = select(SurveyStats).where(SurveyStats.survey_id == survey_id).with_for_update(skip_locked=not wait)
    state = session.scalars(lock).first()
    if state is None:
        session.rollback()
        return 0
    payloads = session.scalars(
        delete(PendingBatch).where(PendingBatch.survey_id == survey_id).returning(PendingBatch.payload)
    ).all()
    if not payloads:
        session.rollback()
        return 0
    if payloads[0][:4] == RANKINGS_MAGIC:  # a ranking survey's batches are all rankings
        return _fold_rankings(session, survey_id, state, payloads)
    parts = [decode_batch(p) for p in payloads]
    i, j, y, eps = (np.concatenate([getattr(p, f) for p in parts]) for f in ("i", "j", "y_tilde", "epsilon"))
    goal_json, privacy_model = session.execute(
        select(Survey.goal, Survey.privacy_model).where(Survey.id == survey_id)
    ).one()
    goal = GoalSpec.from_json(goal_json)
    if privacy_model == "local":
        _log_answers(session, survey_id, state, parts, i, j, y, eps)
    if goal is not None:
        flags = np.concatenate([p.flags for p in parts])
        ticket_m = np.concatenate([np.full(p.i.size, p.ticket_m, dtype=np.int64) for p in parts])
        m = item_count(session, survey_id)
        fold_goal(session, survey_id, goal, state, m, i, j, debias(y, eps), eps, flags, ticket_m)
    batch = pair_stats(int(max(i.max(), j.max())) + 1, i, j, y, eps)
    rows = [
        {
            "survey_id": survey_id,
            "i": int(a),
            "j": int(b),
            "n": int(n),
            "sum_y": float(sy),
            "sum_z": float(sz),
            "sum_z2": float(sz2),
            "sum_v": float(sv),
        }
        for a, b, n, sy, sz, sz2, sv in zip(
            batch.i, batch.j, batch.n, batch.sum_y, batch.sum_z, batch.sum_z2, batch.sum_v, strict=True
        )
    ]
    stmt = _upsert(session)(PairStat)
    stmt = stmt.on_conflict_do_update(
        index_elements=[PairStat.survey_id, PairStat.i, PairStat.j],
        set_={
            "n": PairStat.n + stmt.excluded.n,
            "sum_y": PairStat.sum_y + stmt.excluded.sum_y,
            "sum_z": PairStat.sum_z + stmt.excluded.sum_z,
            "sum_z2": PairStat.sum_z2 + stmt.excluded.sum_z2,
            "sum_v": PairStat.sum_v + stmt.excluded.sum_v,
        },
    )
    session.execute(stmt, rows)
    state.item_counts = _item_counts(session, survey_id, state, i, j)
    state.version += 1
    state.n_comparisons += int(i.size)
    low = float(eps.min())
    state.epsilon_min = low if state.epsilon_min is None else min(state.epsilon_min, low)
    state.updated_at = utcnow()
    session.commit()
    return int(i.size)


def _log_answers(
    session: Session,
    survey_id: str,
    state: SurveyStats,
    parts: Sequence[Batch],
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    y: NDArray[np.int8],
    eps: NDArray[np.float64],
) -> None:
    """Log this fold's answers with their respondents (:class:`~app.core.db.models.AnswerLog`)
    at the version the fold gives the survey. A batch that does not say who gave its answers
    (written before batches did) ends the survey's log, until a ranking starts it again
    (:func:`app.analysis.answer_log.start_log`)."""
    if not state.answer_log:
        return
    if any(p.respondents is None for p in parts):
        state.answer_log = False
        return
    ids: dict[str, int] = {}
    who = []
    for p in parts:
        assert p.respondents is not None
        assert p.who is not None
        codes = np.array([ids.setdefault(r, len(ids)) for r in p.respondents], dtype=np.int64)
        who.append(codes[p.who])
    payload = encode_batch(i, j, y, eps, respondents=list(ids), who=np.concatenate(who))
    session.add(AnswerLog(survey_id=survey_id, version=state.version + 1, n=int(i.size), payload=payload))


def _item_counts(
    session: Session, survey_id: str, state: SurveyStats, i: NDArray[np.int64], j: NDArray[np.int64]
) -> bytes:
    """The survey's comparisons per item after this fold, packed (little-endian int64 by
    position). A survey folded before the counts existed gets them from ``pair_stats``
    once (here, under the fold's lock, which includes this fold's rows)."""
    size = int(max(i.max(), j.max())) + 1
    if state.item_counts is None:
        rows = session.execute(
            select(PairStat.i, PairStat.j, PairStat.n).where(PairStat.survey_id == survey_id)
        ).all()
        counts = np.zeros(size, dtype=np.int64)
        if rows:
            a = np.array(rows, dtype=np.int64)
            size = max(size, int(a[:, :2].max()) + 1)
            counts = np.bincount(a[:, 0], a[:, 2], size) + np.bincount(a[:, 1], a[:, 2], size)
        return counts.astype("<i8").tobytes()
    counts = np.frombuffer(state.item_counts, dtype="<i8").astype(np.int64)
    if counts.size < size:
        counts = np.concatenate([counts, np.zeros(size - counts.size, dtype=np.int64)])
    counts += np.bincount(i, minlength=counts.size) + np.bincount(j, minlength=counts.size)
    return counts.astype("<i8").tobytes()


def item_counts(payload: bytes | None, m: int) -> NDArray[np.int64]:
    """Comparisons per item position 0 … m−1 from a survey's packed counts."""
    counts = np.zeros(m, dtype=np.int64)
    if payload:
        stored = np.frombuffer(payload, dtype="<i8")[:m]
        counts[: stored.size] = stored
    return counts


#: Seconds between two background folds of one survey started by one process: the goal's
#: state lags the answers by at most this much plus a fold, and a busy survey costs one
#: fold per interval whatever its request rate.
FOLD_INTERVAL = 0.25

#: Surveys whose fold this process has handed to its background thread and not finished,
#: and when each survey's last background fold started.
_FOLDING: set[str] = set()
_FOLDED_AT: dict[str, float] = {}
_FOLDING_LOCK = threading.Lock()
_FOLDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="privrank-fold")


def fold_soon(session: Session, survey_id: str) -> None:
    """Fold the survey's pending batches in this process's background thread, unless a
    fold of it is queued or running here or started less than :data:`FOLD_INTERVAL`
    ago; returns at once.

    ``GET …/pairs`` of a goal survey reads the goal's state as last folded and never
    waits for a fold (a fold writes and commits): the request that notices pending
    answers starts one, and later requests see its result. Errors are logged (the next
    request tries again)."""
    now = time.monotonic()
    with _FOLDING_LOCK:
        if survey_id in _FOLDING or now - _FOLDED_AT.get(survey_id, -math.inf) < FOLD_INTERVAL:
            return
        _FOLDING.add(survey_id)
        _FOLDED_AT[survey_id] = now
        if len(_FOLDED_AT) > 10_000:  # forget the oldest surveys (they fold again at once)
            for old in sorted(_FOLDED_AT, key=_FOLDED_AT.__getitem__)[:5_000]:
                del _FOLDED_AT[old]
    bind = session.get_bind()

    def run() -> None:
        try:
            with Session(bind) as background:
                fold_pending(background, survey_id, wait=False)
        except Exception as exc:  # by type only: a database error's message carries its SQL parameters
            log.warning(
                "survey %s: background fold failed (%s); the next request retries",
                survey_id,
                type(exc).__name__,
            )
        finally:
            with _FOLDING_LOCK:
                _FOLDING.discard(survey_id)

    _FOLDER.submit(run)


def _fold_rankings(session: Session, survey_id: str, state: SurveyStats, payloads: Sequence[bytes]) -> int:
    """Add pending synthetic rankings to the survey's ``ranking_stats`` (caller holds the lock)."""
    parts = [decode_rankings(p) for p in payloads]
    orders = np.concatenate([p[0] for p in parts])
    eps = np.concatenate([p[1] for p in parts])
    m = orders.shape[1]
    batch = ranking_stats(orders, m)
    row = session.get(RankingStatsRow, survey_id, populate_existing=True)
    if row is None:
        session.add(RankingStatsRow(survey_id=survey_id, n_items=m, n=batch.n, payload=_pack_stats(batch)))
    else:
        total = _unpack_stats(row.payload) + batch
        row.n, row.payload = total.n, _pack_stats(total)
    state.version += 1
    state.n_comparisons += int(orders.shape[0])  # ranking surveys count rankings here
    low = float(eps.min())
    state.epsilon_min = low if state.epsilon_min is None else min(state.epsilon_min, low)
    state.updated_at = utcnow()
    session.commit()
    return int(orders.shape[0])


@dataclass(frozen=True)
class RankingSnapshot:
    """A ranking survey's folded statistics at one data version."""

    version: int
    epsilon_min: float | None
    stats: RankingStats


def read_ranking_snapshot(session: Session, survey_id: str, n_items: int) -> RankingSnapshot:
    """The folded ranking statistics and their version, read consistently (cf. :func:`read_snapshot`)."""
    for _ in range(20):
        state = _state(session, survey_id)
        version = state.version
        row = session.get(RankingStatsRow, survey_id, populate_existing=True)
        again = _state(session, survey_id)
        if again.version == version:
            break
    else:
        raise Conflict("the survey's data changed too quickly to read consistently; retry")
    stats = RankingStats.empty(n_items) if row is None else _unpack_stats(row.payload)
    return RankingSnapshot(version, state.epsilon_min, stats)


@dataclass(frozen=True)
class Snapshot:
    """A consistent view of a survey's statistics at one data version."""

    version: int
    n_comparisons: int
    epsilon_min: float | None
    stats: PairStats | None  # None when only the version was read

    @property
    def loaded_stats(self) -> PairStats:
        """``stats`` of a snapshot read with them (``need_stats`` was true for its version)."""
        if self.stats is None:
            raise RuntimeError("this snapshot was read without its statistics")
        return self.stats


def _state(session: Session, survey_id: str) -> SurveyStats:
    state = session.get(SurveyStats, survey_id, populate_existing=True)
    if state is None:  # pragma: no cover - created with the survey
        raise LookupError(survey_id)
    return state


def read_snapshot(
    session: Session, survey_id: str, n_items: int, need_stats=lambda version: True
) -> Snapshot:
    """Read the folded statistics and their version consistently.

    ``need_stats(version)`` lets a caller with a cached fit skip reading the
    pairs. Under READ COMMITTED each statement sees its own snapshot, so the
    version is read before and after the pairs and the read is retried if a fold
    committed in between.
    """
    for _ in range(20):
        state = _state(session, survey_id)
        version = state.version
        if not need_stats(version):
            return Snapshot(version, state.n_comparisons, state.epsilon_min, None)
        rows = session.execute(
            select(
                PairStat.i,
                PairStat.j,
                PairStat.n,
                PairStat.sum_y,
                PairStat.sum_z,
                PairStat.sum_z2,
                PairStat.sum_v,
            )
            .where(PairStat.survey_id == survey_id)
            .order_by(PairStat.i, PairStat.j)
        ).all()
        again = _state(session, survey_id)
        if again.version == version:
            break
    else:
        raise Conflict("the survey's data changed too quickly to read consistently; retry")
    eps_min = state.epsilon_min if state.epsilon_min is not None else float("inf")
    if rows:
        cols = list(zip(*rows, strict=True))
        i, j, n = (np.asarray(c, dtype=np.int64) for c in cols[:3])
        sum_y, sum_z, sum_z2, sum_v = (np.asarray(c, dtype=np.float64) for c in cols[3:])
        stats = PairStats(n_items, i, j, n, sum_y, sum_z, sum_z2, sum_v, epsilon_min=eps_min)
    else:
        stats = PairStats.empty(n_items)
    return Snapshot(version, state.n_comparisons, state.epsilon_min, stats)


#: Largest survey whose full pair-count matrix the coverage view returns.
COVERAGE_MAX_ITEMS = 300


def coverage(session: Session, survey: Survey) -> CoverageOut:
    """Stored comparisons per pair of a local pairwise survey (folded statistics first)."""
    require_local(survey)
    require_pairwise(survey)
    items = survey_items(session, survey.id)
    m = len(items)
    if m > COVERAGE_MAX_ITEMS:
        raise Invalid(f"the coverage matrix is available for at most {COVERAGE_MAX_ITEMS} items")
    fold_pending(session, survey.id, wait=True)
    counts = [[0 if a != b else None for b in range(m)] for a in range(m)]
    for i, j, n in session.execute(
        select(PairStat.i, PairStat.j, PairStat.n).where(PairStat.survey_id == survey.id)
    ):
        if i < m and j < m:
            counts[i][j] = counts[j][i] = int(n)
    observed = sum(1 for a in range(m) for b in range(a + 1, m) if counts[a][b])
    return CoverageOut(
        survey_id=survey.id,
        items=[CoverageItem(item_id=it.id, label=it.label) for it in items],
        counts=counts,
        pairs_observed=observed,
        pairs_total=m * (m - 1) // 2,
    )
