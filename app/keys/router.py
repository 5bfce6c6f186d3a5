"""Analyst, moderator and integration keys, minted and revoked by admins."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from ..core import auth
from ..core.deps import PrincipalDep, SessionDep, admin
from ..core.routers import Limit, Offset, errors
from .schemas import KeyCreate, KeyCreated, KeyList, KeyOut, WhoAmI

router = APIRouter(prefix="/v1/keys", tags=["keys"], dependencies=[Depends(admin)])
whoami_router = APIRouter(tags=["keys"])


@whoami_router.get(
    "/v1/whoami",
    response_model=WhoAmI,
    responses=errors(401, 429),
    summary="Who the credentials stand for (any credential)",
)
def whoami(*, who: PrincipalDep) -> WhoAmI:
    """The role of the bearer credential — admin, analyst, moderator, integration,
    respondent or site — and, for a respondent, its survey. The dashboard asks this
    after sign-in."""
    return WhoAmI(role=who.role, survey_id=who.survey_id if who.role == auth.RESPONDENT else None)


def _out(row) -> dict:
    return {
        "id": row.id,
        "role": row.role,
        "label": row.label,
        "created_at": row.created_at,
        "revoked_at": row.revoked_at,
    }


@router.post(
    "",
    status_code=201,
    response_model=KeyCreated,
    responses=errors(401, 403, 422),
    summary="Mint an analyst, moderator or integration key",
)
def create_key(*, body: KeyCreate | None = None, session: SessionDep) -> KeyCreated:
    """The key is in this answer only; the service keeps its SHA-256. An analyst reads
    surveys and their results; a moderator reads surveys and curates their suggestions
    and items (nothing else); an integration registers respondents server-to-server,
    optionally with an ``external_id`` (nothing else)."""
    row, plaintext = auth.create_key(
        session, body.label if body else None, body.role if body else auth.ANALYST
    )
    return KeyCreated(**_out(row), key=plaintext)


@router.get("", response_model=KeyList, responses=errors(401, 403, 422), summary="List keys (no secrets)")
def list_keys(
    *,
    limit: Limit = 100,
    offset: Offset = 0,
    session: SessionDep,
) -> KeyList:
    """A page of keys, newest first, and how many there are."""
    rows, total = auth.list_keys(session, limit, offset)
    return KeyList(keys=[KeyOut(**_out(r)) for r in rows], total=total)


@router.delete("/{key_id}", status_code=204, responses=errors(401, 403, 404, 409), summary="Revoke a key")
def revoke_key(*, key_id: str, request: Request, session: SessionDep) -> Response:
    """Revoke an analyst or admin key (not the last admin key)."""
    auth.revoke_key(session, key_id, request.app.state.settings.admin_key)
    return Response(status_code=204)
