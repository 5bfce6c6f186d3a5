"""Two ``privrank serve`` instances on one PostgreSQL and one Redis: the rate
limits are global, and one-answer-per-pair, budgets and "acknowledged = stored" hold
when one respondent's requests are spread over both instances at once."""

from __future__ import annotations

import math
import threading
import time
import uuid

import httpx2
import pytest
from sqlalchemy import create_engine, func, select

from app.core.db.models import Comparison
from tests.helpers.live import LiveServer

KEY = "instances-admin-" + uuid.uuid4().hex[:8]
ADMIN = {"Authorization": f"Bearer {KEY}"}
REGISTER, FAILURES = 20, 5


@pytest.fixture
def pair_of_instances(postgres_url, redis_url):
    import redis

    # A Redis database of this test's own, emptied, so no earlier run's buckets count.
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    env = {
        "DATABASE_URL": postgres_url,
        "PRIVRANK_ADMIN_KEY": KEY,
        "REDIS_URL": redis_url,
        "PRIVRANK_REGISTER_PER_MINUTE": str(REGISTER),
        "PRIVRANK_AUTH_FAILURES_PER_MINUTE": str(FAILURES),
    }
    first = LiveServer(env)  # migrates the database
    try:
        second = LiveServer(env)
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def _survey(base: str, n_items: int = 6, **privacy) -> dict:
    body = {"title": "two instances", "items": [f"item {k}" for k in range(n_items)]}
    if privacy:
        body["privacy"] = privacy
    r = httpx2.post(f"{base}/v1/surveys", json=body, headers=ADMIN, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()


def _refilled(elapsed: float, per_minute: int) -> int:
    """The most tokens a bucket can have gained back in ``elapsed`` seconds (Redis's clock
    refills it as the test runs)."""
    return math.ceil(elapsed * per_minute / 60)


@pytest.mark.slow
def test_rate_limits_hold_across_instances(pair_of_instances):
    a, b = pair_of_instances
    sid = _survey(a.base)["id"]
    started = time.monotonic()
    codes = [
        httpx2.post(f"{(a, b)[k % 2].base}/v1/surveys/{sid}/respondents", json={}, timeout=30).status_code
        for k in range(2 * REGISTER)
    ]
    elapsed = time.monotonic() - started
    # REGISTER for both instances together (and what refilled meanwhile), not REGISTER on each.
    assert codes[:REGISTER] == [201] * REGISTER and set(codes) <= {201, 429}
    assert REGISTER <= codes.count(201) <= REGISTER + _refilled(elapsed, REGISTER), (codes, elapsed)

    bad = {"Authorization": "Bearer key_aaaaaaaaaaaaaaaa.guess"}
    started = time.monotonic()
    failures = [httpx2.get(f"{a.base}/v1/surveys", headers=bad, timeout=30) for _ in range(FAILURES)]
    # The failures on the first instance are seen by the second: it refuses all but what
    # refilled meanwhile.
    seen = [httpx2.get(f"{b.base}/v1/surveys", headers=bad, timeout=30) for _ in range(FAILURES)]
    elapsed = time.monotonic() - started
    assert [r.status_code for r in failures] == [401] * FAILURES
    refused = [r for r in seen if r.status_code == 429]
    assert len(refused) >= FAILURES - _refilled(elapsed, FAILURES), ([r.status_code for r in seen], elapsed)
    assert all(int(r.headers["retry-after"]) >= 1 for r in refused)
    assert (
        httpx2.get(f"{b.base}/v1/surveys", headers=ADMIN, timeout=30).status_code == 200
    )  # a valid key still works


@pytest.mark.slow
def test_one_answer_per_pair_and_budgets_hold_across_instances(pair_of_instances, postgres_url):
    a, b = pair_of_instances
    s = _survey(a.base, 12, epsilon_default=1.0, respondent_budget=5.0)
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    token = httpx2.post(f"{a.base}/v1/surveys/{sid}/respondents", json={}, timeout=30).json()["token"]
    h = {"Authorization": f"Bearer {token}"}
    barrier = threading.Barrier(16)
    results: list[tuple[int, tuple[str, str]]] = []
    lock = threading.Lock()

    def answer(k: int, pair: tuple[str, str]) -> None:
        body = {"privatized": False, "comparisons": [{"a": pair[0], "b": pair[1], "winner": pair[0]}]}
        barrier.wait()
        r = httpx2.post(f"{(a, b)[k % 2].base}/v1/surveys/{sid}/responses", json=body, headers=h, timeout=30)
        with lock:
            results.append((r.status_code, pair))

    # 8 requests for one pair, and 8 for 8 different pairs, all at once, half on each
    # instance: the one pair is stored once, and the budget (5 answers at ε = 1) admits 5.
    same = (ids[0], ids[1])
    jobs = [same] * 8 + [(ids[0], ids[2 + k]) for k in range(8)]
    threads = [threading.Thread(target=answer, args=(k, p)) for k, p in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {code for code, _ in results} <= {201, 409}
    acknowledged = [pair for code, pair in results if code == 201]
    assert acknowledged.count(same) <= 1
    assert len(acknowledged) == 5  # exactly the budget: 16 requests, at most 9 distinct pairs
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(select(func.count()).select_from(Comparison)).scalar_one()
        assert stored == len(acknowledged)  # acknowledged = stored
    finally:
        engine.dispose()
    me = httpx2.get(f"{b.base}/v1/surveys/{sid}/respondents/me", headers=h, timeout=30).json()
    assert me["comparisons"] == 5 and me["epsilon_total"] == pytest.approx(5.0)
    assert me["budget_remaining"] == pytest.approx(0.0)


def _import(base: str, n_items: int, n_respondents: int, per: int, seed: int = 5) -> str:
    import numpy as np

    s = _survey(base, n_items, respondent_budget="unlimited")
    rng = np.random.default_rng(seed)
    theta = np.linspace(2.0, -2.0, n_items)
    lines = ["respondent,item_a,item_b,winner,epsilon"]
    for r in range(n_respondents):
        pairs: set[tuple[int, int]] = set()
        while len(pairs) < per:
            a, b = sorted(rng.choice(n_items, 2, replace=False).tolist())
            pairs.add((a, b))
        for a, b in sorted(pairs):
            won = rng.random() < 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
            lines.append(f"r{r},item {a},item {b},item {a if won else b},2.0")
    r = httpx2.post(
        f"{base}/v1/surveys/{s['id']}/comparisons/import?privatized=false",
        content=("\n".join(lines) + "\n").encode(),
        headers={**ADMIN, "Content-Type": "text/csv"},
        timeout=120,
    )
    assert r.status_code == 201, r.text
    return s["id"]


class Worker:
    """A ``privrank worker`` process."""

    def __init__(self, env: dict[str, str]) -> None:
        import os
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "worker"],
            env={**os.environ, "PRIVRANK_LOG_LEVEL": "warning", **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def kill(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate_and_wait(self, seconds: float = 60) -> int:
        """SIGTERM (a redeploy): the worker stops its job at the next check and exits."""
        self.proc.terminate()
        return self.proc.wait(seconds)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except Exception:
                self.kill()


def _poll(base: str, job_id: str, until, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        job = httpx2.get(f"{base}/v1/jobs/{job_id}", headers=ADMIN, timeout=30).json()
        if until(job) or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


#: How long the heartbeat of a job whose worker was killed stays silent before another
#: worker takes the job up (PRIVRANK_JOB_STALE_SECONDS; three heartbeats of 2 s and more).
STALE_SECONDS = 8


@pytest.mark.slow
def test_jobs_run_on_a_worker_are_read_on_any_instance_and_survive_a_killed_worker(postgres_url, redis_url):
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    env = {
        "DATABASE_URL": postgres_url,
        "PRIVRANK_ADMIN_KEY": KEY,
        "REDIS_URL": redis_url,
        "PRIVRANK_JOB_QUEUE": "rq",
        "PRIVRANK_JOB_STALE_SECONDS": str(STALE_SECONDS),
    }
    a = LiveServer(env)
    b = LiveServer(env)
    workers = [Worker(env)]
    try:
        small = _import(a.base, 8, 100, 8)
        r = httpx2.post(
            f"{a.base}/v1/surveys/{small}/jobs", json={"kind": "bootstrap", "replicates": 100}, headers=ADMIN
        )
        assert r.status_code == 202, r.text
        done = _poll(b.base, r.json()["id"], lambda j: j["status"] == "done", 60)
        assert done["status"] == "done", done
        direct = httpx2.get(
            f"{b.base}/v1/surveys/{small}/ranking?uncertainty=bootstrap&replicates=100",
            headers=ADMIN,
            timeout=60,
        ).json()
        assert done["result"] == direct  # computed by the worker, read on the other instance

        # A long job: the worker is stopped (SIGTERM, as by a redeploy) while it runs. It
        # gives the job back, uncounted, and a new worker finishes it.
        # Seconds of work: still running when the worker is stopped right after it starts.
        large = _import(a.base, 30, 800, 10)
        r = httpx2.post(
            f"{b.base}/v1/surveys/{large}/jobs", json={"kind": "bootstrap", "replicates": 1000}, headers=ADMIN
        )
        job_id = r.json()["id"]
        running = _poll(a.base, job_id, lambda j: j["status"] != "queued", 60)
        assert running["status"] == "running", running
        assert workers[0].terminate_and_wait() == 0
        released = httpx2.get(f"{a.base}/v1/jobs/{job_id}", headers=ADMIN).json()
        assert released["status"] == "queued" and released["attempts"] == 0, released
        workers.append(Worker(env))
        final = _poll(a.base, job_id, lambda j: j["status"] in ("done", "failed", "cancelled"), 120)
        assert final["status"] == "done" and final["attempts"] == 1, final

        # The worker is killed (SIGKILL) while it runs the job: a new worker takes it up
        # once the heartbeat has been silent STALE_SECONDS.
        r = httpx2.post(
            f"{b.base}/v1/surveys/{large}/jobs", json={"kind": "bootstrap", "replicates": 999}, headers=ADMIN
        )
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        running = _poll(a.base, job_id, lambda j: j["status"] != "queued", 60)
        assert running["status"] == "running", running
        workers[-1].kill()
        workers.append(Worker(env))
        final = _poll(
            a.base, job_id, lambda j: j["status"] in ("done", "failed", "cancelled"), 4 * STALE_SECONDS + 120
        )
        assert final["status"] == "done" and final["attempts"] == 2, final
        assert final["result"]["items"] and final["progress"] == 1.0
    finally:
        for w in workers:
            w.stop()
        b.stop()
        a.stop()


def test_an_unreachable_redis_degrades_to_per_process_limits_and_a_refused_job(postgres_url):
    """Redis down (nothing listens at its address): registrations are still served and
    still limited (per process), with a warning in the log and no 500; a job submitted
    to the unreachable queue is 503 and stores nothing."""
    env = {
        "DATABASE_URL": postgres_url,
        "PRIVRANK_ADMIN_KEY": KEY,
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "PRIVRANK_JOB_QUEUE": "rq",
        "PRIVRANK_REGISTER_PER_MINUTE": "5",
        "PRIVRANK_LOG_LEVEL": "warning",
    }
    server = LiveServer(env)
    try:
        sid = _survey(server.base)["id"]
        codes = [
            httpx2.post(f"{server.base}/v1/surveys/{sid}/respondents", json={}, timeout=30).status_code
            for _ in range(8)
        ]
        assert codes == [201] * 5 + [429] * 3
        r = httpx2.post(f"{server.base}/v1/surveys/{sid}/jobs", json={"kind": "ranking"}, headers=ADMIN)
        assert r.status_code == 503 and "queue is unreachable" in r.json()["detail"]
        assert httpx2.get(f"{server.base}/v1/surveys/{sid}/jobs", headers=ADMIN).json()["jobs"] == []
    finally:
        server.stop()
    log = server.output()
    assert log.count("Redis unavailable for rate limits") == 1, log
    assert "Traceback" not in log


@pytest.mark.slow
def test_answers_spread_over_two_instances_under_load_are_stored_exactly_as_acknowledged(
    pair_of_instances, postgres_url
):
    """8 writers for 6 s, each respondent's requests alternating between the instances,
    every batch sent twice at once (a client retrying on the other instance): each
    acknowledged answer is stored once, no respondent has a pair twice, and no budget
    is overspent."""
    import random
    from collections import Counter

    from sqlalchemy import text

    a, b = pair_of_instances
    s = _survey(a.base, 20, epsilon_default=1.0, respondent_budget=30.0)
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    pairs = [(x, y) for k, x in enumerate(ids) for y in ids[k + 1 :]]
    acknowledged: Counter = Counter()
    statuses: Counter = Counter()
    lock = threading.Lock()
    stop = time.monotonic() + 6.0

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        with httpx2.Client(timeout=30) as c:
            while time.monotonic() < stop:
                reg = c.post(f"{(a, b)[seed % 2].base}/v1/surveys/{sid}/respondents", json={})
                if reg.status_code == 429:  # the shared registration limit
                    time.sleep(0.2)
                    continue
                token = reg.json()["token"]
                h = {"Authorization": f"Bearer {token}"}
                for _ in range(4):  # 4 batches of 10: 40 answers wanted, the budget pays for 30
                    chunk = rng.sample(pairs, 10)
                    body = {
                        "privatized": False,
                        "comparisons": [{"a": x, "b": y, "winner": x} for x, y in chunk],
                    }
                    results: list = [None, None]

                    def send(k: int, body=body, headers=h, out=results) -> None:
                        out[k] = c.post(
                            f"{(a, b)[k].base}/v1/surveys/{sid}/responses", json=body, headers=headers
                        )

                    senders = [threading.Thread(target=send, args=(k,)) for k in (0, 1)]
                    for t in senders:
                        t.start()
                    for t in senders:
                        t.join()
                    with lock:
                        for r in results:
                            statuses[r.status_code] += 1
                            if r.status_code == 201:
                                acknowledged.update((reg.json()["respondent_id"], x, y) for x, y in chunk)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(statuses) <= {201, 409}, statuses  # a duplicate or an overspend is a 409, never a 500
    assert statuses[201] > 0 and statuses[409] > 0
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT respondent_id, i, j FROM comparisons WHERE survey_id = :s"), {"s": sid}
            ).all()
            spent = conn.execute(
                text("SELECT max(epsilon_spent) FROM respondents WHERE survey_id = :s"), {"s": sid}
            ).scalar_one()
    finally:
        engine.dispose()
    stored = Counter((r, i, j) for r, i, j in rows)  # items by position, i < j
    assert max(stored.values()) == 1  # no respondent has a pair twice
    assert sum(acknowledged.values()) == len(rows)  # acknowledged = stored
    position = {item: k for k, item in enumerate(ids)}
    answered = {(r, *sorted((position[x], position[y]))) for r, x, y in acknowledged}
    assert answered == set(stored)
    assert spent <= 30.0 + 1e-9  # no budget overspent
