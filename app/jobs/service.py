"""Long analyses as jobs: submitted by one request, run outside it, read by any instance.

A bootstrap on a large survey or a planner solve can take minutes: too long for a
request. ``POST /v1/surveys/{sid}/jobs`` stores a *job* (its ``jobs`` row is the whole
job) and returns at once; a runner claims it, does the work and writes the result
(:func:`execute`); ``GET /v1/jobs/{id}`` reads it from any instance; ``DELETE`` cancels
it (:func:`cancel_job`). Runners are a bounded thread pool in each API process
(:class:`LocalRunner`, the default; 503 beyond its backlog), or, with
``PRIVRANK_JOB_QUEUE=rq`` and ``REDIS_URL``, ``privrank worker`` processes on an RQ queue
(:func:`run_job`). Jobs of a runner that died are recovered (:func:`recover_lost`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from ..core.config import setting_from_environment
from ..core.db.models import Job, SurveyStats, is_id, new_id, utcnow
from ..core.db.session import begin_write
from ..core.deadline import SHUTDOWN, Deadline, OutOfTime
from ..core.errors import Conflict, Invalid, NotFound, TemporarilyUnavailable, TooMany, invalid_from

__all__ = [
    "HEARTBEAT_SECONDS",
    "KINDS",
    "MAX_ATTEMPTS",
    "STALE_SECONDS",
    "JobContext",
    "JobDeadline",
    "LocalRunner",
    "QueueRunner",
    "TemporarilyUnavailable",
    "cancel_job",
    "check_job",
    "create_job",
    "discard_job",
    "execute",
    "get_job",
    "looks_lost",
    "predicted_seconds",
    "purge_finished",
    "recover_lost",
    "same_active_job",
]

log = logging.getLogger("privrank.jobs")

KINDS = ("ranking", "bootstrap", "plan", "design")
FINAL = ("done", "failed", "cancelled")
ACTIVE = ("queued", "running")
#: How often a runner writes a running job's progress and heartbeat.
HEARTBEAT_SECONDS = 2.0
#: A running job whose runner has not heartbeat for this long is lost (retried or
#: failed); so is a queued job a local runner held. Longer than SQLite's busy timeout
#: would let a blocked heartbeat wait, and than any one unit of work. 30 s unless
#: ``PRIVRANK_JOB_STALE_SECONDS`` says otherwise (read when this module is imported;
#: every API process and worker of a service needs the same value).
STALE_SECONDS: float = setting_from_environment("job_stale_seconds")
#: A job waiting in the RQ queue this long is sent again (a push lost with Redis, or
#: a dispatch that failed); a duplicate is harmless: only one claim succeeds.
QUEUE_RESEND_SECONDS = 300.0

#: ``privrank worker`` without Redis: its wait before trying again starts here and doubles
#: up to the cap (RQ's own wait for a job uses the same cap), and starts over once Redis
#: answered for longer than the cap.
WORKER_BACKOFF_FIRST = 0.5
WORKER_BACKOFF_CAP = 30.0
#: Claims before a lost job fails instead of being queued again.
MAX_ATTEMPTS = 2
#: Jobs queued or running at once: for one key, and for the whole service (beyond
#: them, 429 and 503; nothing is stored).
JOBS_PER_KEY = 10
#: Finished jobs (and their results) are deleted this long after they finished.
RETENTION = timedelta(days=7)


class JobDeadline(Deadline):
    """A :class:`Deadline` that also counts the work's checks, for the progress: the
    work calls ``check()`` once per unit (a replicate, a simulated survey), and the
    progress is the units done over the units expected (an estimate where the
    number of units depends on the data: capped below 1 until the job is done)."""

    def __init__(self, seconds: float, expected_units: int, what: str) -> None:
        super().__init__(seconds, what=what)
        self.units = 0
        self.expected = max(1, int(expected_units))

    def check(self) -> None:
        self.units += 1
        super().check()

    def check_waiting(self) -> None:
        super().check()  # waiting for a turn is not work done

    @property
    def progress(self) -> float:
        return min(0.99, self.units / self.expected)


class JobContext:
    """What running a job needs from its process: sessions, the analysis cache and
    its work slots, the time budget of one job; and whether the runner is stopping
    (its running jobs are then given back, as on shutdown)."""

    def __init__(self, session_factory: sessionmaker[Session], fit_cache: Any, seconds: float) -> None:
        self.session_factory = session_factory
        self.fit_cache = fit_cache
        self.seconds = seconds
        self.stopping = threading.Event()
        self.running: set[JobDeadline] = set()  # the deadlines of the jobs running now
        self.lock = threading.Lock()

    def stop_running(self) -> None:
        """Stop every running job at its next check; each is given back (queued)."""
        self.stopping.set()
        with self.lock:
            for deadline in self.running:
                deadline.cancel()


def _now(session: Session) -> datetime:
    """The database's clock (PostgreSQL: every host reads the same one, so heartbeats
    and cutoffs written by different hosts compare); SQLite runs on one host."""
    if session.get_bind().dialect.name == "postgresql":
        return session.scalar(select(func.now()))  # type: ignore[return-value]
    return utcnow()


def runner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


# -- the jobs table -----------------------------------------------------------------


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


# -- what runs inline and what as a job -------------------------------------------------

#: Survey-plan work (simulated comparisons, app.stats.survey_plan) done per second on
#: one core: the slow end of the range at m = 100 (the survey-planner table of
#: ``python -m tests.benchmarks.bench_coverage`` times :func:`plan_survey`).
PLAN_UNITS_PER_SECOND = 1.5e5
#: Candidate sizes a survey plan's search simulates (doubling, then bisection).
PLAN_SEARCH_STEPS = 12


def predicted_seconds(kind: str, parameters: dict, n_items: int, n_comparisons: int) -> float:
    """What a job of ``kind`` is expected to take on a survey of ``n_items`` items and
    ``n_comparisons`` answers: a bootstrap's replicates
    (:func:`app.analysis.bootstrap.bootstrap_seconds`), or a survey plan's simulated
    comparisons (at most the planner's work bound for a search). Fits and sandwich
    intervals count as nothing: they answer inline."""
    from ..analysis.bootstrap import BOOTSTRAP_REPLICATES, bootstrap_seconds
    from ..stats.survey_plan import MAX_SURVEY_PLAN_WORK

    p = parameters
    if kind == "bootstrap" or (kind == "ranking" and p.get("uncertainty") == "bootstrap"):
        return bootstrap_seconds(
            n_items, n_comparisons, p.get("replicates", BOOTSTRAP_REPLICATES), p.get("covariance", "cluster")
        )
    if kind == "design":
        from ..stats.planner import epsilon_distribution, plan_seconds

        levels = 1  # as the planner counts them: a solve for ε tries one level at a time
        if p.get("epsilon") is not None and p.get("solve") != "epsilon":
            with suppress(ValueError):  # refused with its own message when run
                levels = epsilon_distribution(p["epsilon"], p.get("weights"))[0].size
        solving = p.get("solve", "none") != "none"
        first = 10 if p.get("solve") == "respondents" else (p.get("respondents") or 10)
        one = plan_seconds(n_items, first * p["pairs_per_respondent"], levels, p.get("replications", 200))
        return one * (PLAN_SEARCH_STEPS if solving else 1)
    if kind == "plan":
        added = p.get("respondents")
        per_new = p.get("pairs_per_respondent") or 10
        comparisons = n_comparisons + (added if added is not None else 10) * per_new
        units = (comparisons + n_items**3 / 50) * p.get("replications", 100)
        if added is None:
            units = min(units * PLAN_SEARCH_STEPS, MAX_SURVEY_PLAN_WORK)
        return units / PLAN_UNITS_PER_SECOND
    return 0.0


def check_job(session: Session, survey: Any, kind: str, parameters: dict, seconds: float) -> None:
    """Refuse (422), before anything is stored, what the job would refuse when run and
    can be known now: the synchronous endpoint's checks of the parameters against the
    survey (its items, its answers), and work predicted past twice the job's time
    budget ``seconds`` (as the synchronous endpoints refuse work past twice theirs)."""
    from ..analysis.bootstrap import BOOTSTRAP_MAX_COMPARISONS
    from ..analysis.service import check_ranking_parameters
    from ..planning.service import check_pilot_scores
    from ..stats.planner import epsilon_distribution
    from ..stats.survey_plan import MAX_SURVEY_PLAN_ITEMS
    from ..surveys.items import active_item_count

    p = parameters
    if kind == "design":
        if p["k"] >= p["items"]:
            raise Invalid("k must be less than the number of items")
        if p.get("scores") is not None and len(p["scores"]) != p["items"]:
            raise Invalid(f"scores needs one value per item ({p['items']})")
        check_pilot_scores(p.get("scores"))
        if p.get("epsilon") is not None:
            try:
                epsilon_distribution(p["epsilon"], p.get("weights"))
            except ValueError as exc:
                raise invalid_from(exc) from None
        if p.get("solve", "none") != "none" and p.get("target") is None:
            raise Invalid("solve needs a target")
        predicted = predicted_seconds(kind, p, p["items"], 0)
        if predicted > 2 * seconds:
            raise Invalid(
                f"this plan would take about {predicted:.0f} s here, beyond twice a job's time budget of "
                f"{seconds:g} s: ask for fewer replications, items or epsilon values"
            )
        return
    m = active_item_count(session, survey)  # what the ranking and the planners see
    if kind in ("ranking", "bootstrap"):
        uncertainty = "bootstrap" if kind == "bootstrap" else p.get("uncertainty", "sandwich")
        check_ranking_parameters(
            p.get("method", "debiased_mle"),
            p.get("lambda"),
            p.get("confidence", 0.95),
            uncertainty,
            p.get("covariance", "cluster"),
            p.get("replicates", 200),
        )
        if p.get("k") is not None and not 1 <= p["k"] <= m:
            raise Invalid(f"k must be between 1 and the number of items ({m})")
        stats = session.get(SurveyStats, survey.id)
        if (
            uncertainty == "bootstrap"
            and stats is not None
            and stats.n_comparisons > BOOTSTRAP_MAX_COMPARISONS
        ):
            raise Invalid(
                f"uncertainty=bootstrap is for small samples (at most {BOOTSTRAP_MAX_COMPARISONS} "
                "comparisons); use the default sandwich intervals"
            )
        n = int(stats.n_comparisons) if stats is not None else 0
        predicted = predicted_seconds("ranking", {**p, "uncertainty": uncertainty}, m, n)
        if predicted > 2 * seconds:
            raise Invalid(
                f"uncertainty=bootstrap with {p.get('replicates', 200)} replicates would take about "
                f"{predicted:.0f} s here, beyond twice a job's time budget of {seconds:g} s; ask for fewer "
                "replicates"
            )
        return
    if not 2 <= m <= MAX_SURVEY_PLAN_ITEMS:
        raise Invalid(f"planning from a survey needs 2 to {MAX_SURVEY_PLAN_ITEMS} items (this one has {m})")
    if not 1 <= p["k"] < m:
        raise Invalid(f"k must be between 1 and {m - 1} (the number of items − 1)")
    if p.get("scores") is not None and len(p["scores"]) != m:
        raise Invalid(f"scores needs one value per item, in the survey's item order ({m} values)")
    check_pilot_scores(p.get("scores"))
    stats = session.get(SurveyStats, survey.id)
    n = int(stats.n_comparisons) if stats is not None else 0  # as last folded: a lower bound
    if p.get("respondents") is not None:  # one size: its work is known now (a search stops at the bound)
        from ..stats.survey_plan import MAX_SURVEY_PLAN_WORK

        per_new = p.get("pairs_per_respondent") or 1  # at least one pair each: a lower bound
        units = (n + p["respondents"] * per_new + m**3 / 50) * p.get("replications", 100)
        if units > MAX_SURVEY_PLAN_WORK:
            raise Invalid(
                f"too much work: {p.get('replications', 100)} replicates of at least "
                f"{n + p['respondents'] * per_new:,.0f} comparisons over {m} items exceed the bound of "
                f"{MAX_SURVEY_PLAN_WORK:,} units; ask for fewer respondents or replications"
            )


# -- running one job -----------------------------------------------------------------


def _work(kind: str, parameters: dict, ctx: JobContext) -> tuple[Callable[..., Any], int]:
    """The function that does a job (called with session, survey and deadline) and the
    number of units of work it is expected to check in."""
    from ..analysis.service import ranking
    from ..planning.service import plan_from_survey

    p = dict(parameters)
    if kind in ("ranking", "bootstrap"):
        if kind == "bootstrap":
            p["uncertainty"] = "bootstrap"
        expected = p.get("replicates", 200) if p.get("uncertainty") == "bootstrap" else 3

        def run(session, survey, deadline):
            return ranking(
                session,
                survey,
                ctx.fit_cache,
                p.get("method", "debiased_mle"),
                p.get("lambda"),
                p.get("k"),
                p.get("confidence", 0.95),
                p.get("uncertainty", "sandwich"),
                p.get("covariance", "cluster"),
                p.get("replicates", 200),
                deadline=deadline,
            )

        return run, expected + 3
    if kind == "design":
        from ..planning.service import run_plan

        replications = p.get("replications", 200)

        def design(session, survey, deadline):
            return run_plan(
                p["items"],
                p.get("respondents"),
                p["pairs_per_respondent"],
                p.get("epsilon"),
                p["k"],
                p.get("weights"),
                p.get("spread", 2.0),
                p.get("gap"),
                replications,
                p.get("seed", 0),
                p.get("solve", "none"),
                p.get("target"),
                p.get("scores"),
                deadline=deadline,
                work=ctx.fit_cache.work,
            )

        return design, replications * (PLAN_SEARCH_STEPS if p.get("solve", "none") != "none" else 1) + 3
    # plan: a fixed number of new respondents runs the replications once; a search
    # about a dozen times (doubling, then bisection).
    replications = p.get("replications", 100)

    def plan(session, survey, deadline):
        return plan_from_survey(
            session,
            survey,
            ctx.fit_cache,
            p["k"],
            target=p.get("target", 0.8),
            added=p.get("respondents"),
            max_added=p.get("max_respondents", 100_000),
            level=p.get("confidence", 0.95),
            scores=p.get("scores"),
            tau=p.get("tau"),
            pairs_per_respondent=p.get("pairs_per_respondent"),
            epsilon=p.get("epsilon"),
            replications=replications,
            seed=p.get("seed", 0),
            deadline=deadline,
            work=ctx.fit_cache.work,
        )

    return plan, replications * (1 if p.get("respondents") is not None else 12) + 3


def execute(job_id: str, ctx: JobContext) -> str | None:
    """Claim and run one job in this thread; its final status, ``"released"`` when this
    process is stopping (the job is queued again, for the caller to dispatch), None
    when it was not queued (claimed by another runner, cancelled, or gone).

    Everything about a job lives in its ``jobs`` row: kind, parameters, status (queued →
    running → done | failed | cancelled), progress, result. The runner *claims* the job
    with one conditional UPDATE (``status = 'queued'`` → ``'running'``), so two runners
    never run one job; it writes its progress and a heartbeat every
    :data:`HEARTBEAT_SECONDS` (where it sees a cancellation, and stops at the work's next
    check: one bootstrap replicate, one simulated survey), and finishes with another
    conditional UPDATE (``status = 'running' AND runner = me``), so a cancelled or lost
    job's late result is dropped."""
    from ..surveys.service import get_survey

    me = runner_name()
    with ctx.session_factory() as session:
        job = _claim(session, job_id, me)
    if job is None:
        return None
    try:
        fn, expected = _work(job.kind, job.parameters, ctx)
    except Exception:  # parameters the API validated; a stored row changed by hand
        with ctx.session_factory() as session:
            _finish(session, job_id, me, status="failed", error="the job's parameters are not valid")
        return "failed"
    deadline = JobDeadline(ctx.seconds, expected, what=f"the {job.kind} job")
    with ctx.lock:
        ctx.running.add(deadline)
    if ctx.stopping.is_set():
        deadline.cancel()
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(HEARTBEAT_SECONDS):
            try:
                with ctx.session_factory() as s:
                    if not _beat(s, job_id, me, deadline.progress):
                        deadline.cancel()  # cancelled, or lost: stop at the next check
                        return
            except Exception as exc:  # the database is briefly unreachable: try again next beat
                log.warning("job %s: heartbeat failed (%s)", job_id, type(exc).__name__)

    beats = threading.Thread(target=heartbeat, name=f"job-{job_id}-heartbeat", daemon=True)
    beats.start()
    status, values = "failed", {}
    try:
        with ctx.session_factory() as session:
            survey = get_survey(session, job.survey_id) if job.survey_id is not None else None
            result = fn(session, survey, deadline)
        status = "done"
        values = {"progress": 1.0, "result": result.model_dump(mode="json", by_alias=True)}
    except OutOfTime as exc:
        if SHUTDOWN.is_set() or ctx.stopping.is_set():
            status = "released"
        elif deadline.cancelled:
            status = "cancelled"
        else:
            values = {"error": str(exc.detail)[:500]}
    except (Invalid, Conflict, NotFound) as exc:
        values = {"error": str(exc.detail)[:500]}
    except Exception as exc:
        # The type only: a driver's message can quote the data it was handling.
        log.error("job %s failed with an internal error (%s)", job_id, type(exc).__name__)
        values = {"error": "the job failed with an internal error"}
    finally:
        stop.set()
        beats.join()
        with ctx.lock:
            ctx.running.discard(deadline)
    if status == "cancelled":
        return "cancelled"  # the row says so already (or the job was lost and re-queued)
    if status == "released":
        # This process is stopping: give the job back, not counted as an attempt; its
        # heartbeat goes stale and another runner takes it up.
        with ctx.session_factory() as session:
            _finish(
                session, job_id, me, status="queued", runner=None, attempts=Job.attempts - 1, finished_at=None
            )
        return "released"
    with ctx.session_factory() as session:
        if not _finish(session, job_id, me, status=status, **values):
            return None  # cancelled or lost meanwhile: the late result is dropped
    log.info("job %s %s", job_id, status)
    return status


class LocalRunner:
    """Runs jobs in this process: ``threads`` at once, at most ``backlog`` waiting here
    (more is 503). Heartbeats the jobs it holds, queued or running, recovers lost jobs
    and deletes old ones every :data:`STALE_SECONDS` — from the first job it is given
    or read, until :meth:`close`."""

    #: A queued job here is heartbeat while it waits: silent for STALE_SECONDS, it is lost.
    queued_after = STALE_SECONDS

    def __init__(self, ctx: JobContext, threads: int = 1, backlog: int = 100) -> None:
        self.ctx = ctx
        self.backlog = backlog
        self.threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="privrank-job")
        self._held: set[str] = set()  # queued here, not yet claimed
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    def open(self) -> None:
        """(Re)start after :meth:`close` (an application started again, as in tests)."""
        with self._lock:
            self.ctx.stopping.clear()
            if self._stop.is_set():
                self._stop = threading.Event()
                self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="privrank-job")
                self._keeper = None

    def touch(self) -> None:
        """Start keeping the jobs (heartbeats, recovery) if not yet started."""
        with self._lock:
            if self._keeper is None and not self._stop.is_set():
                self._keeper = threading.Thread(target=self._keep, name="privrank-jobs-keeper", daemon=True)
                self._keeper.start()

    def capacity_left(self) -> int:
        with self._lock:
            return self.backlog - len(self._held)

    def dispatch(self, job_id: str) -> None:
        with self._lock:
            if len(self._held) >= self.backlog:
                raise TemporarilyUnavailable("too many jobs are waiting; retry later", 30)
            self._held.add(job_id)
        self.touch()
        self._pool.submit(self._run, job_id)

    def _run(self, job_id: str) -> None:
        with self._lock:
            self._held.discard(job_id)
        if self._stop.is_set():
            return
        try:
            execute(job_id, self.ctx)
        except Exception as exc:  # the database went away between claim and finish: the job is lost
            log.warning("job %s: runner error (%s); it will be recovered", job_id, type(exc).__name__)

    def _keep(self) -> None:
        last_sweep = 0.0
        stop = self._stop  # this keeper's: a reopened runner starts a keeper of its own
        while not stop.wait(HEARTBEAT_SECONDS):
            try:
                with self._lock:
                    held = list(self._held)
                with self.ctx.session_factory() as session:
                    if held:
                        begin_write(session)
                        session.execute(
                            update(Job)
                            .where(Job.id.in_(held), Job.status == "queued")
                            .values(heartbeat_at=_now(session))
                        )
                        session.commit()
                    if time.monotonic() - last_sweep >= STALE_SECONDS:
                        last_sweep = time.monotonic()
                        for job_id in recover_lost(session, queued_after=self.queued_after):
                            # Not held here when refused: lost again later, and retried then.
                            with suppress(TemporarilyUnavailable):
                                self.dispatch(job_id)
                        purge_finished(session)
            except Exception as exc:
                log.warning("jobs: keeping the queue failed (%s); trying again", type(exc).__name__)

    def close(self) -> None:
        """Stop: jobs waiting here stay queued (recovered elsewhere once silent); a
        running one stops at its next check once the process is shutting down."""
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.ctx.stop_running()  # given back at their next check, so that exit never waits for one


#: The RQ queue privrank's jobs go to.
QUEUE_NAME = "privrank-jobs"


class QueueRunner:
    """Sends jobs to an RQ queue in Redis; ``privrank worker`` processes run them (and
    recover lost jobs: their sweep)."""

    def __init__(self, redis_url: str, seconds: float, backlog: int = 100) -> None:
        import redis
        from rq import Queue

        self._redis = redis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=1.0)
        self._queue = Queue(QUEUE_NAME, connection=self._redis)
        self.seconds = seconds
        self.backlog = backlog

    #: Redis holds a queued job; sent again if no worker claimed it for this long.
    queued_after = QUEUE_RESEND_SECONDS

    def touch(self) -> None:
        """Workers keep the jobs (their sweep); nothing to start here."""

    def open(self) -> None:
        """Nothing to start: the queue is in Redis."""

    def dispatch(self, job_id: str) -> None:
        try:
            self._queue.enqueue_call(
                "app.jobs.service.run_job",
                args=(job_id,),
                # The job's own budget stops it; RQ's timeout is only a backstop.
                timeout=int(self.seconds) + 300,
                result_ttl=0,
                failure_ttl=3600,
            )
        except Exception as exc:
            log.warning("jobs: Redis refused job %s (%s)", job_id, type(exc).__name__)
            raise TemporarilyUnavailable("the job queue is unreachable; retry later", 10) from None

    def close(self) -> None:
        self._redis.close()


_WORKER_CONTEXT: JobContext | None = None


def worker_context() -> JobContext:
    """The context of a ``privrank worker`` process, built once from the settings."""
    global _WORKER_CONTEXT
    if _WORKER_CONTEXT is None:
        from ..analysis.fits import FitCache
        from ..core.config import get_settings
        from ..core.db.session import make_engine, make_session_factory

        settings = get_settings()
        engine = make_engine(settings.database_url, 4)
        _WORKER_CONTEXT = JobContext(
            make_session_factory(engine),
            FitCache(settings.analysis_cache_mb * 2**20, 1),  # one job at a time
            settings.job_seconds,
        )
    return _WORKER_CONTEXT


def run_job(job_id: str) -> str | None:
    """RQ's entry point: run one job in this worker process. Never raises (RQ would
    keep the traceback in Redis): a failure to reach the database leaves the job to
    be recovered."""
    ctx = worker_context()
    try:
        status = execute(job_id, ctx)
        if status == "released":  # this worker is stopping: back on the queue at once
            from ..core.config import get_settings

            runner = QueueRunner(get_settings().redis_url or "", ctx.seconds)
            with suppress(TemporarilyUnavailable):  # else sent again after QUEUE_RESEND_SECONDS
                runner.dispatch(job_id)
            runner.close()
        return status
    except Exception as exc:
        log.warning("job %s: runner error (%s); it will be recovered", job_id, type(exc).__name__)
        return None


def run_worker(redis_url: str, burst: bool = False) -> None:
    """``privrank worker``: run queued jobs until stopped (``burst``: until the queue is
    empty); every few seconds, recover lost jobs and delete old ones. SIGTERM (or
    Ctrl-C) stops the running job at its next check and puts it back on the queue.
    Losing Redis does not stop it: RQ's loop quits on a connection error outside its
    wait for a job (a heartbeat, the job's bookkeeping, registering the worker), so
    the loop is started again after a capped exponential backoff until Redis answers."""
    import redis
    from rq import Queue, SimpleWorker

    class Worker(SimpleWorker):
        # SimpleWorker runs each job in this process: a worker that is killed takes its job
        # with it, and the heartbeat's silence hands the job to another worker.
        max_connection_wait_time = WORKER_BACKOFF_CAP

        def request_stop(self, signum, frame):
            SHUTDOWN.set()  # the running job stops at its next check and is released
            super().request_stop(signum, frame)

    connection = redis.Redis.from_url(redis_url, socket_connect_timeout=5.0)
    queue = Queue(QUEUE_NAME, connection=connection)
    ctx = worker_context()
    runner = QueueRunner(redis_url, ctx.seconds)
    stop = threading.Event()

    def sweep() -> None:
        while not stop.wait(STALE_SECONDS / 3):
            try:
                with ctx.session_factory() as session:
                    for job_id in recover_lost(session, queued_after=QUEUE_RESEND_SECONDS):
                        with suppress(TemporarilyUnavailable):  # sent again at the next resend
                            runner.dispatch(job_id)
                    purge_finished(session)
            except Exception as exc:
                log.warning("jobs: recovering lost jobs failed (%s); trying again", type(exc).__name__)

    def finished(worker: SimpleWorker) -> bool:
        """Whether the loop that returned was asked to stop, or a burst emptied the queue
        (not RQ quitting on an error it logged)."""
        if SHUTDOWN.is_set() or worker._stop_requested:
            return True
        try:
            return burst and queue.count == 0
        except redis.RedisError:
            return False

    sweeper = threading.Thread(target=sweep, name="privrank-jobs-sweeper", daemon=True)
    sweeper.start()

    def stop_waiting(signum, frame) -> None:
        SHUTDOWN.set()  # SIGTERM or Ctrl-C outside RQ's loop: no job runs, stop now

    delay = WORKER_BACKOFF_FIRST
    try:
        while True:
            for signum in (signal.SIGTERM, signal.SIGINT):  # RQ's loop installs its own
                signal.signal(signum, stop_waiting)
            started = time.monotonic()
            try:
                worker = Worker([queue], connection=connection)
                worker.work(burst=burst, with_scheduler=False)
                if finished(worker):
                    break
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # naming, registering or unregistering the worker without Redis
            if SHUTDOWN.is_set():
                break
            if time.monotonic() - started > WORKER_BACKOFF_CAP:
                delay = WORKER_BACKOFF_FIRST  # it ran a while: a new outage starts over
            log.warning("jobs: the worker lost Redis; trying again in %.1f s", delay)
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, stop_waiting)
            if SHUTDOWN.wait(delay):
                break
            delay = min(2.0 * delay, WORKER_BACKOFF_CAP)
    finally:
        stop.set()
        runner.close()
        connection.close()
