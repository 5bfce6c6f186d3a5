"""What runs inline and what as a job: the predicted run time of a job's work, and what a
job would refuse, checked before it is stored (docs/how-to/jobs.md).
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from sqlalchemy.orm import Session

from ..core.errors import Invalid, invalid_from
from ..core.lookup import answers_stored

__all__ = ["PLAN_SEARCH_STEPS", "PLAN_UNITS_PER_SECOND", "check_job", "predicted_seconds"]

#: Survey-plan work (simulated comparisons, app.stats.survey_plan) done per second on
#: one core: the slow end of the range at m = 100 (the survey-planner table of
#: ``python -m tests.benchmarks.bench_coverage`` times :func:`plan_survey`).
PLAN_UNITS_PER_SECOND = 1.5e5
#: Candidate sizes a survey plan's search simulates (doubling, then bisection).
PLAN_SEARCH_STEPS = 12


def predicted_seconds(kind: str, parameters: dict, n_items: int, n_comparisons: int) -> float:
    """What a job of ``kind`` is expected to take on a survey of ``n_items`` items and
    ``n_comparisons`` answers: a bootstrap's replicates
    (:func:`app.analysis.bootstrap.bootstrap_seconds`), or a survey plan's simulated
    comparisons (at most the planner's work bound for a search). Fits and sandwich
    intervals count as nothing: they answer inline."""
    from ..analysis.bootstrap import BOOTSTRAP_REPLICATES, bootstrap_seconds
    from ..stats.survey_plan import MAX_SURVEY_PLAN_WORK

    p = parameters
    if kind == "bootstrap" or (kind == "ranking" and p.get("uncertainty") == "bootstrap"):
        return bootstrap_seconds(
            n_items, n_comparisons, p.get("replicates", BOOTSTRAP_REPLICATES), p.get("covariance", "cluster")
        )
    if kind == "design":
        from ..stats.planner import epsilon_distribution, plan_seconds

        levels = 1  # as the planner counts them: a solve for ε tries one level at a time
        if p.get("epsilon") is not None and p.get("solve") != "epsilon":
            with suppress(ValueError):  # refused with its own message when run
                levels = epsilon_distribution(p["epsilon"], p.get("weights"))[0].size
        solving = p.get("solve", "none") != "none"
        first = 10 if p.get("solve") == "respondents" else (p.get("respondents") or 10)
        one = plan_seconds(n_items, first * p["pairs_per_respondent"], levels, p.get("replications", 200))
        return one * (PLAN_SEARCH_STEPS if solving else 1)
    if kind == "plan":
        added = p.get("respondents")
        per_new = p.get("pairs_per_respondent") or 10
        comparisons = n_comparisons + (added if added is not None else 10) * per_new
        units = (comparisons + n_items**3 / 50) * p.get("replications", 100)
        if added is None:
            units = min(units * PLAN_SEARCH_STEPS, MAX_SURVEY_PLAN_WORK)
        return units / PLAN_UNITS_PER_SECOND
    return 0.0


def check_job(session: Session, survey: Any, kind: str, parameters: dict, seconds: float) -> None:
    """Refuse (422), before anything is stored, what the job would refuse when run and
    can be known now: the synchronous endpoint's checks of the parameters against the
    survey (its items, its answers), and work predicted past twice the job's time
    budget ``seconds`` (as the synchronous endpoints refuse work past twice theirs)."""
    from ..analysis.bootstrap import BOOTSTRAP_MAX_COMPARISONS
    from ..analysis.service import check_ranking_parameters
    from ..planning.service import check_pilot_scores
    from ..stats.planner import epsilon_distribution
    from ..stats.survey_plan import MAX_SURVEY_PLAN_ITEMS
    from ..surveys.items import active_item_count

    p = parameters
    if kind == "design":
        if p["k"] >= p["items"]:
            raise Invalid("k must be less than the number of items")
        if p.get("scores") is not None and len(p["scores"]) != p["items"]:
            raise Invalid(f"scores needs one value per item ({p['items']})")
        check_pilot_scores(p.get("scores"))
        if p.get("epsilon") is not None:
            try:
                epsilon_distribution(p["epsilon"], p.get("weights"))
            except ValueError as exc:
                raise invalid_from(exc) from None
        if p.get("solve", "none") != "none" and p.get("target") is None:
            raise Invalid("solve needs a target")
        predicted = predicted_seconds(kind, p, p["items"], 0)
        if predicted > 2 * seconds:
            raise Invalid(
                f"this plan would take about {predicted:.0f} s here, beyond twice a job's time budget of "
                f"{seconds:g} s: ask for fewer replications, items or epsilon values"
            )
        return
    m = active_item_count(session, survey)  # what the ranking and the planners see
    if kind in ("ranking", "bootstrap"):
        uncertainty = "bootstrap" if kind == "bootstrap" else p.get("uncertainty", "sandwich")
        check_ranking_parameters(
            p.get("method", "debiased_mle"),
            p.get("lambda"),
            p.get("confidence", 0.95),
            uncertainty,
            p.get("covariance", "cluster"),
            p.get("replicates", 200),
        )
        if p.get("k") is not None and not 1 <= p["k"] <= m:
            raise Invalid(f"k must be between 1 and the number of items ({m})")
        n = answers_stored(session, survey.id)
        if uncertainty == "bootstrap" and n > BOOTSTRAP_MAX_COMPARISONS:
            raise Invalid(
                f"uncertainty=bootstrap is for small samples (at most {BOOTSTRAP_MAX_COMPARISONS} "
                "comparisons); use the default sandwich intervals"
            )
        predicted = predicted_seconds("ranking", {**p, "uncertainty": uncertainty}, m, n)
        if predicted > 2 * seconds:
            raise Invalid(
                f"uncertainty=bootstrap with {p.get('replicates', 200)} replicates would take about "
                f"{predicted:.0f} s here, beyond twice a job's time budget of {seconds:g} s; ask for fewer "
                "replicates"
            )
        return
    if not 2 <= m <= MAX_SURVEY_PLAN_ITEMS:
        raise Invalid(f"planning from a survey needs 2 to {MAX_SURVEY_PLAN_ITEMS} items (this one has {m})")
    if not 1 <= p["k"] < m:
        raise Invalid(f"k must be between 1 and {m - 1} (the number of items − 1)")
    if p.get("scores") is not None and len(p["scores"]) != m:
        raise Invalid(f"scores needs one value per item, in the survey's item order ({m} values)")
    check_pilot_scores(p.get("scores"))
    n = answers_stored(session, survey.id)
    if p.get("respondents") is not None:  # one size: its work is known now (a search stops at the bound)
        from ..stats.survey_plan import MAX_SURVEY_PLAN_WORK

        per_new = p.get("pairs_per_respondent") or 1  # at least one pair each: a lower bound
        units = (n + p["respondents"] * per_new + m**3 / 50) * p.get("replications", 100)
        if units > MAX_SURVEY_PLAN_WORK:
            raise Invalid(
                f"too much work: {p.get('replications', 100)} replicates of at least "
                f"{n + p['respondents'] * per_new:,.0f} comparisons over {m} items exceed the bound of "
                f"{MAX_SURVEY_PLAN_WORK:,} units; ask for fewer respondents or replications"
            )
