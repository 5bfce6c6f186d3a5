"""A survey's items: reading and counting them, the per-process item index, appending.

Items are only ever appended, at positions 0 … m−1, and keep their id and position; an
archived item keeps its place and answers but is left out of the rankings and of the
item limit (docs/how-to/moderate.md, "Archiving an item"). :class:`ItemIndex` holds a
survey's items as plain values that requests and threads may share.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from sqlalchemy import ScalarSelect, func, null, select
from sqlalchemy.orm import Session

from ..core.cache import OBJECT_BYTES, ByteLRU
from ..core.db.models import Item, Ranking, Survey, new_id, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid
from ..core.limits import MAX_ITEMS, MAX_ITEMS_STORED, MAX_RANKING_ITEMS
from ..core.lookup import get_survey
from ..goals.service import PAIRWISE_MAX_ITEMS as PAIRWISE_GOAL_MAX_ITEMS
from .labels import _clean_labels, check_shown_labels, item_translations, normalize_label, translations_taken

__all__ = [
    "ITEM_CACHE_BYTES",
    "ItemIndex",
    "active_item_count",
    "active_items",
    "add_items",
    "append_items",
    "archived_positions",
    "current_item_index",
    "item_count",
    "item_count_of",
    "item_index",
    "known_item_index",
    "survey_items",
]


def survey_items(session: Session, survey_id: str) -> list[Item]:
    return list(session.scalars(select(Item).where(Item.survey_id == survey_id).order_by(Item.position)))


@dataclass(frozen=True, eq=False)
class ItemIndex:
    """A survey's items as plain immutable values: ids and labels by position, and each
    id's position.

    Unlike ORM ``Item`` rows, which belong to the session that loaded them (a rollback
    expires them; touching them later loads through that session, from whatever thread),
    an index may be shared between requests and threads, e.g. in a per-process cache.
    """

    ids: tuple[str, ...]
    labels: tuple[str, ...]
    positions: Mapping[str, int]
    #: Positions of the items that joined after the survey's creation (source "added" or
    #: "suggested"): the candidates for catch-up (app.respondents.assignment).
    late: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """Approximate memory held: the strings, and per item its tuple and mapping slots."""
        strings = sum(sys.getsizeof(x) for x in self.ids) + sum(sys.getsizeof(x) for x in self.labels)
        return strings + 120 * len(self.ids) + 3 * OBJECT_BYTES


def item_index(session: Session, survey_id: str) -> ItemIndex:
    """The survey's items as an :class:`ItemIndex` (one query; no ORM objects)."""
    rows = session.execute(
        select(Item.id, Item.position, Item.label, Item.source)
        .where(Item.survey_id == survey_id)
        .order_by(Item.position)
    ).all()
    if any(row.position != k for k, row in enumerate(rows)):  # pragma: no cover - positions are 0..m-1
        raise RuntimeError(f"survey {survey_id}: item positions are not 0..m-1")
    return ItemIndex(
        ids=tuple(row.id for row in rows),
        labels=tuple(row.label for row in rows),
        positions=MappingProxyType({row.id: row.position for row in rows}),
        late=tuple(row.position for row in rows if row.source != "seed"),
    )


def item_count_of(survey_id) -> ScalarSelect[int]:
    """How many items the survey holds, as a scalar subquery: positions are 0 … m−1, so m
    is the largest position + 1 — one seek on the (survey_id, position) index, where a
    ``COUNT`` reads every entry."""
    return (
        select(func.coalesce(func.max(Item.position) + 1, 0))
        .where(Item.survey_id == survey_id)
        .scalar_subquery()
    )


def item_count(session: Session, survey_id: str) -> int:
    """How many items the survey holds (one index seek; no rows loaded)."""
    return int(session.scalar(select(item_count_of(survey_id))) or 0)


def archived_positions(survey: Survey) -> tuple[int, ...]:
    """Positions of the survey's archived items, sorted."""
    return tuple(sorted(survey.archived or ()))


def active_item_count(session: Session, survey: Survey, n: int | None = None) -> int:
    """The items that count toward :data:`MAX_ITEMS`: all but the archived (``n``: the
    survey's item count, when the caller has it)."""
    return (item_count(session, survey.id) if n is None else n) - len(survey.archived or ())


def active_items(session: Session, survey: Survey) -> list[Item]:
    """The survey's items in position order, archived ones left out: the items a ranking
    ranks."""
    archived = set(survey.archived or ())
    return [it for it in survey_items(session, survey.id) if it.position not in archived]


#: Memory of the per-process item index cache (ids and labels of recently used surveys).
ITEM_CACHE_BYTES = 64 * 2**20


class _ItemIndexCache:
    """Items per survey as plain values, per process, within a byte budget (least
    recently used evicted first).

    Items are only ever appended and keep their id and position, so an index stays
    valid as far as it goes; its item count is its version. A caller says when a
    cached index is fresh enough for it; otherwise the survey's items are read again,
    and the cache keeps the index with the most items."""

    def __init__(self, max_bytes: int = ITEM_CACHE_BYTES) -> None:
        self.lru = ByteLRU(max_bytes)
        self._lock = threading.Lock()

    def get(self, session: Session, survey_id: str, fresh: Callable[[ItemIndex], bool]) -> ItemIndex:
        cached = self.lru.get(survey_id)
        if cached is not None and fresh(cached):
            return cached
        index = item_index(session, survey_id)
        with self._lock:
            current = self.lru.get(survey_id)
            if current is None or len(index) >= len(current):
                self.lru.put(survey_id, index, index.nbytes)
        return index


_ITEM_INDEXES = _ItemIndexCache()


def known_item_index(session: Session, survey_id: str, ids: Callable[[ItemIndex], bool]) -> ItemIndex:
    """The survey's items, from the process's cache when ``ids(index)`` holds for the
    cached index (e.g. it knows every item a request names), else read again."""
    return _ITEM_INDEXES.get(session, survey_id, ids)


def current_item_index(session: Session, survey_id: str, n: int | None = None) -> ItemIndex:
    """The survey's items now: the cached index when it has as many items as the survey
    (``n``, or one index seek), else read again. O(m) only when items were added."""
    if n is None:
        n = item_count(session, survey_id)
    return _ITEM_INDEXES.get(session, survey_id, lambda index: len(index) >= n)


def add_items(
    session: Session,
    survey_id: str,
    labels: list[str],
    translations: Mapping[str, list[str | None]] | None = None,
) -> list[Item]:
    """Append items to an open survey; positions continue after the last one.
    ``translations``: ``{code: [label or None, …]}`` aligned with ``labels``."""
    cleaned = _clean_labels(labels)
    if not cleaned:
        raise Invalid("give at least one item")
    item_translations(translations, len(cleaned))  # checked before any write
    begin_write(session)
    survey = get_survey(session, survey_id, lock=True)  # serializes position numbering
    if survey.status != "open":
        raise Conflict("items can only be added to an open survey")
    _check_pairwise_room(session, survey, len(cleaned))
    per_item = (
        item_translations(translations, len(cleaned), translations_taken(session, survey_id))
        if translations
        else None
    )
    new = append_items(session, survey, cleaned, source="added", translations=per_item)
    session.commit()
    return new


def _check_pairwise_room(session: Session, survey: Survey, adding: int) -> None:
    """422 when ``adding`` items would take a pairwise-certificate goal survey beyond the
    certificate's :data:`~app.stats.pair_sequences.MAX_ITEMS` (its state is one sequence
    per pair); the goal, fixed at creation, does not change certificate."""
    if not survey.goal or survey.goal.get("certificate") != "pairwise":
        return
    total = item_count(session, survey.id) + adding
    if total > PAIRWISE_GOAL_MAX_ITEMS:
        raise Invalid(
            "this survey's goal uses the pairwise certificate, which takes at most "
            f"{PAIRWISE_GOAL_MAX_ITEMS} items: adding {adding} would make {total}"
        )


def append_items(
    session: Session,
    survey: Survey,
    cleaned: list[str],
    source: str,
    approved_at: datetime | None = None,
    created_at: datetime | None = None,
    touch: bool = True,
    translations: list[dict[str, str] | None] | None = None,
) -> list[Item]:
    """Append items with normalized, distinct ``cleaned`` labels to ``survey``, which the
    caller has locked (:func:`get_survey` with ``lock``) inside its write transaction;
    the caller commits. ``source``: "added" (an admin) or "suggested" (a participant).
    ``created_at`` (default now) and ``touch`` (bump the survey's ``updated_at``) let a
    respondent's suggestion leave no exact time behind. The labels come from the process's
    item index, so no item rows are read unless items were added meanwhile. ``translations``:
    each new item's {code: label}, aligned with ``cleaned`` (None: none)."""
    survey_id = survey.id
    n = item_count(session, survey_id)
    index = current_item_index(session, survey_id, n)  # plain cached values: no rows read
    taken = {normalize_label(label) for label in index.labels}  # rows stored before labels were NFC
    clash = sorted(set(cleaned) & taken)
    if clash:
        raise Invalid(f"item labels must be unique; already in the survey: {clash}")
    if active_item_count(session, survey, n) + len(cleaned) > MAX_ITEMS:
        raise Invalid(f"a survey holds at most {MAX_ITEMS} items (archived items not counted)")
    if n + len(cleaned) > MAX_ITEMS_STORED:
        raise Invalid(f"a survey stores at most {MAX_ITEMS_STORED} items, archived ones included")
    if survey.kind == "ranking":
        if n + len(cleaned) > MAX_RANKING_ITEMS:
            raise Invalid(f"a ranking survey holds at most {MAX_RANKING_ITEMS} items")
        if session.scalar(select(Ranking.id).where(Ranking.survey_id == survey_id).limit(1)) is not None:
            raise Conflict(
                "this ranking survey already has rankings of its current items; items cannot be added "
                "(create a new survey)"
            )
    new = [
        Item(
            id=new_id("itm"),
            survey_id=survey_id,
            position=n + k,
            label=label,
            source=source,
            approved_at=approved_at,
            created_at=created_at or utcnow(),
            translations=(translations[k] if translations else None) or null(),
        )
        for k, label in enumerate(cleaned)
    ]
    session.add_all(new)
    if touch:
        survey.updated_at = utcnow()
    session.flush()
    check_shown_labels(session, survey_id)  # a new label may be what another item shows in a language
    return new
