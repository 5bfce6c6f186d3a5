"""Federated rounds: the admin's side (open, watch, cancel) and the sites' side."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from ..core.deps import AdminDep, SessionDep, SiteDep, admin, reader
from ..core.routers import Offset, errors
from ..surveys.service import get_survey
from . import service as svc
from .results import RoundList, RoundOut, SiteView
from .schemas import ContributionIn, RoundCreate, SiteKeyIn

router = APIRouter(tags=["federated"])


@router.post(
    "/v1/surveys/{survey_id}/rounds",
    status_code=201,
    response_model=RoundOut,
    responses=errors(401, 403, 404, 409, 422),
    summary="Open a federated round (returns each site's credential, once)",
)
def open_round(
    *,
    survey_id: str,
    body: RoundCreate,
    who: AdminDep,
    session: SessionDep,
):
    """Sites aggregate their local rankings of this survey's items by Borda FRA or
    Lehmer FRA under secure aggregation: each runs ``privrank site contribute``
    with its credential; the server sees only masked messages and publishes the
    consensus when every site is in. Hand each site its own ``token``."""
    survey = get_survey(session, survey_id)
    rnd, _, tokens = svc.open_round(
        session,
        survey,
        body.method,
        body.sites,
        body.phi,
        body.max_rankings,
        body.failure_probability,
        allow_two_sites=body.allow_two_sites,
        created_by=who.key_id or "admin (PRIVRANK_ADMIN_KEY)",
    )
    return svc.round_view(session, rnd, tokens)


@router.get(
    "/v1/surveys/{survey_id}/rounds",
    response_model=RoundList,
    responses=errors(401, 403, 404),
    dependencies=[Depends(reader)],
    summary="The survey's federated rounds",
)
def list_rounds(
    *,
    survey_id: str,
    limit: Annotated[int, Query(ge=1, le=100, description="Rounds per page (at most 100).")] = 20,
    offset: Offset = 0,
    session: SessionDep,
):
    """A page of rounds, newest first, each with its sites and result, and how many there are."""
    get_survey(session, survey_id)
    rows, total = svc.list_rounds(session, survey_id, limit, offset)
    return RoundList(rounds=[svc.round_view(session, r) for r in rows], total=total)


@router.get(
    "/v1/surveys/{survey_id}/rounds/{round_id}",
    response_model=RoundOut,
    responses=errors(401, 403, 404),
    dependencies=[Depends(reader)],
    summary="A federated round: who joined, who contributed, and the result",
)
def get_round(*, survey_id: str, round_id: str, session: SessionDep):
    return svc.round_view(session, svc.get_round(session, survey_id, round_id))


@router.post(
    "/v1/surveys/{survey_id}/rounds/{round_id}/cancel",
    response_model=RoundOut,
    responses=errors(401, 403, 404, 409),
    dependencies=[Depends(admin)],
    summary="Cancel an open round (e.g. a site will never contribute)",
)
def cancel_round(*, survey_id: str, round_id: str, session: SessionDep):
    return svc.round_view(session, svc.cancel_round(session, survey_id, round_id))


# -- sites -------------------------------------------------------------------------------------


@router.get(
    "/v1/site",
    response_model=SiteView,
    responses=errors(401, 403),
    summary="The calling site's round: parameters, peers' public keys, status, result",
)
def site_round(*, me: SiteDep, session: SessionDep):
    return svc.site_view(session, me)


@router.put(
    "/v1/site/key",
    response_model=SiteView,
    responses=errors(401, 403, 409, 422),
    summary="Register the site's X25519 public key (once)",
)
def site_key(*, body: SiteKeyIn, me: SiteDep, session: SessionDep):
    """Idempotent for the same key; a different key after the first is refused (409)."""
    svc.register_key(session, me, body.public_key)
    return svc.site_view(session, me)


@router.post(
    "/v1/site/contribution",
    status_code=201,
    response_model=SiteView,
    responses={
        200: {"model": SiteView, "description": "The same message was already stored: nothing changed."},
        **errors(401, 403, 409, 422),
    },
    summary="Upload the site's masked message",
)
def site_contribution(*, body: ContributionIn, me: SiteDep, session: SessionDep):
    """Accepted once every site has joined, with the site's declaration of what it did to
    its rankings (``privatization``: ``mallows`` at ``epsilon``, or ``none``; 422 for
    ``none`` with an epsilon or ``mallows`` without). The last contribution completes the
    round. Sending the same message with the same declaration again returns 200 and
    changes nothing; a different message or declaration is refused (409)."""
    view, created = svc.contribute(session, me, body.masked, body.privatization, body.epsilon)
    return JSONResponse(jsonable_encoder(view), status_code=201 if created else 200)
