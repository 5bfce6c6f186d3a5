"""A survey as the API shows it: its settings, items, goal and counts, and the language
a respondent-facing answer is given in."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from ..analysis.aggregation import fold_pending
from ..core.db.models import Item, Survey
from ..goals.service import GoalSpec, estimand_text, goal_report
from ..participation.moderation import pending_count
from ..privacy.service import privacy_summary
from ..respondents.service import respondent_totals
from ..respondents.undecided import undecided_count
from ..stats import flip_probability
from .items import survey_items
from .languages import choose_language
from .policy import budget_policy
from .schemas import GoalOut, GoalSpecOut, ItemOut, PrivacyOut, SurveyOut, SurveySummary

#: The respondent's language, on the routes respondents read (labels and the page's catalog).
Lang = Annotated[
    str | None,
    Query(
        description="The language wanted (en, es, de, fr; a region such as es-MX counts as es). "
        "Absent or unknown (ignored, never an error): Accept-Language decides, then the survey's default.",
    ),
]


def language_of(request: Request, response: Response, lang: str | None, survey: Survey) -> str:
    """The language a respondent-facing answer is given in: ``?lang=``, then the request's
    ``Accept-Language``, then the survey's default (docs/how-to/languages.md). The answer says
    that it varies with ``Accept-Language`` (for any cache on the way)."""
    response.headers["Vary"] = "Accept-Language"
    return choose_language(lang, request.headers.get("accept-language"), survey.language)


def privacy_out(survey: Survey, n_items: int) -> PrivacyOut:
    """The survey's privacy settings, with the numbers of its summary (``n_items`` items)."""
    return PrivacyOut(
        model=survey.privacy_model,
        epsilon_default=survey.epsilon_default,
        epsilon_min=survey.epsilon_min,
        epsilon_max=survey.epsilon_max,
        respondent_budget=survey.respondent_budget,
        respondent_budget_policy=budget_policy(survey),
        flip_probability_default=None
        if survey.epsilon_default is None
        else float(flip_probability(survey.epsilon_default)),
        total_budget=survey.total_budget,
        max_comparisons_per_respondent=survey.max_comparisons,
        accounting=survey.accounting if survey.privacy_model == "central" else None,
        delta=survey.delta,
        summary=privacy_summary(survey, n_items),
    )


def _survey_fields(survey: Survey, n_items: int) -> dict:
    return {
        "id": survey.id,
        "title": survey.title,
        "kind": survey.kind,
        "status": survey.status,
        "privacy": privacy_out(survey, n_items),
        "assignment": survey.assignment,
        "suggestions": survey.suggestions,
        "public_results": bool(survey.public_results),
        "results_on_finish": bool(survey.results_on_finish),
        "embed_origins": survey.embed_origins or [],
        "language": survey.language or "en",
        "created_at": survey.created_at,
        "updated_at": survey.updated_at,
    }


def _goal_spec(goal: GoalSpec) -> dict:
    return {
        "top_k": goal.top_k,
        "full_ranking": goal.top_k is None,
        "level": goal.level,
        "close_when_met": goal.close_when_met,
        "certificate": goal.certificate,
        "estimand": goal.estimand,
        "estimand_text": estimand_text(goal),
    }


def survey_out(session, survey: Survey, cache=None, *, operator: bool = True) -> SurveyOut:
    """The survey with its items and, with a goal, where the goal stands (pending answers
    are folded first: after a fold in progress, if any). A central survey's exact
    respondent, comparison and “can't decide” counts are the operator's (admins and
    analysts): for anyone else (``operator=False``: moderators) they are left out (null)."""
    goal = None
    if survey.goal:
        fold_pending(session, survey.id)
    items = survey_items(session, survey.id)
    report = goal_report(session, survey, len(items), cache)
    if report is not None:
        ids = [i.id for i in items]
        goal = GoalOut(
            **_goal_spec(report.goal),
            met=report.met,
            items=[ids[k] for k in report.certified] if report.met else None,
            answers_used=report.answers,
            counted_answers=report.counted,
            resolved=report.resolved,
            n_items=report.n_items,
            unreachable=report.unreachable,
        )
    hidden = not operator and survey.privacy_model == "central"
    return SurveyOut(
        **_survey_fields(survey, len(items)),
        items=[item_out(i) for i in items],
        goal=goal,
        undecided=None if hidden else undecided_count(session, survey.id),
        pending_suggestions=pending_count(session, survey.id) if survey.suggestions else 0,
        **(_central_counts(session, survey) if operator else {}),
    )


def _central_counts(session, survey: Survey) -> dict:
    """A central survey's respondents and stored comparisons (one query; none for local ones)."""
    if survey.privacy_model != "central":
        return {}
    respondents, comparisons = respondent_totals(session, survey.id)
    return {"respondents": respondents, "comparisons": comparisons}


def item_out(item: Item) -> ItemOut:
    return ItemOut(
        id=item.id,
        label=item.label,
        position=item.position,
        source=item.source,
        status=item.status,
        flags=item.flags,
        added_at=item.created_at,
        approved_at=item.approved_at,
        translations=item.translations or None,
    )


def survey_summary(survey: Survey, n_items: int, pending: int = 0) -> SurveySummary:
    goal = GoalSpec.of(survey)
    return SurveySummary(
        **_survey_fields(survey, n_items),
        n_items=n_items,
        goal=None if goal is None else GoalSpecOut(**_goal_spec(goal)),
        pending_suggestions=pending,
    )
