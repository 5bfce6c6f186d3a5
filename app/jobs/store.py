"""The jobs table: a job's row from its submission to its end, and its recovery.

Everything about a job lives in its ``jobs`` row: kind, parameters, status (queued →
running → done | failed | cancelled), progress, result. A job is stored queued
(:func:`create_job`), claimed, heartbeat and finished by its runner with conditional
UPDATEs (:mod:`app.jobs.execution`), cancelled (:func:`cancel_job`), recovered when its
holder went silent (:func:`recover_lost`) and deleted after :data:`RETENTION`
(docs/how-to/jobs.md).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from ..core.config import setting_from_environment
from ..core.db.models import Job, is_id, new_id, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid, NotFound, TemporarilyUnavailable, TooMany

__all__ = [
    "JOBS_PER_KEY",
    "KINDS",
    "MAX_ATTEMPTS",
    "RETENTION",
    "STALE_SECONDS",
    "cancel_job",
    "create_job",
    "discard_job",
    "get_job",
    "looks_lost",
    "purge_finished",
    "recover_lost",
    "same_active_job",
]

log = logging.getLogger("privrank.jobs")

KINDS = ("ranking", "bootstrap", "plan", "design")
FINAL = ("done", "failed", "cancelled")
ACTIVE = ("queued", "running")
#: A running job whose runner has not heartbeat for this long is lost (retried or
#: failed); so is a queued job a local runner held. Longer than SQLite's busy timeout
#: would let a blocked heartbeat wait, and than any one unit of work. 30 s unless
#: ``PRIVRANK_JOB_STALE_SECONDS`` says otherwise (read when this module is imported;
#: every API process and worker of a service needs the same value).
STALE_SECONDS: float = setting_from_environment("job_stale_seconds")
#: Claims before a lost job fails instead of being queued again.
MAX_ATTEMPTS = 2
#: Jobs queued or running at once: for one key, and for the whole service (beyond
#: them, 429 and 503; nothing is stored).
JOBS_PER_KEY = 10
#: Finished jobs (and their results) are deleted this long after they finished.
RETENTION = timedelta(days=7)


def _now(session: Session) -> datetime:
    """The database's clock (PostgreSQL: every host reads the same one, so heartbeats
    and cutoffs written by different hosts compare); SQLite runs on one host."""
    if session.get_bind().dialect.name == "postgresql":
        return session.scalar(select(func.now()))  # type: ignore[return-value]
    return utcnow()


def create_job(
    session: Session,
    survey_id: str | None,
    kind: str,
    parameters: dict,
    created_by: str,
    backlog: int,
) -> Job:
    """Store a queued job (the caller dispatches it once committed), unless ``created_by``
    has :data:`JOBS_PER_KEY` jobs queued or running (429) or the service ``backlog``
    (503). Checked and stored in one write transaction."""
    if kind not in KINDS:
        raise Invalid(f"kind must be one of {', '.join(KINDS)}")
    begin_write(session)
    active = session.execute(
        select(Job.created_by, func.count()).where(Job.status.in_(ACTIVE)).group_by(Job.created_by)
    ).all()
    mine = sum(n for who, n in active if who == created_by)
    if mine >= JOBS_PER_KEY:
        session.rollback()
        raise TooMany(
            f"this key has {mine} jobs queued or running (at most {JOBS_PER_KEY}); wait for one", 30
        )
    if sum(n for _, n in active) >= backlog:
        session.rollback()
        raise TemporarilyUnavailable("too many jobs are waiting; retry later", 30)
    now = _now(session)
    job = Job(
        id=new_id("job"),
        survey_id=survey_id,
        kind=kind,
        parameters=parameters,
        status="queued",
        progress=0.0,
        attempts=0,
        created_by=created_by,
        created_at=now,
        heartbeat_at=now,
    )
    session.add(job)
    session.commit()
    return job


def same_active_job(session: Session, survey_id: str | None, kind: str, parameters: dict, created_by: str):
    """A job of this key queued or running with exactly these parameters (a repeated
    request, a reload: it is followed again instead of started twice), or None."""
    rows = session.execute(
        select(Job).where(
            Job.survey_id == survey_id if survey_id is not None else Job.survey_id.is_(None),
            Job.kind == kind,
            Job.created_by == created_by,
            Job.status.in_(ACTIVE),
        )
    ).scalars()
    return next((job for job in rows if job.parameters == parameters), None)


def discard_job(session: Session, job_id: str) -> None:
    """Delete a job that was never dispatched (its submission is refused)."""
    begin_write(session)
    session.execute(delete(Job).where(Job.id == job_id, Job.status == "queued"))
    session.commit()


def get_job(session: Session, job_id: str) -> Job:
    job = session.get(Job, job_id) if is_id(job_id, "job") else None
    if job is None:
        raise NotFound("no such job")
    return job


def looks_lost(session: Session, job: Job, queued_after: float) -> bool:
    """Whether a job read now would be recovered by :func:`recover_lost` (read only)."""
    if job.status not in ACTIVE or job.heartbeat_at is None:
        return False
    limit = STALE_SECONDS if job.status == "running" else queued_after
    return job.heartbeat_at < _now(session) - timedelta(seconds=limit)


def cancel_job(session: Session, job_id: str, owner: str | None = None) -> Job:
    """Mark a queued or running job cancelled (its runner stops at its next heartbeat).
    Cancelling a cancelled job is a no-op; a finished one is 409. With ``owner`` (the
    caller's ``created_by``; None for an admin), another caller's job is 404, as if it
    did not exist."""
    if not is_id(job_id, "job"):
        raise NotFound("no such job")
    begin_write(session)
    job = session.execute(select(Job).where(Job.id == job_id).with_for_update()).scalar_one_or_none()
    if job is None or (owner is not None and job.created_by != owner):
        session.rollback()
        raise NotFound("no such job")
    if job.status in ("done", "failed"):
        session.rollback()
        raise Conflict(f"the job has already finished ({job.status})")
    if job.status != "cancelled":
        job.status, job.finished_at = "cancelled", _now(session)
    session.commit()
    return job


def recover_lost(
    session: Session, job_id: str | None = None, queued_after: float = STALE_SECONDS
) -> list[str]:
    """Recover jobs whose holder went silent — one job, or all: a running job whose
    heartbeat is older than :data:`STALE_SECONDS` is queued again (or fails, after
    :data:`MAX_ATTEMPTS` claims); a queued job whose heartbeat is older than
    ``queued_after`` is sent again (its holder, a stopped process or a lost queue
    push, will not run it). Returns the ids to dispatch; their heartbeat is renewed.

    A runner that dies (SIGKILL, a crash, a lost host) stops heartbeating, and its job
    is never stuck in ``running``: it is queued again, or fails with a clear message.
    Lost jobs are looked for whenever a job is read (``GET /v1/jobs/{id}``) and by every
    runner every :data:`STALE_SECONDS`. A local runner's queued jobs carry its heartbeat
    too (its process holds them), so a stopped API process's backlog is recovered the
    same way."""
    now = _now(session)
    stale = or_(
        and_(Job.status == "running", Job.heartbeat_at < now - timedelta(seconds=STALE_SECONDS)),
        and_(Job.status == "queued", Job.heartbeat_at < now - timedelta(seconds=queued_after)),
    )
    where = [stale] if job_id is None else [stale, Job.id == job_id]
    begin_write(session)
    lost = session.execute(select(Job).where(*where).with_for_update(skip_locked=True)).scalars().all()
    again = []
    for job in lost:
        if job.status == "running" and job.attempts >= MAX_ATTEMPTS:
            job.status, job.finished_at = "failed", now
            job.error = f"the runner stopped while running it ({job.attempts} attempts); submit it again"
        else:
            if job.status == "running":
                log.warning("job %s lost by its runner: queued again", job.id)
            job.status, job.runner, job.heartbeat_at = "queued", None, now
            again.append(job.id)
    session.commit()
    return again


def purge_finished(session: Session) -> int:
    """Delete the jobs that finished more than :data:`RETENTION` ago."""
    begin_write(session)
    gone = _count(
        session.execute(delete(Job).where(Job.status.in_(FINAL), Job.finished_at < _now(session) - RETENTION))
    )
    session.commit()
    return gone


def _count(result: Any) -> int:
    """Rows an UPDATE matched (a CursorResult's rowcount)."""
    return int(result.rowcount)


def _claim(session: Session, job_id: str, me: str) -> Job | None:
    begin_write(session)
    now = _now(session)
    claimed = _count(
        session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued")
            .values(status="running", runner=me, started_at=now, heartbeat_at=now, attempts=Job.attempts + 1)
        )
    )
    session.commit()
    return session.get(Job, job_id, populate_existing=True) if claimed else None


def _beat(session: Session, job_id: str, me: str, progress: float) -> bool:
    """Heartbeat and progress; False when the job is no longer this runner's (cancelled, lost)."""
    begin_write(session)
    ok = _count(
        session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.runner == me)
            .values(heartbeat_at=_now(session), progress=progress)
        )
    )
    session.commit()
    return bool(ok)


def _finish(session: Session, job_id: str, me: str, **values: Any) -> bool:
    begin_write(session)
    now = _now(session)
    ok = _count(
        session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.runner == me)
            .values(**{"finished_at": now, "heartbeat_at": now, **values})
        )
    )
    session.commit()
    return bool(ok)
