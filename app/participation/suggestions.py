"""Participatory surveys: respondents propose items, moderators curate them, anyone can flag.

**Unlinkable authorship** (docs/how-to/moderate.md, "Who suggested what cannot be told";
docs/privacy.md §1). A suggestion or a flag is held until ``batch`` different
respondents each have one, then published together in a random order with one time to
the hour, so which of the k respondents sent which is a 1/k guess; nothing held or
published names its author (:func:`_publish` gives what is stored and what the server
still sees). **Flags** (:func:`flag_item`): once per respondent and item; enough of
them send a suggested item back to review. **Moderation** ``before`` or ``after``
publication (:func:`_store`), exact duplicates merged (:func:`same_key`), near ones hinted.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from ..core.db.models import (
    HeldContribution,
    Item,
    ItemFlag,
    ParticipationSlot,
    Suggestion,
    Survey,
    is_id,
    new_id,
    to_hour,
    utcnow,
)
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid, NotFound, TooMany
from ..core.limits import MAX_ITEMS
from ..stats import entropy
from ..surveys.items import active_item_count, append_items, current_item_index
from ..surveys.labels import normalize_label, set_translations, shown_as_translation
from ..surveys.service import MAX_TOTAL_DEFAULT, PER_HOUR_DEFAULT, UNSET, get_survey

__all__ = [
    "FLAGS_PER_RESPONDENT",
    "LABEL_MAX",
    "STATUSES",
    "Similar",
    "approve",
    "edit",
    "flag_item",
    "fold_text",
    "held_counts",
    "list_suggestions",
    "merge",
    "pending_count",
    "pending_counts",
    "reject",
    "same_key",
    "set_item_status",
    "similar_labels",
    "submit",
]

#: Longest suggestion (characters): an item label a respondent can read in a pair.
LABEL_MAX = 200
#: Most flags one respondent may raise in a survey.
FLAGS_PER_RESPONDENT = 10
STATUSES = ("pending", "approved", "rejected", "merged")
#: Similarity from which a label is shown to moderators as a near-duplicate.
SIMILAR_FROM = 0.5
#: Trigrams shared by more labels than this are skipped when looking for near-duplicates
#: ("the", " a "…): they say little, and hostile labels made of them would make a listing
#: compare everything with everything.
COMMON_TRIGRAM = 500
#: Near-duplicates listed per suggestion.
SIMILAR_SHOWN = 3
#: Pending suggestions a listing compares against (the oldest first, like the queue), so
#: that a listing's work stays bounded however long the queue grows; items are all
#: compared (a survey holds at most ``MAX_ITEMS``).
SIMILAR_PENDING = 5_000


def _settings(survey: Survey) -> dict:
    s = survey.suggestions
    if not s or not s.get("enabled"):
        raise Conflict("this survey does not take suggestions", code="suggestions_off")
    return s


#: Characters that reorder or hide text (bidirectional overrides and isolates) and C1 controls.
_HOSTILE = re.compile("[\u202a-\u202e\u2066-\u2069\u0080-\u009f]")
#: Most combining marks on one character (beyond it, text spills over its neighbours).
_MAX_MARKS = 4


def _visible(c: str) -> bool:
    """Whether a character shows something: not a space, format character (zero-width,
    BOM), combining mark or one of the blank letters (Hangul fillers, blank braille)."""
    if c in "\u3164\u115f\u1160\uffa0\u2800":
        return False
    return unicodedata.category(c) not in ("Zs", "Zl", "Zp", "Cf", "Cc", "Mn", "Me", "Mc")


def _clean(label: str) -> str:
    cleaned = normalize_label(label)
    if not cleaned:
        raise Invalid("a suggestion must not be empty")
    if len(cleaned) > LABEL_MAX:
        raise Invalid(f"a suggestion must be at most {LABEL_MAX} characters")
    if _HOSTILE.search(cleaned):
        raise Invalid("a suggestion must not contain text-direction overrides or control characters")
    if not any(_visible(c) for c in cleaned):
        raise Invalid("a suggestion must contain visible characters")
    run = 0
    for c in cleaned:
        run = run + 1 if unicodedata.combining(c) else 0
        if run > _MAX_MARKS:
            raise Invalid(f"a suggestion must not stack more than {_MAX_MARKS} accents on one letter")
    return cleaned


# -- near-duplicates --------------------------------------------------------------

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")


def fold_text(label: str) -> str:
    """The form two labels are compared in for hints: compatibility-normalized, accents
    and punctuation removed, case folded, spaces collapsed ("Bike lanes!" ≡ "bike  lanes").
    A label with nothing left (emoji, punctuation only) keeps its :func:`same_key` form,
    so that two such labels are not "the same" by both folding to nothing."""
    text = unicodedata.normalize("NFKD", label)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = _SPACE.sub(" ", _PUNCT.sub(" ", text.casefold())).strip()
    return text or same_key(label)


def _trigrams(folded: str) -> set[str]:
    padded = f"  {folded} "
    return {padded[k : k + 3] for k in range(len(padded) - 2)}


@dataclass(frozen=True)
class Similar:
    label: str
    similarity: float
    same_text: bool
    item_id: str | None = None
    suggestion_id: str | None = None


def similar_labels(
    labels: list[str], against: list[tuple[str, str | None, str | None]]
) -> list[list[Similar]]:
    """For each of ``labels``, the entries of ``against`` — ``(label, item_id,
    suggestion_id)`` — most like it, best first: the same folded text (similarity 1),
    or a Dice coefficient of character trigrams of at least :data:`SIMILAR_FROM`. One
    inverted index of trigrams, so the work is the postings the labels' trigrams hit, not
    len(labels) × len(against) comparisons."""
    folded = [fold_text(a[0]) for a in against]
    grams = [_trigrams(f) for f in folded]
    index: dict[str, list[int]] = {}
    for k, g in enumerate(grams):
        for t in g:
            index.setdefault(t, []).append(k)
    by_text: dict[str, list[int]] = {}
    for k, f in enumerate(folded):
        by_text.setdefault(f, []).append(k)
    out = []
    for label in labels:
        f = fold_text(label)
        g = _trigrams(f)
        shared: Counter[int] = Counter()
        for t in g:
            posting = index.get(t, ())
            if len(posting) <= COMMON_TRIGRAM:
                shared.update(posting)
        for k in by_text.get(f, ()):  # the same folded text, whatever its trigrams
            shared.setdefault(k, 0)
        found = []
        for k, n in shared.items():
            same = folded[k] == f
            dice = 1.0 if same else 2 * n / (len(g) + len(grams[k]))
            if dice >= SIMILAR_FROM:
                text, item_id, suggestion_id = against[k]
                found.append(Similar(text, round(dice, 3), same, item_id, suggestion_id))
        found.sort(key=lambda s: (-s.similarity, s.label))
        out.append(found[:SIMILAR_SHOWN])
    return out


# -- respondents --------------------------------------------------------------------


def _slot_digest(token: str, survey_id: str, kind: str, k: int) -> str:
    message = f"privrank slot v1:{survey_id}:{kind}:{k}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def take_slot(session: Session, survey_id: str, token: str, kind: str, limit: int) -> int | None:
    """Insert the respondent's first free ``kind`` slot, in the caller's transaction; its
    index, or None when all ``limit`` are used. Concurrent requests of one token each get
    a different slot (PostgreSQL: a second insert of one key waits for the first to
    commit, then finds it taken and tries the next)."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    for k in range(limit):
        taken = session.execute(
            insert(ParticipationSlot)
            .values(survey_id=survey_id, digest=_slot_digest(token, survey_id, kind, k))
            .on_conflict_do_nothing()
            .returning(ParticipationSlot.digest)
        ).scalar_one_or_none()
        if taken is not None:
            return k
    return None


def submit(session: Session, survey: Survey, token: str, label: str) -> int:
    """Hold a respondent's suggestion, and publish its batch if it completes one; returns
    how many more the respondent may make. One transaction: the respondent's next free
    slot (the limit), the held suggestion, and the batch it completes — with nothing
    pointing back to the respondent."""
    settings = _settings(survey)
    if survey.status != "open":
        raise Conflict("this survey is closed", code="survey_closed")
    text = _clean(label)
    limit = int(settings["per_respondent"])
    begin_write(session)
    try:
        survey = get_survey(session, survey.id, lock=True)  # one batch is published at a time
        if survey.status != "open":
            raise Conflict("this survey is closed", code="survey_closed")
        _check_room(session, survey, settings)
        k = take_slot(session, survey.id, token, "suggestion", limit)
        if k is None:
            made = "the one suggestion" if limit == 1 else f"the {limit} suggestions"
            raise Conflict(
                f"you have made {made} a respondent may make in this survey", code="suggestion_limit"
            )
        _hold(session, survey, token, "suggestion", label=text)
        _publish(session, survey, "suggestion")
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return limit - k - 1


def _check_room(session: Session, survey: Survey, settings: dict) -> None:
    """Refuse a suggestion when the batch it may complete would take the survey past its
    limits: ``per_hour`` published in this clock hour (429 until the next hour) or
    ``max_total`` published and not rejected (409). Published suggestions carry the hour
    they were published in, so the hour's count is one range read; held ones are not
    counted (at most ``batch`` − 1 respondents' allowance waits), and the room asked for
    is the largest batch that may be published, so that no hour and no survey ever goes
    past its limit. In the caller's transaction, which holds the survey's lock."""
    held_batch = session.scalar(
        select(func.max(HeldContribution.batch)).where(
            HeldContribution.survey_id == survey.id, HeldContribution.kind == "suggestion"
        )
    )
    room = max(int(settings["batch"]), int(held_batch or 0))
    per_hour = int(settings.get("per_hour", PER_HOUR_DEFAULT))
    max_total = int(settings.get("max_total", MAX_TOTAL_DEFAULT))
    mine = Suggestion.survey_id == survey.id
    stored = session.scalar(select(func.count()).where(mine, Suggestion.status != "rejected"))
    if int(stored or 0) + room > max_total:
        raise Conflict(
            f"this survey has taken all the suggestions it accepts ({max_total}); thank you",
            code="suggestions_full",
        )
    now = utcnow()
    hour = to_hour(now)
    this_hour = session.scalar(select(func.count()).where(mine, Suggestion.received_at >= hour))
    if int(this_hour or 0) + room > per_hour:
        raise TooMany(
            f"this survey takes at most {per_hour} suggestions an hour; retry in the next hour",
            retry_after=(hour + timedelta(hours=1) - now).total_seconds(),
            code="suggestions_hourly",
        )


def _author(token: str, survey_id: str, kind: str) -> str:
    message = f"privrank author v1:{survey_id}:{kind}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def _hold(session: Session, survey: Survey, token: str, kind: str, **payload: str) -> None:
    """Hold a contribution with what its sender was told: the batch and the moderation."""
    settings = _settings(survey)
    session.add(
        HeldContribution(
            id=new_id("held"),
            survey_id=survey.id,
            kind=kind,
            author=_author(token, survey.id, kind),
            batch=int(settings["batch"]),
            moderation=settings["moderation"],
            **payload,
        )
    )
    session.flush()


def _shuffled(rows: list) -> list:
    """``rows`` in an order drawn from :mod:`app.stats.entropy` (Fisher–Yates)."""
    out = list(rows)
    for k in range(len(out) - 1, 0, -1):
        j = entropy.randbelow(k + 1)
        out[k], out[j] = out[j], out[k]
    return out


def held_counts(session: Session, survey_id: str) -> dict[str, int]:
    """Held suggestions and flags of a survey, and the distinct respondents behind each kind."""
    rows = session.execute(
        select(HeldContribution.kind, func.count(), func.count(func.distinct(HeldContribution.author)))
        .where(HeldContribution.survey_id == survey_id)
        .group_by(HeldContribution.kind)
    ).all()
    out = {"suggestions": 0, "suggestion_respondents": 0, "flags": 0, "flag_respondents": 0}
    for kind, n, authors in rows:
        out[f"{kind}s"], out[f"{kind}_respondents"] = int(n), int(authors)
    return out


def _publish(session: Session, survey: Survey, kind: str) -> None:
    """Publish a batch of ``kind`` if respondents of ``batch`` different tokens have one
    held: one of each (drawn at random among a respondent's), in random order, with one
    time to the hour; their held rows are deleted. In the caller's transaction, which
    holds the survey's lock. At most ``batch`` − 1 respondents wait between batches, each
    with at most its allowance, so the rows read here are bounded.

    A contribution is *held* (:class:`~app.core.db.models.HeldContribution`) until respondents
    of ``batch`` different tokens (the survey's ``suggestions.batch``, default 5) each
    have one held. The batch is then published in one transaction: one held contribution
    of each of those respondents, in an order drawn from the CSPRNG, all with the same
    time rounded down to the hour (suggestions' ``received_at``; with moderation "after",
    items' ``created_at`` and ``approved_at`` and the positions that follow the drawn
    order). Everything stored afterwards — row order (SQLite's rowid, PostgreSQL's ctid),
    the writing transaction (PostgreSQL's xmin), the times, the item positions, when an
    item was first served and answered — is the same for the batch's k contributions, so
    which of the k respondents sent which is as good as a guess: 1/k. A respondent's
    further contributions wait for later batches; with fewer than k respondents nothing
    is published.

    Nothing held or published names its author: the held row's ``author`` is an
    HMAC-SHA256 keyed with the respondent's bearer token, of which the database holds
    only a hash (it counts distinct respondents, and goes with the batch). The allowance
    (``per_respondent`` suggestions, :data:`FLAGS_PER_RESPONDENT` flags) is kept as
    slots (:func:`take_slot`), HMAC digests keyed with the token over (survey, kind, k).
    The respondent's own row is never written when it suggests or flags, and the
    survey's ``updated_at`` is not touched by it. What the server still sees is the
    request itself: the process holds the token and the text together in memory, and the
    request's time. A database administrator who reads the database *while* a
    contribution is held — or its write-ahead log, or row versions not yet vacuumed —
    sees the held row arrive next to the respondent's answers, as the server does; what
    stays once a batch is published does not tell the k authors apart."""
    settings = _settings(survey)
    held = list(
        session.scalars(
            select(HeldContribution).where(
                HeldContribution.survey_id == survey.id, HeldContribution.kind == kind
            )
        )
    )
    by_author: dict[str, list[HeldContribution]] = {}
    for row in held:
        by_author.setdefault(row.author, []).append(row)
    # The largest batch any waiting contribution was promised: lowering the setting later
    # cannot publish one in a smaller batch than its sender was told.
    if len(by_author) < max([int(settings["batch"])] + [row.batch for row in held]):
        return
    batch = _shuffled([rows[entropy.randbelow(len(rows))] for rows in by_author.values()])
    hour = to_hour(utcnow())
    for row in batch:
        if kind == "suggestion":
            assert row.label is not None
            # Reviewed first if its sender was told so, or the survey now says so.
            after = row.moderation == "after" and settings["moderation"] == "after"
            _store(session, survey, row.label, "after" if after else "before", hour)
        else:
            assert row.item_id is not None
            assert row.digest is not None
            _count_flag(session, survey, settings, row.item_id, row.digest)
        session.delete(row)
    session.flush()


def _store(session: Session, survey: Survey, text: str, moderation: str, hour: datetime) -> None:
    """A published suggestion (and with moderation ``after`` its item), in the caller's transaction.

    Moderation ``before``: published suggestions wait (pending) for a moderator, who
    approves (optionally editing the text), rejects with a reason, or merges one into an
    existing item. ``after``: a published suggestion becomes a live item at once, unless
    an item has the same text (:func:`same_key`; then it is merged into that item);
    moderators hide what should not stay. Near-duplicates are pointed out to moderators
    as hints only (:func:`similar_labels`): the same text once accents and punctuation
    are also folded away (so "C#" and "C++" are a hint, never merged), or a high
    similarity of character trigrams."""
    row = Suggestion(id=new_id("sug"), survey_id=survey.id, label=text, status="pending", received_at=hour)
    if moderation == "after":
        same = _same_item(session, survey.id, text)
        if same is not None:
            row.status, row.item_id = "merged", same.id
            row.decided_at, row.decided_by = hour, "auto"
        elif active_item_count(session, survey) < MAX_ITEMS and not shown_as_translation(
            session, survey.id, text
        ):
            (item,) = append_items(
                session, survey, [text], source="suggested", approved_at=hour, created_at=hour, touch=False
            )
            row.status, row.item_id = "approved", item.id
            row.decided_at, row.decided_by = hour, "auto"
        # Else the survey changed since it arrived (an item's translation now shows the same
        # text, or the survey is full): it waits for a moderator, and the request that
        # completed the batch is answered as any other (checked first, not tried: one
        # transaction writes the whole batch, with no savepoint's transaction id of its own).
    session.add(row)
    session.flush()


def same_key(label: str) -> str:
    """The form in which two labels count as the same item: NFC, case folded, white space
    collapsed ("Night  buses" ≡ "night buses"; "C#" ≠ "C++")."""
    return _SPACE.sub(" ", unicodedata.normalize("NFC", label).casefold()).strip()


def _same_item(session: Session, survey_id: str, text: str) -> Item | None:
    """The item whose label is the same text (:func:`same_key`), if any: from the process's
    item index (plain values, read again only when items were added), so O(1) reads."""
    index = current_item_index(session, survey_id)
    key = same_key(text)
    for k, label in enumerate(index.labels):
        if same_key(label) == key:
            return session.get(Item, index.ids[k])
    return None


def _flag_digest(token: str, item_id: str) -> str:
    return hmac.new(token.encode(), f"privrank flag v1:{item_id}".encode(), hashlib.sha256).hexdigest()


def flag_item(session: Session, survey: Survey, token: str, item_id: str) -> None:
    """Hold a respondent's flag on an item (a repeat counts once; at most
    :data:`FLAGS_PER_RESPONDENT` items each), and publish its batch if it completes one.
    One transaction, which writes the respondent's slot, the held flag and the batch —
    never the respondent's row.

    The flag is stored as HMAC-SHA256 keyed with the respondent's token over the item id;
    a repeat from the same token finds its digest (held or published). A *suggested* item
    whose distinct published flags reach the survey's ``flag_threshold`` goes back to
    review: it is withheld (not served) until a moderator restores or hides it. Seed and
    admin-added items collect flags for the moderators to see but stay live: otherwise a
    few throw-away registrations could take any item out of a survey. Closed surveys take
    no flags."""
    _settings(survey)
    if survey.status != "open":
        raise Conflict("this survey is closed", code="survey_closed")
    _item(session, survey.id, item_id)  # NotFound unless the survey has it
    digest = _flag_digest(token, item_id)
    if _flagged(session, survey.id, item_id, digest):
        return  # flagged before: counted once
    begin_write(session)
    try:
        survey = get_survey(session, survey.id, lock=True)  # one batch is published at a time
        if survey.status != "open":
            raise Conflict("this survey is closed", code="survey_closed")
        if _flagged(session, survey.id, item_id, digest):  # a concurrent repeat was first
            session.rollback()
            return
        if take_slot(session, survey.id, token, "flag", FLAGS_PER_RESPONDENT) is None:
            raise Conflict(
                f"you have flagged the {FLAGS_PER_RESPONDENT} items a respondent may flag", code="flag_limit"
            )
        _hold(session, survey, token, "flag", item_id=item_id, digest=digest)
        _publish(session, survey, "flag")
        session.commit()
    except BaseException:
        session.rollback()
        raise


def _flagged(session: Session, survey_id: str, item_id: str, digest: str) -> bool:
    """Whether this respondent's flag on the item is published or held."""
    if session.get(ItemFlag, (item_id, digest)) is not None:
        return True
    return (
        session.scalar(
            select(HeldContribution.id).where(
                HeldContribution.survey_id == survey_id,
                HeldContribution.kind == "flag",
                HeldContribution.digest == digest,
            )
        )
        is not None
    )


def _count_flag(session: Session, survey: Survey, settings: dict, item_id: str, digest: str) -> None:
    """A published flag: its digest, the item's count, and review at the threshold."""
    session.add(ItemFlag(item_id=item_id, digest=digest))
    item = session.get(Item, item_id, populate_existing=True)
    if item is None:  # pragma: no cover - items are never deleted
        raise NotFound(f"no item {item_id!r} in this survey")
    item.flags += 1
    if item.source == "suggested" and item.status == "live" and item.flags >= int(settings["flag_threshold"]):
        item.status = "review"
        _withhold(survey, item.position, True, touch=False)
    session.flush()  # a batch may count several flags on one item: each reads the last


# -- moderators ---------------------------------------------------------------------


def _withhold(survey: Survey, position: int, withheld: bool, touch: bool = True) -> None:
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


def _item(session: Session, survey_id: str, item_id: str, populate_existing: bool = False) -> Item:
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
    text = _clean(label)
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
    text = None if label is None else _clean(label)
    begin_write(session)
    survey = get_survey(session, survey_id, lock=True)
    row = _pending(session, survey_id, suggestion_id)
    text = text or row.label
    same = _same_item(session, survey_id, text)
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
    item = _item(session, survey_id, item_id)
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
    item = _item(session, survey_id, item_id, populate_existing=True)
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
    _withhold(survey, item.position, status != "live")
    session.commit()
    return item
