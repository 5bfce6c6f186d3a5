"""Surveys: creating, listing and changing them, and what endpoints require of one.

A survey's privacy settings are resolved by :mod:`app.surveys.policy`, its items kept by
:mod:`app.surveys.items`; this module checks and stores the survey itself, its
suggestions and results settings, and refuses endpoints that need a pairwise or a
local-model survey (docs/reference/api.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import delete, func, null, select
from sqlalchemy.orm import Session

from ..core.db.models import HeldContribution, Item, Survey, SurveyStats, new_id, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid
from ..core.limits import MAX_ITEMS, MAX_RANKING_ITEMS
from ..core.lookup import get_survey
from ..goals.service import new_ticket_key, resolve_goal
from .embedding import clean_origins
from .items import item_count_of
from .labels import _clean_labels, check_shown_labels, item_translations
from .languages import DEFAULT_LANGUAGE, check_language
from .policy import PrivacyPolicy, _resolve_central, _resolve_policy, resolve_accounting

__all__ = [
    "BATCH_DEFAULT",
    "MAX_ITEMS",
    "MAX_RANKING_ITEMS",
    "UNSET",
    "create_survey",
    "list_surveys",
    "require_local",
    "require_pairwise",
    "resolve_suggestions",
    "update_survey",
]

# MAX_ITEMS and MAX_RANKING_ITEMS (app.core.limits): a ranking survey is short because a
# person ranks the whole list, the Mallows mechanism's per-pair privacy weakens as
# ε/(m−1), and its folded statistics are O(m²).


def create_survey(
    session: Session,
    title: str,
    kind: str,
    labels: list[str],
    policy: PrivacyPolicy,
    assignment: str = "balanced",
    goal: dict | None = None,
    suggestions: dict | None = None,
    public_results: bool = False,
    results_on_finish: bool = False,
    language: str = DEFAULT_LANGUAGE,
    translations: Mapping[str, list[str | None]] | None = None,
    embed_origins: list[str] | None = None,
) -> Survey:
    """A new open survey. ``goal``: ``{"top_k": K | None, "full_ranking": bool, "level": float,
    "close_when_met": bool, "certificate": "borda" | "pairwise"}`` (checked by
    :func:`app.goals.service.resolve_goal`).
    ``language``: the respondents' default language; ``translations``: ``{code: [label or
    None, …]}`` aligned with ``labels`` (:func:`~app.surveys.labels.item_translations`)."""
    title = title.strip()
    if not title:
        raise Invalid("title must not be empty")
    if kind not in ("pairwise", "ranking"):
        raise Invalid("kind must be 'pairwise' or 'ranking'")
    cleaned = _clean_labels(labels)
    if not 2 <= len(cleaned) <= MAX_ITEMS:
        raise Invalid(f"a survey needs between 2 and {MAX_ITEMS} items")
    if kind == "ranking" and len(cleaned) > MAX_RANKING_ITEMS:
        raise Invalid(f"a ranking survey holds at most {MAX_RANKING_ITEMS} items")
    fields: dict[str, str | float | int | bool | None]
    if policy.model == "central":
        if kind != "pairwise":
            raise Invalid("central-model surveys are pairwise")
        total, cap = _resolve_central(policy, len(cleaned))
        accounting, delta = resolve_accounting(policy.accounting, policy.delta)
        fields = {"total_budget": total, "max_comparisons": cap, "accounting": accounting, "delta": delta}
    else:
        local = _resolve_policy(policy, kind)
        fields = {
            "epsilon_default": local.epsilon_default,
            "epsilon_min": local.epsilon_min,
            "epsilon_max": local.epsilon_max,
            "respondent_budget": local.respondent_budget,
            "respondent_budget_unlimited": local.unlimited,
        }
    g = goal or {}
    spec = resolve_goal(
        assignment,
        g.get("top_k"),
        bool(g.get("full_ranking", False)),
        float(g.get("level", 0.95)),
        bool(g.get("close_when_met", False)),
        goal is not None,
        kind,
        policy.model,
        len(cleaned),
        str(g.get("certificate") or "borda"),
    )
    suggestion_settings = resolve_suggestions(suggestions, kind)
    if suggestion_settings and suggestion_settings["enabled"] and goal is not None:
        raise Invalid(_NO_SUGGESTIONS_WITH_GOAL)
    _check_results(public_results, results_on_finish)
    origins = clean_origins(embed_origins)  # app.surveys.embedding
    check_language(language)
    per_item = item_translations(translations, len(cleaned))
    begin_write(session)
    survey = Survey(
        id=new_id("srv"),
        title=title,
        kind=kind,
        status="open",
        privacy_model=policy.model,
        assignment=assignment,
        goal=None if spec is None else spec.as_json(),
        ticket_key=None if spec is None else new_ticket_key(),
        suggestions=suggestion_settings,
        public_results=public_results,
        results_on_finish=results_on_finish,
        embed_origins=origins,
        language=language,
        **fields,
    )
    session.add(survey)
    # item_counts starts empty (not NULL, which means "before the counts existed": a survey
    # migrated with answers gets them from pair_stats at its first fold).
    session.add(SurveyStats(survey_id=survey.id, version=0, n_comparisons=0, item_counts=b""))
    session.flush()
    session.add_all(
        # SQL NULL, not JSON null, where there are none: "translations IS NOT NULL" finds the others.
        Item(
            id=new_id("itm"), survey_id=survey.id, position=k, label=label, translations=per_item[k] or null()
        )
        for k, label in enumerate(cleaned)
    )
    if any(per_item):
        session.flush()
        check_shown_labels(session, survey.id)
    session.commit()
    return survey


def list_surveys(session: Session, limit: int = 100, offset: int = 0) -> tuple[list[tuple[Survey, int]], int]:
    """A page of surveys, newest first, each with its number of items; and how many
    surveys there are. Two queries whatever the page's size, and no item is loaded:
    positions are 0 … m−1, so m is the largest position + 1, one seek on the
    (survey_id, position) index per survey."""
    total = session.scalar(select(func.count()).select_from(Survey)) or 0
    n_items = item_count_of(Survey.id).correlate(Survey)
    rows = session.execute(
        select(Survey, n_items).order_by(Survey.created_at.desc(), Survey.id).limit(limit).offset(offset)
    ).all()
    return [(survey, int(n)) for survey, n in rows], int(total)


#: Most suggestions one respondent may make in a survey (the survey sets its own limit up to it).
MAX_PER_RESPONDENT = 20
#: Largest flag threshold a survey may set.
MAX_FLAG_THRESHOLD = 100
#: Suggestions (and flags) are published in batches from this many different respondents
#: by default: an author is then one of five, as likely as any other (docs/how-to/moderate.md,
#: "Who suggested what cannot be told").
BATCH_DEFAULT = 5
#: The smallest and largest batch a survey may set.
BATCH_MIN, BATCH_MAX = 2, 50
#: Suggestions a survey accepts from all its respondents per clock hour, by default and at
#: most (docs/how-to/moderate.md, "Limits on suggestions").
PER_HOUR_DEFAULT, PER_HOUR_MAX = 100, 10_000
#: Suggestions a survey accepts in all (rejected ones do not count), by default; at most
#: MAX_ITEMS.
MAX_TOTAL_DEFAULT = 1_000


def resolve_suggestions(raw: dict | None, kind: str) -> dict | None:
    """The stored form of a survey's ``suggestions`` settings (None: off), checked."""
    if raw is None:
        return None
    enabled = bool(raw.get("enabled", True))
    per = raw.get("per_respondent", 3)
    moderation = raw.get("moderation", "before")
    threshold = raw.get("flag_threshold", 3)
    batch = raw.get("batch", BATCH_DEFAULT)
    per_hour = raw.get("per_hour", PER_HOUR_DEFAULT)
    max_total = raw.get("max_total", MAX_TOTAL_DEFAULT)
    if enabled and kind != "pairwise":
        raise Invalid("suggestions are for pairwise surveys (a ranking survey's items are fixed)")
    if not isinstance(per, int) or not 1 <= per <= MAX_PER_RESPONDENT:
        raise Invalid(f"suggestions.per_respondent must be an integer in [1, {MAX_PER_RESPONDENT}]")
    if moderation not in ("before", "after"):
        raise Invalid("suggestions.moderation must be 'before' or 'after'")
    if not isinstance(threshold, int) or not 1 <= threshold <= MAX_FLAG_THRESHOLD:
        raise Invalid(f"suggestions.flag_threshold must be an integer in [1, {MAX_FLAG_THRESHOLD}]")
    if not isinstance(batch, int) or isinstance(batch, bool) or not BATCH_MIN <= batch <= BATCH_MAX:
        raise Invalid(f"suggestions.batch must be an integer in [{BATCH_MIN}, {BATCH_MAX}]")
    # A batch is published whole, so each limit must leave room for one.
    if not isinstance(per_hour, int) or isinstance(per_hour, bool) or not batch <= per_hour <= PER_HOUR_MAX:
        raise Invalid(f"suggestions.per_hour must be an integer in [batch ({batch}), {PER_HOUR_MAX}]")
    if not isinstance(max_total, int) or isinstance(max_total, bool) or not batch <= max_total <= MAX_ITEMS:
        raise Invalid(f"suggestions.max_total must be an integer in [batch ({batch}), {MAX_ITEMS}]")
    return {
        "enabled": enabled,
        "per_respondent": per,
        "moderation": moderation,
        "flag_threshold": threshold,
        "batch": batch,
        "per_hour": per_hour,
        "max_total": max_total,
    }


_NO_SUGGESTIONS_WITH_GOAL = (
    "a survey with a goal does not take suggestions: its certificate draws each pair's partner from all "
    "the items, so items could not be hidden (admins may still add items)"
)


def _check_results(public_results: bool, results_on_finish: bool) -> None:
    if results_on_finish and not public_results:
        raise Invalid("results_on_finish shows the public results: it needs public_results")


#: "Leave unchanged" for :func:`update_survey`'s ``suggestions`` (None turns them off).
UNSET: dict = {}


def _set_accounting(session: Session, survey: Survey, accounting: str | None, delta: float | None) -> None:
    """Change a central survey's accounting (and δ) inside the caller's write transaction,
    which holds the survey's row lock: a release stores under the same lock, so no release
    is charged in one accounting and the survey's later ones in another. A survey with a
    release keeps its accounting (409 ``accounting_locked``); asking for what it has is
    no change."""
    from ..core.db.models import Release

    if survey.privacy_model != "central":
        raise Invalid(
            "accounting and delta belong to central surveys (a local survey's answers are randomized)"
        )
    wanted = accounting or survey.accounting
    if delta is None and wanted == survey.accounting:
        delta = survey.delta
    new = resolve_accounting(wanted, delta)
    if new == (survey.accounting, survey.delta):
        return
    if session.scalar(select(Release.id).where(Release.survey_id == survey.id).limit(1)) is not None:
        raise Conflict(
            f"this survey has made releases under {survey.accounting} accounting; its accounting and δ are "
            "fixed at its first release (create a new survey to account otherwise)",
            code="accounting_locked",
        )
    survey.accounting, survey.delta = new


def update_survey(
    session: Session,
    survey_id: str,
    status: str | None,
    title: str | None,
    suggestions: dict | None = UNSET,
    public_results: bool | None = None,
    results_on_finish: bool | None = None,
    language: str | None = None,
    embed_origins: list[str] | dict | None = UNSET,
    accounting: str | None = None,
    delta: float | None = None,
) -> Survey:
    """Change a survey's status, title, suggestions settings (None: off), results
    settings, default language or (central surveys, before their first release) privacy
    accounting and δ; arguments left at their defaults are unchanged."""
    if language is not None:
        check_language(language)
    # embed_origins: the sites that may frame its pages (None or []: none; UNSET: unchanged).
    new_origins = embed_origins is not UNSET
    origins = clean_origins(embed_origins) if new_origins else None  # type: ignore[arg-type]
    begin_write(session)
    survey = get_survey(session, survey_id, lock=True)
    if accounting is not None or delta is not None:
        _set_accounting(session, survey, accounting, delta)
    if new_origins:
        survey.embed_origins = origins
    if suggestions is not UNSET:
        survey.suggestions = resolve_suggestions(suggestions, survey.kind)
        if survey.suggestions and survey.suggestions["enabled"] and survey.goal:
            raise Invalid(_NO_SUGGESTIONS_WITH_GOAL)
    public = survey.public_results if public_results is None else public_results
    on_finish = survey.results_on_finish if results_on_finish is None else results_on_finish
    _check_results(public, on_finish)
    survey.public_results, survey.results_on_finish = public, on_finish
    if status is not None:
        if status not in ("open", "closed"):
            raise Invalid("status must be 'open' or 'closed'")
        survey.status = status
    if survey.status == "closed" or not (survey.suggestions and survey.suggestions.get("enabled")):
        # Held suggestions and flags are never published now: discarded, not kept unread.
        session.execute(delete(HeldContribution).where(HeldContribution.survey_id == survey.id))
    if title is not None:
        if not title.strip():
            raise Invalid("title must not be empty")
        survey.title = title.strip()
    if language is not None:
        survey.language = language
    survey.updated_at = utcnow()
    session.commit()
    return survey


def require_pairwise(survey: Survey) -> None:
    """Refuse pairwise-only endpoints for ranking surveys (409)."""
    if survey.kind != "pairwise":
        raise Conflict(
            f"this survey collects rankings: see GET /v1/surveys/{survey.id}/ranking"
            f"?method=borda|lehmer|kemeny|btl and GET /v1/surveys/{survey.id}/rankings.csv"
        )


def require_local(survey: Survey) -> None:
    """Refuse direct access to a central-model survey's answers or statistics (409)."""
    if survey.privacy_model == "central":
        raise Conflict(
            "this survey uses the central privacy model: its answers are true answers, so results leave the "
            f"service only as differentially private releases (POST /v1/surveys/{survey.id}/releases)"
        )
