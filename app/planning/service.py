"""The privacy planner as a use case (API and CLI)."""

from __future__ import annotations

import math

import numpy as np

from ..analysis.bootstrap import eps_of
from ..analysis.intervals import current_fit
from ..core.deadline import Deadline, WorkSlots
from ..core.errors import Conflict, Invalid, invalid_from
from ..goals.service import CERTIFICATE_CHOICE, CERTIFICATES, ESTIMANDS, PAIRWISE_MAX_ITEMS, GoalSpec
from ..stats.goal_plan import plan_goal
from ..stats.planner import (
    MAX_PLAN_RESPONDENTS,
    Plan,
    epsilon_distribution,
    epsilon_needed,
    pilot_scores,
    plan,
    plan_seconds,
    respondents_needed,
)
from ..stats.random_effects import estimate_tau
from ..stats.survey_plan import (
    MAX_SURVEY_PLAN_ITEMS,
    PlanOptions,
    SurveyDesign,
    plan_survey,
    respondents_to_certify,
)
from ..surveys.items import active_items, survey_items
from ..surveys.service import require_local, require_pairwise
from .results import (
    GoalPlanOut,
    PlanBody,
    PlanOut,
    StrategyPlanOut,
    SurveyPlanBody,
    SurveyPlanItem,
    SurveyPlanOut,
)

__all__ = [
    "MAX_GOAL_PLAN_ITEMS",
    "PLAN_REFUSE_FACTOR",
    "check_pilot_scores",
    "goal_plan_from_survey",
    "plan_from_survey",
    "run_goal_plan",
    "run_plan",
]

#: Seconds one simulated answer costs the planner of adaptive designs, at most (an upper
#: bound on the run time per answer of the simulations ``python -m
#: tests.benchmarks.bench_adaptive --sizes …`` runs, 2 to 1,000 items; each cell records
#: its seconds, and ``--estimands`` prints them beside the answers): a plan's worst case is
#: every simulated survey running to ``max_answers``.
GOAL_PLAN_SECONDS_PER_ANSWER = 4e-5


def check_pilot_scores(scores: list[float] | None) -> None:
    """Pilot scores a planner may take (:func:`~app.stats.planner.pilot_scores`: finite,
    within ±50 of their mean), or :class:`Invalid` saying why not. Checked where they
    arrive, before a plan runs or is stored as a job."""
    if scores is not None:
        try:
            pilot_scores(scores)
        except ValueError as exc:
            raise Invalid(str(exc)) from None


def goal_plan_seconds_per_answer(m: int, certificate: str) -> float:
    """Seconds one simulated answer costs at most with ``certificate``. The pairwise one
    is charged per simulated *respondent*, which may bring a single answer (a top 1 has
    one boundary pair per respondent): a draw among the C(m, 2) pairs, O(m²), plus its
    overhead, and a check, O(m²), every max(m, 50) answers: a fixed part plus one in m²,
    an upper bound up to 300 items on the run time per answer of the pairwise simulations
    of ``python -m tests.benchmarks.bench_adaptive --certificate pairwise --ks 1 --sizes …``
    (one answer per respondent; each cell records its seconds)."""
    if certificate == "pairwise":
        return 1.5e-4 + 2e-8 * m * m
    return GOAL_PLAN_SECONDS_PER_ANSWER


#: The cap of one simulated survey's answers when the request names none: this, or
#: less so that the plan's worst case fits the time budget.
DEFAULT_GOAL_PLAN_ANSWERS = 50_000
#: The least cap of a simulated survey's answers (the routes' ``max_answers`` minimum).
MIN_GOAL_PLAN_ANSWERS = 100


#: The most items the planner of adaptive designs simulates (one simulated survey of
#: 1,000 items takes seconds; the time budget bounds the rest).
MAX_GOAL_PLAN_ITEMS = 1000

_GOAL_ASSUMPTION = (
    "Respondents arrive one after another and answer every pair they are served (at most "
    "pairs_per_respondent, fewer once they have answered about every item still in doubt), with true "
    "answers from the Bradley–Terry–Luce model at the scores simulated, independent across respondents, "
    "randomized at epsilon; the goal is checked after every max(m, 50) answers, with the service's "
    "anytime-valid certificate."
)

#: A plan predicted (:func:`~app.stats.planner.plan_seconds`) to need more than this
#: many times the time budget is refused at once (422); anything closer runs under
#: the deadline, which stops it at the budget (503).
PLAN_REFUSE_FACTOR = 2.0


def _check_plan_work(
    items: int,
    respondents: int | None,
    pairs_per_respondent: int,
    epsilon: list[float] | None,
    weights: list[float] | None,
    replications: int,
    solve: str,
    budget: float,
) -> None:
    """Refuse a plan whose first simulation alone is predicted far beyond the budget
    (a search runs more: those are left to the deadline). The first simulation of
    ``solve=respondents`` is at 10 respondents, of ``solve=epsilon`` at the largest ε."""
    if not math.isfinite(budget):
        return
    levels = 1
    if epsilon is not None and solve != "epsilon":
        try:
            levels = epsilon_distribution(epsilon, weights)[0].size
        except ValueError as exc:
            raise invalid_from(exc) from None
    first = 10 if solve == "respondents" else respondents
    if first is None or not 1 <= first <= MAX_PLAN_RESPONDENTS or pairs_per_respondent < 1:
        return  # refused with its own message by the planner
    predicted = plan_seconds(items, first * pairs_per_respondent, levels, replications)
    if predicted > PLAN_REFUSE_FACTOR * budget:
        raise Invalid(
            f"this plan would take about {predicted:.0f} s here, beyond the time budget of {budget:g} s: "
            "ask for fewer replications, items or epsilon values"
        )


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
    scores: list[float] | None = None,
    deadline: Deadline | None = None,
    work: WorkSlots | None = None,
) -> PlanOut:
    """Shared by the API and ``privrank plan``: a prediction or an inverse problem.
    ``deadline`` bounds the work (none: no time budget, as for the CLI); the
    simulation takes one of ``work``'s turns (the worker's long computations)."""
    deadline = deadline or Deadline.none()
    work = work or WorkSlots(1)
    if scores is not None and len(scores) != items:
        raise Invalid(f"scores needs one value per item ({items})")
    _check_plan_work(
        items, respondents, pairs_per_respondent, epsilon, weights, replications, solve, deadline.seconds
    )
    options = {
        "spread": spread,
        "gap": gap,
        "replications": replications,
        "seed": seed,
        "scores": scores,
        "check": deadline.check,
    }
    with work.hold(deadline):
        return _solve(items, respondents, pairs_per_respondent, epsilon, k, weights, solve, target, options)


def _solve(items, respondents, pairs_per_respondent, epsilon, k, weights, solve, target, options) -> PlanOut:
    value: float | None  # respondents (an int) or epsilon
    try:
        if solve == "none":
            if respondents is None or epsilon is None:
                raise Invalid("give respondents and epsilon (or solve for one of them)")
            result = plan(
                items, respondents, pairs_per_respondent, epsilon, k, epsilon_weights=weights, **options
            )
            return PlanOut(solve="none", target=None, solution=None, reached=True, plan=_body(result))
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
        raise invalid_from(exc) from None
    return PlanOut(solve=solve, target=target, solution=value, reached=value is not None, plan=_body(result))


def _body(result: Plan) -> PlanBody:
    return PlanBody.model_validate(result, from_attributes=True)


def plan_from_survey(
    session,
    survey,
    cache,
    k: int,
    *,
    target: float = 0.8,
    added: int | None = None,
    max_added: int = 100_000,
    level: float = 0.95,
    scores: list[float] | None = None,
    tau: float | None = None,
    pairs_per_respondent: int | None = None,
    epsilon: float | None = None,
    replications: int = 100,
    seed: int = 0,
    deadline: Deadline | None = None,
    work: WorkSlots | None = None,
) -> SurveyPlanOut:
    """``GET /v1/surveys/{sid}/plan`` and ``privrank plan --survey``: how many more
    respondents certify the top-K, simulated from the survey's own design, fit
    and respondent clustering (:mod:`app.stats.survey_plan`). ``deadline`` bounds
    the simulation besides its work bound (none: no time budget)."""
    deadline = deadline or Deadline.none()
    work = work or cache.work
    require_pairwise(survey)
    require_local(survey)
    m = len(active_items(session, survey))
    if not 2 <= m <= MAX_SURVEY_PLAN_ITEMS:
        raise Invalid(f"planning from a survey needs 2 to {MAX_SURVEY_PLAN_ITEMS} items (this one has {m})")
    if not 1 <= k < m:
        raise Invalid(f"k must be between 1 and {m - 1} (the number of items − 1)")
    if scores is not None and len(scores) != m:
        raise Invalid(f"scores needs one value per item, in the survey's item order ({m} values)")
    check_pilot_scores(scores)
    fit, clusters, items, version = current_fit(session, survey, cache, deadline, work)
    m = len(items)  # items may have been added meanwhile
    if scores is not None and len(scores) != m:
        raise Conflict("the survey's items changed while planning; retry")
    if clusters.i.size == 0 and scores is None:
        raise Conflict(
            "the survey has no answers yet, so there is no fit to plan from: give pilot scores (scores=…, "
            "one per item) and the new respondents' design (pairs_per_respondent and epsilon), or use "
            "GET /v1/plan"
        )
    design = SurveyDesign(
        m, clusters.i, clusters.j, eps_of(clusters.v), clusters.cluster, clusters.n_clusters
    )
    if clusters.i.size:
        tau_hat, tau_interval = estimate_tau(fit.theta, clusters, level)
    else:
        tau_hat, tau_interval = 0.0, None
    use_tau = tau_hat if tau is None else float(tau)
    theta = fit.theta if scores is None else scores
    source = (
        "the survey's current estimates (its fit of the answers so far)"
        if scores is None
        else "the pilot scores given"
    )
    options: PlanOptions = {
        "tau": use_tau,
        "level": level,
        "replications": replications,
        "seed": seed,
        "pairs_per_respondent": pairs_per_respondent,
        "epsilon": epsilon,
        "source": source,
        "tau_interval": tau_interval if tau is None else None,
        "check": deadline.check,
    }
    try:
        with work.hold(deadline):
            solution: int | None
            reached: bool | None
            limit: str | None
            if added is not None:
                result = plan_survey(design, theta, k, added, **options)
                solution, reached, limit = added, None, None
            else:
                solution, result, limit = respondents_to_certify(
                    design, theta, k, target, max_added=max_added, **options
                )
                reached = solution is not None
    except ValueError as exc:
        raise invalid_from(exc) from None
    return SurveyPlanOut(
        survey_id=survey.id,
        k=k,
        level=level,
        target=None if added is not None else target,
        solution=solution,
        reached=reached,
        search_limit=limit,
        scores="fit" if scores is None else "pilot",
        items=[
            SurveyPlanItem(item_id=it.id, label=it.label, score=float(x))
            for it, x in zip(items, np.asarray(theta, dtype=float), strict=True)
        ],
        tau=use_tau,
        tau_source="estimated" if tau is None else "query",
        tau_estimate=tau_hat if clusters.i.size else None,
        tau_interval=tau_interval,
        plan=SurveyPlanBody.model_validate(result, from_attributes=True),
        data_version=int(version),
    )


def _saving_reason(result) -> str | None:
    """Why a goal plan gives no saving: a strategy's surveys that stopped at max_answers
    without meeting the goal have no count of answers to the goal, so no ratio of means."""
    if result.saving is not None:
        return None
    n = result.replications
    return (
        f"Not every simulated survey met the goal within max_answers = {result.max_answers:,}: adaptive "
        f"assignment met it in {result.adaptive.met} of {n}, balanced assignment in {result.balanced.met} "
        f"of {n}, so there is no ratio of the answers each needs. Raise max_answers, or ask for less "
        "(a lower level, a smaller top_k, or a larger ε)."
    )


def _goal_plan_out(result, scores: str) -> GoalPlanOut:
    def strategy(p) -> StrategyPlanOut:
        se = p.answers_se if math.isfinite(p.answers_se) else None
        return StrategyPlanOut(
            answers_mean=p.answers_mean,
            answers_se=se,
            respondents_mean=p.respondents_mean,
            met=p.met,
            false_certifications=p.false_certifications,
        )

    return GoalPlanOut(
        certificate=result.certificate,
        estimand=ESTIMANDS[result.certificate, result.top_k is None],
        n_items=result.n_items,
        top_k=result.top_k,
        level=result.level,
        epsilon=result.epsilon,
        pairs_per_respondent=result.pairs_per_respondent,
        replications=result.replications,
        max_answers=result.max_answers,
        adaptive=strategy(result.adaptive),
        balanced=strategy(result.balanced),
        saving=result.saving,
        saving_reason=_saving_reason(result),
        scores=scores,
        assumption=_GOAL_ASSUMPTION,
    )


def _run_goal(
    theta, epsilon, level, top_k, replications, seed, pairs, max_answers, deadline, work, scores, certificate
):
    if certificate == "pairwise" and theta.size > PAIRWISE_MAX_ITEMS:
        raise Invalid(f"the pairwise certificate takes at most {PAIRWISE_MAX_ITEMS} items: plan with 'borda'")
    per_answer = GOAL_PLAN_SECONDS_PER_ANSWER + goal_plan_seconds_per_answer(theta.size, certificate)
    if max_answers is None:  # the default cap, lowered to what the time budget allows
        fits = deadline.seconds / (replications * per_answer) if math.isfinite(deadline.seconds) else math.inf
        max_answers = int(min(DEFAULT_GOAL_PLAN_ANSWERS, max(fits, MIN_GOAL_PLAN_ANSWERS)))
    worst = replications * max_answers * per_answer
    if math.isfinite(deadline.seconds) and worst > deadline.seconds:
        raise Invalid(
            f"this plan could take up to {worst:,.1f} s here (every simulated survey running to "
            f"max_answers), beyond the time budget of {deadline.seconds:g} s: ask for fewer replications "
            "or a lower max_answers"
        )
    try:
        with work.hold(deadline):
            result = plan_goal(
                theta,
                epsilon,
                level,
                top_k=top_k,
                replications=replications,
                seed=seed,
                pairs_per_respondent=pairs,
                max_answers=max_answers,
                check=deadline.check,
                certificate=certificate,
            )
    except ValueError as exc:
        raise invalid_from(exc) from None
    return _goal_plan_out(result, scores)


def run_goal_plan(
    items: int,
    top_k: int | None,
    epsilon: float,
    level: float,
    pairs_per_respondent: int,
    spread: float,
    gap: float | None,
    scores: list[float] | None,
    replications: int,
    seed: int,
    max_answers: int | None,
    deadline: Deadline | None = None,
    work: WorkSlots | None = None,
    certificate: str = "borda",
) -> GoalPlanOut:
    """``GET /v1/plan/goal``: answers a goal needs under adaptive and balanced assignment,
    the adaptive design certified by ``certificate`` (``borda`` or ``pairwise``: the
    admin's choice of estimand)."""
    deadline = deadline or Deadline.none()
    work = work or WorkSlots(1)
    if not 2 <= items <= MAX_GOAL_PLAN_ITEMS:
        raise Invalid(f"items must be between 2 and {MAX_GOAL_PLAN_ITEMS}")
    if top_k is not None and not 1 <= top_k < items:
        raise Invalid(f"top_k must be between 1 and items − 1 ({items - 1})")
    if certificate not in CERTIFICATES:
        raise Invalid(CERTIFICATE_CHOICE)
    if scores is not None:
        if len(scores) != items:
            raise Invalid(f"scores needs one value per item ({items})")
        check_pilot_scores(scores)
        theta = np.asarray(scores, dtype=float)
        source = "the pilot scores given"
    elif gap is not None:
        theta = -gap * np.arange(items, dtype=float)
        source = f"evenly spaced scores {gap:g} apart"
    else:
        theta = np.sort(np.random.default_rng(seed).uniform(-spread, spread, items))[::-1]
        source = f"scores drawn from Uniform(−{spread:g}, {spread:g})"
    return _run_goal(
        theta,
        epsilon,
        level,
        top_k,
        replications,
        seed,
        pairs_per_respondent,
        max_answers,
        deadline,
        work,
        source,
        certificate,
    )


def goal_plan_from_survey(
    session,
    survey,
    cache,
    replications: int = 10,
    seed: int = 0,
    pairs_per_respondent: int = 10,
    max_answers: int | None = None,
    deadline: Deadline | None = None,
    work: WorkSlots | None = None,
) -> GoalPlanOut:
    """``GET /v1/surveys/{sid}/goal/plan``: the survey's goal planned with its current fit as
    the true scores and its default ε — the dashboard's estimate of the answers saved."""
    deadline = deadline or Deadline.none()
    work = work or cache.work
    goal = GoalSpec.of(survey)
    if goal is None:
        raise Conflict("this survey has no goal: create it with one to plan adaptive assignment")
    m = len(survey_items(session, survey.id))
    if m > MAX_GOAL_PLAN_ITEMS:
        raise Invalid(f"the planner of adaptive designs simulates up to {MAX_GOAL_PLAN_ITEMS} items")
    fit, clusters, _items, _version = current_fit(session, survey, cache, deadline, work)
    if clusters.i.size == 0:
        raise Conflict(
            "the survey has no answers yet, so there is no fit to plan from: use GET /v1/plan/goal"
        )
    return _run_goal(
        fit.theta,
        survey.epsilon_default,
        goal.level,
        goal.top_k,
        replications,
        seed,
        pairs_per_respondent,
        max_answers,
        deadline,
        work,
        "the survey's current estimates (its fit of the answers so far)",
        goal.certificate,
    )
