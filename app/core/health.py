"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from .schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, response_model_exclude_none=True, summary="Liveness")
def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}}, summary="Readiness")
def readyz(request: Request):
    """200 when the database answers, 503 otherwise."""
    try:
        with request.app.state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception:
        return JSONResponse({"status": "unavailable", "database": "unreachable"}, status_code=503)
    return Health(status="ready", database="ok")
