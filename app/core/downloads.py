"""Large downloads (the CSV exports) that a slow client cannot use to stall the service.

Streaming an export from the database while the client reads it would hold an admission
slot, a database connection and (on SQLite) a read transaction for as long as the client
took. So an export is written in one go, at database speed, into a temporary file (in
memory up to :data:`SPOOL_MEMORY_BYTES`, then on disk: the exports hold only releasable,
privatized data) inside the request's slot and connection; then the connection is
returned, the slot released as the response starts, and the file sent at the client's
pace. What a slow client can still hold is bounded (:class:`Downloads`).
"""

from __future__ import annotations

import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from typing import IO

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .admission import RELEASE_ADMISSION, Slots
from .errors import TemporarilyUnavailable

__all__ = ["SPOOL_MEMORY_BYTES", "Downloads", "SpooledDownload", "spool", "spool_binary"]

#: A download is kept in memory up to this size, then in a temporary file.
SPOOL_MEMORY_BYTES = 1 * 2**20
#: Bytes read from the spool and sent per chunk.
CHUNK_BYTES = 64 * 2**10
#: Slowest average pace (bytes a second) a client may read at, beyond the grace period
#: of ``PRIVRANK_SEND_TIMEOUT``: 16 KiB/s, a 15 MB export in 16 minutes.
MIN_SEND_RATE = 16 * 2**10

#: The clock a download's allowance is measured on (tests replace it with a fake one).
_clock = time.monotonic


class Busy(TemporarilyUnavailable):
    """Too many downloads at once in this worker (503 with ``Retry-After``)."""


class Downloads:
    """At most ``capacity`` downloads of one worker being written or sent at once.

    What a slow client can still hold is bounded:

    * at most ``PRIVRANK_MAX_DOWNLOADS`` downloads per worker are being written or sent
      at once; one more is answered 503 with ``Retry-After`` at once;
    * a client that reads nothing for ``PRIVRANK_SEND_TIMEOUT`` seconds (one chunk's
      send waits that long for room in the connection's buffers), or that reads slower
      than :data:`MIN_SEND_RATE` on average after that grace period, is dropped (the
      response ends unfinished, the connection is closed, its slot freed): a download of
      b bytes takes at most ``PRIVRANK_SEND_TIMEOUT`` + b / MIN_SEND_RATE, and a reader
      that stops holds its slot for ``PRIVRANK_SEND_TIMEOUT`` once the buffers are full.
    """

    def __init__(self, capacity: int, send_timeout: float) -> None:
        self.slots = Slots(capacity)
        self.send_timeout = float(send_timeout)

    def take(self) -> Callable[[], None]:
        """A download slot, or :class:`Busy` at once; returns its release (idempotent)."""
        if not self.slots.try_acquire():
            raise Busy(f"the server is sending {self.slots.capacity} exports already; retry in a few seconds")
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                self.slots.release()

        return release


def spool(chunks: Iterator[str]) -> IO[bytes]:
    """Write ``chunks`` (text) into a temporary file, rewound; the caller closes it."""
    out = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 - the caller closes it
    try:
        for text in chunks:
            out.write(text.encode("utf-8"))
        out.seek(0)
    except BaseException:
        out.close()
        raise
    return out


def spool_binary(write: Callable[[IO[bytes]], None]) -> IO[bytes]:
    """A temporary file filled by ``write`` (a binary export, e.g. Parquet), rewound; the
    caller closes it."""
    out = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 - the caller closes it
    try:
        write(out)
        out.seek(0)
    except BaseException:
        out.close()
        raise
    return out


def _read(file: IO[bytes]) -> Iterator[bytes]:
    while chunk := file.read(CHUNK_BYTES):
        yield chunk


class SpooledDownload(StreamingResponse):
    """Send a spooled file: the admission slot is released as the response starts, the
    download slot and the file when it ends (sent, client gone, or dropped for reading
    nothing for ``send_timeout`` seconds)."""

    def __init__(
        self,
        file: IO[bytes],
        release: Callable[[], None],
        send_timeout: float,
        media_type: str,
        headers: dict[str, str],
    ) -> None:
        super().__init__(_read(file), media_type=media_type, headers=headers)
        self.file = file
        self.release = release
        self.send_timeout = send_timeout
        self._release_admission: Callable[[], None] | None = None
        # Also when the response is never sent (the request cancelled after the endpoint
        # returned it): the slot and the file go with the object.
        weakref.finalize(self, release)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._release_admission = scope.get(RELEASE_ADMISSION)
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.file.close()
            self.release()

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if self._release_admission is not None:
            self._release_admission()  # from here on the request costs no connection
        started, sent = _clock(), 0
        async for chunk in self.body_iterator:
            sent += len(chunk)
            # This chunk must be taken by the time a reader at MIN_SEND_RATE would have
            # taken it, after the grace period — and within the grace of being offered.
            # ``sent`` counts what the kernel's buffers absorbed too (megabytes on a
            # stalled connection), so the pace alone would let a reader that stopped
            # hold its slot for minutes; a send blocks only while those buffers are
            # full, so its own bound measures what the client reads.
            now = _clock()
            allowed = min(self.send_timeout, started + self.send_timeout + sent / MIN_SEND_RATE - now)
            try:
                with anyio.fail_after(max(allowed, 0.0)):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except TimeoutError:
                # The client stopped reading, or reads too slowly: end the response
                # unfinished (the server closes the connection) and free the slot.
                return
        await send({"type": "http.response.body", "body": b"", "more_body": False})
