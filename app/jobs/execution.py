"""Running one job: claim it, do its work under a deadline that counts its progress,
heartbeat, and finish it — or give it back when the process is stopping.

:func:`execute` is what every runner calls (:mod:`app.jobs.service`); the job's row
changes only through the conditional UPDATEs of :mod:`app.jobs.store`, so two runners
never run one job and a cancelled or lost job's late result is dropped
(docs/how-to/jobs.md).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from ..core.db.models import Job
from ..core.deadline import SHUTDOWN, Deadline, OutOfTime
from ..core.errors import Conflict, Invalid, NotFound
from .cost import PLAN_SEARCH_STEPS
from .store import _beat, _claim, _finish

__all__ = ["HEARTBEAT_SECONDS", "JobContext", "JobDeadline", "execute", "runner_name"]

log = logging.getLogger("privrank.jobs")

#: How often a runner writes a running job's progress and heartbeat.
HEARTBEAT_SECONDS = 2.0


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


def runner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


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
