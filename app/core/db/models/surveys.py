"""A survey, its items and its respondents: the rows every domain reads.

The survey row holds the settings every pair request needs (privacy model and bounds,
assignment, goal, suggestions, withheld items); docs/reference/api.md.
"""

from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy import false as sa_false
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, utcnow

__all__ = ["Item", "Respondent", "Survey"]


class Survey(Base):
    __tablename__ = "surveys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    title: Mapped[str] = mapped_column(String(500))
    kind: Mapped[str] = mapped_column(String(16), default="pairwise")
    status: Mapped[str] = mapped_column(String(16), default="open")
    privacy_model: Mapped[str] = mapped_column(String(16), default="local")
    #: Local model: the bounds of respondents' ε. NULL for central surveys.
    epsilon_default: Mapped[float | None] = mapped_column(Float, nullable=True)
    epsilon_min: Mapped[float | None] = mapped_column(Float, nullable=True)
    epsilon_max: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Local model: the cap on each respondent's total ε (basic composition); NULL: none.
    respondent_budget: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Local model: the admin opted out of the cap (``"respondent_budget": "unlimited"``).
    #: A local survey with neither a cap nor this has no cap either ("unset" in the API).
    respondent_budget_unlimited: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    #: Central model: the total ε all releases may spend, and the most comparisons
    #: one respondent may contribute (L of individual DP). NULL for local surveys.
    total_budget: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_comparisons: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: Central model: how releases are charged, "pure" (sum of person-level ε) or "zcdp"
    #: (sum of person-level ρ, shown as (ε, δ) at ``delta``); docs/mechanisms.md §2.6.
    #: Fixed once the survey has a release.
    accounting: Mapped[str] = mapped_column(String(8), default="pure", server_default="pure")
    delta: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: How ``GET …/pairs`` picks pairs: "balanced" (least-answered first) or "adaptive"
    #: (pairs touching the items still in doubt; needs a goal). See app.goals.service.
    assignment: Mapped[str] = mapped_column(String(16), default="balanced", server_default="balanced")
    #: A local survey's goal: {"top_k": K or null (the whole ranking), "level": 0.95,
    #: "close_when_met": bool}; NULL without one.
    goal: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    #: The key of the tickets that vouch for served pairs (goal surveys; never returned).
    ticket_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: Participants' suggestions (app.participation.suggestions): {"enabled", "per_respondent",
    #: "moderation": "before" | "after", "flag_threshold"}; NULL: none.
    suggestions: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    #: The public results page /r/{id} (and GET …/results) is on.
    public_results: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    #: The respondent page ends with the current results (needs ``public_results``).
    results_on_finish: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    #: Positions of the items not served (hidden, back in review, or archived); NULL or [] : none.
    #: Kept on the survey row, which every pair request reads anyway.
    withheld: Mapped[list | None] = mapped_column(JSON, nullable=True)
    #: Positions of the archived items (also in ``withheld``): left out of the item limits
    #: and of the rankings; NULL or []: none.
    archived: Mapped[list | None] = mapped_column(JSON, nullable=True)
    #: The respondents' default language (a catalog code: "en", "es", "de", "fr");
    #: ``?lang=`` and ``Accept-Language`` choose first.
    language: Mapped[str] = mapped_column(String(16), default="en", server_default="en")
    #: Origins allowed to frame the respondent page (``frame-ancestors``); NULL or []: none.
    embed_origins: Mapped[list | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        CheckConstraint("kind IN ('pairwise', 'ranking')", name="ck_surveys_kind"),
        CheckConstraint("status IN ('open', 'closed')", name="ck_surveys_status"),
        CheckConstraint("privacy_model IN ('local', 'central')", name="ck_surveys_privacy_model"),
        CheckConstraint("assignment IN ('balanced', 'adaptive')", name="ck_surveys_assignment"),
        CheckConstraint(
            "(privacy_model = 'local' AND epsilon_min >= 0.001 AND epsilon_min <= epsilon_default "
            "AND epsilon_default <= epsilon_max) OR "
            "(privacy_model = 'central' AND total_budget > 0 AND max_comparisons >= 1)",
            name="ck_surveys_privacy",
        ),
        CheckConstraint(
            "(accounting = 'pure' AND delta IS NULL) OR "
            "(accounting = 'zcdp' AND privacy_model = 'central' AND delta > 0 AND delta < 1)",
            name="ck_surveys_accounting",
        ),
    )


class Item(Base):
    __tablename__ = "items"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), index=True)
    #: 0-based index of the item in its survey: the library's item index.
    position: Mapped[int] = mapped_column(Integer)
    label: Mapped[str] = mapped_column(String(500))
    #: "seed" (given at creation), "added" (by an admin later) or "suggested" (a participant's).
    source: Mapped[str] = mapped_column(String(16), default="seed", server_default="seed")
    #: "live" (served), "hidden" (by a moderator), "review" (flagged past the threshold) or
    #: "archived" (retired: not served, not counted toward the item limits, left out of
    #: the rankings; its answers stay stored).
    status: Mapped[str] = mapped_column(String(16), default="live", server_default="live")
    #: Distinct respondents who flagged it since it was last reviewed.
    flags: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: When a moderator (or moderation "after", at once) approved a suggested item.
    approved_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: The label in other languages: {language code: label}; NULL: none.
    translations: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        UniqueConstraint("survey_id", "position", name="uq_items_survey_position"),
        UniqueConstraint("survey_id", "label", name="uq_items_survey_label"),
        CheckConstraint("source IN ('seed', 'added', 'suggested')", name="ck_items_source"),
        CheckConstraint("status IN ('live', 'hidden', 'review', 'archived')", name="ck_items_status"),
    )


class Respondent(Base):
    __tablename__ = "respondents"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), index=True)
    #: SHA-256 of the token's secret part; NULL for respondents created by an import.
    token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: The respondent's ε (local model); NULL in central surveys.
    epsilon: Mapped[float | None] = mapped_column(Float, nullable=True)
    epsilon_spent: Mapped[float] = mapped_column(Float, default=0.0)
    n_comparisons: Mapped[int] = mapped_column(Integer, default=0)
    #: The pseudonym a bulk import gave this respondent (unique per survey).
    external_ref: Mapped[str | None] = mapped_column(String(200), nullable=True)
    #: Registered by an integration with an ``external_id``: HMAC-SHA256 of (survey, id)
    #: under the ``external_ids`` service secret (hex); the raw id is never stored.
    external_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        UniqueConstraint("survey_id", "external_ref", name="uq_respondents_survey_external_ref"),
        UniqueConstraint("survey_id", "external_key", name="uq_respondents_survey_external_key"),
        CheckConstraint("epsilon IS NULL OR epsilon >= 0.001", name="ck_respondents_epsilon"),
    )
