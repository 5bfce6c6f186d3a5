"""``privrank worker`` rides out a Redis outage (app.jobs.service.run_worker).

A worker on a private ``redis-server`` runs a job; Redis is then stopped for longer
than the worker's first backoff steps and started again on the same port (empty, as
after a restart without persistence). The worker is still running, and a job queued
after the outage completes — nobody restarts the worker. See docs/how-to/jobs.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from fastapi.testclient import TestClient

from app.core.db.models import Job
from app.jobs import service as jobs
from app.jobs.store import create_job
from tests.helpers.api import import_survey, make_app
from tests.helpers.live import free_port

#: How long Redis stays away: longer than the backoff's first steps (0.5 + 1 + 2 + 4 s),
#: shorter than its cap, as the 12 s outages seen in production.
OUTAGE_SECONDS = 12.0


class RedisServer:
    """A ``redis-server`` without persistence on a free port, started and stopped at will."""

    def __init__(self, directory) -> None:
        self.port = free_port()
        self.directory = directory
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            cwd=self.directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url, socket_connect_timeout=1).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # as a crash: clients see their connections reset
            self.proc.wait(10)


def _wait_done(session_factory, job_id: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while True:
        with session_factory() as s:
            status = s.get(Job, job_id).status
        if status in ("done", "failed", "cancelled") or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def _queue(app, redis_url: str, survey_id: str, k: int) -> str:
    with app.state.session_factory() as s:
        job = create_job(s, survey_id, "ranking", {"k": k}, "test", 100)
        job_id = job.id
    runner = jobs.QueueRunner(redis_url, 60.0)
    try:
        runner.dispatch(job_id)
    finally:
        runner.close()
    return job_id


def test_a_worker_survives_a_redis_outage_and_runs_the_next_job(tmp_path):
    from app.core.db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    upgrade(url)
    app = make_app(url)
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_server.url, "PRIVRANK_JOB_QUEUE": "rq"}
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "worker"], env=env, stdout=log, stderr=log
        )
    try:
        with TestClient(app) as client:
            sid = import_survey(client, 5, 30, 4, seed=3)
        t0 = time.monotonic()
        before = _queue(app, redis_server.url, sid, 1)
        assert _wait_done(app.state.session_factory, before, 60) == "done"
        print(f"first job done in {time.monotonic() - t0:.1f} s")

        redis_server.stop()
        time.sleep(OUTAGE_SECONDS)
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
        redis_server.start()
        back = time.monotonic()

        after = _queue(app, redis_server.url, sid, 2)
        # The worker's next try comes within the backoff's cap after Redis is back; the
        # job itself takes well under a second (the first one's time is the margin).
        status = _wait_done(app.state.session_factory, after, jobs.WORKER_BACKOFF_CAP + 30)
        assert status == "done", (tmp_path / "worker.log").read_text()[-2000:]
        print(f"job done {time.monotonic() - back:.1f} s after Redis came back")
        assert worker.poll() is None
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        redis_server.stop()
        app.state.engine.dispose()
