"""Handing long work to a job: what the jobs router and any endpoint whose work may be
long (a ranking with a bootstrap, a plan) share: submitting a job, and the 202 answer with
its ``Location``."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from ..core import auth
from ..core.db.models import Job
from ..core.errors import TemporarilyUnavailable
from ..core.lookup import answers_stored
from ..core.schemas import ErrorOut
from ..surveys.items import active_item_count
from . import store as jobs
from .cost import check_job, predicted_seconds
from .schemas import JobOut


def job_out(job: Job, with_result: bool = True) -> JobOut:
    """A job as the API shows it (``with_result=False``: without its result, for lists)."""
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
    check_job(session, survey, kind, parameters, request.app.state.settings.job_seconds)
    same = jobs.same_active_job(session, survey_id, kind, parameters, created_by)
    if same is not None:
        return same
    if getattr(runner, "capacity_left", None) is not None and runner.capacity_left() <= 0:
        raise TemporarilyUnavailable("too many jobs are waiting; retry later", 30)
    backlog = request.app.state.settings.job_backlog
    job = jobs.create_job(session, survey_id, kind, parameters, created_by, backlog)
    try:
        runner.dispatch(job.id)
    except TemporarilyUnavailable:
        jobs.discard_job(session, job.id)  # never dispatched: stored nothing after all
        raise
    return job


def submit_accepted(request: Request, session, survey, kind: str, parameters: dict, who) -> JSONResponse:
    """Submit the job (:func:`_submit`) and answer 202 with it and its ``Location``."""
    job = _submit(request, session, survey, kind, parameters, who)
    return JSONResponse(
        job_out(job).model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"}
    )


def as_job_if_long(
    request: Request, session, survey, kind: str, parameters: dict, who
) -> JSONResponse | None:
    """For a synchronous endpoint: when the work is predicted to take longer than
    ``PRIVRANK_INLINE_SECONDS``, submit it as a job and answer 202 with the job and
    its ``Location``; otherwise None (answer inline)."""
    if survey is None:  # a design plan: the parameters say its size
        predicted = predicted_seconds(kind, parameters, parameters["items"], 0)
    else:
        n = answers_stored(session, survey.id)
        predicted = predicted_seconds(kind, parameters, active_item_count(session, survey), n)
    if predicted <= request.app.state.settings.inline_seconds:
        return None
    return submit_accepted(request, session, survey, kind, parameters, who)


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
