"""Concurrency and hostile load: admission (no pool/thread starvation), a bounded
queue, failed logins that cannot lock out valid credentials, trusted proxies only
when configured, and unexpected errors that never print their message."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter

import httpx2
import pytest
from fastapi.testclient import TestClient

from app.core.admission import Admission, Slots, admitted
from app.core.config import Settings
from app.main import create_app
from tests.helpers.api import ADMIN, ADMIN_KEY, make_app
from tests.helpers.live import LiveServer


async def _burst(base: str, path: str, headers: dict, n: int) -> list[int]:
    limits = httpx2.Limits(max_connections=n + 10)
    async with httpx2.AsyncClient(base_url=base, limits=limits, timeout=120) as c:
        return [
            r.status_code for r in await asyncio.gather(*[c.get(path, headers=headers) for _ in range(n)])
        ]


@pytest.mark.slow
def test_200_concurrent_requests_from_one_token_are_all_answered(database_url):
    """A live server (SQLite: 1 worker; PostgreSQL: 2): 200 concurrent calls with one
    respondent token are all answered. Without admission every AnyIO thread ends up
    waiting for a pooled connection while the requests holding connections wait for a
    thread, and the calls beyond threads + connections fail with 503 after the pool
    timeout; with it, requests beyond the pool wait on the event loop."""
    postgres = not database_url.startswith("sqlite")
    server = LiveServer(
        {"DATABASE_URL": database_url, "PRIVRANK_ADMIN_KEY": ADMIN_KEY}, workers=2 if postgres else 1
    )
    try:
        sid = httpx2.post(
            server.base + "/v1/surveys", json={"title": "burst", "items": ["a", "b", "c"]}, headers=ADMIN
        ).json()["id"]
        token = httpx2.post(server.base + f"/v1/surveys/{sid}/respondents", json={}).json()["token"]
        statuses = asyncio.run(
            _burst(
                server.base, f"/v1/surveys/{sid}/respondents/me", {"Authorization": f"Bearer {token}"}, 200
            )
        )
    finally:
        log = server.stop()
    assert Counter(statuses) == {200: 200}, (Counter(statuses), log[-2000:])


def test_a_burst_runs_no_more_requests_than_admitted_and_none_waits_for_a_connection(database_url):
    """In process, 60 concurrent calls (more than AnyIO's 40 threads and the pool's 4
    connections together) on a pool of 2 + 2 overflow: admission runs admitted(4) = 3 at
    once and queues the rest, so the database connections checked out at once never
    exceed the 3 admitted (no request waits for one), and every call is answered."""
    from sqlalchemy import event

    from app.core.db.session import pool_capacity

    app = make_app(database_url, PRIVRANK_DB_POOL_SIZE=2)
    slots, engine = app.state.admission, app.state.engine
    assert pool_capacity(engine) == 4 and slots.capacity == admitted(4) == 3
    with TestClient(app) as c:
        sid = c.post("/v1/surveys", json={"title": "burst", "items": ["a", "b", "c"]}, headers=ADMIN).json()[
            "id"
        ]
        token = c.post(f"/v1/surveys/{sid}/respondents", json={}).json()["token"]
    most = Counter()
    out = Counter()
    real_acquire = slots.acquire

    async def acquire(queue_limit: int) -> bool:
        got = await real_acquire(queue_limit)
        most["busy"] = max(most["busy"], slots.busy)
        most["waiting"] = max(most["waiting"], slots.waiting)  # queued behind this one
        return got

    def checkout(*_):
        out["now"] += 1
        most["connections"] = max(most["connections"], out["now"])

    def checkin(*_):
        out["now"] -= 1

    slots.acquire = acquire
    event.listen(engine, "checkout", checkout)
    event.listen(engine, "checkin", checkin)

    async def burst() -> list[int]:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://t") as client:
            headers = {"Authorization": f"Bearer {token}"}
            calls = [client.get(f"/v1/surveys/{sid}/respondents/me", headers=headers) for _ in range(60)]
            return [r.status_code for r in await asyncio.gather(*calls)]

    try:
        statuses = asyncio.run(burst())
    finally:
        event.remove(engine, "checkout", checkout)
        event.remove(engine, "checkin", checkin)
        engine.dispose()
    assert Counter(statuses) == {200: 60}
    assert most["busy"] == 3 and most["waiting"] > 3  # the burst filled the slots and queued
    assert most["connections"] <= 3
    assert slots.busy == 0 and slots.waiting == 0


def test_admitted_requests_stay_below_the_pool_and_the_thread_pool():
    assert admitted(20) == 19  # PostgreSQL default: 10 + 10 overflow, one kept for probes
    assert admitted(2) == 1 and admitted(1) == 1
    assert admitted(500) == 32  # never more than AnyIO's 40 threads can carry


async def _until(condition, steps: int = 1000) -> None:
    """Let the event loop run until ``condition()`` holds (at most ``steps`` turns)."""
    for _ in range(steps):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


def test_a_full_queue_answers_503_at_once_and_the_queued_requests_complete():
    """One slot, a queue of two: with one request running and two waiting, a fourth gets
    503 with Retry-After while the first still holds its slot (it is never queued); when
    the running one ends the waiting ones run, in order."""
    release = asyncio.Event()
    order: list[str] = []

    async def app(scope, receive, send):
        name = scope["path"]
        if name == "/v1/hold":
            await release.wait()
        order.append(name)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    slots = Slots(1)
    gated = Admission(app, slots, queue_limit=2)

    async def scenario():
        transport = httpx2.ASGITransport(app=gated)
        async with httpx2.AsyncClient(transport=transport, base_url="http://t") as c:
            hold = asyncio.create_task(c.get("/v1/hold"))
            await _until(lambda: slots.busy == 1)
            first = asyncio.create_task(c.get("/v1/first"))
            second = asyncio.create_task(c.get("/v1/second"))
            await _until(lambda: slots.waiting == 2)
            refused = asyncio.create_task(c.get("/v1/refused"))
            # Answered, or queued behind the holder (a third waiter): whichever comes first.
            await _until(lambda: refused.done() or slots.waiting > 2)
            assert refused.done() and not hold.done()  # refused while the holder holds
            assert slots.busy == 1 and slots.waiting == 2
            unguarded = await c.get("/healthz")  # not an API path: never queued
            release.set()
            done = await asyncio.gather(hold, first, second)
            return refused.result(), unguarded, done

    refused, unguarded, done = asyncio.run(scenario())
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "busy" in refused.json()["detail"]
    assert unguarded.status_code == 200
    assert [r.status_code for r in done] == [200, 200, 200]
    assert order == ["/healthz", "/v1/hold", "/v1/first", "/v1/second"]
    assert slots.busy == 0 and slots.waiting == 0


def test_a_waiter_that_gives_up_passes_its_slot_on():
    async def scenario():
        slots = Slots(1)
        assert await slots.acquire(10)
        waiter = asyncio.create_task(slots.acquire(10))
        await _until(lambda: slots.waiting == 1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert slots.waiting == 0
        slots.release()
        assert slots.busy == 0
        # Handed the slot, then cancelled before running: the slot goes to the next one.
        assert await slots.acquire(10)
        a = asyncio.create_task(slots.acquire(10))
        b = asyncio.create_task(slots.acquire(10))
        await _until(lambda: slots.waiting == 2)
        slots.release()  # hands the slot to a
        assert slots.waiting == 1 and not a.done()
        a.cancel()
        with pytest.raises(asyncio.CancelledError):
            await a
        await _until(b.done)
        assert b.result() is True
        assert slots.busy == 1 and slots.waiting == 0

    asyncio.run(scenario())


def _limited_app(database_url: str, admin_key: str, per_minute: int):
    return make_app(database_url, admin_key, PRIVRANK_AUTH_FAILURES_PER_MINUTE=per_minute)


def test_valid_credentials_still_work_after_100_failed_ones_from_the_same_address(database_url):
    """Failed logins are limited, not valid ones: after 100 invalid tokens from one address
    (limit 30 a minute), the admin key, an analyst key and a respondent token from that
    address are all served; the failures beyond the limit get 429 with Retry-After. The
    bucket refills as the test runs (a token every 2 s), so the failures answered 401 are
    the 30 of the full bucket and at most one more per 2 s of the test's time."""
    app = _limited_app(database_url, ADMIN_KEY, 30)
    with TestClient(app) as c:
        sid = c.post("/v1/surveys", json={"title": "t", "items": ["a", "b"]}, headers=ADMIN).json()["id"]
        token = c.post(f"/v1/surveys/{sid}/respondents", json={}).json()["token"]
        analyst = c.post("/v1/keys", json={"role": "analyst"}, headers=ADMIN).json()["key"]
        bad = {"Authorization": "Bearer rsp_aaaaaaaaaaaaaaaa.guess"}
        started = time.monotonic()
        failed = [c.get("/v1/surveys", headers=bad) for _ in range(100)]
        elapsed = time.monotonic() - started
        codes = [r.status_code for r in failed]
        assert codes[:30] == [401] * 30 and set(codes) == {401, 429}
        assert codes.count(401) <= 30 + math.ceil(elapsed * 30 / 60), (codes.count(401), elapsed)
        assert all(int(r.headers["retry-after"]) >= 1 for r in failed if r.status_code == 429)
        assert [c.get("/v1/surveys", headers=ADMIN).status_code for _ in range(10)] == [200] * 10
        assert c.get(f"/v1/surveys/{sid}", headers={"Authorization": f"Bearer {analyst}"}).status_code == 200
        me = c.get(f"/v1/surveys/{sid}/respondents/me", headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 200
    app.state.engine.dispose()


def test_a_short_configured_admin_key_is_not_honoured_from_a_limited_address(database_url):
    """The exception: a configured admin key under 20 characters could be guessed, so an
    address over its failure limit gets 429 for it too (docs/service.md, "Hostile input":
    use a long key). A limit of 3 a minute: no token refills for 20 s, far longer than the
    test's six requests."""
    app = _limited_app(database_url, "short-admin-key", 3)
    with TestClient(app) as c:
        ok = {"Authorization": "Bearer short-admin-key"}
        assert c.get("/v1/surveys", headers=ok).status_code == 200
        bad = {"Authorization": "Bearer wrong"}
        assert [c.get("/v1/surveys", headers=bad).status_code for _ in range(4)] == [401, 401, 401, 429]
        assert c.get("/v1/surveys", headers=ok).status_code == 429
    app.state.engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [False, True])
def test_forwarded_headers_are_trusted_only_when_configured(database_url, trusted, tmp_path):
    """uvicorn trusts X-Forwarded-For from 127.0.0.1 by default, so anything proxying on
    loopback could pick its rate-limit bucket. Registration limit 1 a minute: without
    PRIVRANK_FORWARDED_ALLOW_IPS the second registration is refused whatever address the
    header claims; with the proxy trusted, each forwarded address has its own bucket."""
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/fwd.db", "PRIVRANK_ADMIN_KEY": ADMIN_KEY}
    env["PRIVRANK_REGISTER_PER_MINUTE"] = "1"
    if trusted:
        env["PRIVRANK_FORWARDED_ALLOW_IPS"] = "127.0.0.1"
    server = LiveServer(env)
    try:
        sid = httpx2.post(
            server.base + "/v1/surveys", json={"title": "t", "items": ["a", "b"]}, headers=ADMIN
        ).json()["id"]
        codes = [
            httpx2.post(
                server.base + f"/v1/surveys/{sid}/respondents", json={}, headers={"X-Forwarded-For": address}
            ).status_code
            for address in ("203.0.113.1", "203.0.113.2")
        ]
    finally:
        server.stop()
    assert codes == ([201, 201] if trusted else [201, 429])


def test_an_unexpected_error_is_answered_500_and_logged_without_its_message(database_url, caplog):
    """The message of an unexpected exception (for a database error: the driver's text,
    with PostgreSQL's DETAIL naming a respondent and a pair) never reaches a log line or
    the server's traceback: the error stops at the app's own middleware."""
    app = create_app(Settings(DATABASE_URL=database_url, PRIVRANK_ADMIN_KEY=ADMIN_KEY))

    @app.get("/v1/boom")
    def boom():
        raise RuntimeError("DETAIL: Key (respondent_id, i, j)=(rsp_secret, 1, 2) already exists")

    caplog.set_level(logging.DEBUG)
    with TestClient(app) as c:  # raise_server_exceptions: an error reaching the server would raise here
        r = c.get("/v1/boom")
    assert r.status_code == 500 and r.json() == {"detail": "internal error"}
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "unexpected RuntimeError during GET /v1/boom" in caplog.text
    assert "rsp_secret" not in caplog.text and "DETAIL" not in caplog.text
    app.state.engine.dispose()
