"""Exception handlers: every error is JSON ``{"detail": …}`` and never echoes input.

FastAPI's default 422 body repeats the offending input; a submitted answer must
never come back in an error, so validation errors keep only where the problem
is and what is wrong with it.
"""

from __future__ import annotations

import logging
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from .errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    NotInstalled,
    ServiceError,
    TemporarilyUnavailable,
    TooLarge,
    TooMany,
    Unauthorized,
)

log = logging.getLogger("privrank.api")

#: Paths whose item id would say what a respondent did (which item it flagged): logged
#: with the id replaced by its name.
_FLAG_PATH = re.compile(r"(/v1/surveys/[^/]+/items/)[^/]+(/flag)")


#: Characters that would end or rewrite a log line (C0 and C1 controls, Unicode line and
#: paragraph separators): a percent-encoded newline in a path must not forge a line.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def logged_path(path: str) -> str:
    """The path as the logs show it: a flagged item's id is not logged (with the time and,
    in uvicorn's access log, the client's address, it would tie a flag to a respondent's
    other requests), and control characters are written as escapes (``\\x0a``)."""
    return _CONTROL.sub(_escaped, _FLAG_PATH.sub(r"\1{item_id}\2", path))


def _sanitize(errors: list[dict]) -> list[dict]:
    """Keep where and what; drop the input (and the name of an unexpected field,
    which a client might have used to carry an answer)."""
    out = []
    for e in errors:
        loc = list(e.get("loc", ()))
        if e.get("type") == "extra_forbidden" and loc:
            loc[-1] = "<extra field>"
        msg = e.get("msg", "")
        if e.get("type") in ("too_long", "too_short") and isinstance(e.get("input"), str):
            # A length set on a field of an annotated string (Text) is checked as a generic
            # length: pydantic then speaks of "items after validation". Say characters.
            ctx = e.get("ctx") or {}
            longer = e["type"] == "too_long"
            bound = ctx.get("max_length") if longer else ctx.get("min_length")
            msg = f"String should have {'at most' if longer else 'at least'} {bound} characters"
        out.append({"loc": loc, "msg": msg, "type": e.get("type", "")})
    return out


#: Messages of connection-level failures (the database is down or unreachable).
_UNAVAILABLE = re.compile(
    r"connection|connect|server closed|terminating|database is locked|unable to open database|timeout|"
    r"could not receive|could not send|no route",
    re.IGNORECASE,
)


def _unavailable(exc: Exception) -> bool:
    if isinstance(exc, PoolTimeout):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, OperationalError) and bool(_UNAVAILABLE.search(str(exc.orig)))


def where(exc: BaseException) -> str:
    """``file:line`` where the exception was raised (never its message)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else "?"


#: What each domain error means in HTTP (the first match along the exception's MRO).
STATUS: dict[type[ServiceError], int] = {
    Invalid: 422,
    NotFound: 404,
    Conflict: 409,
    Unauthorized: 401,
    Forbidden: 403,
    TooLarge: 413,
    TooMany: 429,
    TemporarilyUnavailable: 503,
    NotInstalled: 501,
    ServiceError: 400,
}


def status_of(exc: ServiceError) -> int:
    return next(STATUS[cls] for cls in type(exc).__mro__ if cls in STATUS)


def install(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, exc: ServiceError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        retry_after = getattr(exc, "retry_after", None)  # the "busy" errors (503, 429) carry one
        if retry_after:
            headers = {"Retry-After": str(retry_after)}
        body = {"detail": exc.detail} if exc.code is None else {"detail": exc.detail, "code": exc.code}
        return JSONResponse(body, status_code=status_of(exc), headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI's answer to a body that is not JSON (or not UTF-8): a 422 like every
            # other invalid content, with the same shape.
            return JSONResponse({"detail": "the request body is not valid JSON"}, status_code=422)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _sanitize(list(exc.errors()))}, status_code=422)

    @app.exception_handler(DBAPIError)
    @app.exception_handler(PoolTimeout)
    async def _database_error(request: Request, exc: Exception) -> JSONResponse:
        if _unavailable(exc):
            # The database is unreachable: fail fast so that clients retry.
            log.warning(
                "database unavailable during %s %s: %s",
                request.method,
                logged_path(request.url.path),
                type(exc).__name__,
            )
            return JSONResponse(
                {"detail": "database unavailable, retry later"}, status_code=503, headers={"Retry-After": "1"}
            )
        log.error(
            "database error during %s %s: %s at %s",
            request.method,
            logged_path(request.url.path),
            type(exc).__name__,
            where(exc),
        )
        return JSONResponse({"detail": "internal error"}, status_code=500)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # The type and place only: an exception's message could carry request data.
        log.error(
            "unexpected %s during %s %s at %s",
            type(exc).__name__,
            request.method,
            logged_path(request.url.path),
            where(exc),
        )
        return JSONResponse({"detail": "internal error"}, status_code=500)
