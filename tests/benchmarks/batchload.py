"""A lean load of answer batches: raw HTTP/1.1 keep-alive, request bodies built beforehand.

The ingestion row of :mod:`tests.benchmarks.bench_service` sets the API against psycopg
COPYing the same rows, whose client builds its rows before the clock starts and writes
them with C code. This generator is the API's equivalent: every respondent's answers are
serialized before the clock starts, and each virtual respondent speaks HTTP/1.1 over one
asyncio stream, so that the load's own CPU per answer stays close to the COPY client's
and the figure measures the server. Registration stays inside the timed run (a new
respondent every 1,225 answers at m = 50), as it is in a real survey.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
import uuid
from urllib.parse import urlsplit

from tests.benchmarks.loadgen import LoadResult, Record

__all__ = ["run_batches"]

#: Distinct answer sets prepared per run; virtual respondents take them in turn.
ANSWER_SETS = 64


def _answer_sets(survey: dict, batch: int, seed: int) -> list[list[tuple[list, bytes]]]:
    """``ANSWER_SETS`` respondents' answers: each every pair once, in random order, as
    request bodies of ``batch`` comparisons (with the pairs each carries)."""
    ids = [it["id"] for it in survey["items"]]
    pairs = list(itertools.combinations(ids, 2))
    rng = random.Random(seed)
    sets = []
    for _ in range(ANSWER_SETS):
        order = pairs[:]
        rng.shuffle(order)
        bodies = []
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            comparisons = [{"a": a, "b": b, "winner": a if rng.random() < 0.5 else b} for a, b in chunk]
            bodies.append((chunk, json.dumps({"privatized": False, "comparisons": comparisons}).encode()))
        sets.append(bodies)
    return sets


class _Connection:
    """One keep-alive HTTP/1.1 connection: a request at a time, answers by Content-Length."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        status_line = await self.reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length, close = 0, False
        while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        payload = await self.reader.readexactly(length)
        if close:
            await self.close()
        return status, payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


async def _user(
    base: str, survey: dict, sets: list, k: int, deadline: float, result: LoadResult, delay: float
) -> None:
    url = urlsplit(base)
    conn = _Connection(url.hostname or "127.0.0.1", url.port or 80)
    host = f"Host: {url.netloc}\r\n".encode()
    sid = survey["id"]
    json_body = b"Content-Type: application/json\r\n"
    register = f"POST /v1/surveys/{sid}/respondents HTTP/1.1\r\n".encode() + host + json_body
    answer = f"POST /v1/surveys/{sid}/responses HTTP/1.1\r\n".encode() + host + json_body
    await asyncio.sleep(delay)
    try:
        for turn in itertools.count():
            if time.monotonic() >= deadline:
                return
            t0 = time.monotonic()
            status, payload = await conn.request(register, b'{"epsilon": 1.0}')
            result.records.append(Record(t0, time.monotonic() - t0, status, "", [], kind="register"))
            if status != 201:
                raise RuntimeError(f"registration answered {status}: {payload[:200]!r}")
            data = json.loads(payload)
            auth = f"Authorization: Bearer {data['token']}\r\n".encode()
            for chunk, body in sets[(k + turn * 7) % len(sets)]:
                if time.monotonic() >= deadline:
                    return
                key = f"Idempotency-Key: {uuid.uuid4().hex}\r\n".encode()
                t0 = time.monotonic()
                status, payload = await conn.request(answer + auth + key, body)
                result.records.append(
                    Record(t0, time.monotonic() - t0, status, data["respondent_id"], chunk, key=key.decode())
                )
                if status != 201:
                    raise RuntimeError(f"a batch answered {status}: {payload[:200]!r}")
    finally:
        await conn.close()


async def _run(base: str, survey: dict, users: int, seconds: float, batch: int, stagger: float) -> LoadResult:
    sets = _answer_sets(survey, batch, seed=users)
    result = LoadResult()
    start = time.monotonic()
    deadline = start + seconds
    tasks = [
        asyncio.create_task(_user(base, survey, sets, k, deadline, result, k * stagger)) for k in range(users)
    ]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
    result.wall = time.monotonic() - start
    return result


def run_batches(
    base: str, survey: dict, users: int, seconds: float, batch: int = 500, stagger: float = 0.01
) -> LoadResult:
    """``users`` virtual respondents, each registering and then sending its answers in
    ``batch``-comparison requests, back to back, for ``seconds``; a new respondent follows
    each one that has answered every pair. Any answer other than 201 ends the run with
    an error: the figure is of acknowledged answers only."""
    return asyncio.run(_run(base, survey, users, seconds, batch, stagger))
