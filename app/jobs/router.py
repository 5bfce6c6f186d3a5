"""Jobs: long analyses submitted now, read later from any instance (app.jobs.service)."""

from __future__ import annotations

from contextlib import suppress

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select

from ..core import auth
from ..core.db.models import Job
from ..core.deps import ReaderDep, SessionDep
from ..core.errors import TemporarilyUnavailable
from ..core.routers import errors
from ..surveys.service import get_survey, require_local, require_pairwise
from . import store as jobs
from .handoff import JOBS_429, job_out, owner, submit_accepted
from .schemas import DesignJobIn, JobIn, JobList, JobOut

router = APIRouter(prefix="/v1", tags=["jobs"])


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
    return submit_accepted(request, session, survey, body.kind, parameters, who)


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
    return submit_accepted(request, session, None, "design", parameters, who)


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
            with suppress(TemporarilyUnavailable):  # lost again later, and retried then
                runner.dispatch(again)
        job = jobs.get_job(session, job_id)
        session.refresh(job)
    return job_out(job)


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
    return job_out(jobs.cancel_job(session, job_id, owner=mine))


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
    return JobList(jobs=[job_out(j, with_result=False) for j in rows])
