"""Rankings, the releasable CSV, and bulk import."""

from __future__ import annotations

import io
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from ..core.bounded import run_bounded
from ..core.db.models import Survey
from ..core.deps import ReaderDep, SessionDep, admin, reader
from ..core.downloads import SpooledDownload, spool, spool_binary
from ..core.errors import Conflict, Invalid
from ..core.routers import errors
from ..core.schemas import ErrorOut
from ..jobs.handoff import AS_JOB_202, as_job_if_long
from ..rankings import ballot_import
from ..rankings import service as ranking_surveys
from ..respondents import imports
from ..surveys.service import get_survey, require_local, require_pairwise
from . import parquet
from . import service as analysis
from .export import iter_comparison_rows, iter_comparisons_csv, iter_item_rows, iter_items_csv
from .results import ConsensusOut, ImportOut, PairwiseOut, RankingOut

router = APIRouter(prefix="/v1/surveys/{survey_id}", tags=["analysis"])

T = TypeVar("T")

_ANALYSIS_503: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorOut,
        "description": "The analysis did not finish within its time budget (PRIVRANK_ANALYSIS_SECONDS), "
        "the client went away, the server is stopping, or the database is unreachable; nothing was "
        "stored. Retry after the Retry-After header's seconds.",
    }
}


def _fit_cache(request: Request) -> analysis.FitCache:
    """The worker's analysis cache, held to the configured memory budget."""
    cache = request.app.state.fit_cache
    budget = request.app.state.settings.analysis_cache_mb * 2**20
    if cache.max_bytes != budget:
        cache.max_bytes = budget
    return cache


async def _bounded(request: Request, what: str, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` under the analysis time budget (``PRIVRANK_ANALYSIS_SECONDS``; see
    :func:`.bounded.run_bounded`): 503 when it runs out or the client goes away."""
    return await run_bounded(
        request, fn, *args, seconds=request.app.state.settings.analysis_seconds, what=what
    )


async def _fit(
    request: Request, what: str, fn: Callable[..., T], session: Session, survey: Survey, *args: Any
) -> T:
    """``fn(session, survey, cache, *args)``: a fit of a pairwise survey's answers, with the
    worker's analysis cache, under the analysis time budget."""
    return await _bounded(request, what, fn, session, survey, _fit_cache(request), *args)


#: The query parameters' closed vocabularies (OpenAPI shows them as enums; the services
#: check them again for library callers).
PairwiseMethod = Literal["debiased_mle", "naive_mle"]
ConsensusMethod = Literal["borda", "lehmer", "kemeny", "btl"]
Uncertainty = Literal["sandwich", "bootstrap", "none"]
Covariance = Literal["cluster", "model"]

_IMPORT_EXAMPLE = "respondent,item_a,item_b,winner,epsilon\nexternal-17,Housing,Transit,Transit,1.0\n"
_CSV_EXAMPLE = (
    "respondent,item_a,item_b,winner,epsilon,z,created_at\n"
    "rsp_q2x7…,itm_a…,itm_b…,itm_a…,1.0,1.5819767068693265,2026-11-21T10:00:00Z\n"
)


def _csv_200(example: str, description: str) -> dict[int | str, dict[str, Any]]:
    """The 200 answer of a CSV export, for OpenAPI."""
    return {200: {"content": {"text/csv": {"example": example}}, "description": description}}


def _csv_body(example: str) -> dict[str, Any]:
    """The CSV request body of an import, for OpenAPI."""
    return {
        "requestBody": {
            "required": True,
            "content": {"text/csv": {"schema": {"type": "string"}, "example": example}},
        }
    }


@router.get(
    "/ranking",
    response_model=RankingOut | ConsensusOut,
    response_model_by_alias=True,
    responses={**errors(401, 403, 404, 409, 422), **_ANALYSIS_503, **AS_JOB_202},
    summary="The ranking",
)
async def ranking(
    *,
    request: Request,
    survey_id: str,
    who: ReaderDep,
    method: PairwiseMethod | ConsensusMethod | None = Query(
        None,
        description="Pairwise surveys: debiased_mle (default; the paper's estimator) or naive_mle "
        "(classic RR without debiasing, the paper's baseline). Ranking surveys: borda (default; mean "
        "position), lehmer (coordinate-wise majority of Lehmer codes), kemeny (the consensus closest in "
        "Kendall distance: exact up to 16 items, certified local search beyond) or btl (BTL fit of the "
        "pairs the rankings imply).",
    ),
    lambda_: float | None = Query(
        None, alias="lambda", gt=0, le=1e9, description="Ridge λ in (0, 1e9]; default G(ε)."
    ),
    k: int | None = Query(None, ge=1, description="Size of the top-K set to return."),
    confidence: float = Query(
        0.95,
        ge=0.5,
        lt=1,
        description="Level of every interval in the answer: two decimals (0.50 … 0.99), or 0.995 or 0.999.",
    ),
    uncertainty: Uncertainty = Query(
        "sandwich",
        description="sandwich (default; privacy-aware sandwich covariance with bias correction), "
        "bootstrap (resamples respondents with all their answers, or with covariance=model re-simulates "
        "independent randomized answers; small samples, debiased_mle only) or none.",
    ),
    covariance: Covariance = Query(
        "cluster",
        description="cluster (default: respondents are the independent unit, cluster-robust sandwich; "
        "an upper bound while there are few respondents) or model (every comparison independent).",
    ),
    replicates: int = Query(
        analysis.BOOTSTRAP_REPLICATES,
        ge=analysis.BOOTSTRAP_MIN_REPLICATES,
        le=analysis.BOOTSTRAP_MAX_REPLICATES,
        description="Bootstrap replicates (uncertainty=bootstrap). A bootstrap predicted to need more "
        "than twice the analysis time budget is refused (422) before it starts.",
    ),
    session: SessionDep,
):
    """Items by estimated score θ̂ (rank 1 = most preferred) with standard errors,
    confidence intervals, rank intervals and (given k) top-K probabilities; the
    top-K set and which of its members are certain; groups of statistically tied
    items; diagnostics.

    Works on the survey's per-pair sufficient statistics, so its cost does not
    grow with the number of stored answers; fits are cached per data version and
    warm-started from the previous fit. Intervals account for the privacy noise
    (Lemma 2 of the paper) and are centred on a bias-corrected estimate; see
    docs/tutorials/read-a-ranking.md.

    Ranking surveys answer with the consensus of the stored synthetic rankings
    (``ConsensusOut``): the ordering, each item's mean position, and — for borda
    and btl — standard errors, rank intervals and top-K probabilities that treat
    each respondent's ranking as the independent unit.

    Where the data cannot support intervals (no or too few respondents, an unsafe
    bias correction), ``uncertainty.available`` is false with a machine-readable
    ``reason`` and a plain ``message``; every interval that is given contains its
    item's score and rank.

    Intervals, rank summaries and the bootstrap run under the analysis time budget
    (``PRIVRANK_ANALYSIS_SECONDS``) and stop when the client disconnects: 503 with
    ``Retry-After``. A bootstrap predicted to take longer than ``PRIVRANK_INLINE_SECONDS``
    runs as a job instead: 202 with the job (``Location: /v1/jobs/{id}``), whose
    result is this answer."""
    survey = await run_in_threadpool(get_survey, session, survey_id)
    if survey.kind == "ranking":
        if uncertainty not in ("sandwich", "none"):
            raise Invalid("ranking surveys compute their own intervals; uncertainty=bootstrap is not offered")
        return await _bounded(
            request,
            "the consensus",
            ranking_surveys.consensus,
            session,
            survey,
            request.app.state.consensus_cache,
            method or "borda",
            lambda_,
            k,
            confidence,
        )
    if uncertainty == "bootstrap":
        require_local(survey)
        parameters = {
            "method": method or "debiased_mle",
            "lambda": lambda_,
            "k": k,
            "confidence": confidence,
            "uncertainty": uncertainty,
            "covariance": covariance,
            "replicates": replicates,
        }
        parameters = {key: value for key, value in parameters.items() if value is not None}
        accepted = await run_in_threadpool(
            as_job_if_long, request, session, survey, "ranking", parameters, who
        )
        if accepted is not None:
            return accepted
    return await _fit(
        request,
        "the ranking's analysis",
        analysis.ranking,
        session,
        survey,
        method or "debiased_mle",
        lambda_,
        k,
        confidence,
        uncertainty,
        covariance,
        replicates,
    )


@router.get(
    "/pairwise",
    response_model=PairwiseOut,
    responses={**errors(401, 403, 404, 409, 422), **_ANALYSIS_503},
    dependencies=[Depends(reader)],
    summary="Estimated win probabilities with intervals",
)
async def pairwise(
    *,
    request: Request,
    survey_id: str,
    confidence: float = Query(
        0.95, ge=0.5, lt=1, description="Two decimals (0.50 … 0.99), or 0.995 or 0.999."
    ),
    method: PairwiseMethod = Query("debiased_mle", description="debiased_mle (default) or naive_mle."),
    lambda_: float | None = Query(None, alias="lambda", gt=0, le=1e9),
    covariance: Covariance = Query("cluster", description="cluster (default) or model, as for the ranking."),
    session: SessionDep,
):
    """``probability[a][b]`` = estimated P(item a is preferred to item b) =
    σ(θ̂_a − θ̂_b) (so it agrees in direction with the scores), with the
    ``confidence`` interval [``lower``, ``upper``] from the interval of the score
    difference (always containing the estimate). Null on the diagonal; pairs in
    different components of the comparison graph are not comparable (null,
    interval [0, 1]). Without intervals (``available`` false, with ``reason`` and
    ``message``) the estimates are still given. Under the analysis time budget,
    like the ranking."""
    survey = await run_in_threadpool(get_survey, session, survey_id)
    require_pairwise(survey)
    return await _fit(
        request,
        "the pairwise analysis",
        analysis.pairwise,
        session,
        survey,
        confidence,
        method,
        lambda_,
        covariance,
    )


@router.get(
    "/comparisons.csv",
    response_class=StreamingResponse,
    responses={**_csv_200(_CSV_EXAMPLE, "The privatized comparisons."), **errors(401, 403, 404, 409)},
    dependencies=[Depends(reader)],
    summary="Export the releasable (privatized) data",
)
def comparisons_csv(*, request: Request, survey_id: str, session: SessionDep):
    """CSV columns: respondent, item_a, item_b, winner, epsilon, z, created_at.
    Winners are the privatized answers; z is eq. (1)'s debiased value towards
    item_a. ``app.stats.fit_debiased_mle`` on these rows reproduces the ranking."""
    survey = get_survey(session, survey_id)
    require_local(survey)
    require_pairwise(survey)
    return _download(
        request, session, iter_comparisons_csv(session, survey_id), f"{survey_id}-comparisons.csv"
    )


@router.get(
    "/items.csv",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {
                "text/csv": {
                    "example": "item,position,label,source,status,added_at,approved_at\n"
                    "itm_a…,0,Parks,seed,live,2026-11-21T10:00:00Z,\n"
                    "itm_b…,4,Night buses,suggested,live,2026-11-22T09:00:00Z,2026-11-22T09:00:00Z\n"
                }
            },
            "description": "The items, with their source and approval time.",
        },
        **errors(401, 403, 404),
    },
    dependencies=[Depends(reader)],
    summary="Export the items (source, status, when added and approved)",
)
def items_csv(*, request: Request, survey_id: str, session: SessionDep):
    """CSV columns: item, position, label, source (seed, added, suggested), status (live,
    hidden, review), added_at, approved_at. Never an author: nothing stored links a
    suggested item to the respondent who proposed it."""
    get_survey(session, survey_id)
    return _download(request, session, iter_items_csv(session, survey_id), f"{survey_id}-items.csv")


def _download(
    request: Request, session: Session, chunks, filename: str, parquet_types: dict[str, str] | None = None
) -> SpooledDownload:
    """Write the export at database speed into a spooled file, give the connection back,
    then send the file at the client's pace outside admission (see :mod:`.downloads`).
    ``chunks``: CSV text; or, with ``parquet_types``, typed row batches written as Parquet."""
    if parquet_types is not None:
        parquet.require_pyarrow()  # 501 before any work
    downloads = request.app.state.downloads
    release = downloads.take()
    try:
        if parquet_types is None:
            file = spool(chunks)
        else:
            file = spool_binary(lambda out: parquet.write_parquet(out, parquet_types, chunks))
    except BaseException:
        release()
        raise
    session.close()  # the connection goes back to the pool before the (possibly slow) send
    return SpooledDownload(
        file,
        release,
        downloads.send_timeout,
        media_type="text/csv; charset=utf-8" if parquet_types is None else parquet.MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


#: The bulk imports' routes: 201 with the counts, admins only.
_import_route = partial(
    router.post,
    status_code=201,
    response_model=ImportOut,
    responses=errors(401, 403, 404, 409, 422),
    dependencies=[Depends(admin)],
)
PrivatizedAnswers = Annotated[
    bool,
    Query(
        description="true: winners are already randomized with each row's epsilon; "
        "false: the server randomizes each row on arrival."
    ),
]
PrivatizedBallots = Annotated[
    bool,
    Query(
        description="true: each ranking is already the Mallows mechanism's output at its row's epsilon "
        "and lists every item; false: the server completes each (possibly partial) ranking and "
        "privatizes it on arrival."
    ),
]


async def _import(
    request: Request, session: Session, survey_id: str, importer: Callable[..., ImportOut], privatized: bool
) -> ImportOut:
    """Run a bulk import (``importer``: the service's) on the request's CSV body."""
    raw = await request.body()
    # Decoded as it is parsed (a wrapper over the body's own buffer), so that a body is not
    # held three times over, as bytes, as text and as a StringIO's copy.
    text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8-sig", newline="")
    del raw
    survey = await run_in_threadpool(get_survey, session, survey_id)
    return await run_in_threadpool(
        importer,
        session,
        survey,
        text,
        privatized,
        sqlite_max_rows=request.app.state.settings.sqlite_max_import_rows,
    )


@_import_route(
    "/comparisons/import",
    openapi_extra=_csv_body(_IMPORT_EXAMPLE),
    summary="Bulk import comparisons collected elsewhere (CSV)",
)
async def import_csv(*, request: Request, survey_id: str, privatized: PrivatizedAnswers, session: SessionDep):
    """All or nothing, with the same rules as ``POST …/responses``. Items by id or
    label; each distinct ``respondent`` value becomes a respondent of the survey."""
    return await _import(request, session, survey_id, imports.import_comparisons, privatized)


_BALLOTS_EXAMPLE = (
    "respondent,ranking,epsilon\nvoter-17,Transit>Housing>Parks,2.0\nvoter-18,Parks>Transit,2.0\n"
)


@_import_route(
    "/rankings/import",
    openapi_extra=_csv_body(_BALLOTS_EXAMPLE),
    summary="Bulk import rankings (ballots) collected elsewhere into a ranking survey (CSV)",
)
async def import_ballots(
    *, request: Request, survey_id: str, privatized: PrivatizedBallots, session: SessionDep
):
    """All or nothing, with the same rules as ``POST …/rankings``: CSV columns respondent,
    ranking (items best → worst by id or label, joined by ``>``), epsilon; other columns
    are ignored, so ``rankings.csv`` imports again. One ranking per respondent: a
    respondent named twice, or one that ranked already, is 409 with nothing stored."""
    return await _import(request, session, survey_id, ballot_import.import_rankings, privatized)


_RANKINGS_CSV_EXAMPLE = (
    "respondent,epsilon,source,ranking,created_at\n"
    "rsp_q2x7…,2.0,server,itm_c…>itm_a…>itm_b…,2026-11-21T10:00:00Z\n"
)


@router.get(
    "/rankings.csv",
    response_class=StreamingResponse,
    responses={**_csv_200(_RANKINGS_CSV_EXAMPLE, "The synthetic rankings."), **errors(401, 403, 404, 409)},
    dependencies=[Depends(reader)],
    summary="Export the releasable (synthetic) rankings of a ranking survey",
)
def rankings_csv(*, request: Request, survey_id: str, session: SessionDep):
    """CSV columns: respondent, epsilon, source (server or client privatized),
    ranking (item ids best → worst, joined by ``>``), created_at. Each row is the
    Mallows mechanism's output, never the ranking the respondent gave;
    ``app.stats.rankings`` on these rows reproduces every consensus method."""
    survey = get_survey(session, survey_id)
    if survey.kind != "ranking":
        raise Conflict(
            f"this survey collects pairwise comparisons: GET /v1/surveys/{survey.id}/comparisons.csv"
        )
    return _download(
        request, session, ranking_surveys.iter_rankings_csv(session, survey_id), f"{survey_id}-rankings.csv"
    )


# -- Parquet: the same rows with column types (pyarrow, the optional extra privrank[parquet]) --

_PARQUET_501: dict[int | str, dict[str, Any]] = {
    501: {
        "model": ErrorOut,
        "description": "pyarrow is not installed on this server: install privrank[parquet].",
    }
}


def _parquet_200(what: str) -> dict[int | str, dict[str, Any]]:
    return {200: {"content": {parquet.MEDIA_TYPE: {}}, "description": f"{what}, as Parquet."}}


@router.get(
    "/comparisons.parquet",
    response_class=StreamingResponse,
    responses={**_parquet_200("The privatized comparisons"), **errors(401, 403, 404, 409), **_PARQUET_501},
    dependencies=[Depends(reader)],
    summary="Export the releasable (privatized) data as Parquet",
)
def comparisons_parquet(*, request: Request, survey_id: str, session: SessionDep):
    """The rows of ``comparisons.csv``, typed: respondent, item_a, item_b, winner (string),
    epsilon, z (double), created_at (timestamp, UTC); one row group per 20,000 rows."""
    survey = get_survey(session, survey_id)
    require_local(survey)
    require_pairwise(survey)
    return _download(
        request,
        session,
        iter_comparison_rows(session, survey_id, chunk=20_000),
        f"{survey_id}-comparisons.parquet",
        parquet.COMPARISON_TYPES,
    )


@router.get(
    "/rankings.parquet",
    response_class=StreamingResponse,
    responses={**_parquet_200("The synthetic rankings"), **errors(401, 403, 404, 409), **_PARQUET_501},
    dependencies=[Depends(reader)],
    summary="Export the releasable (synthetic) rankings of a ranking survey as Parquet",
)
def rankings_parquet(*, request: Request, survey_id: str, session: SessionDep):
    """The rows of ``rankings.csv``, typed: respondent, source, ranking (string; item ids
    best → worst joined by ``>``), epsilon (double), created_at (timestamp, UTC)."""
    survey = get_survey(session, survey_id)
    if survey.kind != "ranking":
        raise Conflict(
            f"this survey collects pairwise comparisons: GET /v1/surveys/{survey.id}/comparisons.parquet"
        )
    return _download(
        request,
        session,
        ranking_surveys.iter_ranking_rows(session, survey_id, chunk=10_000),
        f"{survey_id}-rankings.parquet",
        parquet.RANKING_TYPES,
    )


@router.get(
    "/items.parquet",
    response_class=StreamingResponse,
    responses={**_parquet_200("The items"), **errors(401, 403, 404), **_PARQUET_501},
    dependencies=[Depends(reader)],
    summary="Export the items as Parquet",
)
def items_parquet(*, request: Request, survey_id: str, session: SessionDep):
    """The rows of ``items.csv``, typed: item, label, source, status (string), position
    (int64), added_at, approved_at (timestamp, UTC; approved_at null if never approved)."""
    get_survey(session, survey_id)
    return _download(
        request, session, iter_item_rows(session, survey_id), f"{survey_id}-items.parquet", parquet.ITEM_TYPES
    )
