"""Time budgets for long computations: stop when the budget is spent, the client
has gone away, or the server is shutting down.

A computation that can run long (a bootstrap, a planner solve, large-m intervals)
takes a :class:`Deadline` and calls :meth:`Deadline.check` between units of work
(a replicate, a bisection step). ``check`` raises :class:`OutOfTime` once the
budget is spent or the deadline was cancelled. The API layer runs such work with
:func:`app.core.bounded.run_bounded`, which cancels the deadline when the client
disconnects; :data:`SHUTDOWN` cancels every deadline when the process stops, so a
long request never holds up a shutdown for longer than one unit of work.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import TemporarilyUnavailable

__all__ = ["SHUTDOWN", "Deadline", "OutOfTime", "WorkSlots"]

#: Set when the process is shutting down: every deadline counts as expired.
SHUTDOWN = threading.Event()

#: The clock every deadline reads (seconds, monotonic). Tests replace it
#: (``monkeypatch.setattr(deadline, "_clock", fake)``) to spend a budget at an exact
#: check, whatever the machine's speed; nothing else should.
_clock = time.monotonic


class OutOfTime(TemporarilyUnavailable):
    """The computation stopped: its time budget was spent, its client left, or the
    server is stopping (503 with ``Retry-After``; nothing was stored)."""


class Deadline:
    """A time budget in seconds (``math.inf``: none) that can also be cancelled."""

    def __init__(self, seconds: float = math.inf, *, what: str = "this analysis") -> None:
        if not seconds > 0:
            raise ValueError("a time budget must be positive")
        self.seconds = float(seconds)
        self.what = what
        self._end = _clock() + self.seconds
        self._cancelled = threading.Event()

    @classmethod
    def none(cls) -> Deadline:
        """No budget (library calls, tests): ``check`` only honours shutdown and cancel."""
        return cls(math.inf)

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check_waiting(self) -> None:
        """:meth:`check`, called while waiting for a turn rather than between units of
        work (a deadline that counts work, such as a job's, does not count these)."""
        self.check()

    def remaining(self) -> float:
        return self._end - _clock()

    def expired(self) -> bool:
        return self._cancelled.is_set() or SHUTDOWN.is_set() or _clock() >= self._end

    def check(self) -> None:
        """Raise :class:`OutOfTime` when the work must stop."""
        if SHUTDOWN.is_set():
            raise OutOfTime("the server is shutting down; retry later")
        if self._cancelled.is_set():
            raise OutOfTime(f"{self.what} was cancelled: the client went away")
        if _clock() >= self._end:
            raise OutOfTime(
                f"{self.what} did not finish within its time budget of {self.seconds:g} s; "
                "ask for less work (fewer replicates or items) or retry when the server is less busy"
            )


class WorkSlots:
    """At most ``capacity`` long computations of a process at once (fits, intervals,
    rank summaries, bootstraps): each holds O(m²) memory and a core, so N concurrent
    requests for new summaries must not take N times that. The others wait for a slot
    within their own deadline (503 when it is spent while waiting)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._slots = threading.BoundedSemaphore(capacity)

    @contextmanager
    def hold(self, deadline: Deadline) -> Iterator[None]:
        """A slot for the duration of the block (never nested: one slot per thread)."""
        while not self._slots.acquire(timeout=0.1):
            deadline.check_waiting()
        try:
            yield
        finally:
            self._slots.release()
