"""The one write path of answers: spend the respondent's budget and store what it bought.

Pairwise batches (:mod:`.ingestion`) and rankings (:mod:`.ranking_surveys`) go through
:func:`spend_and_store`, one write transaction whose steps (idempotent replay, the
survey's shared lock, the respondent's conditional counter update, the store) its
docstring gives; CSV imports spend many respondents' budgets at once with the same
conditions (:func:`spend_conditions`) and the same refusals (:func:`over_limit`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Float,
    Integer,
    Select,
    String,
    Table,
    Update,
    bindparam,
    exists,
    select,
    true,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from ..core import idempotency
from ..core.db.models import Base, IdempotencyRecord, Respondent, Survey
from ..core.db.session import begin_write
from ..core.errors import Conflict
from ..core.idempotency import Receipt, Stored
from .service import reload_respondent

__all__ = [
    "BUDGET_SLACK",
    "Purchase",
    "exceeded",
    "lock_survey",
    "over_limit",
    "receipt",
    "spend_and_store",
    "spend_conditions",
    "table_of",
]


def table_of(model: type[Base]) -> Table:
    """The Core table a model maps (declarative classes type ``__table__`` as any FromClause)."""
    table = model.__table__
    if not isinstance(table, Table):  # pragma: no cover - every model here maps one table
        raise TypeError(f"{model.__name__} does not map a single table")
    return table


#: The tables the write path reads and updates with Core statements.
_RESPONDENTS = table_of(Respondent)
_SURVEYS = table_of(Survey)
_KEYS = table_of(IdempotencyRecord)

#: Floating-point slack of the budget comparison (ε values are sums of floats).
BUDGET_SLACK = 1e-9


@dataclass(frozen=True)
class Purchase:
    """What a request buys: ``count`` answers (counted towards a central survey's L)
    costing ``cost`` ε (0 in the central model), described as ``what`` in refusals."""

    accepted: int
    cost: float
    count: int
    what: str


class Limits(Protocol):
    """A survey's limits on a respondent (a :class:`Survey`, or bound parameters)."""

    @property
    def respondent_budget(self) -> Any: ...
    @property
    def max_comparisons(self) -> Any: ...


def spend_conditions(
    survey: Limits, spent: ColumnElement, answered: ColumnElement, cost, count
) -> list[ColumnElement[bool]]:
    """The conditions under which a respondent whose counters are ``spent`` and
    ``answered`` may buy ``count`` answers costing ``cost`` (values or bound parameters)."""
    conditions: list[ColumnElement[bool]] = []
    if survey.respondent_budget is not None:
        conditions.append(spent + cost <= survey.respondent_budget + BUDGET_SLACK)
    if survey.max_comparisons is not None:  # central model: the contribution bound L
        conditions.append(answered + count <= survey.max_comparisons)
    return conditions


def exceeded(survey: Survey, spent: float, answered: int, cost: float, count: int) -> str | None:
    """Which limit a respondent with ``spent`` ε and ``answered`` answers so far would pass by
    buying ``count`` more costing ``cost``: ``"comparisons"`` (a central survey's L),
    ``"budget"`` (the respondent budget), or None."""
    cap = survey.max_comparisons
    if cap is not None and answered + count > cap:
        return "comparisons"
    budget = survey.respondent_budget
    if budget is not None and spent + cost > budget + BUDGET_SLACK:
        return "budget"
    return None


def over_limit(
    survey: Survey, spent: float, answered: int, cost: float, count: int, what: str
) -> Conflict | None:
    """The refusal of a purchase :func:`exceeded` finds over a limit; None when it may go ahead."""
    limit = exceeded(survey, spent, answered, cost, count)
    if limit == "comparisons":
        cap = survey.max_comparisons or 0
        return Conflict(f"a respondent may give at most {cap} comparisons; {max(0, cap - answered)} remain")
    if limit == "budget":
        left = max(0.0, (survey.respondent_budget or 0.0) - spent)
        return Conflict(f"over the privacy budget: {what} costs epsilon {cost:g}, {left:g} remains")
    return None


def receipt(survey: Survey, purchase: Purchase, spent: float, answered: int) -> Receipt:
    """The receipt of a purchase, from the respondent's counters after it."""
    if survey.privacy_model == "central":
        cap = survey.max_comparisons
        return Receipt(purchase.accepted, None, None, None, None if cap is None else cap - answered)
    budget = survey.respondent_budget
    remaining = None if budget is None else max(0.0, budget - spent)
    return Receipt(purchase.accepted, purchase.cost, spent, remaining, None)


def lock_survey(session: Session, survey_id: str, check: Callable[[str, str, str], None]) -> None:
    """Re-read the survey with a shared row lock (PostgreSQL ``FOR SHARE``; SQLite's write
    lock already excludes others) and ``check(status, kind, privacy_model)`` it."""
    surveys = _SURVEYS.c
    row = session.execute(
        select(surveys.status, surveys.kind, surveys.privacy_model)
        .where(surveys.id == survey_id)
        .with_for_update(read=True)
    ).one()
    check(row.status, row.kind, row.privacy_model)


def _spend(survey: Survey, respondent_id: str, purchase: Purchase) -> Update:
    """Step 3's conditional ``UPDATE`` of the respondent's counters (a Core statement: the
    ORM's bulk UPDATE machinery cost more than the statement), without its RETURNING."""
    table = _RESPONDENTS.c
    return (
        update(_RESPONDENTS)
        .where(
            table.id == respondent_id,
            *spend_conditions(
                survey, table.epsilon_spent, table.n_comparisons, purchase.cost, purchase.count
            ),
        )
        .values(
            epsilon_spent=table.epsilon_spent + purchase.cost,
            n_comparisons=table.n_comparisons + purchase.count,
        )
    )


@dataclass(frozen=True)
class _Limits:
    """A survey's limits as :func:`spend_conditions` reads them (here: bound parameters)."""

    respondent_budget: BindParameter | None
    max_comparisons: BindParameter | None


@functools.cache
def _spend_statement(budget: bool, cap: bool) -> Select:
    """Steps 1-3 as one PostgreSQL statement: the survey's row under ``FOR SHARE`` (taken
    first: the UPDATE's condition reads it), the key's record, and the UPDATE's RETURNING
    — one row, whose record and RETURNING columns are NULL when there are none.

    Built once per kind of limit (a respondent ``budget``, a ``cap`` on answers), with
    bound parameters (:func:`_spend_parameters`): building it and its cache key on every
    request cost a tenth of a batch's worker CPU."""
    surveys, keys, table = _SURVEYS.c, _KEYS.c, _RESPONDENTS.c
    respondent_id, cost, count = (
        bindparam("rid", type_=String),
        bindparam("cost", type_=Float),
        bindparam("n", type_=Integer),
    )
    locked = (
        select(surveys.status, surveys.kind, surveys.privacy_model)
        .where(surveys.id == bindparam("sid", type_=String))
        .with_for_update(read=True)
        .cte("locked")
    )
    record = (
        select(keys.fingerprint, keys.response)
        .where(keys.respondent_id == respondent_id, keys.key == bindparam("key", type_=String))
        .cte("record")
    )
    limits = _Limits(
        bindparam("budget", type_=Float) if budget else None, bindparam("cap", type_=Integer) if cap else None
    )
    spent = (
        update(_RESPONDENTS)
        .where(
            table.id == respondent_id,
            *spend_conditions(limits, table.epsilon_spent, table.n_comparisons, cost, count),
            exists(locked.select()),
        )
        .values(epsilon_spent=table.epsilon_spent + cost, n_comparisons=table.n_comparisons + count)
        .returning(table.epsilon_spent, table.n_comparisons)
        .cte("spent")
    )
    return select(
        locked.c.status,
        locked.c.kind,
        locked.c.privacy_model,
        record.c.fingerprint,
        record.c.response,
        spent.c.epsilon_spent,
        spent.c.n_comparisons,
    ).select_from(locked.outerjoin(record, true()).outerjoin(spent, true()))


def _spend_parameters(survey: Survey, respondent_id: str, purchase: Purchase, key: str | None) -> dict:
    """The parameters of :func:`_spend_statement` for this purchase."""
    return {
        "sid": survey.id,
        "rid": respondent_id,
        "key": key,
        "cost": purchase.cost,
        "n": purchase.count,
        "budget": survey.respondent_budget,
        "cap": survey.max_comparisons,
    }


def _spend_in_steps(
    session: Session,
    survey: Survey,
    respondent: Respondent,
    purchase: Purchase,
    key: str | None,
    shape: str,
    check_survey: Callable[[str, str, str], None],
    check_more: Callable[[Session], None] | None,
) -> Stored | tuple[float, int] | None:
    """Steps 1-3 one statement each: a replay, or the counters the UPDATE returned (None:
    no row, over a limit or a copy's replay)."""
    # A retry of a request that committed gets its first answer. Two copies racing
    # both get past this; the second then waits on the respondent's row (the UPDATE
    # below) and fails on a unique constraint or the budget, and is replayed there.
    replayed = idempotency.replay(session, respondent.id, key, shape)
    if replayed is not None:
        session.rollback()
        return replayed
    lock_survey(session, survey.id, check_survey)
    if check_more is not None:
        try:
            check_more(session)
        except Conflict:
            # What it refuses (a ranking already stored) may be what a copy of this
            # request committed since the replay check above: then this is a retry.
            # Each statement sees what committed before it (READ COMMITTED), so the
            # key's record is read again here, before any refusal.
            replayed = idempotency.replay(session, respondent.id, key, shape)
            if replayed is not None:
                session.rollback()
                return replayed
            raise
    table = _RESPONDENTS.c
    row = session.execute(
        _spend(survey, respondent.id, purchase).returning(table.epsilon_spent, table.n_comparisons)
    ).one_or_none()
    return None if row is None else (row[0], row[1])


def spend_and_store(
    session: Session,
    survey: Survey,
    respondent: Respondent,
    purchase: Purchase,
    *,
    key: str | None,
    shape: str,
    check_survey: Callable[[str, str, str], None],
    store: Callable[[Session, Receipt], bool],
    duplicate: Callable[[Session], Conflict],
    check_more: Callable[[Session], None] | None = None,
) -> Stored:
    """Spend ``purchase`` from ``respondent``'s budget and ``store`` what it bought, in one
    transaction. ``store(session, receipt)`` inserts the rows and
    returns whether it also wrote the key's record; ``duplicate(session)`` builds the
    conflict for a unique constraint the store violated (the transaction is rolled back
    before it is called); ``check_more(session)`` runs after the survey's lock.

    The steps, in one write transaction:

    1. a retry of a request that committed gets its first answer (:mod:`.idempotency`);
    2. the survey row is re-read under a shared lock and must still take this kind of
       answer (closing takes the conflicting lock, so once ``PATCH status=closed`` has
       answered, nothing more is stored) — plus any check of the caller's, whose
       conflict (a ranking already stored) is a replay when a copy of this request
       committed since step 1, and the key's conflict when a request of another shape
       did;
    3. the respondent's counters grow by a conditional ``UPDATE … RETURNING``: its row
       lock serializes one respondent's concurrent requests and its condition holds the
       budget (Σε ≤ ``respondent_budget``; central model: at most L answers), so there is
       no read-then-write race. No row back means over the limit: 409, unless a copy of
       this very request committed meanwhile (then it is replayed);
    4. the caller stores the answers (and the key's record), then the transaction
       commits. A unique constraint the store violates (a pair answered before, a second
       ranking, a copy racing with the same key) rolls everything back: replayed if a
       copy with the key committed, else the caller's conflict.
    """
    try:
        begin_write(session)
        if check_more is None and session.get_bind().dialect.name == "postgresql":
            # Steps 1-3 in one statement (one round trip); the same checks, in the same
            # order, on what it read. A refusal rolls its UPDATE back.
            spend = _spend_statement(survey.respondent_budget is not None, survey.max_comparisons is not None)
            found = session.execute(spend, _spend_parameters(survey, respondent.id, purchase, key)).one()
            if found.fingerprint is not None:
                session.rollback()
                return idempotency.replayed(found.fingerprint, found.response, shape)
            check_survey(found.status, found.kind, found.privacy_model)
            row = None if found.epsilon_spent is None else (found.epsilon_spent, found.n_comparisons)
        else:
            stepped = _spend_in_steps(
                session, survey, respondent, purchase, key, shape, check_survey, check_more
            )
            if isinstance(stepped, Stored):
                return stepped
            row = stepped
        if row is None:
            # A copy of this request that committed while we waited for the row lock may
            # have spent the budget: then this is a retry (READ COMMITTED sees it).
            replayed = idempotency.replay(session, respondent.id, key, shape)
            if replayed is not None:
                session.rollback()
                return replayed
            now = reload_respondent(session, respondent.id)
            refusal = over_limit(
                survey, now.epsilon_spent, now.n_comparisons, purchase.cost, purchase.count, purchase.what
            )
            raise refusal or Conflict(f"{purchase.what} exceeds the respondent's limits")
        # SQLite may hand back an integral REAL as int.
        bought = receipt(survey, purchase, float(row[0]), int(row[1]))
        if respondent in session:  # the loaded row as the UPDATE left it
            set_committed_value(respondent, "epsilon_spent", float(row[0]))
            set_committed_value(respondent, "n_comparisons", int(row[1]))
        if not store(session, bought):
            idempotency.remember(session, respondent.id, key, shape, bought)
        session.commit()
    except IntegrityError:
        session.rollback()
        replayed = idempotency.replay(session, respondent.id, key, shape)
        if replayed is not None:
            return replayed
        raise duplicate(session) from None
    except BaseException:
        session.rollback()
        raise
    return Stored(bought)
