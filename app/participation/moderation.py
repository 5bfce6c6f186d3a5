"""Participatory surveys, the moderators' side: the queue, its decisions, an item's status.

Moderation ``before``: published suggestions wait, pending, in the queue
(:func:`list_suggestions`, each with its near-duplicates) for a moderator to approve,
reject or merge; ``after``: they are items at once, and moderators hide what should not
stay (:func:`set_item_status`, which also archives items; docs/how-to/moderate.md).
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..core.db.models import Item, Suggestion, Survey, is_id, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid, NotFound
from ..core.limits import MAX_ITEMS
from ..surveys.items import active_item_count, append_items
from ..surveys.labels import set_translations
from ..surveys.service import UNSET, get_survey
from .labels import Similar, clean_label, same_item, similar_labels

__all__ = [
    "SIMILAR_PENDING",
    "STATUSES",
    "approve",
    "edit",
    "list_suggestions",
    "merge",
    "pending_count",
    "pending_counts",
    "reject",
    "set_item_status",
    "survey_item",
    "withhold",
]

STATUSES = ("pending", "approved", "rejected", "merged")
#: Pending suggestions a listing compares against (the oldest first, like the queue), so
#: that a listing's work stays bounded however long the queue grows; items are all
#: compared (a survey holds at most ``MAX_ITEMS``).
SIMILAR_PENDING = 5_000


def withhold(survey: Survey, position: int, withheld: bool, touch: bool = True) -> None:
    """Leave the item at ``position`` out of the pairs served, or serve it again (and with
    ``touch``, the survey's ``updated_at``), in the caller's transaction."""
    current = set(survey.withheld or [])
    current.add(position) if withheld else current.discard(position)
    survey.withheld = sorted(current) or None
    if touch:  # not when a respondent's flag did it: its time would be stored
        survey.updated_at = utcnow()


def pending_count(session: Session, survey_id: str) -> int:
    return pending_counts(session, [survey_id]).get(survey_id, 0)


def pending_counts(session: Session, survey_ids: list[str]) -> dict[str, int]:
    """Pending suggestions per survey, for a page of surveys (one grouped query)."""
    if not survey_ids:
        return {}
    rows = session.execute(
        select(Suggestion.survey_id, func.count())
        .where(Suggestion.survey_id.in_(survey_ids), Suggestion.status == "pending")
        .group_by(Suggestion.survey_id)
    ).all()
    return {sid: int(n) for sid, n in rows}


def list_suggestions(
    session: Session, survey_id: str, status: str, limit: int, offset: int
) -> tuple[list[tuple[Suggestion, list[Similar]]], int]:
    """A page of the survey's suggestions (oldest first: the moderation queue), each with
    its near-duplicates among the items and the other pending suggestions."""
    get_survey(session, survey_id)
    where = [Suggestion.survey_id == survey_id]
    if status != "all":
        if status not in STATUSES:
            raise Invalid(f"status must be one of {', '.join(STATUSES)} or all")
        where.append(Suggestion.status == status)
    total = int(session.scalar(select(func.count()).select_from(Suggestion).where(*where)) or 0)
    rows = list(
        session.scalars(
            select(Suggestion)
            .where(*where)
            .order_by(Suggestion.received_at, Suggestion.id)
            .limit(limit)
            .offset(offset)
        )
    )
    if not rows:
        return [], total
    against: list[tuple[str, str | None, str | None]] = [
        (label, item_id, None)
        for item_id, label in session.execute(select(Item.id, Item.label).where(Item.survey_id == survey_id))
    ]
    pending = session.execute(
        select(Suggestion.id, Suggestion.label)
        .where(Suggestion.survey_id == survey_id, Suggestion.status == "pending")
        .order_by(Suggestion.received_at, Suggestion.id)
        .limit(SIMILAR_PENDING)
    ).all()
    against += [(label, None, sid) for sid, label in pending]
    hints = similar_labels([r.label for r in rows], against)
    out = []
    for row, found in zip(rows, hints, strict=True):
        # Not itself, nor (once decided) the item it became.
        keep = [
            s for s in found if s.suggestion_id != row.id and not (s.item_id and s.item_id == row.item_id)
        ]
        out.append((row, keep))
    return out, total


def survey_item(session: Session, survey_id: str, item_id: str, populate_existing: bool = False) -> Item:
    """The survey's item ``item_id``; :class:`NotFound` when there is none (an id not
    shaped like an item's is not looked up)."""
    if not is_id(item_id, "itm"):
        raise NotFound("no such item in this survey")
    item = session.get(Item, item_id, populate_existing=populate_existing)
    if item is None or item.survey_id != survey_id:
        raise NotFound(f"no item {item_id!r} in this survey")
    return item


def _pending(session: Session, survey_id: str, suggestion_id: str) -> Suggestion:
    if not is_id(suggestion_id, "sug"):
        raise NotFound("no such suggestion in this survey")
    row = session.get(Suggestion, suggestion_id, populate_existing=True)
    if row is None or row.survey_id != survey_id:
        raise NotFound(f"no suggestion {suggestion_id!r} in this survey")
    if row.status != "pending":
        raise Conflict(f"this suggestion was already decided ({row.status})")
    return row


def edit(session: Session, survey_id: str, suggestion_id: str, label: str) -> Suggestion:
    text = clean_label(label)
    begin_write(session)
    get_survey(session, survey_id, lock=True)
    row = _pending(session, survey_id, suggestion_id)
    row.label = text
    session.commit()
    return row


def approve(
    session: Session, survey_id: str, suggestion_id: str, moderator: str, label: str | None = None
) -> Suggestion:
    """Make a pending suggestion an item (optionally with an edited text)."""
    text = None if label is None else clean_label(label)
    begin_write(session)
    survey = get_survey(session, survey_id, lock=True)
    row = _pending(session, survey_id, suggestion_id)
    text = text or row.label
    same = same_item(session, survey_id, text)
    if same is not None:
        raise Conflict(
            f"the survey already has this item ({same.label!r}, {same.id}); merge the suggestion into it "
            "instead"
        )
    if survey.status != "open":
        raise Conflict("items can only be added to an open survey")
    now = utcnow()
    (item,) = append_items(session, survey, [text], source="suggested", approved_at=now)
    row.label, row.status, row.item_id = text, "approved", item.id
    row.decided_at, row.decided_by = now, moderator
    session.commit()
    return row


def reject(session: Session, survey_id: str, suggestion_id: str, moderator: str, reason: str) -> Suggestion:
    reason = reason.strip()
    if not reason:
        raise Invalid("give a reason for rejecting a suggestion")
    begin_write(session)
    get_survey(session, survey_id, lock=True)
    row = _pending(session, survey_id, suggestion_id)
    row.status, row.reason = "rejected", reason[:500]
    row.decided_at, row.decided_by = utcnow(), moderator
    session.commit()
    return row


def merge(session: Session, survey_id: str, suggestion_id: str, moderator: str, item_id: str) -> Suggestion:
    """Count a pending suggestion as the existing item ``item_id`` (nothing is added)."""
    begin_write(session)
    get_survey(session, survey_id, lock=True)
    row = _pending(session, survey_id, suggestion_id)
    item = survey_item(session, survey_id, item_id)
    row.status, row.item_id = "merged", item.id
    row.decided_at, row.decided_by = utcnow(), moderator
    session.commit()
    return row


def set_item_status(
    session: Session, survey_id: str, item_id: str, status: str | None, translations: dict | None = UNSET
) -> Item:
    """Hide an item (it is no longer served; its answers stay), archive it (as hidden, and
    also left out of the item limits and of the rankings) or make it live again (which
    also clears its flags: it has been reviewed; an archived item only while the survey
    has room for it); and/or replace its label's ``translations`` (None: none; UNSET:
    unchanged). One transaction: all or nothing."""
    if status is not None and status not in ("live", "hidden", "archived"):
        raise Invalid("status must be 'live', 'hidden' or 'archived'")
    begin_write(session)
    survey = get_survey(session, survey_id, lock=True)
    item = survey_item(session, survey_id, item_id, populate_existing=True)
    if translations is not UNSET:
        set_translations(session, survey_id, item, translations)
    if status is None:
        session.commit()
        return item
    if status in ("hidden", "archived") and (survey.kind != "pairwise" or survey.goal):
        raise Conflict(
            f"items of ranking surveys and of surveys with a goal cannot be {status}: a ranking orders "
            "every item, and a goal's certificate draws each pair's partner from all the items"
        )
    was_archived = item.status == "archived"
    if was_archived and status != "archived" and active_item_count(session, survey) + 1 > MAX_ITEMS:
        raise Conflict(f"the survey holds {MAX_ITEMS} items besides the archived: archive another first")
    if was_archived != (status == "archived"):
        archived = set(survey.archived or ())
        archived.add(item.position) if status == "archived" else archived.discard(item.position)
        survey.archived = sorted(archived) or None
    item.status = status
    if status == "live":
        item.flags = 0
    withhold(survey, item.position, status != "live")
    session.commit()
    return item
