"""Run a long computation in the thread pool under a time budget that also ends
when the client disconnects (see :mod:`app.core.deadline`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from fastapi import Request
from starlette.concurrency import run_in_threadpool

from .deadline import Deadline

__all__ = ["run_bounded"]

T = TypeVar("T")

#: How often the client's connection is looked at while the work runs (seconds).
POLL_SECONDS = 0.25


async def run_bounded(
    request: Request, fn: Callable[..., T], *args: Any, seconds: float, what: str, **kwargs: Any
) -> T:
    """``fn(*args, deadline=…, **kwargs)`` in a worker thread; the deadline expires after
    ``seconds`` or as soon as the client goes away, and ``fn`` stops at its next
    ``deadline.check()`` with :class:`~app.core.deadline.OutOfTime`.

    Call it only once the request body has been read (the disconnect watch reads
    the request's receive channel)."""
    deadline = Deadline(seconds, what=what)

    async def watch() -> None:
        while not deadline.expired():
            await anyio.sleep(POLL_SECONDS)
            if await request.is_disconnected():
                deadline.cancel()
                return

    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            result = await run_in_threadpool(fn, *args, deadline=deadline, **kwargs)
        except Exception as exc:  # re-raised below, outside the task group (no exception group)
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result
