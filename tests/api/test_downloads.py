"""Slow readers of an export cannot stall the service.

Before: an export streamed from the database while its client read it, keeping its
admission slot and a connection; 19 clients that read 1 KiB of a 23 MiB export and
stopped froze every API call of the worker (``GET …/public``: 5 ms → a 20 s client
timeout), for as long as they kept their sockets open.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import time

import httpx2
import numpy as np
import pytest

from tests.helpers.api import ADMIN, ADMIN_KEY
from tests.helpers.live import LiveServer

#: Longer than preparing the four exports takes (~1 s each), so that none is dropped early.
SEND_TIMEOUT = 10.0


def _survey_with_answers(c: httpx2.Client, n_respondents: int, per: int) -> tuple[str, int]:
    """A 60-item survey with ``n_respondents × per`` comparisons, imported as CSV."""
    items = [f"item {k}" for k in range(60)]
    sid = c.post("/v1/surveys", json={"title": "export", "items": items}, headers=ADMIN).json()["id"]
    rng = np.random.default_rng(7)
    a, b = np.triu_indices(60, 1)
    lines = ["respondent,item_a,item_b,winner,epsilon"]
    for r in range(n_respondents):
        for x in rng.choice(a.size, per, replace=False):
            lines.append(f"r{r},{items[a[x]]},{items[b[x]]},{items[a[x]]},1.0")
    r = c.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=true",
        content=("\n".join(lines) + "\n").encode(),
        headers={**ADMIN, "Content-Type": "text/csv"},
        timeout=300,
    )
    assert r.status_code == 201, r.text
    return sid, n_respondents * per


def _stalled_reader(port: int, path: str) -> socket.socket:
    """Ask for ``path``, read the first KiB, then read nothing more."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_KEY}\r\n\r\n".encode())
    got = s.recv(1024)
    assert got.startswith(b"HTTP/1.1 200"), got[:200]
    return s


async def _burst(base: str, path: str, n: int) -> list[tuple[int, float]]:
    async with httpx2.AsyncClient(base_url=base, timeout=30, limits=httpx2.Limits(max_connections=n)) as c:

        async def one():
            t = time.perf_counter()
            r = await c.get(path)
            return r.status_code, time.perf_counter() - t

        return await asyncio.gather(*[one() for _ in range(n)])


def _drained(s: socket.socket, within: float) -> bool:
    """True when the server closed the connection (EOF) within ``within`` seconds."""
    s.settimeout(0.5)
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            if s.recv(1 << 20) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


@pytest.mark.slow
def test_stalled_export_readers_do_not_stall_the_api(private_url):
    server = LiveServer(
        {
            "DATABASE_URL": private_url,
            "PRIVRANK_ADMIN_KEY": ADMIN_KEY,
            "PRIVRANK_SEND_TIMEOUT": str(SEND_TIMEOUT),
            "PRIVRANK_MAX_DOWNLOADS": "4",
            # One connection per worker besides the probe's: one stalled export would
            # have taken the whole API before.
            "PRIVRANK_DB_POOL_SIZE": "2",
        }
    )
    readers: list[socket.socket] = []
    try:
        c = httpx2.Client(base_url=server.base, timeout=120)
        # 64,000 rows, ~7.6 MB of CSV: more than the ~3 MB a stalled connection buffers.
        sid, n = _survey_with_answers(c, 800, 80)
        path = f"/v1/surveys/{sid}/comparisons.csv"
        readers = [_stalled_reader(server.port, path) for _ in range(4)]
        # A fifth export is refused at once: the downloads a worker sends are bounded.
        t = time.perf_counter()
        busy = c.get(path, headers=ADMIN)
        refused_in = time.perf_counter() - t
        assert busy.status_code == 503 and int(busy.headers["Retry-After"]) >= 1, busy.text
        assert "exports already" in busy.json()["detail"]
        # Everything else answers at its usual speed while the four stalled readers wait.
        out = asyncio.run(_burst(server.base, f"/v1/surveys/{sid}/public", 40))
        seconds = [s for _, s in out]
        median, slowest = statistics.median(seconds) * 1000, max(seconds) * 1000
        print(
            f"\n4 stalled export readers: 5th export refused in {refused_in * 1000:.0f} ms; 40 concurrent "
            f"GET …/public: median {median:.0f} ms, max {slowest:.0f} ms"
        )
        assert [code for code, _ in out] == [200] * 40
        assert max(seconds) < 5.0  # was a 20 s client timeout with every request stuck
        token = c.post(f"/v1/surveys/{sid}/respondents", json={}).json()["token"]
        pairs = c.get(f"/v1/surveys/{sid}/pairs", headers={"Authorization": f"Bearer {token}"})
        assert pairs.status_code == 200
        # The stalled readers are dropped after the send timeout, and their slots come back.
        dropped = [_drained(s, SEND_TIMEOUT + 10) for s in readers]
        assert all(dropped)
        full = c.get(path, headers=ADMIN)
        assert full.status_code == 200
        assert full.text.count("\n") == n + 1  # header and every row, once
    finally:
        for s in readers:
            s.close()
        log = server.stop()
    assert "Traceback" not in log, log[-3000:]


def test_a_trickling_reader_is_dropped_at_the_minimum_pace(monkeypatch):
    """A client that takes 64 KiB every few seconds never trips a per-send timeout;
    the download's overall allowance (grace + bytes / MIN_SEND_RATE) ends it. Here
    the grace is 0.5 s and the minimum pace 256 KiB/s, and the client takes a 64 KiB
    chunk every 0.5 s (128 KiB/s): it is dropped early in the 1 MiB file. A reader at
    1 MiB/s gets the whole file."""
    import io

    import anyio

    from app.api import downloads

    monkeypatch.setattr(downloads, "MIN_SEND_RATE", 256 * 2**10)
    body = b"x" * 2**20

    def run(seconds_per_chunk: float) -> tuple[int, bool, bool]:
        released = []
        response = downloads.SpooledDownload(
            io.BytesIO(body), lambda: released.append(1), 0.5, media_type="text/csv", headers={}
        )
        got, finished = [], []

        async def send(message):
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    await anyio.sleep(seconds_per_chunk)
                    got.append(len(message["body"]))
                else:
                    finished.append(True)

        async def receive():
            await anyio.sleep(60)
            return {"type": "http.disconnect"}

        scope = {"type": "http", "asgi": {"spec_version": "2.4"}}
        anyio.run(response, scope, receive, send)
        return sum(got), bool(finished), bool(released)

    sent, finished, released = run(0.5)
    assert not finished and released and 0 < sent < len(body)
    sent, finished, released = run(1 / 16)
    assert finished and released and sent == len(body)
