"""Participatory surveys: suggestions, moderation, flags, and the public results."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ..core.auth import ADMIN
from ..core.bounded import run_bounded
from ..core.deps import ModeratorDep, RespondentDep, SessionDep, bearer_token
from ..core.errors import Forbidden, Invalid
from ..core.ratelimit import RateLimiter, TooManyRequests, client_address
from ..core.routers import Offset, errors
from ..surveys.languages import label_in, translations_of
from ..surveys.schemas import ItemOut
from ..surveys.service import BATCH_DEFAULT, UNSET, get_survey
from ..surveys.views import Lang, item_out, language_of
from . import moderation
from . import suggestions as svc
from .labels import Similar
from .schemas import (
    ItemStatusIn,
    PublicResults,
    SimilarOut,
    SuggestionApprove,
    SuggestionEdit,
    SuggestionIn,
    SuggestionList,
    SuggestionMerge,
    SuggestionOut,
    SuggestionReceived,
    SuggestionReject,
)

router = APIRouter(prefix="/v1/surveys/{survey_id}", tags=["participation"])


def _moderator_id(who) -> str:
    return who.key_id or "admin"


def _token(request: Request) -> str:
    """The respondent's bearer token (already authenticated): the key of its slots and flags."""
    return bearer_token(request)


def _out(row, similar: list[Similar] | None = None) -> SuggestionOut:
    return SuggestionOut(
        id=row.id,
        label=row.label,
        status=row.status,
        received_at=row.received_at,
        reason=row.reason,
        item_id=row.item_id,
        decided_at=row.decided_at,
        similar=[SimilarOut(**vars(s)) for s in similar or []],
    )


# -- respondents --------------------------------------------------------------------


@router.post(
    "/suggestions",
    status_code=202,
    response_model=SuggestionReceived,
    responses=errors(401, 403, 404, 409, 422, 429),
    summary="Suggest an item (respondent)",
)
def suggest(
    *, body: SuggestionIn, request: Request, ctx: RespondentDep, session: SessionDep
) -> SuggestionReceived:
    """Propose an item. It is stored with no link to you: not your id, not your token;
    your record is not written at all (the survey's limit is kept as slots keyed with your
    token, which the service does not keep). It is held until respondents of ``batch``
    different tokens have sent one, then published with theirs in random order and with
    one time to the hour. With moderation "before" a moderator reviews it then.
    409: the survey takes no suggestions, is closed, your suggestions are used up
    (``suggestion_limit``) or the survey has taken all it accepts (``suggestions_full``);
    429 (``suggestions_hourly``, with Retry-After): the survey has taken its suggestions
    for this hour; 429 (``suggestions_address``, with Retry-After): this client address
    has sent its suggestions for now (``PRIVRANK_SUGGEST_PER_HOUR``, whatever the survey
    or the token). A refused suggestion stores nothing and uses none of your allowance."""
    survey, _ = ctx
    limiter: RateLimiter = request.app.state.rate_limiter
    wait = limiter.take("suggestions", client_address(request))
    if wait is not None:
        per_hour = limiter.per_hour["suggestions"]
        raise TooManyRequests(
            f"too many suggestions from this address (at most {per_hour} an hour); retry later",
            wait,
            code="suggestions_address",
        )
    try:
        remaining = svc.submit(session, survey, _token(request), body.label)
    except Exception:
        # Refused (or failed): nothing was stored, so the address's token goes back — one
        # respondent's refused suggestions never lock out others behind the same address.
        limiter.give_back("suggestions", client_address(request))
        raise
    return SuggestionReceived(remaining=remaining, batch=int((survey.suggestions or {})["batch"]))


@router.post(
    "/items/{item_id}/flag",
    status_code=204,
    responses=errors(401, 403, 404, 409),
    summary="Flag an item as inappropriate (respondent)",
)
def flag(*, item_id: str, request: Request, ctx: RespondentDep, session: SessionDep) -> Response:
    """Counts once per respondent and item, once published: flags are held and published
    in batches from ``suggestions.batch`` different respondents, like suggestions. At the
    survey's ``flag_threshold`` a suggested item goes back to review and is no longer
    served. Stored as a digest keyed with your token, which the service does not keep:
    nobody can read back who flagged what."""
    survey, _ = ctx
    svc.flag_item(session, survey, _token(request), item_id)
    return Response(status_code=204)


# -- moderators ---------------------------------------------------------------------


@router.get(
    "/suggestions",
    response_model=SuggestionList,
    responses=errors(401, 403, 404, 422),
    summary="The moderation queue (admin or moderator)",
)
def list_suggestions(
    *,
    survey_id: str,
    who: ModeratorDep,
    status: str = Query("pending", description="pending (default), approved, rejected, merged or all."),
    limit: int = Query(50, ge=1, le=200, description="Entries per page (at most 200)."),
    offset: Offset = 0,
    session: SessionDep,
) -> SuggestionList:
    """Suggestions oldest first, each with its near-duplicates among the items and the
    pending suggestions: the same text once case, accents, punctuation and spacing are
    folded away, or trigram similarity ≥ 0.5. The text of a suggestion is visible here
    only (to moderators and admins) until it is approved and becomes an item."""
    rows, total = moderation.list_suggestions(session, survey_id, status, limit, offset)
    held = svc.held_counts(session, survey_id)
    settings = get_survey(session, survey_id).suggestions or {}
    return SuggestionList(
        suggestions=[_out(r, s) for r, s in rows],
        total=total,
        held=held["suggestions"],
        held_respondents=held["suggestion_respondents"],
        batch=int(settings.get("batch", BATCH_DEFAULT)),
    )


@router.patch(
    "/suggestions/{suggestion_id}",
    response_model=SuggestionOut,
    responses=errors(401, 403, 404, 409, 422),
    summary="Edit a pending suggestion's text",
)
def edit_suggestion(
    *, survey_id: str, suggestion_id: str, body: SuggestionEdit, who: ModeratorDep, session: SessionDep
) -> SuggestionOut:
    return _out(moderation.edit(session, survey_id, suggestion_id, body.label))


@router.post(
    "/suggestions/{suggestion_id}/approve",
    response_model=SuggestionOut,
    responses=errors(401, 403, 404, 409, 422),
    summary="Approve a suggestion: it becomes an item",
)
def approve_suggestion(
    *,
    survey_id: str,
    suggestion_id: str,
    body: SuggestionApprove | None = None,
    who: ModeratorDep,
    session: SessionDep,
) -> SuggestionOut:
    """The item is served at once, with catch-up (docs/how-to/moderate.md, "New items catch up"). 409 when
    an item has the same text (merge instead) or the survey is closed."""
    label = body.label if body else None
    return _out(moderation.approve(session, survey_id, suggestion_id, _moderator_id(who), label))


@router.post(
    "/suggestions/{suggestion_id}/reject",
    response_model=SuggestionOut,
    responses=errors(401, 403, 404, 409, 422),
    summary="Reject a suggestion, with a reason",
)
def reject_suggestion(
    *, survey_id: str, suggestion_id: str, body: SuggestionReject, who: ModeratorDep, session: SessionDep
) -> SuggestionOut:
    return _out(moderation.reject(session, survey_id, suggestion_id, _moderator_id(who), body.reason))


@router.post(
    "/suggestions/{suggestion_id}/merge",
    response_model=SuggestionOut,
    responses=errors(401, 403, 404, 409, 422),
    summary="Merge a suggestion into an existing item",
)
def merge_suggestion(
    *, survey_id: str, suggestion_id: str, body: SuggestionMerge, who: ModeratorDep, session: SessionDep
) -> SuggestionOut:
    return _out(moderation.merge(session, survey_id, suggestion_id, _moderator_id(who), body.item_id))


@router.patch(
    "/items/{item_id}",
    response_model=ItemOut,
    responses=errors(401, 403, 404, 409, 422),
    summary="Hide or archive an item, or make it live again (admin or moderator); set its translations "
    "(admin)",
)
def set_item_status(
    *, survey_id: str, item_id: str, body: ItemStatusIn, who: ModeratorDep, session: SessionDep
) -> ItemOut:
    """hidden: no longer served (its answers stay in the data, and in the admin's ranking);
    archived: no longer served, not counted toward the survey's item limits and left out
    of every ranking (its answers stay in the data and the exports); live: served again,
    its flags cleared (it has been reviewed; an archived item only while the survey has
    room for it, else 409). Ranking surveys and surveys with a goal: 409. ``translations``
    (admins only): the label in other languages, replacing the item's; both in one change."""
    translations: dict[str, str] | None = UNSET
    if "translations" in body.model_fields_set:
        if who.role != ADMIN:
            raise Forbidden("only an admin may set an item's translations")
        translations = body.translations
    if body.status is None and translations is UNSET:
        raise Invalid("give status, translations or both")
    return item_out(moderation.set_item_status(session, survey_id, item_id, body.status, translations))


# -- everyone -----------------------------------------------------------------------


@router.get(
    "/results",
    response_model=PublicResults,
    responses=errors(404),
    summary="The public results (no credentials; surveys that publish them)",
)
async def results(
    *, request: Request, response: Response, survey_id: str, lang: Lang = None, session: SessionDep
) -> PublicResults:
    """What the page /r/{id} shows: the ranking with 95% score intervals (local surveys:
    post-processing of randomized answers, so publishing it costs no privacy), or a
    central survey's latest release. 404 unless the survey publishes its results.
    Computed at most once a minute per survey (``as_of``), on a turn of work of its own.
    Labels in the reader's language where they have a translation (``?lang=``, then
    ``Accept-Language``, then the survey's default)."""
    survey = await run_in_threadpool(get_survey, session, survey_id)
    state = request.app.state
    found = await run_bounded(
        request,
        state.public_results.get,
        session,
        survey,
        seconds=state.settings.analysis_seconds,
        what="the results",
    )
    language = language_of(request, response, lang, survey)
    translations = await run_in_threadpool(translations_of, session, [it.item_id for it in found.items])
    # The snapshot is shared: relabel a copy.
    return found.model_copy(
        update={
            "language": language,
            "items": [
                it.model_copy(update={"label": label_in(it.label, translations.get(it.item_id), language)})
                for it in found.items
            ]
            if translations
            else found.items,
        }
    )
