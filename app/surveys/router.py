"""Surveys and items (admin; analysts may read)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from ..analysis.aggregation import coverage as pair_coverage
from ..core.auth import ADMIN, ANALYST
from ..core.deps import SessionDep, ViewerDep, admin, reader, viewer
from ..core.routers import Limit, Offset, errors
from ..goals.service import goal_met
from ..participation.moderation import pending_counts
from ..privacy.service import privacy_summary
from . import items
from . import service as svc
from .languages import LANGUAGES
from .policy import PrivacyPolicy, budget_policy
from .results import CoverageOut
from .schemas import (
    ItemOut,
    ItemsAdd,
    PublicSuggestions,
    PublicSurveyOut,
    SurveyCreate,
    SurveyList,
    SurveyOut,
    SurveyUpdate,
)
from .views import Lang, item_out, language_of, survey_out, survey_summary

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
    """Create a survey with its items and privacy policy. It starts open. A local survey
    without ``respondent_budget`` gets the default cap on each respondent's total ε (5 for
    pairwise surveys, epsilon_max for ranking surveys); ``"respondent_budget": "unlimited"``
    opts out, and the survey's privacy summary says so (docs/how-to/privacy.md, "Privacy by default")."""
    p = body.privacy
    survey = svc.create_survey(
        session,
        body.title,
        body.kind,
        body.items,
        PrivacyPolicy(
            p.model,
            p.epsilon_default,
            p.epsilon_min,
            p.epsilon_max,
            p.respondent_budget,
            p.total_budget,
            p.max_comparisons_per_respondent,
            p.accounting,
            p.delta,
        ),
        body.assignment,
        None if body.goal is None else body.goal.model_dump(),
        None if body.suggestions is None else body.suggestions.model_dump(),
        body.public_results,
        body.results_on_finish,
        body.language,
        body.item_translations,
        embed_origins=body.embed_origins,
    )
    return survey_out(session, survey)


@router.get(
    "",
    response_model=SurveyList,
    responses=errors(401, 403),
    dependencies=[Depends(viewer)],
    summary="List surveys",
)
def list_surveys(
    *,
    limit: Limit = 100,
    offset: Offset = 0,
    session: SessionDep,
) -> SurveyList:
    """Surveys, newest first, with their number of items (``n_items``; the items
    themselves: ``GET /v1/surveys/{id}``) and suggestions waiting for a moderator
    (``pending_suggestions``). Three queries whatever ``limit``."""
    rows, total = svc.list_surveys(session, limit, offset)
    pending = pending_counts(session, [s.id for s, _ in rows])
    return SurveyList(surveys=[survey_summary(s, n, pending.get(s.id, 0)) for s, n in rows], total=total)


@router.get(
    "/{survey_id}",
    response_model=SurveyOut,
    responses=errors(401, 403, 404),
    summary="Get a survey",
)
def get_survey(*, survey_id: str, who: ViewerDep, session: SessionDep) -> SurveyOut:
    """A central survey's ``respondents``, ``comparisons`` and ``undecided`` are exact
    counts for the operator (admins and analysts); a moderator gets null there."""
    operator = who.role in (ADMIN, ANALYST)
    return survey_out(session, svc.get_survey(session, survey_id), operator=operator)


@router.patch(
    "/{survey_id}",
    response_model=SurveyOut,
    responses=errors(401, 403, 404, 409, 422),
    dependencies=[Depends(admin)],
    summary="Open or close a survey, rename it, or change its participation settings",
)
def update_survey(*, request: Request, survey_id: str, body: SurveyUpdate, session: SessionDep) -> SurveyOut:
    """A closed survey answers 409 to new respondents and responses; reopening is allowed.
    ``suggestions``: new settings, or null to stop taking suggestions (absent: unchanged).
    ``embed_origins``: the sites that may frame the survey's pages, replacing the list; null or
    [] for none (absent: unchanged). ``privacy``: a central survey's ``accounting`` (pure or
    zcdp) and ``delta``, until its first release (then 409 with code ``accounting_locked``).
    Every other field, absent or null, is unchanged (the survey's ``language`` is never
    empty: send ``"en"`` for the default)."""
    suggestions: dict | None = svc.UNSET
    if "suggestions" in body.model_fields_set:
        suggestions = None if body.suggestions is None else body.suggestions.model_dump()
    survey = svc.update_survey(
        session,
        survey_id,
        body.status,
        body.title,
        suggestions,
        body.public_results,
        body.results_on_finish,
        body.language,
        embed_origins=body.embed_origins if "embed_origins" in body.model_fields_set else svc.UNSET,
        accounting=None if body.privacy is None else body.privacy.accounting,
        delta=None if body.privacy is None else body.privacy.delta,
    )
    request.app.state.embed_origins.forget(survey.id)  # this process's pages see the change at once
    return survey_out(session, survey)


@router.post(
    "/{survey_id}/items",
    status_code=201,
    response_model=list[ItemOut],
    responses=errors(401, 403, 404, 409, 422),
    dependencies=[Depends(admin)],
    summary="Add items to an open survey",
)
def add_items(*, survey_id: str, body: ItemsAdd, session: SessionDep) -> list[ItemOut]:
    """New items get the next positions; earlier answers keep their meaning.
    ``item_translations``: their labels in other languages, as on create."""
    return [item_out(i) for i in items.add_items(session, survey_id, body.items, body.item_translations)]


@router.get(
    "/{survey_id}/public",
    response_model=PublicSurveyOut,
    responses=errors(404),
    summary="What a prospective respondent may know (no credentials needed)",
)
def public_survey(
    *, request: Request, response: Response, survey_id: str, lang: Lang = None, session: SessionDep
) -> PublicSurveyOut:
    """Title, kind, status and the privacy a respondent will get — what the respondent
    page shows before registering. Nothing about answers or other respondents.
    ``language``: the one the page is shown in (``?lang=``, then ``Accept-Language``,
    then the survey's default); ``languages``: those it has."""
    survey = svc.get_survey(session, survey_id)
    n = items.item_count(session, survey.id)
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
        respondent_budget_policy=budget_policy(survey),
        max_comparisons_per_respondent=survey.max_comparisons,
        privacy_summary=privacy_summary(survey, n),
        goal_met=None if survey.goal is None else goal_met(session, survey),
        suggestions=_public_suggestions(survey),
        public_results=bool(survey.public_results),
        results_on_finish=bool(survey.results_on_finish),
        language=language_of(request, response, lang, survey),
        languages=list(LANGUAGES),
    )


def _public_suggestions(survey) -> PublicSuggestions | None:
    s = survey.suggestions
    if not s or not s.get("enabled"):
        return None
    return PublicSuggestions(
        enabled=True, per_respondent=s["per_respondent"], moderation=s["moderation"], batch=s["batch"]
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
    return pair_coverage(session, svc.get_survey(session, survey_id))
