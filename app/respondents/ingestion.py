"""Private ingestion of pairwise answers (local model; docs/mechanisms.md §1).

Each comparison is randomized before it is stored: either the server flips it on
arrival with the respondent's ε (OS CSPRNG, :func:`app.stats.privatize`), or the
client already did and declares its ε. The true answer exists only in memory
for the duration of the request; it is never stored, logged, or put in an error
message (errors name the comparison's position and its pair, never its winner).

A batch is all-or-nothing: the budget update, the comparisons, the pending batch
for aggregation and the idempotency record commit together or not at all.
"""

from __future__ import annotations

import json
import logging
import operator
from collections.abc import Mapping, Sequence
from itertools import chain
from operator import attrgetter, eq
from typing import NamedTuple, Protocol

import numpy as np
from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

from ..analysis.aggregation import encode_batch
from ..core import idempotency
from ..core.db.models import Comparison, PendingBatch, Respondent, Survey, utcnow
from ..core.errors import Conflict, Invalid
from ..core.idempotency import Receipt, Stored
from ..core.limits import MAX_BATCH
from ..goals.service import COUNT_I, COUNT_J, COUNT_PAIR, read_ticket
from ..stats import privatize
from ..surveys.items import ItemIndex, current_item_index, known_item_index
from .service import answer_epsilon
from .spending import Purchase, spend_and_store

__all__ = ["Answer", "ComparisonIn", "submit_responses"]

log = logging.getLogger("privrank.ingestion")


class Answer(Protocol):
    """One pairwise answer as a request gives it: two item ids and the winner's, and the
    ticket ``GET …/pairs`` served the pair with (goal surveys; app.goals.service)."""

    @property
    def a(self) -> str: ...
    @property
    def b(self) -> str: ...
    @property
    def winner(self) -> str: ...
    @property
    def ticket(self) -> str | None: ...


class ComparisonIn(NamedTuple):
    """An :class:`Answer` (a tuple, so that a batch's hundreds are made by C calls)."""

    a: str
    b: str
    winner: str
    ticket: str | None = None


def _ticket_flags(
    survey: Survey,
    respondent_id: str,
    comparisons: Sequence[Answer],
    i: np.ndarray,
    j: np.ndarray,
    m: int,
) -> np.ndarray:
    """Which items each answer counts for in the goal's certificate (goal surveys), from
    the tickets; 422 for a ticket that does not vouch for its pair. A ticket issued for
    another number of items counts for nothing (items were added). Flags for items the
    respondent answered about are dropped when the answers are stored
    (:func:`_drop_repeats`)."""
    flags = np.zeros(len(comparisons), dtype=np.uint8)
    for k, c in enumerate(comparisons):
        if c.ticket is None:
            continue
        got = read_ticket(survey.ticket_key, survey.id, respondent_id, int(i[k]), int(j[k]), c.ticket)
        if got is None:
            raise Invalid(
                f"comparisons[{k}].ticket does not belong to this pair and respondent: send the ticket "
                "GET …/pairs served with the pair, or none"
            )
        if got[0] == m:
            flags[k] = got[1]
    return flags


def _drop_repeats(
    flags: np.ndarray, i: np.ndarray, j: np.ndarray, seen: np.ndarray | None = None
) -> np.ndarray:
    """``flags`` without the bits of items flagged more than once, or in ``seen`` (items
    the respondent answered about before). A pair's bit (pairwise certificate) flags both
    its items, and goes when either does: a respondent's counted pairs stay on disjoint
    items it had not answered about."""
    ci, cj = (flags & COUNT_I) != 0, (flags & COUNT_J) != 0
    cp = (flags & COUNT_PAIR) != 0
    items = np.concatenate((i[ci | cp], j[cj | cp]))
    values, counts = np.unique(items, return_counts=True)
    bad = values[counts > 1]
    if seen is not None:
        bad = np.union1d(bad, seen)
    drop_i = ci & np.isin(i, bad)
    drop_j = cj & np.isin(j, bad)
    drop_p = cp & (np.isin(i, bad) | np.isin(j, bad))
    return (flags & ~(drop_i * COUNT_I + drop_j * COUNT_J + drop_p * COUNT_PAIR)).astype(np.uint8)


def _answered_items(session: Session, respondent_id: str) -> np.ndarray:
    """The items of every pair the respondent answered (read under its row lock)."""
    rows = session.execute(
        select(Comparison.i, Comparison.j).where(Comparison.respondent_id == respondent_id)
    ).all()
    return np.unique(np.array(rows, dtype=np.int64).ravel())


_A, _B, _WINNER = attrgetter("a"), attrgetter("b"), attrgetter("winner")


def _fingerprint(privatized: bool, epsilon: float | None, comparisons: Sequence[Answer]) -> str:
    """What identifies a request for Idempotency-Key: its mode, ε and *set* of pairs.

    Never its answers — nor anything a client might correlate with them, such as
    the order of the comparisons or which item it put first (a hash cannot hide
    a one-bit answer): the pairs are taken unordered and sorted.
    """
    a, b = list(map(_A, comparisons)), list(map(_B, comparisons))
    pairs = sorted(zip(map(min, a, b), map(max, a, b), strict=True))  # JSON: as lists
    return idempotency.fingerprint(privatized=privatized, epsilon=epsilon, pairs=pairs)


def check_open_pairwise(status: str, kind: str, model: str) -> None:
    if status != "open":
        raise Conflict("the survey is closed")
    if kind != "pairwise":
        raise Conflict("this survey asks for rankings, not pairwise comparisons")
    if model not in ("local", "central"):  # pragma: no cover - the schema allows no other
        raise Conflict("unknown privacy model")


def canonical(
    comparisons: Sequence[Answer],
    positions: Mapping[str, int],
    where=lambda k: f"comparisons[{k}]",
    fields: tuple[str, str, str] = ("a", "b", "winner"),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item positions (i < j) and y = 1 when item i won; Invalid on bad content.

    ``where(k)`` names the k-th comparison and ``fields`` its three fields in
    error messages. The winner is never quoted back.
    """
    a, b = list(map(_A, comparisons)), list(map(_B, comparisons))
    at_a, at_b = list(map(positions.get, a)), list(map(positions.get, b))
    a_won = list(map(eq, map(_WINNER, comparisons), a))
    b_won = list(map(eq, map(_WINNER, comparisons), b))
    if None not in at_a and None not in at_b and all(map(operator.or_, a_won, b_won)):
        first, second = np.array(at_a, dtype=np.int64), np.array(at_b, dtype=np.int64)
        if not (first == second).any():
            # Column-wise; any bad comparison is found, and named, by the loop below.
            i, j = np.minimum(first, second), np.maximum(first, second)
            y = (np.where(np.array(a_won, dtype=bool), first, second) == i).astype(np.int8)
            return i, j, y
    n = len(comparisons)
    i = np.empty(n, dtype=np.int64)
    j = np.empty(n, dtype=np.int64)
    y = np.empty(n, dtype=np.int8)
    fa, fb, fw = fields
    for k, c in enumerate(comparisons):
        pa = positions.get(c.a)
        pb = positions.get(c.b)
        if pa is None:
            raise Invalid(f"{where(k)}: {fa} is not an item of this survey")
        if pb is None:
            raise Invalid(f"{where(k)}: {fb} is not an item of this survey")
        if pa == pb:
            raise Invalid(f"{where(k)}: {fa} and {fb} must be two different items")
        if c.winner == c.a:
            w = pa
        elif c.winner == c.b:
            w = pb
        else:
            raise Invalid(f"{where(k)}: {fw} must be one of its two items")
        i[k], j[k] = min(pa, pb), max(pa, pb)
        y[k] = 1 if w == i[k] else 0
    return i, j, y


def first_repeat(keys: np.ndarray) -> int | None:
    """Index of the first element equal to an earlier one, or None."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    repeats = np.flatnonzero(first[inverse] != np.arange(keys.size))
    return int(repeats[0]) if repeats.size else None


def _item_index(session: Session, survey_id: str, comparisons: Sequence[Answer]) -> ItemIndex:
    """The survey's items (plain values, cached per process), read again when a
    comparison names an item the cached index lacks (items added since)."""
    return known_item_index(
        session,
        survey_id,
        lambda idx: all(map(idx.positions.__contains__, chain(map(_A, comparisons), map(_B, comparisons)))),
    )


#: One statement, one round trip (PostgreSQL): the comparisons (array-bound, so the
#: driver sends three array literals instead of a row per answer), the pending batch, and the
#: Idempotency-Key's record when there is one. Data-modifying CTEs all run.
_STORE_BATCH_PG = text(
    """
    WITH stored AS (
        INSERT INTO comparisons (survey_id, respondent_id, i, j, y_tilde, epsilon, source, created_at)
        SELECT :survey_id, :respondent_id, t.i, t.j, t.y, CAST(:epsilon AS double precision), :source, :now
        FROM unnest(CAST(:i AS integer[]), CAST(:j AS integer[]), CAST(:y AS smallint[])) AS t (i, j, y)
    ), pending AS (
        INSERT INTO pending_batches (survey_id, n, payload) VALUES (:survey_id, :n, :payload)
    )
    INSERT INTO idempotency_keys (respondent_id, key, fingerprint, status_code, response, created_at)
    SELECT :respondent_id, CAST(:key AS text), :fingerprint, 201, CAST(:response AS json), :now
    WHERE CAST(:key AS text) IS NOT NULL
    """
)


def _array_literal(values: np.ndarray) -> str:
    """An integer array as PostgreSQL's array literal (``{1,2,3}``), which the statement
    casts: the driver sends one string instead of adapting each element of a list."""
    return "{" + ",".join(map(str, values.tolist())) + "}"


def _store_batch(
    session: Session,
    survey_id: str,
    respondent_id: str,
    i: np.ndarray,
    j: np.ndarray,
    y_tilde: np.ndarray,
    eps: float | None,
    source: str,
    payload: bytes,
    idempotency_key: str | None,
    fingerprint: str,
    receipt: Receipt,
) -> bool:
    """Append the comparisons and the packed pending batch in the session's transaction;
    True when the idempotency record went in too (PostgreSQL: one statement for all three;
    elsewhere Core inserts, and the caller adds the record). A pair this respondent
    answered before raises IntegrityError (uq_comparisons_respondent_pair)."""
    now = utcnow()
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            _STORE_BATCH_PG,
            {
                "survey_id": survey_id,
                "respondent_id": respondent_id,
                "epsilon": eps,
                "source": source,
                "now": now,
                "i": _array_literal(i),
                "j": _array_literal(j),
                "y": _array_literal(y_tilde),
                "n": int(i.size),
                "payload": payload,
                "key": idempotency_key,
                "fingerprint": fingerprint,
                "response": json.dumps(receipt.as_dict()),
            },
        )
        return True
    session.execute(
        insert(Comparison),
        [
            {
                "survey_id": survey_id,
                "respondent_id": respondent_id,
                "i": a,
                "j": b,
                "y_tilde": t,
                "epsilon": eps,
                "source": source,
                "created_at": now,
            }
            for a, b, t in zip(i.tolist(), j.tolist(), y_tilde.tolist(), strict=True)
        ],
    )
    session.add(PendingBatch(survey_id=survey_id, n=int(i.size), payload=payload))
    return False


def _repeated_pair(session: Session, respondent_id: str, i, j, items: ItemIndex) -> Conflict:
    """The Conflict for a batch that repeats a pair this respondent answered before."""
    answered = set(
        map(
            tuple,
            session.execute(
                select(Comparison.i, Comparison.j).where(Comparison.respondent_id == respondent_id)
            ),
        )
    )
    session.rollback()
    for k in range(len(i)):
        if (int(i[k]), int(j[k])) in answered:
            return Conflict(
                f"comparisons[{k}]: this respondent already answered the pair "
                f"({items.ids[i[k]]}, {items.ids[j[k]]})"
            )
    return Conflict("a pair in this request was answered concurrently by the same respondent")


def submit_responses(
    session: Session,
    survey: Survey,
    respondent: Respondent,
    comparisons: Sequence[Answer],
    privatized: bool,
    epsilon: float | None,
    idempotency_key: str | None = None,
    max_batch: int = MAX_BATCH,
) -> Stored:
    """Validate, privatize (unless the client did) and store one batch of answers
    (through the one write path, :func:`app.respondents.spending.spend_and_store`)."""
    shape = _fingerprint(privatized, epsilon, comparisons)
    if survey.status != "open":
        # A retry of an answer acknowledged before the survey closed is still answered.
        replayed = idempotency.replay(session, respondent.id, idempotency_key, shape)
        if replayed is not None:
            return replayed
    check_open_pairwise(survey.status, survey.kind, survey.privacy_model)
    if not 1 <= len(comparisons) <= max_batch:
        raise Invalid(f"send between 1 and {max_batch} comparisons per request")
    central = survey.privacy_model == "central"
    if central:
        if privatized or epsilon is not None:
            raise Invalid(
                "this survey uses the central privacy model: send the true answers (privatized=false, no "
                "epsilon); they are never returned, and results leave only as differentially private releases"
            )
        eps = None
    else:
        eps = answer_epsilon(survey, respondent, privatized, epsilon)
    goal = survey.goal is not None and not central
    items = current_item_index(session, survey.id) if goal else _item_index(session, survey.id, comparisons)
    i, j, y = canonical(comparisons, items.positions)
    if survey.withheld:
        withheld = np.isin(i, survey.withheld) | np.isin(j, survey.withheld)
        if withheld.any():
            raise Conflict(
                f"comparisons[{int(np.flatnonzero(withheld)[0])}]: one of its items is withheld by the "
                "moderators (hidden, or under review) and takes no answers"
            )
    flags = _ticket_flags(survey, respondent.id, comparisons, i, j, len(items)) if goal else None
    k = first_repeat(i * len(items) + j)
    if k is not None:
        raise Conflict(
            f"comparisons[{k}] repeats a pair already in this request ({items.ids[i[k]]}, {items.ids[j[k]]})"
        )
    # eps is None exactly for a central survey.
    if eps is None:
        y_tilde, source = y, "central"  # the operator is trusted with true answers
    elif privatized:
        y_tilde, source = y, "client"
    else:
        y_tilde, source = privatize(y, eps), "server"  # OS CSPRNG
    del y
    n = len(comparisons)
    # Central answers are true answers: ε = ∞ for the statistics (z = ỹ = y).
    epsilons = np.full(n, np.inf if eps is None else eps)

    def store(session: Session, receipt: Receipt) -> bool:
        # A pair this respondent answered before violates uq_comparisons_respondent_pair:
        # the database checks it (no scan of the respondent's answers); see `duplicate`.
        if flags is not None and flags.any():
            # Under the respondent's row lock: an item answered about since the pair was
            # served, or flagged twice here, no longer counts (one per respondent and item).
            kept = _drop_repeats(flags, i, j, _answered_items(session, respondent.id))
            batch = encode_batch(i, j, y_tilde, epsilons, kept, len(items), respondents=[respondent.id])
        else:
            batch = encode_batch(i, j, y_tilde, epsilons, respondents=[respondent.id])
        return _store_batch(
            session,
            survey.id,
            respondent.id,
            i,
            j,
            y_tilde,
            eps,
            source,
            batch,
            idempotency_key,
            shape,
            receipt,
        )

    stored = spend_and_store(
        session,
        survey,
        respondent,
        Purchase(accepted=n, cost=0.0 if eps is None else eps * n, count=n, what="this request"),
        key=idempotency_key,
        shape=shape,
        check_survey=check_open_pairwise,
        store=store,
        duplicate=lambda session: _repeated_pair(session, respondent.id, i, j, items),
    )
    if not stored.replayed:
        log.info("survey %s: stored %d comparisons (%s-privatized)", survey.id, n, source)
    return stored
