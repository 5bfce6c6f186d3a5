"""The privacy planner as a use case (API and CLI)."""

from __future__ import annotations

from ..stats.planner import epsilon_needed, plan, respondents_needed
from .errors import Invalid

__all__ = ["run_plan"]


def run_plan(
    items: int,
    respondents: int | None,
    pairs_per_respondent: int,
    epsilon: list[float] | None,
    k: int,
    weights: list[float] | None,
    spread: float,
    gap: float | None,
    replications: int,
    seed: int,
    solve: str,
    target: float | None,
) -> dict:
    """Shared by the API and ``privrank plan``: a prediction or an inverse problem."""
    options = {"spread": spread, "gap": gap, "replications": replications, "seed": seed}
    try:
        if solve == "none":
            if respondents is None or epsilon is None:
                raise Invalid("give respondents and epsilon (or solve for one of them)")
            result = plan(
                items, respondents, pairs_per_respondent, epsilon, k, epsilon_weights=weights, **options
            )
            return {
                "solve": "none",
                "target": None,
                "solution": None,
                "reached": True,
                "plan": result.as_dict(),
            }
        if target is None:
            raise Invalid("solving needs a target probability of recovering the exact top-K")
        if solve == "respondents":
            if epsilon is None:
                raise Invalid("solve=respondents needs epsilon")
            value, result = respondents_needed(
                target, items, pairs_per_respondent, epsilon, k, epsilon_weights=weights, **options
            )
        elif solve == "epsilon":
            if respondents is None:
                raise Invalid("solve=epsilon needs respondents")
            value, result = epsilon_needed(target, items, respondents, pairs_per_respondent, k, **options)
        else:
            raise Invalid("solve must be none, respondents or epsilon")
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    return {
        "solve": solve,
        "target": target,
        "solution": value,
        "reached": value is not None,
        "plan": result.as_dict(),
    }
