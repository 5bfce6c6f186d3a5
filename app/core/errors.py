"""Domain errors raised by services; the API layer decides what each means in HTTP
(:mod:`app.core.http_errors`), so the services know nothing of status codes.

Messages are shown to clients. They must never contain a submitted answer.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

__all__ = [
    "Conflict",
    "Forbidden",
    "Invalid",
    "NotFound",
    "NotInstalled",
    "ServiceError",
    "TemporarilyUnavailable",
    "TooLarge",
    "TooMany",
    "Unauthorized",
    "invalid_from",
]

log = logging.getLogger("privrank.services")

#: The package's own source files: a ValueError raised there has a message written for clients.
_OWN_CODE = str(Path(__file__).resolve().parent.parent)
#: What a client is told when a library refused its parameters.
COMPUTATION_FAILED = "the computation failed for these parameters; try less extreme values"


class ServiceError(Exception):
    """A request the service refuses, with a message for the client."""

    def __init__(self, detail: str | list | dict, code: str | None = None) -> None:
        super().__init__(detail if isinstance(detail, str) else "service error")
        self.detail = detail
        #: A machine-readable name for the refusal, where a client acts on it
        #: (e.g. ``suggestion_limit``); answered as ``code`` next to ``detail``.
        self.code = code


class Invalid(ServiceError):
    """The request is well-formed but its content is not acceptable."""


class NotFound(ServiceError):
    """No such survey, item, respondent, key, release or round."""


class Conflict(ServiceError):
    """The request conflicts with the survey's state or earlier answers; nothing was stored."""


class Unauthorized(ServiceError):
    """Missing or invalid credentials."""


class Forbidden(ServiceError):
    """Valid credentials that do not allow this call."""


class TooLarge(ServiceError):
    """A body or an upload over its size limit."""


class NotInstalled(ServiceError):
    """The call needs an optional extra this server does not have (e.g. pyarrow for Parquet)."""


class _RetryLater(ServiceError):
    """A refusal that goes away: ``retry_after`` seconds (at least 1) is worth waiting."""

    def __init__(self, detail: str, retry_after: float = 5.0, code: str | None = None) -> None:
        super().__init__(detail, code)
        self.retry_after = max(1, math.ceil(retry_after))


class TemporarilyUnavailable(_RetryLater):
    """The work could not be done now (busy, out of time, shutting down); retry later."""


class TooMany(_RetryLater):
    """This client asked too often (a rate limit); retry later."""


def invalid_from(exc: ValueError) -> Invalid:
    """The 422 for a ``ValueError`` out of a computation on a client's parameters.

    The statistical core raises ``ValueError`` with a sentence for the client ("scores
    must be finite numbers"), and that sentence is kept. NumPy and SciPy raise it too
    (``LinAlgError`` is one: "3-th leading minor of the array is not positive
    definite"), speaking of their internals: the client gets
    :data:`COMPUTATION_FAILED`, and the log the exception's type, place and message.
    Which is which: where it is raised (a file of this package or not)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    origin = tb.tb_frame.f_code.co_filename if tb is not None else ""
    if origin.startswith(_OWN_CODE) and type(exc) is ValueError:
        return Invalid(str(exc))
    line = tb.tb_lineno if tb is not None else 0
    log.warning("a library refused a computation: %s at %s:%d: %s", type(exc).__name__, origin, line, exc)
    return Invalid(COMPUTATION_FAILED)
