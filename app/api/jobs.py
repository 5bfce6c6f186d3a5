"""Jobs: long analyses submitted now, read later from any instance (app.services.jobs)."""

from __future__ import annotations

from contextlib import suppress

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select

from ..db.models import Job, SurveyStats
from ..services import auth, jobs
from ..services.surveys import active_item_count, get_survey, require_local, require_pairwise
from .common import errors
from .deps import ReaderDep, SessionDep
from .schemas import ErrorOut
from .schemas.jobs import DesignJobIn, JobIn, JobList, JobOut

router = APIRouter(prefix="/v1", tags=["jobs"])


def _out(job: Job, with_result: bool = True) -> JobOut:
    return JobOut(
        id=job.id,
        survey_id=job.survey_id,
        kind=job.kind,
        status=job.status,
        progress=job.progress,
        parameters=job.parameters,
        result=job.result if with_result else None,
        error=job.error,
        attempts=job.attempts,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
    )


def owner(who: auth.Principal) -> str:
    """What a job records as its creator: the key's id, or ``admin`` for the configured
    ``PRIVRANK_ADMIN_KEY`` (which has no id)."""
    return who.key_id or who.role


def _submit(request: Request, session, survey, kind: str, parameters: dict, who) -> Job:
    """Check, store and dispatch a job (``survey`` None for a design plan). The same
    key's identical job still queued or running is returned instead of a new one (a
    repeated request, a reload). Refused with nothing stored: 422 (what the job would
    refuse), 429 (this key's jobs in progress), 503 (the backlog, or the queue)."""
    runner = request.app.state.jobs
    created_by = owner(who)
    survey_id = survey.id if survey is not None else None
    jobs.check_job(session, survey, kind, parameters, request.app.state.settings.job_seconds)
    same = jobs.same_active_job(session, survey_id, kind, parameters, created_by)
    if same is not None:
        return same
    if getattr(runner, "capacity_left", None) is not None and runner.capacity_left() <= 0:
        raise jobs.TemporarilyUnavailable("too many jobs are waiting; retry later", 30)
    backlog = request.app.state.settings.job_backlog
    job = jobs.create_job(session, survey_id, kind, parameters, created_by, backlog)
    try:
        runner.dispatch(job.id)
    except jobs.TemporarilyUnavailable:
        jobs.discard_job(session, job.id)  # never dispatched: stored nothing after all
        raise
    return job


def _accepted(job: Job) -> JSONResponse:
    return JSONResponse(
        _out(job).model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"}
    )


def as_job_if_long(
    request: Request, session, survey, kind: str, parameters: dict, who
) -> JSONResponse | None:
    """For a synchronous endpoint: when the work is predicted to take longer than
    ``PRIVRANK_INLINE_SECONDS``, submit it as a job and answer 202 with the job and
    its ``Location``; otherwise None (answer inline)."""
    if survey is None:  # a design plan: the parameters say its size
        predicted = jobs.predicted_seconds(kind, parameters, parameters["items"], 0)
    else:
        stats = session.get(SurveyStats, survey.id)
        n = int(stats.n_comparisons) if stats is not None else 0
        predicted = jobs.predicted_seconds(kind, parameters, active_item_count(session, survey), n)
    if predicted <= request.app.state.settings.inline_seconds:
        return None
    return _accepted(_submit(request, session, survey, kind, parameters, who))


#: The 429 of a call that submits a job: the key's jobs in progress are capped.
JOBS_429: dict[int | str, dict] = {
    429: {
        "model": ErrorOut,
        "description": f"This key has {jobs.JOBS_PER_KEY} jobs queued or running; nothing was stored. "
        "Retry after the Retry-After header's seconds.",
    }
}

#: The answers of synchronous endpoints that hand long work to a job: 202, and the 429
#: of a key with too many jobs in progress.
AS_JOB_202: dict[int | str, dict] = {
    202: {
        "model": JobOut,
        "description": "Predicted to take longer than PRIVRANK_INLINE_SECONDS: submitted as a job "
        "instead (Location: /v1/jobs/{id}); poll it for the progress and, when done, this "
        "endpoint's answer as its result.",
    },
    **JOBS_429,
}


@router.post(
    "/surveys/{survey_id}/jobs",
    status_code=202,
    response_model=JobOut,
    responses={**errors(401, 403, 404, 409, 422, 503), **JOBS_429},
    summary="Run a ranking, a bootstrap or a plan as a job",
)
def submit(
    *, request: Request, survey_id: str, body: JobIn, who: ReaderDep, session: SessionDep
) -> JSONResponse:
    """Stores the job and returns at once (202) with its ``id``; ``GET /v1/jobs/{id}``
    then shows its status, progress and, when done, the result the synchronous
    endpoint would give. ``kind``: ``ranking`` (the parameters of ``GET …/ranking``),
    ``bootstrap`` (the ranking with bootstrap intervals) or ``plan`` (those of
    ``GET …/plan``). A job runs under ``PRIVRANK_JOB_SECONDS`` instead of the
    request's budget. 503 when the runner's backlog is full or the queue is
    unreachable (nothing is stored then)."""
    survey = get_survey(session, survey_id)
    require_pairwise(survey)
    require_local(survey)
    parameters = body.model_dump(by_alias=True, exclude={"kind"}, exclude_none=True)
    return _accepted(_submit(request, session, survey, body.kind, parameters, who))


@router.post(
    "/jobs",
    status_code=202,
    response_model=JobOut,
    responses={**errors(401, 403, 422, 503), **JOBS_429},
    summary="Run the planner of a survey not yet run (GET /v1/plan) as a job",
)
def submit_design(
    *, request: Request, body: DesignJobIn, who: ReaderDep, session: SessionDep
) -> JSONResponse:
    """``kind: design`` with the parameters of ``GET /v1/plan`` (``epsilon`` and
    ``weights`` as lists); otherwise as ``POST /v1/surveys/{sid}/jobs``."""
    parameters = body.model_dump(exclude={"kind"}, exclude_none=True)
    return _accepted(_submit(request, session, None, "design", parameters, who))


@router.get(
    "/jobs/{job_id}",
    response_model=JobOut,
    responses=errors(401, 403, 404),
    summary="A job's status, progress and result",
)
def read(*, request: Request, job_id: str, who: ReaderDep, session: SessionDep) -> JobOut:
    """From any instance. A job whose runner stopped heartbeating is found here too:
    queued again (one retry), or failed with the reason — never left ``running``.
    Reading is read-only unless the job looks lost."""
    job = jobs.get_job(session, job_id)
    runner = request.app.state.jobs
    runner.touch()  # this process keeps jobs from now on (local runner)
    if jobs.looks_lost(session, job, runner.queued_after):
        for again in jobs.recover_lost(session, job_id, queued_after=runner.queued_after):
            with suppress(jobs.TemporarilyUnavailable):  # lost again later, and retried then
                runner.dispatch(again)
        job = jobs.get_job(session, job_id)
        session.refresh(job)
    return _out(job)


@router.delete(
    "/jobs/{job_id}",
    response_model=JobOut,
    responses=errors(401, 403, 404, 409),
    summary="Cancel a job",
)
def cancel(*, job_id: str, who: ReaderDep, session: SessionDep) -> JobOut:
    """A queued job never starts; a running one stops at its next unit of work (one
    bootstrap replicate or simulated survey) within a heartbeat (2 s). Cancelling
    twice is harmless; a finished job is 409. Only the key that submitted the job, or
    an admin, may cancel it: another analyst's job is 404, as an unknown one."""
    mine = None if who.role == auth.ADMIN else owner(who)
    return _out(jobs.cancel_job(session, job_id, owner=mine))


@router.get(
    "/surveys/{survey_id}/jobs",
    response_model=JobList,
    responses=errors(401, 403, 404),
    summary="The survey's latest jobs",
)
def list_jobs(*, survey_id: str, who: ReaderDep, session: SessionDep) -> JobList:
    """The 50 newest, without their results (read one job for its result)."""
    get_survey(session, survey_id)
    rows = session.execute(
        select(Job).where(Job.survey_id == survey_id).order_by(Job.created_at.desc(), Job.id).limit(50)
    ).scalars()
    return JobList(jobs=[_out(j, with_result=False) for j in rows])
