"""PostgreSQL stops in the middle of a load run and starts again.

A two-worker ``privrank serve`` on a private cluster answers a load of respondents
(8 of them, 2 comparisons per request, every request with an Idempotency-Key and
retried up to 3 times on 5xx). After a warm-up the cluster is stopped (``pg_ctl
stop -m fast``: sessions rolled back and disconnected) for a few seconds, then
started again; the server is never restarted. Then:

* every request during the outage fails fast with 503 (never a 500, never a hang),
  and ``/readyz`` says so, quickly;
* the service recovers by itself: ``/readyz`` is 200 again and requests succeed;
* every acknowledged (201) comparison is in the database, once; a row beyond them
  belongs to a request that committed whole but whose 201 was lost.

"Fast" has a derived bound. With the database down its port refuses connections, so
a request waits at most for one connection attempt — ``connect_timeout`` of the
service's engine — on top of its ordinary service time (taken as the slowest request
before the outage, doubled, at least a second, for a loaded machine). The pool's
``pool_timeout`` would add to that only if a worker's every pooled connection were
busy, which the load cannot reach (asserted).

``PRIVRANK_FAULT_SECONDS`` lengthens the phases and adds a crash of the cluster
(``-m immediate``: no shutdown checkpoint, WAL recovery at the next start). Then a
transaction can be durable while its COMMIT's answer never reached the service: its
request gets a 503, and if all its retries come during the outage, its rows are in
the database unacknowledged — which ``check_acknowledged`` allows, and checks.
"""

from __future__ import annotations

import threading
import time

import httpx2
import pytest

from tests.benchmarks.loadgen import LoadResult, create_survey, run_load
from tests.helpers.faults import (
    ADMIN_KEY,
    check_acknowledged,
    engine_limits,
    long_run,
    phase_seconds,
    serve,
    worker_pids,
)

USERS = 8
BATCH = 2
UNAVAILABLE = {"status": "unavailable", "database": "unreachable"}
#: How the cluster goes down: "fast" always; a crash too in the long runs.
MODES = ["fast", "immediate"] if long_run() else ["fast"]


def _get(url: str, timeout: float) -> tuple[float, int | str, dict | None]:
    t0 = time.monotonic()
    try:
        r = httpx2.get(url, timeout=timeout)
        status, body = r.status_code, r.json()
    except httpx2.HTTPError as exc:
        status, body = type(exc).__name__, None
    return time.monotonic() - t0, status, body


@pytest.mark.parametrize("mode", MODES)
def test_postgres_outage_fails_fast_recovers_and_loses_nothing(private_postgres, mode):
    pg = private_postgres
    limits = engine_limits()
    assert limits.pool_capacity > USERS, "the load must not exhaust a worker's pool (pool_timeout)"
    warm, outage, after = phase_seconds(3), phase_seconds(3), phase_seconds(3)

    stop, result = threading.Event(), LoadResult()
    server = serve(pg, workers=2)
    try:
        survey = create_survey(server.base, ADMIN_KEY, n_items=30, title="outage")
        horizon = 10 * (warm + outage + after) + 120  # run_load's own limit: never reached
        load = threading.Thread(
            target=run_load,
            args=(server.base, survey, USERS, horizon, BATCH),
            kwargs={"stop": stop, "result": result, "timeout": 60},
            daemon=True,
        )
        load.start()
        time.sleep(warm)
        assert result.acknowledged(), f"no request succeeded before the outage: {result.statuses()}"
        t_stopping = time.monotonic()
        ordinary = max(r.seconds for r in list(result.records))
        bound = limits.connect_timeout + max(1.0, 2 * ordinary)

        processes = worker_pids(server)
        assert len(processes) == 2, processes
        pg.stop(mode)
        t_down = time.monotonic()
        probes = []
        while time.monotonic() < t_down + outage:
            probes.append(_get(server.base + "/readyz", timeout=3 * bound))
            time.sleep(0.2)
        # A write during the outage, seen whole: 503, the JSON error, Retry-After.
        r = httpx2.post(
            f"{server.base}/v1/surveys/{survey['id']}/respondents", json={"epsilon": 1.0}, timeout=3 * bound
        )
        assert r.status_code == 503
        assert r.json() == {"detail": "database unavailable, retry later"}
        assert int(r.headers["Retry-After"]) >= 1

        t_starting = time.monotonic()
        pg.start()
        t_up = time.monotonic()
        # Recovery needs no restart and no waiting: the pool's pre-ping finds its connections
        # dead and opens new ones, so the service is ready within one request's bound.
        ready = None
        while ready is None and time.monotonic() < t_up + bound:
            if _get(server.base + "/readyz", timeout=3 * bound)[1] == 200:
                ready = time.monotonic()
            else:
                time.sleep(0.1)
        assert ready is not None, f"/readyz not 200 within {bound:.1f} s of PostgreSQL's restart"
        # Both workers answer (each probe is a new connection, taken by either worker).
        again = [_get(server.base + "/readyz", timeout=3 * bound)[1] for _ in range(10)]
        assert again == [200] * 10, again
        time.sleep(after)
        stop.set()
        load.join(timeout=3 * bound + 60)
        assert not load.is_alive(), "the load generator hung"
        # The same server and the same worker processes throughout: nothing was restarted.
        assert server.proc.poll() is None
        assert worker_pids(server) == processes, (processes, worker_pids(server))
    finally:
        stop.set()
        output = server.stop()

    records = result.records
    # Nothing but 201 and 503: no 500, no connection dropped, no client timeout.
    assert set(result.statuses()) <= {201, 503}, (result.statuses(), output[-3000:])
    # Every request that began while the database was down got a 503 …
    during = [r for r in records if t_down <= r.start and r.start + r.seconds <= t_starting]
    assert during, "no request was sent during the outage"
    assert {r.status for r in during} == {503}
    # … and every 503, and every request the outage overlapped, came back fast.
    overlapped = [r for r in records if r.start < t_up and r.start + r.seconds > t_stopping]
    slow = [r for r in overlapped if r.seconds > bound] + [
        r for r in records if r.status == 503 and r.seconds > bound
    ]
    assert not slow, f"requests took up to {max(r.seconds for r in slow):.2f} s (bound {bound:.2f} s)"
    # /readyz reported the outage, fast, on every probe.
    assert probes
    assert all(status == 503 and body == UNAVAILABLE for _, status, body in probes), probes
    assert max(seconds for seconds, _, _ in probes) <= bound
    # Recovered without a restart: every request begun after /readyz turned 200 succeeded.
    later = [r for r in records if r.start >= ready]
    assert later
    assert {r.status for r in later} == {201}, result.statuses()

    figures = check_acknowledged(pg, survey, result)
    lat_503 = sorted(r.seconds for r in records if r.status == 503)
    print(
        f"\noutage ({mode}): {len(during)} requests during it, all 503; 503 latency "
        f"median {lat_503[len(lat_503) // 2] * 1e3:.1f} ms, max {lat_503[-1] * 1e3:.1f} ms "
        f"(bound {bound:.2f} s = connect_timeout {limits.connect_timeout:g} s + allowance); "
        f"/readyz during the outage: {len(probes)} probes, max {max(p[0] for p in probes) * 1e3:.1f} ms; "
        f"ready {ready - t_up:.2f} s after PostgreSQL accepted connections "
        f"(pg_ctl start took {t_up - t_starting:.2f} s); statuses {result.statuses()}; {figures}"
    )
