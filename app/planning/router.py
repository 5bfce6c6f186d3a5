"""The privacy planner: before a survey runs (``/v1/plan``) and from where it stands (``…/plan``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from ..core.bounded import run_bounded
from ..core.deps import ReaderDep, SessionDep, reader
from ..core.errors import Invalid
from ..core.routers import errors
from ..core.schemas import ErrorOut
from ..jobs.handoff import AS_JOB_202, as_job_if_long
from ..stats.planner import MAX_PLAN_ITEMS, MAX_PLAN_RESPONDENTS
from ..stats.random_effects import MAX_TAU
from ..surveys.schemas import Certificate
from ..surveys.service import get_survey
from .results import GoalPlanOut, PlanOut, SurveyPlanOut
from .service import check_pilot_scores, goal_plan_from_survey, plan_from_survey, run_goal_plan, run_plan

router = APIRouter(prefix="/v1", tags=["planner"])

_PLAN_503: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorOut,
        "description": "The simulation did not finish within its time budget (PRIVRANK_ANALYSIS_SECONDS), "
        "the client went away or the server is stopping. Retry after the Retry-After header's seconds, "
        "or ask for less work.",
    }
}


def _scores(text: str | None) -> list[float] | None:
    """The ``scores`` query: pilot scores, refused (422) unless finite and bounded."""
    values = _floats(text, "scores")
    check_pilot_scores(values)
    return values


def _floats(text: str | None, name: str) -> list[float] | None:
    if text is None:
        return None
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise Invalid(f"{name} must be a comma-separated list of numbers") from None
    if not values:
        raise Invalid(f"{name} must not be empty")
    return values


@router.get(
    "/plan",
    response_model=PlanOut,
    responses={**errors(401, 403, 422), **_PLAN_503, **AS_JOB_202},
    summary="Plan a survey: predicted accuracy, or respondents / ε needed",
)
async def get_plan(
    request: Request,
    who: ReaderDep,
    session: SessionDep,
    items: int = Query(ge=2, le=MAX_PLAN_ITEMS, description="Number of items m."),
    pairs_per_respondent: int = Query(ge=1, description="Pairs each respondent answers."),
    k: int = Query(ge=1, description="Size K of the top set of interest."),
    respondents: int | None = Query(
        None,
        ge=1,
        le=MAX_PLAN_RESPONDENTS,
        description="Number of respondents (not needed for solve=respondents).",
    ),
    epsilon: str | None = Query(
        None, min_length=1, description="ε, or comma-separated ε values of a distribution."
    ),
    epsilon_weights: str | None = Query(
        None, min_length=1, description="Comma-separated weights of those ε values."
    ),
    spread: float = Query(
        2.0, gt=0, le=20, description="True scores ~ Uniform(−spread, spread) (the paper's 2)."
    ),
    gap: float | None = Query(
        None, gt=0, le=20, description="Use evenly spaced true scores with this gap instead."
    ),
    replications: int = Query(200, ge=20, le=2000, description="Monte Carlo replicates per prediction."),
    seed: int = Query(0, ge=0, description="Seed of the simulation (predictions are reproducible)."),
    solve: Literal["none", "respondents", "epsilon"] = Query(
        "none", description="none, respondents (fewest respondents reaching target) or epsilon (smallest ε)."
    ),
    target: float | None = Query(None, gt=0, lt=1, description="Target P(exact top-K) for solve."),
    scores: str | None = Query(
        None,
        min_length=1,
        description="Pilot scores taken as the true ones, one per item (comma-separated), instead of "
        "spread or gap.",
    ),
):
    """Predicted ℓ∞ error, Kendall error and probability of recovering the exact
    top-K — each with its Monte Carlo standard error — for m items, a number of respondents
    answering k pairs each at privacy level ε (the server's balanced pair
    assignment and the default λ are simulated), and each respondent's total ε.
    With ``solve``, the fewest respondents or the smallest ε that reach ``target``.
    Bounded: at most 32 distinct ε values; a plan predicted to take longer than
    ``PRIVRANK_INLINE_SECONDS`` runs as a job (202, ``Location: /v1/jobs/{id}``); one
    running here stops at the analysis budget, when the client leaves or when the
    server stops (503)."""
    eps = _floats(epsilon, "epsilon")
    weights = _floats(epsilon_weights, "epsilon_weights")
    pilot = _scores(scores)
    parameters = {
        "items": items,
        "pairs_per_respondent": pairs_per_respondent,
        "k": k,
        "respondents": respondents,
        "epsilon": eps,
        "weights": weights,
        "spread": spread,
        "gap": gap,
        "replications": replications,
        "seed": seed,
        "solve": solve,
        "target": target,
        "scores": pilot,
    }
    parameters = {key: value for key, value in parameters.items() if value is not None}
    accepted = await run_in_threadpool(as_job_if_long, request, session, None, "design", parameters, who)
    if accepted is not None:
        return accepted
    return await run_bounded(
        request,
        run_plan,
        items,
        respondents,
        pairs_per_respondent,
        eps,
        k,
        weights,
        spread,
        gap,
        replications,
        seed,
        solve,
        target,
        pilot,
        work=request.app.state.fit_cache.work,
        seconds=request.app.state.settings.analysis_seconds,
        what="the plan's simulation",
    )


@router.get(
    "/surveys/{survey_id}/plan",
    response_model=SurveyPlanOut,
    responses={**errors(401, 403, 404, 409, 422), **_PLAN_503, **AS_JOB_202},
    summary="How many more respondents certify the top-K, from where the survey stands",
)
async def get_survey_plan(
    *,
    request: Request,
    survey_id: str,
    who: ReaderDep,
    k: int = Query(ge=1, description="Size K of the top set to certify."),
    target: float = Query(
        0.8, gt=0, lt=1, description="Wanted probability that the top-K is certified (when solving)."
    ),
    respondents: int | None = Query(
        None,
        ge=0,
        le=1_000_000,
        description="Predict for exactly this many more respondents instead of solving for target.",
    ),
    max_respondents: int = Query(
        100_000, ge=1, le=1_000_000, description="The most added respondents the search tries."
    ),
    confidence: float = Query(0.95, ge=0.5, lt=1, description="Level of the intervals that certify."),
    scores: str | None = Query(
        None,
        min_length=1,
        description="Pilot scores, one per item in the survey's order (comma-separated), instead of the "
        "survey's current fit.",
    ),
    tau: float | None = Query(
        None,
        ge=0,
        le=MAX_TAU,
        description="Respondent random-effect scale τ to simulate; default: estimated from the answers.",
    ),
    pairs_per_respondent: int | None = Query(
        None, ge=1, description="New respondents' pairs (with epsilon); default: copy current respondents."
    ),
    epsilon: float | None = Query(
        None, ge=0.001, le=20, description="New respondents' ε (with pairs_per_respondent)."
    ),
    replications: int = Query(100, ge=20, le=1000, description="Simulated surveys per candidate size."),
    seed: int = Query(0, ge=0, description="Seed of the simulation (predictions are reproducible)."),
    session: SessionDep,
):
    """Simulates the survey as it stands — its respondents and the pairs they
    answered, at their ε — plus new respondents served least-answered pairs, with
    the true scores taken to be the current fit (or ``scores``) and respondents
    differing by random effects of scale τ estimated from the answers; every
    simulated survey is privatized, fitted and certified by its own cluster-robust
    simultaneous intervals (``top_k_certain`` of ``GET …/ranking``). Answers the
    fewest added respondents whose P(certified) reaches ``target`` (``solution``;
    null when out of reach), or with ``respondents`` the prediction at that size.
    ``plan.assumption`` states the assumptions in words. The work is bounded
    (422 beyond it); ranking surveys, central-model surveys and surveys without
    answers (unless pilot scores and the new respondents' design are given) get
    409."""
    survey = await run_in_threadpool(get_survey, session, survey_id)
    values = _scores(scores)
    if survey.kind == "pairwise" and survey.privacy_model == "local":  # others: refused below
        parameters = {
            "k": k,
            "target": target,
            "respondents": respondents,
            "max_respondents": max_respondents,
            "confidence": confidence,
            "scores": values,
            "tau": tau,
            "pairs_per_respondent": pairs_per_respondent,
            "epsilon": epsilon,
            "replications": replications,
            "seed": seed,
        }
        parameters = {key: value for key, value in parameters.items() if value is not None}
        accepted = await run_in_threadpool(as_job_if_long, request, session, survey, "plan", parameters, who)
        if accepted is not None:
            return accepted
    return await run_bounded(
        request,
        plan_from_survey,
        session,
        survey,
        request.app.state.fit_cache,
        k,
        target=target,
        added=respondents,
        max_added=max_respondents,
        level=confidence,
        scores=values,
        tau=tau,
        pairs_per_respondent=pairs_per_respondent,
        epsilon=epsilon,
        replications=replications,
        seed=seed,
        work=request.app.state.fit_cache.work,
        seconds=request.app.state.settings.analysis_seconds,
        what="the plan's simulation",
    )


@router.get(
    "/plan/goal",
    response_model=GoalPlanOut,
    responses={**errors(401, 403, 422), **_PLAN_503},
    dependencies=[Depends(reader)],
    summary="Plan an adaptive design: answers a goal needs, adaptive against balanced",
)
async def get_goal_plan(
    request: Request,
    items: int = Query(ge=2, le=1000, description="Number of items m (at most 1,000)."),
    top_k: int | None = Query(None, ge=1, description="The top-K goal; omit for the whole ranking."),
    epsilon: float = Query(1.0, ge=0.001, le=20, description="Respondents' ε."),
    level: float = Query(0.95, ge=0.5, le=0.9999, description="The goal's level."),
    pairs_per_respondent: int = Query(10, ge=1, le=100, description="Pairs a respondent is asked at most."),
    spread: float = Query(2.0, gt=0, le=20, description="True scores ~ Uniform(−spread, spread)."),
    gap: float | None = Query(
        None, gt=0, le=20, description="Evenly spaced true scores with this gap instead."
    ),
    scores: str | None = Query(None, min_length=1, description="Pilot scores, one per item, instead."),
    replications: int = Query(10, ge=2, le=200, description="Simulated surveys per strategy."),
    seed: int = Query(0, ge=0, description="Seed of the simulation (predictions are reproducible)."),
    max_answers: int | None = Query(
        None,
        ge=100,
        le=10_000_000,
        description="Cap of one simulated survey's answers (default 50,000, or less to fit the time budget).",
    ),
    certificate: Annotated[
        Certificate,
        Query(
            description="The adaptive design's certificate: borda (certifies the Borda top-K or ranking) "
            "or pairwise (the majority top-K or ranking)."
        ),
    ] = "borda",
):
    """Simulates surveys as the service runs them with a goal — respondents served pairs
    from their pool (the items in doubt they have not answered about, or every item
    for balanced assignment), true BTL answers randomized at ε, the anytime-valid
    certificate checked as answers arrive — and reports for each strategy the mean
    answers and respondents until the goal is met, how many simulated surveys met it
    within ``max_answers`` and how many certified a wrong set, and the saving
    (balanced / adaptive answers). Bounded: a plan whose worst case (every simulated
    survey running to ``max_answers``, at
    :data:`~app.planning.service.GOAL_PLAN_SECONDS_PER_ANSWER` per answer, more for the
    pairwise certificate) exceeds the analysis time budget is refused (422); any other runs
    under the budget (503 beyond). Without ``max_answers`` the cap is 50,000 or the
    most that fits the budget."""
    pilot = _scores(scores)
    return await run_bounded(
        request,
        run_goal_plan,
        items,
        top_k,
        epsilon,
        level,
        pairs_per_respondent,
        spread,
        gap,
        pilot,
        replications,
        seed,
        max_answers,
        certificate=certificate,
        work=request.app.state.fit_cache.work,
        seconds=request.app.state.settings.analysis_seconds,
        what="the plan's simulation",
    )


@router.get(
    "/surveys/{survey_id}/goal/plan",
    response_model=GoalPlanOut,
    responses={**errors(401, 403, 404, 409, 422), **_PLAN_503},
    dependencies=[Depends(reader)],
    summary="The answers a survey's goal needs, adaptive against balanced (from its current fit)",
)
async def get_survey_goal_plan(
    *,
    request: Request,
    survey_id: str,
    replications: int = Query(10, ge=2, le=200, description="Simulated surveys per strategy."),
    pairs_per_respondent: int = Query(10, ge=1, le=100, description="Pairs a respondent is asked at most."),
    max_answers: int | None = Query(
        None,
        ge=100,
        le=10_000_000,
        description="Cap of one simulated survey's answers (default 50,000, or less to fit the time budget).",
    ),
    seed: int = Query(0, ge=0, description="Seed of the simulation."),
    session: SessionDep,
):
    """``GET /v1/plan/goal`` for a goal survey, with its current estimates taken as the
    true scores and its default ε: the dashboard's estimate of the answers adaptive
    assignment saves. 409 without a goal or without answers."""
    survey = await run_in_threadpool(get_survey, session, survey_id)
    return await run_bounded(
        request,
        goal_plan_from_survey,
        session,
        survey,
        request.app.state.fit_cache,
        replications=replications,
        seed=seed,
        pairs_per_respondent=pairs_per_respondent,
        max_answers=max_answers,
        work=request.app.state.fit_cache.work,
        seconds=request.app.state.settings.analysis_seconds,
        what="the plan's simulation",
    )
