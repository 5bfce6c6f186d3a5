"""A uvicorn worker killed (SIGKILL) in the middle of requests loses nothing it acknowledged.

A two-worker ``privrank serve`` on a private cluster answers 8 respondents (5
comparisons per request, each request with an Idempotency-Key, retried up to 3
times on a network error or a 5xx). While the load runs, a worker is killed with
SIGKILL: the requests it was serving get their connection dropped and are retried
with the same key — on the other worker, or on the replacement — so a request that
had committed is answered with its first answer, and one that had not is stored
once, whole. PostgreSQL rolls back the dead worker's open transactions when its
connections close.

uvicorn's supervisor (``--workers N``, uvicorn >= 0.30) notices a dead worker within
half a second and starts a replacement; the test asserts that it does, that the
killed process is reaped, and that the service answers throughout (the other worker
serves while the replacement starts).

A kill lands in the middle of a request only when the worker is serving one at that
instant; the test kills the workers in turn (each at least once) until a kill has
demonstrably interrupted a request under way — one sent before the kill whose
connection then failed. ``PRIVRANK_FAULT_SECONDS`` lengthens the load between kills.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import httpx2

from tests.benchmarks.loadgen import LoadResult, create_survey, run_load
from tests.helpers.faults import ADMIN_KEY, check_acknowledged, children, phase_seconds, serve, worker_pids

USERS = 8
BATCH = 5
MAX_KILLS = 8


def started(server) -> set[int]:
    """Workers that logged ``Started server process [pid]``: the app is loaded; they accept next."""
    return {int(pid) for pid in re.findall(r"Started server process \[(\d+)\]", server.output())}


def wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds:.0f} s: {what}")


def test_worker_killed_mid_request_loses_nothing_acknowledged(private_postgres):
    pg = private_postgres
    between = phase_seconds(2)
    t0 = time.monotonic()
    # Info level for uvicorn's "Started server process [pid]" lines (and an access log).
    server = serve(pg, workers=2, env={"PRIVRANK_LOG_LEVEL": "info"})
    startup = time.monotonic() - t0
    # A replacement needs the supervisor's next check (every 0.5 s) and a worker's start-up,
    # which is a part of a whole server's (that also migrates the database).
    respawn_bound = 0.5 + 3 * startup + 5
    kills, windows = [], []  # windows: (kill, replacement started) for each kill
    stop, result = threading.Event(), LoadResult()
    try:
        original = wait_for(
            lambda: (
                len(worker_pids(server)) == 2
                and set(worker_pids(server)) <= started(server)
                and worker_pids(server)
            ),
            respawn_bound,
            "two workers started",
        )
        survey = create_survey(server.base, ADMIN_KEY, n_items=30, title="worker kill")
        load = threading.Thread(
            target=run_load,
            args=(server.base, survey, USERS, 100 * between * MAX_KILLS + 600, BATCH),
            kwargs={"stop": stop, "result": result, "timeout": 60},
            daemon=True,
        )
        load.start()
        time.sleep(between)
        assert result.acknowledged(), f"no request succeeded before the first kill: {result.statuses()}"
        victims = list(original)
        while len(kills) < MAX_KILLS:
            before = worker_pids(server)
            victim = victims.pop(0) if victims else before[len(kills) % len(before)]
            t_kill = time.monotonic()
            os.kill(victim, signal.SIGKILL)
            # The supervisor reaps the dead worker and starts a replacement, which loads the app.
            replacement = wait_for(
                lambda victim=victim, before=before: (
                    victim not in children(server.proc.pid)
                    and len(worker_pids(server)) == 2
                    and [p for p in worker_pids(server) if p not in before]
                ),
                respawn_bound,
                f"a replacement for worker {victim}",
            )[0]
            wait_for(
                lambda replacement=replacement: replacement in started(server),
                respawn_bound,
                f"worker {replacement} started",
            )
            t_replaced = time.monotonic()
            windows.append((t_kill, t_replaced))
            time.sleep(between)
            interrupted = [
                r
                for r in list(result.records)
                if r.start < t_kill and not isinstance(r.status, int) and r.start + r.seconds >= t_kill
            ]
            kills.append(
                {"victim": victim, "interrupted": len(interrupted), "replaced_after": t_replaced - t_kill}
            )
            if len(kills) >= len(original) and any(k["interrupted"] for k in kills):
                break
        ready = httpx2.get(server.base + "/readyz", timeout=30)
        t_stop = time.monotonic()
        stop.set()
        load.join(timeout=120)
        assert not load.is_alive(), "the load generator hung"
        assert server.proc.poll() is None, "the server exited"
    finally:
        stop.set()
        output = server.stop()

    assert ready.status_code == 200
    assert any(k["interrupted"] for k in kills), f"no kill hit a request under way: {kills}"
    # A dropped connection is the only failure: never a 5xx (the retries found a live worker).
    failures = {s for s in result.statuses() if s != 201}
    assert all(isinstance(s, str) for s in failures), (result.statuses(), output[-3000:])
    # Every request the kills interrupted was retried under its key and acknowledged.
    by_key: dict[str, list] = {}
    for r in result.records:
        if r.kind == "responses":
            by_key.setdefault(r.key, []).append(r)
    gave_up = [key for key, tries in by_key.items() if tries[-1].status != 201]
    assert not gave_up, f"{len(gave_up)} requests never acknowledged: {[by_key[k] for k in gave_up][:3]}"
    # The service kept answering: the other worker while each replacement started, then both.
    for t_kill, t_replaced in windows:
        assert [r for r in result.acknowledged() if t_kill < r.start < t_replaced], "no answer after a kill"
    assert [r for r in result.acknowledged() if r.start > t_stop - between]

    figures = check_acknowledged(pg, survey, result)
    assert figures["extra_rows"] == 0  # every request was acknowledged, so rows == acknowledged
    print(f"\nworker kill: startup {startup:.1f} s; kills {kills}; statuses {result.statuses()}; {figures}")
