"""Exception handlers: every error is JSON ``{"detail": …}`` and never echoes input.

FastAPI's default 422 body repeats the offending input; a submitted answer must
never come back in an error, so validation errors keep only where the problem
is and what is wrong with it.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from ..services.errors import ServiceError, Unauthorized

log = logging.getLogger("privrank.api")


def _sanitize(errors: list[dict]) -> list[dict]:
    return [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in errors
    ]


def install(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, exc: ServiceError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _sanitize(list(exc.errors()))}, status_code=422)

    @app.exception_handler(OperationalError)
    @app.exception_handler(PoolTimeout)
    async def _database_down(request: Request, exc: Exception) -> JSONResponse:
        # Connection-level failures: fail fast with 503 so clients retry.
        log.warning(
            "database unavailable during %s %s: %s", request.method, request.url.path, type(exc).__name__
        )
        return JSONResponse(
            {"detail": "database unavailable, retry later"}, status_code=503, headers={"Retry-After": "1"}
        )

    @app.exception_handler(DBAPIError)
    async def _database_error(request: Request, exc: DBAPIError) -> JSONResponse:
        if exc.connection_invalidated:
            return JSONResponse(
                {"detail": "database unavailable, retry later"}, status_code=503, headers={"Retry-After": "1"}
            )
        log.error("database error during %s %s: %s", request.method, request.url.path, type(exc).__name__)
        return JSONResponse({"detail": "internal error"}, status_code=500)
