"""Soak: 200 concurrent virtual respondents against ``privrank serve --workers 2``, on
SQLite and on PostgreSQL, for 8 s (``PRIVRANK_FAULT_SECONDS`` lengthens it).

Each virtual respondent registers, then loops: fetch 3 pairs, answer them in one
request (server-side randomization, with an Idempotency-Key), and now and then read
its own record — until its privacy budget is spent (409), when it registers anew.
That is every respondent-facing call, at 200 clients, against admission's queue (the
pool admits ~19 requests per worker at a time). The run must show no 5xx and no
transport error (the client timeout is 60 s), and every comparison acknowledged with
201 must be stored exactly once, with nothing stored beyond them. Latency
percentiles per call are printed (``-s``)."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter

import httpx2
import numpy as np
from sqlalchemy import create_engine, text

from tests.benchmarks.loadgen import create_survey, percentiles
from tests.helpers.faults import ADMIN_KEY, phase_seconds, serve
from tests.helpers.live import LiveServer

USERS = 200


async def _respondent(client, survey, deadline, records, acknowledged, rng) -> None:
    sid = survey["id"]

    async def call(kind, method, path, **kwargs):
        t0 = time.monotonic()
        try:
            r = await client.request(method, path, **kwargs)
            status = r.status_code
        except httpx2.HTTPError as exc:
            r, status = None, type(exc).__name__
        records.append((kind, status, time.monotonic() - t0))
        return r, status

    while time.monotonic() < deadline:
        r, status = await call("register", "POST", f"/v1/surveys/{sid}/respondents", json={"epsilon": 1.0})
        if status != 201:
            await asyncio.sleep(0.05)
            continue
        me = r.json()
        headers = {"Authorization": f"Bearer {me['token']}"}
        rounds = 0
        while time.monotonic() < deadline:
            r, status = await call("pairs", "GET", f"/v1/surveys/{sid}/pairs?count=3", headers=headers)
            if status != 200 or not r.json()["pairs"]:
                break
            pairs = [(p["a"], p["b"]) for p in r.json()["pairs"]]
            body = {
                "privatized": False,
                "comparisons": [{"a": a, "b": b, "winner": a if rng.random() < 0.5 else b} for a, b in pairs],
            }
            key = {"Idempotency-Key": uuid.uuid4().hex}
            r, status = await call(
                "responses", "POST", f"/v1/surveys/{sid}/responses", json=body, headers={**headers, **key}
            )
            if status != 201:
                break  # budget spent (409): a new respondent
            acknowledged.extend((me["respondent_id"], a, b) for a, b in pairs)
            rounds += 1
            if rounds % 4 == 0:
                await call("me", "GET", f"/v1/surveys/{sid}/respondents/me", headers=headers)


async def _soak(base: str, survey: dict, seconds: float):
    records: list[tuple[str, int | str, float]] = []
    acknowledged: list[tuple[str, str, str]] = []
    limits = httpx2.Limits(max_connections=USERS + 8, max_keepalive_connections=USERS + 8)
    async with httpx2.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        deadline = time.monotonic() + seconds

        async def staggered(k):
            await asyncio.sleep(k * 0.005)
            await _respondent(client, survey, deadline, records, acknowledged, random.Random(k))

        await asyncio.gather(*(staggered(k) for k in range(USERS)))
    return records, acknowledged


def _in_own_thread(coroutine):
    """``asyncio.run`` in a thread of its own: it cannot run where a test before this one
    left an event loop running in the main thread."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _stored(url: str, survey: dict) -> list[tuple[str, str, str]]:
    ids = {item["position"]: item["id"] for item in survey["items"]}
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT respondent_id, i, j FROM comparisons WHERE survey_id = :s"), {"s": survey["id"]}
            ).all()
    finally:
        engine.dispose()
    return [(r, ids[i], ids[j]) for r, i, j in rows]


def _check(name: str, server, url: str) -> None:
    try:
        survey = create_survey(server.base, ADMIN_KEY, n_items=20, title="soak")
        t0 = time.monotonic()
        records, acknowledged = _in_own_thread(_soak(server.base, survey, phase_seconds(8)))
        wall = time.monotonic() - t0
    finally:
        log = server.stop()
    statuses = Counter(status for _, status, _ in records)
    print(f"\nsoak {name}: {USERS} respondents, {wall:.1f} s, {len(records)} requests")
    print(f"  statuses {dict(statuses)}")
    for kind in ("register", "pairs", "responses", "me"):
        seconds = np.array([s for k, status, s in records if k == kind and isinstance(status, int)])
        q = percentiles(seconds * 1e3)
        figures = f"p50 {q['p50']:.0f} ms  p99 {q['p99']:.0f} ms  max {q['max']:.0f} ms"
        print(f"  {kind:9s} n={seconds.size:6d} {figures}")
    bad = {s: n for s, n in statuses.items() if not isinstance(s, int) or s >= 500}
    assert not bad, (bad, log[-3000:])
    assert statuses[201] > 0 and sum(1 for k, s, _ in records if k == "responses" and s == 201) > 100
    # Acknowledged = stored: every 201 stored once, nothing stored that was not acknowledged.
    canon = {(r, *sorted((a, b))) for r, a, b in acknowledged}
    assert len(canon) == len(acknowledged), "a pair was acknowledged twice to one respondent"
    stored = _stored(url, survey)
    canon_stored = {(r, *sorted((a, b))) for r, a, b in stored}
    assert len(canon_stored) == len(stored)
    assert canon_stored == canon, (len(canon_stored), len(canon))
    print(f"  acknowledged comparisons = stored rows = {len(stored)}")


def test_soak_sqlite_two_workers(tmp_path):
    url = f"sqlite:///{tmp_path}/soak.db"
    server = LiveServer({"DATABASE_URL": url, "PRIVRANK_ADMIN_KEY": ADMIN_KEY}, workers=2)
    _check("SQLite", server, url)


def test_soak_postgres_two_workers(private_postgres):
    server = serve(private_postgres, workers=2, database="soak")
    _check("PostgreSQL", server, server_url(private_postgres, "soak"))


def server_url(pg, database: str) -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:{pg.port}/{database}"
