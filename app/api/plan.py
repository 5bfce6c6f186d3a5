"""The privacy planner (no survey data involved)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from starlette.concurrency import run_in_threadpool

from ..services.errors import Invalid
from ..services.planning import run_plan
from ..stats.planner import MAX_PLAN_ITEMS
from .common import errors
from .deps import reader
from .schemas import PlanOut

router = APIRouter(prefix="/v1", tags=["planner"])


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
    responses=errors(401, 403, 422),
    dependencies=[Depends(reader)],
    summary="Plan a survey: predicted accuracy, or respondents / ε needed",
)
async def get_plan(
    items: int = Query(ge=2, le=MAX_PLAN_ITEMS, description="Number of items m."),
    pairs_per_respondent: int = Query(ge=1, description="Pairs each respondent answers."),
    k: int = Query(ge=1, description="Size K of the top set of interest."),
    respondents: int | None = Query(
        None, ge=1, description="Respondents L (not needed for solve=respondents)."
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
    solve: str = Query(
        "none", description="none, respondents (fewest L reaching target) or epsilon (smallest ε)."
    ),
    target: float | None = Query(None, gt=0, lt=1, description="Target P(exact top-K) for solve."),
):
    """Predicted ℓ∞ error, Kendall error and probability of recovering the exact
    top-K — each with its Monte Carlo standard error — for m items, L respondents
    answering k pairs each at privacy level ε (the server's balanced pair
    assignment and the default λ are simulated), and each respondent's total ε.
    With ``solve``, the fewest respondents or the smallest ε that reach ``target``."""
    eps = _floats(epsilon, "epsilon")
    weights = _floats(epsilon_weights, "epsilon_weights")
    return await run_in_threadpool(
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
    )
