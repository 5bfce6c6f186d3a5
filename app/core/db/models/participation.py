"""Suggestions, flags and what they wait in (docs/how-to/moderate.md).

Nothing here names or points to the respondent who sent a suggestion or a flag: slots,
flags and the held rows' authors are HMAC digests keyed with the respondent's bearer token.
"""

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime

__all__ = ["HeldContribution", "ItemFlag", "ParticipationSlot", "Suggestion"]


class Suggestion(Base):
    """A participant's proposed item and its moderation. Nothing here names or points to
    the respondent who sent it: no respondent id, no token, no address, and the time only
    to the hour (``received_at``), so that it cannot be matched to the respondent's other
    rows by timestamp. The respondent's allowance is a :class:`ParticipationSlot`."""

    __tablename__ = "suggestions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(500))
    status: Mapped[str] = mapped_column(String(16), default="pending")
    #: Why it was rejected (shown to moderators).
    reason: Mapped[str | None] = mapped_column(String(500), nullable=True)
    #: The item it became (approved) or was merged into (merged).
    item_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    #: When it arrived, rounded down to the hour.
    received_at: Mapped[datetime] = mapped_column(UTCDateTime())
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: The moderator's key id ("admin" for the configured admin key; "auto" for moderation after).
    decided_by: Mapped[str | None] = mapped_column(String(40), nullable=True)

    __table_args__ = (
        CheckConstraint(
            "status IN ('pending', 'approved', 'rejected', 'merged')", name="ck_suggestions_status"
        ),
        Index("ix_suggestions_survey_status", "survey_id", "status"),
    )


class ParticipationSlot(Base):
    """One used unit of a respondent's allowance (its k-th suggestion, its k-th flag), as
    HMAC-SHA256 keyed with the respondent's bearer token — which the database does not
    hold — over the survey, the kind and k. The limit is enforced by inserting the first
    free slot in the same transaction as the suggestion or flag; nothing here, and no
    write to the respondent's row, says whose slot it is."""

    __tablename__ = "participation_slots"

    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)


class ItemFlag(Base):
    """One respondent's flag on one item, as HMAC-SHA256(token, item id): the key is the
    respondent's bearer token, of which the database holds only a hash, so a repeat by
    the same respondent is recognized while no stored value says who flagged what."""

    __tablename__ = "item_flags"

    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)


class HeldContribution(Base):
    """A suggestion or a flag waiting for its batch (:mod:`app.participation.suggestions`):
    published, in random order and with one time to the hour, once respondents of
    ``batch`` different tokens have one waiting; then deleted. ``author`` is HMAC-SHA256
    keyed with the respondent's bearer token (which the database does not hold), only to
    count distinct respondents; no time is stored."""

    __tablename__ = "held_contributions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"))
    #: "suggestion" or "flag".
    kind: Mapped[str] = mapped_column(String(16))
    author: Mapped[str] = mapped_column(String(64))
    #: A suggestion's text.
    label: Mapped[str | None] = mapped_column(String(500), nullable=True)
    #: A flag's item and its :class:`ItemFlag` digest.
    item_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: What the respondent was told when it sent it: the batch it waits for (a smaller one
    #: set later does not publish it) and the moderation ("before": a moderator reviews it).
    batch: Mapped[int] = mapped_column(Integer)
    moderation: Mapped[str] = mapped_column(String(16))

    __table_args__ = (
        CheckConstraint("kind IN ('suggestion', 'flag')", name="ck_held_contributions_kind"),
        CheckConstraint("moderation IN ('before', 'after')", name="ck_held_contributions_moderation"),
        Index("ix_held_contributions_survey_kind", "survey_id", "kind"),
    )
