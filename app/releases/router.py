"""Differentially private releases of central-model surveys."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Header, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from ..core.bounded import run_bounded
from ..core.deps import ReaderDep, SessionDep, reader
from ..core.routers import Limit, Offset, errors
from . import service as svc
from .results import ReleaseList, ReleaseOut
from .schemas import ReleaseCreate

router = APIRouter(prefix="/v1/surveys/{survey_id}/releases", tags=["releases"])


@router.post(
    "",
    status_code=201,
    response_model=ReleaseOut,
    responses={
        200: {
            "model": ReleaseOut,
            "description": "A retry with the same Idempotency-Key: the release, unspent.",
        },
        **errors(401, 403, 404, 409, 422, 503),
    },
    summary="Make a differentially private release (spends budget)",
)
async def create_release(
    *,
    request: Request,
    survey_id: str,
    body: ReleaseCreate,
    who: ReaderDep,
    session: SessionDep,
    idempotency_key: str | None = Header(
        None,
        alias="Idempotency-Key",
        max_length=200,
        description="A retry with the same key returns the release, unspent.",
    ),
):
    """Run the mechanism on the survey's true answers and store its output.

    Costs ``epsilon`` of the survey's person-level budget for ``unit=individual``
    and ``max_comparisons_per_respondent·epsilon`` for ``unit=edge`` (a person's answers,
    by group privacy).
    A survey with ``zcdp`` accounting sums ρ instead: ``rho`` (noisy counts with
    discrete Gaussian noise) costs ρ (individual) or max_comparisons_per_respondent²·ρ
    (edge), and an ``epsilon`` release costs (person-level ε)²/2; ``rho`` in a pure survey is 409
    ``pure_accounting``. 409 when the cost exceeds what remains — nothing is spent then. The stored release
    can be read again for free (``GET …/releases/{id}``). The mechanism takes a turn
    with the worker's other long computations, within ``PRIVRANK_ANALYSIS_SECONDS``
    (503 beyond, nothing spent)."""
    out, replayed = await run_bounded(
        request,
        svc.create_release,
        session,
        survey_id,
        body.method,
        body.unit,
        body.epsilon,
        body.k,
        created_by=who.key_id or "admin (PRIVRANK_ADMIN_KEY)",
        idempotency_key=idempotency_key,
        work=request.app.state.fit_cache.work,
        seconds=request.app.state.settings.analysis_seconds,
        what="the release",
        rho=body.rho,
    )
    headers = {"Idempotent-Replayed": "true"} if replayed else None
    return JSONResponse(jsonable_encoder(out), status_code=200 if replayed else 201, headers=headers)


@router.get(
    "",
    response_model=ReleaseList,
    responses=errors(401, 403, 404, 409),
    dependencies=[Depends(reader)],
    summary="The ledger: the releases, newest first, and the budget",
)
def list_releases(
    *,
    survey_id: str,
    limit: Limit = 100,
    offset: Offset = 0,
    session: SessionDep,
):
    """Each release with its first 10 items (the whole result: ``GET …/releases/{id}``),
    the number of releases (``total``) and the budget. O(limit) whatever the number of
    items."""
    return svc.list_releases(session, survey_id, limit, offset)


@router.get(
    "/{release_id}",
    response_model=ReleaseOut,
    responses=errors(401, 403, 404, 409),
    dependencies=[Depends(reader)],
    summary="A stored release (free: nothing is spent)",
)
def get_release(*, survey_id: str, release_id: str, session: SessionDep):
    return svc.get_release(session, survey_id, release_id)
