"""Respondents: registration, pairs to answer, responses."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from ..core.deps import IntegrationDep, RespondentDep, SessionDep, SettingsDep, bearer_token
from ..core.errors import Conflict, Forbidden, Invalid
from ..core.idempotency import Stored
from ..core.ratelimit import TooManyRequests, client_address
from ..core.routers import errors
from ..privacy.service import MAX_RECEIPT_ANSWERS, receipt
from ..rankings import service as ranking_surveys
from ..stats import flip_probability
from ..surveys.languages import label_in, translations_of
from ..surveys.service import get_survey, require_pairwise
from ..surveys.views import Lang, language_of
from . import ingestion
from .assignment import next_pairs
from .results import QuestionOut
from .schemas import (
    PairOut,
    PairsOut,
    RespondentCreate,
    RespondentCreated,
    RespondentStatus,
    ResponsesIn,
    ResponsesOut,
    UndecidedIn,
)
from .service import account, budget_remaining, comparisons_remaining, register_respondent
from .undecided import record_undecided

router = APIRouter(prefix="/v1/surveys/{survey_id}", tags=["respondents"])


@router.post(
    "/respondents",
    status_code=201,
    response_model=RespondentCreated,
    responses=errors(403, 404, 409, 422, 429),
    summary="Register as a respondent (no credentials needed; integrations with their key)",
    # Credentials are optional here: an integration key, or none.
    openapi_extra={"security": [{}, {"HTTPBearer": []}]},
)
def register(
    *,
    request: Request,
    survey_id: str,
    body: RespondentCreate | None = None,
    session: SessionDep,
    caller: IntegrationDep,
) -> RespondentCreated:
    """Anyone may register with an open survey. In a local-model survey the
    respondent's ε (default: the survey's) fixes how often each of its answers is
    flipped, 1/(1+e^ε); central-model surveys take no ε (their answers are stored
    as given and only differentially private releases leave the service).

    Registrations are rate-limited per client address (429 with Retry-After).

    An integration key (another service registering its users server-to-server) is
    exempt from that limit and limited per key instead; it alone may send
    ``external_id`` (403 for anyone else): the same id in the same survey is the same
    respondent, returned with a new token that replaces its old one. Only an HMAC
    digest of the id is stored (docs/how-to/embed.md, "Integrations")."""
    limiter = request.app.state.rate_limiter
    external_id = body.external_id if body else None
    if caller is not None:
        wait = limiter.take("integration", str(caller.key_id))
        if wait is not None:
            raise TooManyRequests("too many registrations with this integration key; retry later", wait)
    else:
        if external_id is not None:
            raise Forbidden("external_id is accepted only from an integration key")
        wait = limiter.take("register", client_address(request))
        if wait is not None:
            raise TooManyRequests("too many registrations from this address; retry later", wait)
    survey = get_survey(session, survey_id)
    external_key = None if external_id is None else request.app.state.external_ids.key(survey.id, external_id)
    respondent, token = register_respondent(session, survey, body.epsilon if body else None, external_key)
    return RespondentCreated(
        respondent_id=respondent.id,
        token=token,
        epsilon=respondent.epsilon,
        flip_probability=None if respondent.epsilon is None else float(flip_probability(respondent.epsilon)),
        budget_remaining=budget_remaining(survey, respondent),
        comparisons_remaining=comparisons_remaining(survey, respondent),
    )


@router.post(
    "/undecided",
    status_code=204,
    responses=errors(401, 403, 404, 409, 422),
    summary="“Can't decide”: count a pass on a pair served, and nothing else",
)
def undecided(*, request: Request, body: UndecidedIn, ctx: RespondentDep, session: SessionDep) -> Response:
    """The respondent passes on a pair it was served (``ticket``: the pair's
    ``undecided_ticket``): the survey's count of “can't decide” answers goes up by one,
    once per pair served to this respondent — passing the same pair again is a no-op
    (204, nothing counted). The request names no pair and nothing is stored about the
    respondent, the pair or the time; no privacy budget is spent (docs/how-to/privacy.md, "Can't
    decide"). 422 for a ticket not issued to this respondent; 409 when the survey is
    closed or collects rankings."""
    survey, respondent = ctx
    require_pairwise(survey)
    x = request.app.state.undecided_tickets.pair_digest(survey.id, respondent.id, body.ticket)
    record_undecided(session, survey, bearer_token(request), x)
    return Response(status_code=204)


@router.get(
    "/respondents/me",
    response_model=RespondentStatus,
    responses=errors(401, 403, 404),
    summary="The calling respondent's own privacy account and receipt",
)
def me(
    *,
    request: Request,
    response: Response,
    limit: int = Query(
        MAX_RECEIPT_ANSWERS,
        ge=0,
        le=MAX_RECEIPT_ANSWERS,
        description="Answers the receipt lists (at most 1,000).",
    ),
    offset: int = Query(0, ge=0, le=10**9, description="Answers the receipt skips (in the order given)."),
    lang: Lang = None,
    ctx: RespondentDep,
    session: SessionDep,
) -> RespondentStatus:
    """The respondent's account (answers, ε spent, budget left) and its privacy receipt:
    every stored answer — which pair (labels in the respondent's language), or its ranking —
    with its mechanism, where it was randomized and its ε; the total ε under basic
    composition, what remains of the cap, and what each means as a guess bound e^ε/(1+e^ε)
    (docs/how-to/privacy.md, the receipt). The receipt names what the respondent already knows, never
    a stored (randomized) answer; only the respondent's own token reads it. A receipt lists
    at most 1,000 answers (``limit``, ``offset``); its totals cover them all."""
    survey, respondent = ctx
    out = receipt(session, survey, respondent, limit, offset)
    language = language_of(request, response, lang, survey)
    found = translations_of(session, [i for a in out.answers for i in a.items])
    if found:
        for a in out.answers:
            a.labels = [
                label_in(label, found.get(i), language) for i, label in zip(a.items, a.labels, strict=True)
            ]
    return RespondentStatus(**asdict(account(session, survey, respondent)), receipt=out)


@router.get(
    "/question",
    response_model=QuestionOut,
    responses=errors(401, 403, 404, 409),
    summary="Ranking surveys: the items to rank",
)
def question(
    *, request: Request, response: Response, lang: Lang = None, ctx: RespondentDep, session: SessionDep
) -> QuestionOut:
    """The survey's items in a fresh uniformly random order (so that presentation order
    biases no item), whether this respondent already answered, and the privacy its
    ranking will get: the Mallows mechanism with weight ε/(m−1) per pair, which swaps
    two adjacent items with probability 1/(1+e^{ε/(m−1)}). Pairwise surveys: 409.
    Labels in the respondent's language where they have a translation (``?lang=``, then
    ``Accept-Language``, then the survey's default)."""
    survey, respondent = ctx
    out = ranking_surveys.question(session, survey, respondent)
    language = language_of(request, response, lang, survey)
    found = translations_of(session, [it.id for it in out.items])
    if found:
        for it in out.items:
            it.label = label_in(it.label, found.get(it.id), language)
    return out


@router.get(
    "/pairs",
    response_model=PairsOut,
    responses=errors(401, 403, 404, 409),
    summary="Pairs for the calling respondent to compare",
)
def pairs(
    *,
    request: Request,
    response: Response,
    count: int = Query(1, ge=1, le=100),
    lang: Lang = None,
    ctx: RespondentDep,
    session: SessionDep,
) -> PairsOut:
    """Pairs this respondent has not answered, least-answered first (random among
    ties), in random orientation. Fewer than ``count`` (or none) when the pairs or
    the respondent's privacy budget run out, or the survey is closed: ``reason`` and
    ``message`` then say which. Ranking
    surveys: 409 (see ``GET …/question``). The work is O(m + answers), never
    O(m²): see :mod:`app.respondents.assignment`. Labels in the respondent's language where
    they have a translation (``?lang=``, then ``Accept-Language``, then the survey's default)."""
    survey, respondent = ctx
    if survey.kind != "pairwise":
        raise Conflict(f"this survey asks for a ranking of its items: GET /v1/surveys/{survey.id}/question")
    served = next_pairs(session, survey, respondent, count, cache=request.app.state.fit_cache)
    tickets = request.app.state.undecided_tickets
    language = language_of(request, response, lang, survey)
    # One primary-key query for the pairs' items (at most 200) that have translations.
    found = translations_of(session, [x[0] for pair in served.pairs for x in pair])

    def shown(item_id: str, label: str) -> str:
        return label_in(label, found.get(item_id), language)

    return PairsOut(
        pairs=[
            PairOut(
                a=a_id,
                b=b_id,
                a_label=shown(a_id, a_label),
                b_label=shown(b_id, b_label),
                ticket=ticket,
                undecided_ticket=tickets.issue(survey.id, respondent.id, a_id, b_id),
            )
            for ((a_id, a_label), (b_id, b_label)), ticket in zip(
                served.pairs, served.tickets or [None] * len(served.pairs), strict=True
            )
        ],
        reason=served.reason,
        message=served.message,
    )


@router.post(
    "/responses",
    status_code=201,
    response_model=ResponsesOut,
    responses=errors(401, 403, 404, 409, 422),
    summary="Submit answers",
)
def responses(
    *,
    body: ResponsesIn,
    ctx: RespondentDep,
    session: SessionDep,
    settings: SettingsDep,
    idempotency_key: str | None = Header(
        None,
        alias="Idempotency-Key",
        max_length=200,
        description="Retries with the same key return the first answer and store nothing new.",
    ),
):
    """Pairwise surveys: store a batch of up to 1,000 comparisons, all or nothing.
    ``privatized: false`` — the server flips each answer with probability
    1/(1+e^ε) using the respondent's ε and the OS CSPRNG before storing it; the
    true answer is never stored, logged or echoed. ``privatized: true`` — the
    answers were flipped on the device with the declared ``epsilon``.

    Ranking surveys: store the respondent's one ranking (``ranking``: item ids,
    best first). ``privatized: false`` — the server completes a partial ranking
    (unranked items below, uniformly shuffled) and replaces it by a synthetic
    ranking from the Mallows mechanism at the respondent's ε (ε-ranking DP; OS
    CSPRNG); only that is stored. ``privatized: true`` — the device did both and
    sends the full synthetic ranking with its ``epsilon``. A second ranking → 409.
    """
    survey, respondent = ctx
    if body.ranking is not None:
        result = ranking_surveys.submit_ranking(
            session,
            survey,
            respondent,
            body.ranking,
            privatized=body.privatized,
            epsilon=body.epsilon,
            idempotency_key=idempotency_key,
        )
        return _answered(result)
    if survey.kind != "pairwise":
        raise Conflict('this survey asks for rankings, not pairwise comparisons: send {"ranking": [...]}')
    if body.comparisons is None:  # pragma: no cover - ResponsesIn holds comparisons or a ranking
        raise Invalid("send either comparisons (pairwise surveys) or ranking (ranking surveys)")
    result = ingestion.submit_responses(
        session,
        survey,
        respondent,
        body.comparisons,
        privatized=body.privatized,
        epsilon=body.epsilon,
        idempotency_key=idempotency_key,
        max_batch=settings.max_batch,
    )
    return _answered(result)


def _answered(stored: Stored) -> JSONResponse:
    """201 with the receipt; a retry gets its first answer again (201, the first receipt),
    marked ``Idempotent-Replayed``."""
    headers = {"Idempotent-Replayed": "true"} if stored.replayed else None
    return JSONResponse(stored.receipt.as_dict(), status_code=201, headers=headers)
