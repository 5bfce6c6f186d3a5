"""Shared pieces of the routers: pagination and the error answers they document."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from .schemas import ErrorOut

#: Pagination of the lists (newest first): entries per page and entries to skip.
Limit = Annotated[int, Query(ge=1, le=1000, description="Entries per page (at most 1,000).")]
Offset = Annotated[int, Query(ge=0, le=1_000_000, description="Entries to skip (newest first).")]


def errors(*codes: int) -> dict:
    """OpenAPI entries for the error answers a route can give."""
    text = {
        401: "Missing or invalid credentials.",
        403: "The credentials do not allow this call.",
        404: "No such survey (or item, key).",
        409: "Conflicts with the survey's state or earlier answers; nothing was stored.",
        422: "Invalid content; nothing was stored.",
        429: "Too many requests from this address; retry after the Retry-After header's seconds.",
        503: "The database is unreachable; retry later.",
    }
    return {c: {"model": ErrorOut, "description": text[c]} for c in codes}
