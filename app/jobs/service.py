"""Long analyses as jobs: where they run.

A bootstrap on a large survey or a planner solve can take minutes: too long for a
request. ``POST /v1/surveys/{sid}/jobs`` stores a job (:mod:`app.jobs.store`) and returns
at once; a runner claims it, does the work and writes the result
(:func:`~app.jobs.execution.execute`). Runners are a bounded thread pool in each API
process (:class:`LocalRunner`, the default; 503 beyond its backlog), or, with
``PRIVRANK_JOB_QUEUE=rq`` and ``REDIS_URL``, ``privrank worker`` processes on an RQ queue
(:func:`run_job`, which the queue names by its path: ``app.jobs.service.run_job``).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress

from sqlalchemy import update

from ..core.db.models import Job
from ..core.db.session import begin_write
from ..core.deadline import SHUTDOWN
from ..core.errors import TemporarilyUnavailable
from .execution import HEARTBEAT_SECONDS, JobContext, execute
from .store import STALE_SECONDS, _now, purge_finished, recover_lost

__all__ = [
    "QUEUE_NAME",
    "LocalRunner",
    "QueueRunner",
    "run_job",
    "run_worker",
    "worker_context",
]

log = logging.getLogger("privrank.jobs")

#: A job waiting in the RQ queue this long is sent again (a push lost with Redis, or
#: a dispatch that failed); a duplicate is harmless: only one claim succeeds.
QUEUE_RESEND_SECONDS = 300.0

#: ``privrank worker`` without Redis: its wait before trying again starts here and doubles
#: up to the cap (RQ's own wait for a job uses the same cap), and starts over once Redis
#: answered for longer than the cap.
WORKER_BACKOFF_FIRST = 0.5
WORKER_BACKOFF_CAP = 30.0


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
