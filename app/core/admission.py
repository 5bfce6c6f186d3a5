"""Admission: API requests run at most as many at a time as the database pool can
serve, and the rest wait in a bounded queue on the event loop (ASGI middleware).

An admitted request always finds a pooled connection and a thread, so no request holds
a thread waiting for a connection, or a connection waiting for a thread, until the pool
times out (:class:`Admission` says why); at most ``queue_limit`` wait per worker process
(``PRIVRANK_MAX_QUEUE``), and one more is answered 503 at once. One connection of the
pool is kept out of admission for the health probes, and at most :data:`MAX_RUNNING`
requests run at once, well below AnyIO's 40 threads.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque

__all__ = ["MAX_RUNNING", "RELEASE_ADMISSION", "Admission", "Slots", "admitted"]

#: Scope key of a function that gives the request's slot back early: a response that no
#: longer needs a connection or a thread (a spooled download being sent) calls it.
RELEASE_ADMISSION = "privrank.release_admission"

#: Requests of one worker that run at once at most, whatever the pool's size: AnyIO's
#: default thread pool has 40 threads, and static files and probes need some too.
MAX_RUNNING = 32


def admitted(pool_capacity: int) -> int:
    """Requests admitted at once for a pool of ``pool_capacity`` connections."""
    return max(1, min(pool_capacity - 1, MAX_RUNNING))


class Slots:
    """A FIFO counting semaphore whose waiters may live on different event loops
    (uvicorn has one loop per worker; the test client runs one per portal)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._free = capacity
        self._waiters: deque[asyncio.Future] = deque()
        self._lock = threading.Lock()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def busy(self) -> int:
        return self.capacity - self._free

    def try_acquire(self) -> bool:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return True
            return False

    async def acquire(self, queue_limit: int) -> bool:
        """Take a slot, waiting in line; False (nothing taken) when the line is full."""
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return True
            if len(self._waiters) >= queue_limit:
                return False
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
        try:
            await future
        except BaseException:
            with self._lock:
                try:
                    self._waiters.remove(future)
                    handed = False
                except ValueError:  # release() already handed this waiter the slot
                    handed = True
            if handed:
                self.release()
            raise
        return True

    def release(self) -> None:
        with self._lock:
            if not self._waiters:
                self._free += 1
                return
            future = self._waiters.popleft()
        loop = future.get_loop()
        if loop.is_closed():  # its loop is gone: pass the slot on
            self.release()
            return
        loop.call_soon_threadsafe(_wake, future)


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


_BUSY = json.dumps({"detail": "the server is busy: too many requests are waiting; retry shortly"}).encode()


class Admission:
    """Gate the API's paths (``prefixes``) through :class:`Slots`.

    A request's sync parts (dependencies, the endpoint, the session's close) run in
    AnyIO's thread pool, one pool call after another, and hold one pooled database
    connection from the first to the last. Without admission, N concurrent requests take
    every thread: some hold connections and wait for a thread to go on, the others hold
    threads and wait for a connection (the pool's ``pool_timeout``) — with N above
    threads + connections, every thread ends up waiting for a connection and the
    requests fail with 503 after the pool timeout although the database is healthy.
    Admitting at most ``capacity`` requests, below both the pool's connections and the
    thread pool's tokens, means an admitted request always finds a connection and a
    thread: requests beyond it wait here, costing no thread and no connection, and are
    served in arrival order. At most ``queue_limit`` requests wait per worker process;
    one more is answered at once with 503 and ``Retry-After: 1``
    (``PRIVRANK_MAX_QUEUE``)."""

    def __init__(self, app, slots: Slots, queue_limit: int, prefixes: tuple[str, ...] = ("/v1/",)) -> None:
        self.app = app
        self.slots = slots
        self.queue_limit = queue_limit
        self.prefixes = prefixes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        if not await self.slots.acquire(self.queue_limit):
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(_BUSY)).encode()),
                        (b"retry-after", b"1"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": _BUSY})
            return
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self.slots.release()

        scope[RELEASE_ADMISSION] = release
        try:
            await self.app(scope, receive, send)
        finally:
            release()
