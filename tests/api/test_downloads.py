"""Slow readers of an export cannot stall the service (app.core.downloads).

An export is written to a temporary file at database speed and then sent without an
admission slot or a database connection; at most ``PRIVRANK_MAX_DOWNLOADS`` are sent
at once per worker, and a reader that falls behind its allowance (a grace period,
then :data:`~app.core.downloads.MIN_SEND_RATE`) is dropped. The live test checks
that stalled readers hold nothing but their download slots; the allowance itself is
checked on a fake clock.
"""

from __future__ import annotations

import asyncio
import io
import socket
import struct
import time

import anyio
import anyio.lowlevel
import httpx2
import numpy as np
import pytest

from app.core import downloads
from tests.helpers.api import ADMIN, ADMIN_KEY
from tests.helpers.live import LiveServer

#: The stalled readers' grace: far longer than the test takes on any machine, so they are
#: certainly still connected (holding their download slots) until they close.
SEND_TIMEOUT = 600.0


def _survey_with_answers(c: httpx2.Client, n_respondents: int, per: int) -> tuple[str, int]:
    """A 60-item survey with ``n_respondents × per`` comparisons, imported as CSV; the
    respondents' 150-character pseudonyms make an exported row ~260 bytes."""
    items = [f"item {k}" for k in range(60)]
    privacy = {"respondent_budget": float(per)}  # ``per`` answers at ε = 1
    body = {"title": "export", "items": items, "privacy": privacy}
    sid = c.post("/v1/surveys", json=body, headers=ADMIN).json()["id"]
    rng = np.random.default_rng(7)
    a, b = np.triu_indices(60, 1)
    lines = ["respondent,item_a,item_b,winner,epsilon"]
    for r in range(n_respondents):
        ref = f"r{r}-".ljust(150, "p")
        for x in rng.choice(a.size, per, replace=False):
            lines.append(f"{ref},{items[a[x]]},{items[b[x]]},{items[a[x]]},1.0")
    r = c.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=true",
        content=("\n".join(lines) + "\n").encode(),
        headers={**ADMIN, "Content-Type": "text/csv"},
        timeout=300,
    )
    assert r.status_code == 201, r.text
    return sid, n_respondents * per


def _stalled_readers(port: int, path: str, n: int) -> list[socket.socket]:
    """``n`` clients that ask for ``path`` at once, read the first KiB, then read nothing more."""
    readers = []
    for _ in range(n):
        s = socket.socket()
        readers.append(s)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_KEY}\r\n\r\n".encode())
    for s in readers:
        got = s.recv(1024)
        assert got.startswith(b"HTTP/1.1 200"), got[:200]
    return readers


async def _burst(base: str, path: str, n: int) -> list[int]:
    async with httpx2.AsyncClient(base_url=base, timeout=60, limits=httpx2.Limits(max_connections=n)) as c:
        return [r.status_code for r in await asyncio.gather(*[c.get(path) for _ in range(n)])]


def _refused_while_busy(c: httpx2.Client, path: str) -> None:
    """One more export is refused at once: every download slot is held."""
    busy = c.get(path, headers=ADMIN)
    assert busy.status_code == 503 and int(busy.headers["Retry-After"]) >= 1, busy.text
    assert "exports already" in busy.json()["detail"]


@pytest.mark.slow
def test_stalled_export_readers_do_not_stall_the_api(private_url):
    """Four readers take the first KiB of a 7.9 MB export and stop reading. They hold the
    worker's four download slots (a fifth export is refused 503 before and after what
    follows, so none of them was dropped or finished meanwhile) and nothing else: 40
    concurrent API calls and a respondent's pairs are all answered with one database
    connection per worker besides the probe's. Once the readers hang up their slots come
    back, and a full export has every row once."""
    server = LiveServer(
        {
            "DATABASE_URL": private_url,
            "PRIVRANK_ADMIN_KEY": ADMIN_KEY,
            "PRIVRANK_SEND_TIMEOUT": str(SEND_TIMEOUT),
            "PRIVRANK_MAX_DOWNLOADS": "4",
            "PRIVRANK_DB_POOL_SIZE": "2",
        }
    )
    readers: list[socket.socket] = []
    try:
        c = httpx2.Client(base_url=server.base, timeout=120)
        # 30,000 rows, ~7.9 MB of CSV: more than the ~4 MB a stalled connection buffers,
        # so each download is still being sent while its reader waits.
        sid, n = _survey_with_answers(c, 400, 75)
        path = f"/v1/surveys/{sid}/comparisons.csv"
        readers = _stalled_readers(server.port, path, 4)
        _refused_while_busy(c, path)
        statuses = asyncio.run(_burst(server.base, f"/v1/surveys/{sid}/public", 40))
        assert statuses == [200] * 40
        token = c.post(f"/v1/surveys/{sid}/respondents", json={}).json()["token"]
        pairs = c.get(f"/v1/surveys/{sid}/pairs", headers={"Authorization": f"Bearer {token}"})
        assert pairs.status_code == 200
        _refused_while_busy(c, path)  # the four readers were connected throughout
        for s in readers:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # hang up: RST
            s.close()
        readers = []
        deadline = time.monotonic() + 120  # a hang guard: the slots come back as the server sees the RSTs
        while (full := c.get(path, headers=ADMIN)).status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert full.status_code == 200, full.text
        assert full.text.count("\n") == n + 1  # header and every row, once
    finally:
        for s in readers:
            s.close()
        log = server.stop()
    assert "Traceback" not in log, log[-3000:]


class _FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _download(body: bytes, release, grace: float, send) -> None:
    """Send ``body`` as a spooled download through ``send`` (an ASGI send)."""
    response = downloads.SpooledDownload(io.BytesIO(body), release, grace, media_type="text/csv", headers={})

    async def receive():  # ASGI 2.4: the response does not listen for a disconnect
        raise AssertionError("receive() is not called")

    anyio.run(response, {"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)


def test_a_trickling_reader_is_dropped_at_the_minimum_pace(monkeypatch):
    """A client that takes a chunk every few seconds never trips a per-send timeout; the
    download's overall allowance (grace + bytes / MIN_SEND_RATE) ends it. On a fake
    clock: a grace of 10.5 s, a minimum pace of 16 KiB/s (a 64 KiB chunk buys 4 s), and
    a client that takes a chunk every 8 s, each take well within the grace. Chunk k
    (from 1) is offered at 8(k − 1) s with an allowance of 10.5 + 4k s: chunks 1–4 are
    taken, the fifth (allowance 30.5 s, offered at 32 s) is not sent, and the response
    ends unfinished with its slot released. A reader taking a chunk every 0.25 s
    (256 KiB/s) gets the whole file."""
    clock = _FakeClock()
    monkeypatch.setattr(downloads, "_clock", clock)
    monkeypatch.setattr(downloads, "MIN_SEND_RATE", downloads.CHUNK_BYTES // 4)
    body = b"x" * 2**20  # 16 chunks

    def run(seconds_per_chunk: float) -> tuple[list[int], bool, bool]:
        slots = downloads.Downloads(1, send_timeout=10.5)
        release = slots.take()
        got, finished = [], []

        async def send(message):
            if message["type"] != "http.response.body":
                return
            if message.get("more_body"):
                clock.now += seconds_per_chunk  # the client takes this long to take the chunk
                await anyio.lowlevel.checkpoint()  # where a send past its allowance is cancelled
                got.append(len(message["body"]))
            else:
                finished.append(True)

        _download(body, release, slots.send_timeout, send)
        return got, bool(finished), slots.slots.busy == 0

    got, finished, released = run(8.0)
    assert got == [downloads.CHUNK_BYTES] * 4 and not finished and released
    got, finished, released = run(0.25)
    assert sum(got) == len(body) and finished and released


def test_a_reader_that_takes_nothing_is_dropped_after_the_grace(monkeypatch):
    """A client that never takes the first chunk (its send blocks for ever) is dropped
    once the grace and the chunk's share at the minimum pace have passed: the response
    ends unfinished and the download slot is free again."""
    monkeypatch.setattr(downloads, "MIN_SEND_RATE", 2**40)  # the allowance is the grace alone
    slots = downloads.Downloads(1, send_timeout=0.01)
    release = slots.take()
    with pytest.raises(downloads.Busy):
        slots.take()
    sent: list[dict] = []

    async def send(message):
        sent.append(message)
        if message["type"] == "http.response.body":
            with anyio.move_on_after(60):  # a hang guard: the download is dropped long before
                await anyio.Event().wait()  # the client reads nothing

    _download(b"x" * 2**20, release, slots.send_timeout, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert slots.slots.busy == 0
    slots.take()()  # the slot is free again


#: The grace of the test below: long enough for a busy machine to fill a stalled
#: connection's buffers well within it, short enough to wait for.
STALL_GRACE = 3.0


@pytest.mark.slow
def test_a_reader_that_stops_frees_its_slot_within_the_grace(private_url):
    """A reader takes the first KiB of a 5.2 MB export and stops, on a live server with
    one download slot. The kernel's buffers absorb megabytes of it at once, which the
    client never reads; what it does not read blocks the next send, and the slot comes
    back within ``PRIVRANK_SEND_TIMEOUT`` of that (plus the time to fill the buffers,
    and to poll), not after the megabytes' share at the minimum pace (~4 MB / 16 KiB/s
    ≈ 250 s)."""
    server = LiveServer(
        {
            "DATABASE_URL": private_url,
            "PRIVRANK_ADMIN_KEY": ADMIN_KEY,
            "PRIVRANK_SEND_TIMEOUT": str(STALL_GRACE),
            "PRIVRANK_MAX_DOWNLOADS": "1",
        }
    )
    readers: list[socket.socket] = []
    try:
        c = httpx2.Client(base_url=server.base, timeout=120)
        sid, n = _survey_with_answers(c, 400, 50)  # 20,000 rows, ~5.2 MB
        path = f"/v1/surveys/{sid}/comparisons.csv"
        readers = _stalled_readers(server.port, path, 1)
        stopped = time.monotonic()
        _refused_while_busy(c, path)
        bound = STALL_GRACE + 10.0  # the grace, filling the buffers, and polling on a busy machine
        while (full := c.get(path, headers=ADMIN)).status_code == 503 and time.monotonic() < stopped + 60:
            time.sleep(0.2)
        freed = time.monotonic() - stopped
        assert full.status_code == 200 and freed <= bound, (full.status_code, freed)
        assert full.text.count("\n") == n + 1  # the next reader gets the whole export
        print(f"slot free {freed:.1f} s after the reader stopped (grace {STALL_GRACE:g} s)")
    finally:
        for s in readers:
            s.close()
        log = server.stop()
    assert "Traceback" not in log, log[-3000:]
