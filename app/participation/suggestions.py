"""Participatory surveys, the respondents' side: suggestions and flags (docs/how-to/moderate.md).

**Unlinkable authorship** ("Who suggested what cannot be told"; docs/privacy.md §1). A
suggestion or a flag is held until ``batch`` different respondents each have one, then
published together in a random order with one time to the hour, so which of the k
respondents sent which is a 1/k guess; nothing held or published names its author
(:func:`_publish` gives what is stored and what the server still sees). **Flags**
(:func:`flag_item`): once per respondent and item; enough of them send a suggested item
back to review. A published suggestion is stored as the moderation says (:func:`_store`).
"""

from __future__ import annotations

import hashlib
import hmac
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
    new_id,
    to_hour,
    utcnow,
)
from ..core.db.session import begin_write
from ..core.errors import Conflict, NotFound, TooMany
from ..core.limits import MAX_ITEMS
from ..stats import entropy
from ..surveys.items import active_item_count, append_items
from ..surveys.labels import shown_as_translation
from ..surveys.service import MAX_TOTAL_DEFAULT, PER_HOUR_DEFAULT, get_survey
from .labels import clean_label, same_item
from .moderation import survey_item, withhold

__all__ = [
    "FLAGS_PER_RESPONDENT",
    "flag_item",
    "held_counts",
    "submit",
    "take_slot",
]

#: Most flags one respondent may raise in a survey.
FLAGS_PER_RESPONDENT = 10


def _settings(survey: Survey) -> dict:
    s = survey.suggestions
    if not s or not s.get("enabled"):
        raise Conflict("this survey does not take suggestions", code="suggestions_off")
    return s


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
    text = clean_label(label)
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
    an item has the same text (:func:`~.labels.same_key`; then it is merged into that item);
    moderators hide what should not stay. Near-duplicates are pointed out to moderators
    as hints only (:func:`~.labels.similar_labels`): the same text once accents and punctuation
    are also folded away (so "C#" and "C++" are a hint, never merged), or a high
    similarity of character trigrams."""
    row = Suggestion(id=new_id("sug"), survey_id=survey.id, label=text, status="pending", received_at=hour)
    if moderation == "after":
        same = same_item(session, survey.id, text)
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
    survey_item(session, survey.id, item_id)  # NotFound unless the survey has it
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
        withhold(survey, item.position, True, touch=False)
    session.flush()  # a batch may count several flags on one item: each reads the last
