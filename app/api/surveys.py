"""Surveys and items (admin; analysts may read)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from ..services import surveys as svc
from ..services.goals import goal_met
from .common import Limit, Offset, errors, survey_out, survey_summary
from .deps import SessionDep, admin, reader
from .schemas import (
    CoverageOut,
    ItemOut,
    ItemsAdd,
    PublicSurveyOut,
    SurveyCreate,
    SurveyList,
    SurveyOut,
    SurveyUpdate,
)

router = APIRouter(prefix="/v1/surveys", tags=["surveys"])


@router.post(
    "",
    status_code=201,
    response_model=SurveyOut,
    responses=errors(401, 403, 422),
    dependencies=[Depends(admin)],
    summary="Create a survey",
)
def create_survey(*, body: SurveyCreate, session: SessionDep) -> SurveyOut:
    """Create a survey with its items and privacy policy. It starts open."""
    p = body.privacy
    survey = svc.create_survey(
        session,
        body.title,
        body.kind,
        body.items,
        svc.PrivacyPolicy(
            p.model,
            p.epsilon_default,
            p.epsilon_min,
            p.epsilon_max,
            p.respondent_budget,
            p.total_budget,
            p.max_comparisons_per_respondent,
        ),
        body.assignment,
        None if body.goal is None else body.goal.model_dump(),
    )
    return survey_out(session, survey)


@router.get(
    "",
    response_model=SurveyList,
    responses=errors(401, 403),
    dependencies=[Depends(reader)],
    summary="List surveys",
)
def list_surveys(
    *,
    limit: Limit = 100,
    offset: Offset = 0,
    session: SessionDep,
) -> SurveyList:
    """Surveys, newest first, with their number of items (``n_items``; the items
    themselves: ``GET /v1/surveys/{id}``). Two queries whatever ``limit``."""
    rows, total = svc.list_surveys(session, limit, offset)
    return SurveyList(surveys=[survey_summary(s, n) for s, n in rows], total=total)


@router.get(
    "/{survey_id}",
    response_model=SurveyOut,
    responses=errors(401, 403, 404),
    dependencies=[Depends(reader)],
    summary="Get a survey",
)
def get_survey(*, survey_id: str, session: SessionDep) -> SurveyOut:
    return survey_out(session, svc.get_survey(session, survey_id))


@router.patch(
    "/{survey_id}",
    response_model=SurveyOut,
    responses=errors(401, 403, 404, 422),
    dependencies=[Depends(admin)],
    summary="Open or close a survey, or rename it",
)
def update_survey(*, survey_id: str, body: SurveyUpdate, session: SessionDep) -> SurveyOut:
    """A closed survey answers 409 to new respondents and responses; reopening is allowed."""
    return survey_out(session, svc.update_survey(session, survey_id, body.status, body.title))


@router.post(
    "/{survey_id}/items",
    status_code=201,
    response_model=list[ItemOut],
    responses=errors(401, 403, 404, 409, 422),
    dependencies=[Depends(admin)],
    summary="Add items to an open survey",
)
def add_items(*, survey_id: str, body: ItemsAdd, session: SessionDep) -> list[ItemOut]:
    """New items get the next positions; earlier answers keep their meaning."""
    new = svc.add_items(session, survey_id, body.items)
    return [ItemOut(id=i.id, label=i.label, position=i.position) for i in new]


@router.get(
    "/{survey_id}/public",
    response_model=PublicSurveyOut,
    responses=errors(404),
    summary="What a prospective respondent may know (no credentials needed)",
)
def public_survey(*, survey_id: str, session: SessionDep) -> PublicSurveyOut:
    """Title, kind, status and the privacy a respondent will get — what the respondent
    page shows before registering. Nothing about answers or other respondents."""
    survey = svc.get_survey(session, survey_id)
    n = svc.item_count(session, survey.id)
    return PublicSurveyOut(
        id=survey.id,
        title=survey.title,
        kind=survey.kind,
        status=survey.status,
        n_items=n,
        privacy_model=survey.privacy_model,
        epsilon_default=survey.epsilon_default,
        epsilon_min=survey.epsilon_min,
        epsilon_max=survey.epsilon_max,
        respondent_budget=survey.respondent_budget,
        max_comparisons_per_respondent=survey.max_comparisons,
        goal_met=None if survey.goal is None else goal_met(session, survey.id),
    )


@router.get(
    "/{survey_id}/coverage",
    response_model=CoverageOut,
    responses=errors(401, 403, 404, 409),
    dependencies=[Depends(reader)],
    summary="Comparisons per pair (local pairwise surveys)",
)
def coverage(*, survey_id: str, session: SessionDep) -> CoverageOut:
    """``counts[a][b]`` = stored comparisons of items a and b (symmetric; null on the
    diagonal), from the folded statistics, for the dashboard's coverage matrix. Central
    surveys: 409 (which pairs were answered is protected there)."""
    return svc.coverage(session, svc.get_survey(session, survey_id))
