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

import csv
import hashlib
import io
import json
import logging
import math
import operator
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from operator import attrgetter, eq
from typing import IO, NamedTuple, Protocol

import numpy as np
from sqlalchemy import Connection, Dialect, UpdateBase, bindparam, insert, or_, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..analysis.aggregation import encode_batch
from ..analysis.results import ImportOut
from ..core import idempotency
from ..core.db.models import Base, Comparison, PendingBatch, Respondent, Survey, new_id, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid
from ..core.idempotency import Receipt, Stored
from ..core.limits import MAX_BATCH
from ..goals.service import COUNT_I, COUNT_J, COUNT_PAIR, read_ticket
from ..stats import privatize
from ..surveys.items import ItemIndex, current_item_index, item_index, known_item_index
from ..surveys.labels import normalize_label
from .service import answer_epsilon, check_epsilon
from .spending import Purchase, exceeded, lock_survey, spend_and_store, spend_conditions, table_of

__all__ = ["Answer", "ComparisonIn", "import_comparisons", "submit_responses"]

log = logging.getLogger("privrank.ingestion")

#: Floating-point slack when comparing a sum of ε with the budget.
#: Rows per pending batch written by an import (keeps each payload under ~1.7 MB).
IMPORT_CHUNK = 100_000


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


def _check_open_pairwise(status: str, kind: str, model: str) -> None:
    if status != "open":
        raise Conflict("the survey is closed")
    if kind != "pairwise":
        raise Conflict("this survey asks for rankings, not pairwise comparisons")
    if model not in ("local", "central"):  # pragma: no cover - the schema allows no other
        raise Conflict("unknown privacy model")


def _canonical(
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


def _first_repeat(keys: np.ndarray) -> int | None:
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
    _check_open_pairwise(survey.status, survey.kind, survey.privacy_model)
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
    i, j, y = _canonical(comparisons, items.positions)
    if survey.withheld:
        withheld = np.isin(i, survey.withheld) | np.isin(j, survey.withheld)
        if withheld.any():
            raise Conflict(
                f"comparisons[{int(np.flatnonzero(withheld)[0])}]: one of its items is withheld by the "
                "moderators (hidden, or under review) and takes no answers"
            )
    flags = _ticket_flags(survey, respondent.id, comparisons, i, j, len(items)) if goal else None
    k = _first_repeat(i * len(items) + j)
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
        check_survey=_check_open_pairwise,
        store=store,
        duplicate=lambda session: _repeated_pair(session, respondent.id, i, j, items),
    )
    if not stored.replayed:
        log.info("survey %s: stored %d comparisons (%s-privatized)", survey.id, n, source)
    return stored


# -- bulk import ---------------------------------------------------------------

_REQUIRED = ("respondent", "item_a", "item_b", "winner", "epsilon")
#: Pseudonyms in imported CSVs: plain identifiers (no spreadsheet formulas, no control characters).
_PSEUDONYM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}")
#: Bound parameters per IN list (PostgreSQL allows at most 65,535 per statement).
_IN_CHUNK = 10_000


def _chunks(values: list, size: int = _IN_CHUNK):
    for start in range(0, len(values), size):
        yield values[start : start + size]


#: Characters one CSV record (the header too) may take, in this import and the ballot
#: import. csv.reader makes a field of every comma and holds the whole record: a body of
#: commas turns into ~11 bytes of fields per byte of body (~3 GB for a 256 MiB import).
MAX_RECORD_CHARS = 2**20


#: An ε in a CSV: a plain decimal number (float() also reads "1_0" as 10, "٢" as 2, "inf").
_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*", re.ASCII)


def parse_epsilon(text: str) -> float:
    """A row's ε: NaN when empty (out of every survey's bounds), ValueError when it is not a
    plain decimal number."""
    if not text:
        return math.nan
    if not _NUMBER.fullmatch(text):
        raise ValueError(text)
    return float(text)


class _Records:
    """The stream's lines for csv.reader, refusing a record longer than
    :data:`MAX_RECORD_CHARS` (the caller sets ``taken`` to 0 after each record)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.taken = 0

    def __iter__(self) -> _Records:
        return self

    def __next__(self) -> str:
        line = self.stream.readline(MAX_RECORD_CHARS + 1)  # never more than a record's worth
        if not line:
            raise StopIteration
        self.taken += len(line)
        if self.taken > MAX_RECORD_CHARS:
            raise Invalid(f"a CSV row is longer than {MAX_RECORD_CHARS} characters")
        return line


def _field(rec: list[str], at: int) -> str:
    return rec[at] if at < len(rec) else ""


class _ImportCsv:
    """An import's CSV (this import's and the ballot import's), read as it is parsed, so
    that a large body is never copied whole: the header, checked for the ``required``
    columns (by :attr:`column`), then the data rows (:meth:`rows`)."""

    def __init__(self, csv_text: str | IO[str], required: list[str], max_rows: int, why: str) -> None:
        stream = io.StringIO(csv_text) if isinstance(csv_text, str) else csv_text
        self._records = _Records(stream)
        self._reader = csv.reader(self._records)
        self._max_rows, self._why = max_rows, why
        try:
            fieldnames = next(self._reader, [])
        except csv.Error:
            raise Invalid("the CSV cannot be parsed") from None
        except UnicodeDecodeError:
            raise Invalid("the CSV must be UTF-8") from None
        self._records.taken = 0
        names = [name.strip().lower() for name in fieldnames]
        if len(set(names)) != len(names):
            raise Invalid("the CSV header repeats a column")
        self.column = {name: k for k, name in enumerate(names)}
        missing = [c for c in required if c not in self.column]
        if missing:
            raise Invalid(f"CSV header lacks column(s) {missing}; need {required}")

    def rows(self) -> Iterator[tuple[int, str, list[str]]]:
        """Each data row as (line number, respondent pseudonym, record); Invalid on bad
        content. Blank records count towards ``max_rows`` like data rows, so that a body of
        blank lines is refused as soon as it passes the limit."""
        reader, records = self._reader, self._records
        c_ref = self.column["respondent"]
        n_records = 0
        found = False
        try:
            for rec in reader:
                records.taken = 0
                n_records += 1
                if n_records > self._max_rows:
                    raise Invalid(f"at most {self._max_rows} rows per import{self._why}; split the file")
                if not rec:
                    continue  # a blank line (counted above)
                line = reader.line_num
                ref = _field(rec, c_ref).strip()
                if not _PSEUDONYM.fullmatch(ref):
                    raise Invalid(
                        f"row {line}: respondent must be 1 to 200 letters, digits or ._:@- "
                        "(starting with a letter or digit)"
                    )
                found = True
                yield line, ref, rec
        except csv.Error:
            raise Invalid(f"the CSV cannot be parsed after line {reader.line_num}") from None
        except UnicodeDecodeError:
            raise Invalid("the CSV must be UTF-8") from None
        if not found:
            raise Invalid("the CSV has no data rows")


def _row_epsilon(survey: Survey, text: str, line: int) -> float:
    """The ε of row ``line``: a number within the survey's bounds, or Invalid naming the row."""
    try:
        eps = parse_epsilon(text)
    except ValueError:
        raise Invalid(f"row {line}: epsilon is not a number") from None
    try:
        check_epsilon(survey, eps)
    except Invalid as exc:
        raise Invalid(f"row {line}: {exc.detail}") from None
    return eps


def _parse_import(
    csv_text: str | IO[str], max_rows: int, survey: Survey, lookup: dict[str, str], why: str = ""
):
    """Rows of the CSV as (comparisons, pseudonyms, ε's, line numbers); Invalid on bad content.

    ``csv_text``: the text, or a text stream (read as it is parsed; see :class:`_ImportCsv`)."""
    central = survey.privacy_model == "central"
    required = [c for c in _REQUIRED if not (central and c == "epsilon")]
    table = _ImportCsv(csv_text, required, max_rows, why)
    c_a, c_b, c_win = (table.column[c] for c in ("item_a", "item_b", "winner"))
    c_eps = None if central else table.column["epsilon"]
    rows: list[ComparisonIn] = []
    refs: list[str] = []
    eps_list: list[float] = []
    lines: list[int] = []
    for line, ref, rec in table.rows():
        # A central survey's rows are true answers (an epsilon column, if any, is ignored).
        eps = math.inf if c_eps is None else _row_epsilon(survey, _field(rec, c_eps), line)
        a = normalize_label(_field(rec, c_a))
        b = normalize_label(_field(rec, c_b))
        winner = normalize_label(_field(rec, c_win))
        rows.append(ComparisonIn(lookup.get(a, a), lookup.get(b, b), lookup.get(winner, winner)))
        refs.append(ref)
        eps_list.append(eps)
        lines.append(line)
    return rows, refs, eps_list, lines


@dataclass(frozen=True)
class _Bulk:
    """One statement executed for many rows, its parameters converted before the write.

    SQLite's write transaction holds the database's only write lock, which every
    respondent's answer waits for, and SQLAlchemy's per-row parameter processing costs
    more than SQLite's own work for an import of many new respondents. So on SQLite the
    rows are put in the driver's form (each value through its type's bind processor, in
    the statement's parameter order) when staged, and the write is one driver-level
    ``executemany``. Elsewhere (PostgreSQL has no database-wide
    write lock) SQLAlchemy executes the statement with the rows as given.
    """

    statement: UpdateBase
    rows: list
    sql: str | None = None

    @classmethod
    def stage(cls, dialect: Dialect, statement: UpdateBase, rows: list[dict]) -> _Bulk:
        if dialect.name != "sqlite" or not rows:
            return cls(statement, rows)
        compiled = statement.compile(dialect=dialect, column_keys=list(rows[0]))
        if compiled.positiontup is None:  # pragma: no cover - SQLite's driver takes positional parameters
            return cls(statement, rows)
        names = list(compiled.positiontup)
        procs = [compiled.binds[name].type.bind_processor(dialect) for name in names]
        fixed = compiled.params  # values bound in the statement itself (e.g. a survey's budget)
        converted = [
            tuple(value if proc is None else proc(value) for value, proc in zip(values, procs, strict=True))
            for values in (tuple(row[name] if name in row else fixed[name] for name in names) for row in rows)
        ]
        return cls(statement, converted, compiled.string)

    def run(self, conn: Connection) -> int:
        """Execute; the number of rows matched (summed over the parameter sets)."""
        if not self.rows:
            return 0
        if self.sql is None:
            return conn.execute(self.statement, self.rows).rowcount
        return conn.exec_driver_sql(self.sql, self.rows).rowcount


def _over(survey: Survey, ref: str, cost: float, n: int, spent: float, answered: int) -> Conflict | None:
    """The Conflict when respondent ``ref`` (with ``spent`` ε and ``answered`` comparisons
    so far) may not take ``n`` more comparisons costing ``cost``; None when it may
    (the limits of :func:`app.respondents.spending.exceeded`, worded for an import)."""
    limit = exceeded(survey, spent, answered, cost, n)
    if limit == "comparisons":
        bound = survey.max_comparisons
        return Conflict(f"respondent {ref!r} would give more than {bound} comparisons (the survey's bound)")
    if limit == "budget":
        return Conflict(f"respondent {ref!r} would exceed the privacy budget")
    return None


@dataclass(frozen=True)
class _Known:
    """A respondent an import names (by pseudonym or id), as read before the write."""

    id: str
    ref: str
    spent: float
    answered: int


def _known_respondents(session: Session, survey_id: str, refs: list[str]) -> dict[str, _Known]:
    """This survey's respondents whose pseudonym (external_ref) or id is one of ``refs``, by ref."""
    table = Respondent.__table__
    found: dict[str, _Known] = {}
    wanted = set(refs)
    for part in _chunks(refs):
        for row in session.execute(
            select(table.c.id, table.c.external_ref, table.c.epsilon_spent, table.c.n_comparisons)
            .where(table.c.survey_id == survey_id)
            .where(or_(table.c.external_ref.in_(part), table.c.id.in_(part)))
        ):
            ref = row.external_ref if row.external_ref in wanted else row.id
            found[ref] = _Known(row.id, ref, float(row.epsilon_spent), int(row.n_comparisons))
    return found


def _spent_meanwhile(
    session: Session,
    survey: Survey,
    known: dict[str, _Known],
    cost: np.ndarray,
    n_rows: np.ndarray,
    ref_index: dict[str, int],
) -> Conflict:
    """The Conflict for an import whose respondents' budgets no longer held at the write
    (answers of theirs were stored while it was prepared), naming one when it can."""
    now = _known_respondents(session, survey.id, list(known))
    session.rollback()
    for ref, r in now.items():
        idx = ref_index[ref]
        over = _over(survey, ref, float(cost[idx]), int(n_rows[idx]), r.spent, r.answered)
        if over is not None:
            return Conflict(
                f"{over.detail} (answers stored while the import was prepared); nothing was imported"
            )
    return Conflict("respondents' answers were stored while the import was prepared; nothing was imported")


_SQLITE_LIMIT_WHY = " on this server (its SQLite database is locked for answers while an import is written)"


def _row_limit(dialect: Dialect, max_rows: int, sqlite_max_rows: int | None) -> tuple[int, str]:
    """The rows one import may have on this database, and why, when lower than ``max_rows``
    (for the refusal): on SQLite the write holds the lock for which every answer waits."""
    if dialect.name == "sqlite" and sqlite_max_rows is not None and sqlite_max_rows < max_rows:
        return sqlite_max_rows, _SQLITE_LIMIT_WHY
    return max_rows, ""


def _respondents(
    survey: Survey,
    refs: Sequence[str],
    known: Mapping[str, _Known],
    cost: Sequence[float],
    count: Sequence[int],
    epsilon: Sequence[float | None],
    now: datetime,
    where: Callable[[int], str] | None = None,
) -> tuple[list[str], list[dict]]:
    """The respondent ids of ``refs``, each buying ``count[k]`` answers costing ``cost[k]``,
    and the rows of those that are new (their ε ``epsilon[k]``, their counters what the
    import buys). A respondent over a limit fails the import: its Conflict, prefixed with
    ``where(k)`` when given."""
    ids: list[str] = []
    new: list[dict] = []
    for k, ref in enumerate(refs):
        r = known.get(ref)
        over = _over(
            survey, ref, cost[k], count[k], 0.0 if r is None else r.spent, 0 if r is None else r.answered
        )
        if over is not None:
            raise over if where is None else Conflict(f"{where(k)}: {over.detail}")
        if r is not None:
            ids.append(r.id)
            continue
        rid = new_id("rsp")
        ids.append(rid)
        new.append(
            {
                "id": rid,
                "survey_id": survey.id,
                "token_hash": None,
                "epsilon": epsilon[k],
                "epsilon_spent": cost[k],
                "n_comparisons": count[k],
                "external_ref": ref,
                "created_at": now,
            }
        )
    return ids, new


@dataclass(frozen=True)
class _StagedImport:
    """An import's writes (this import's and the ballot import's), staged before its write
    transaction (:class:`_Bulk`): the known respondents' spending, then the inserts."""

    spend: _Bulk
    n_spend: int
    inserts: tuple[_Bulk, ...]

    @classmethod
    def stage(
        cls,
        dialect: Dialect,
        survey: Survey,
        known: Mapping[str, _Known],
        buys: Callable[[str], tuple[float, int]],
        inserts: Sequence[tuple[type[Base], list[dict]]],
    ) -> _StagedImport:
        """Each known respondent buys ``buys(ref)`` (ε, answers), its counters growing in the
        write on the condition that its budget still holds then (the same conditions as every
        answer's, the one write path): its answers may be stored while the import is
        prepared. ``inserts``: each model's rows, written in this order."""
        table = table_of(Respondent)
        spend = (
            update(table)
            .where(
                table.c.id == bindparam("rid"),
                *spend_conditions(
                    survey, table.c.epsilon_spent, table.c.n_comparisons, bindparam("cost"), bindparam("n")
                ),
            )
            .values(
                epsilon_spent=table.c.epsilon_spent + bindparam("cost"),
                n_comparisons=table.c.n_comparisons + bindparam("n"),
            )
        )
        updates = []
        for r in sorted(known.values(), key=lambda r: r.id):  # one lock order (PostgreSQL)
            cost, n = buys(r.ref)
            updates.append({"rid": r.id, "cost": cost, "n": n})
        return cls(
            _Bulk.stage(dialect, spend, updates),
            len(updates),
            tuple(_Bulk.stage(dialect, insert(table_of(model)), rows) for model, rows in inserts),
        )

    def write(
        self,
        session: Session,
        survey_id: str,
        check_survey: Callable[[str, str, str], None],
        *,
        stored: str,
        spent_meanwhile: Callable[[Session], Conflict],
        recheck: Callable[[Session], None] | None = None,
    ) -> float:
        """All or nothing, in one write transaction that only re-checks what can have changed
        since the import was staged, then writes in bulk: under the survey's row lock
        ``check_survey`` (and ``recheck``, if any) must pass and each known respondent's budget
        must still hold (else the Conflict ``spent_meanwhile`` gives, after a rollback); a row
        stored meanwhile that violates a unique constraint is a 409 naming ``stored``. Imports
        into one survey write one at a time. Returns the seconds the transaction took."""
        try:
            begin_write(session)
            started = time.perf_counter()
            if session.get_bind().dialect.name == "postgresql":
                # One import per survey at a time, of either kind (SQLite's write lock already serializes).
                digest = hashlib.sha256(f"import:{survey_id}".encode()).digest()[:8]
                key = int.from_bytes(digest, "big", signed=True)
                session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
            lock_survey(session, survey_id, check_survey)
            if recheck is not None:
                recheck(session)
            conn = session.connection()
            if self.spend.run(conn) != self.n_spend:
                session.rollback()
                raise spent_meanwhile(session)
            for bulk in self.inserts:
                bulk.run(conn)
            session.commit()
            return time.perf_counter() - started
        except IntegrityError:
            session.rollback()
            raise Conflict(
                f"the import conflicts with {stored} or respondents stored while it was prepared; "
                "nothing was imported"
            ) from None
        except BaseException:
            session.rollback()
            raise


def import_comparisons(
    session: Session,
    survey: Survey,
    csv_text: str | IO[str],
    privatized: bool,
    max_rows: int = 1_000_000,
    sqlite_max_rows: int | None = None,
) -> ImportOut:
    """Import comparisons collected elsewhere, all or nothing.

    CSV columns ``respondent, item_a, item_b, winner, epsilon`` (others, such as the
    export's ``z`` and ``created_at``, are ignored), items given by id or label.
    ``privatized=True``: winners are already randomized with the row's ε;
    ``False``: the server randomizes each row with its ε (OS CSPRNG). A pseudonym
    that is the id of one of this survey's respondents (as in the service's own
    export) is that respondent; any other becomes a respondent of the survey,
    matched again by later imports. Every rule of the API applies: ε within
    bounds, one answer per respondent and pair, the respondent budget.

    Everything is parsed, checked and staged before the write transaction (the
    parse, the item and respondent look-ups, the randomization, the budget
    arithmetic, the rows to insert), which then only re-checks what can have
    changed meanwhile and writes in bulk: on SQLite it holds the database's one
    write lock, for which every respondent's answer waits. Under the lock the
    survey must still be open and each known respondent's budget must still
    hold; a pair answered or a pseudonym created meanwhile violates a unique
    constraint. Any of these fails the whole import with 409. Imports into one
    survey write one at a time.

    ``sqlite_max_rows`` bounds the rows of one import on SQLite, where the write holds
    the lock every answer waits for (``PRIVRANK_SQLITE_MAX_IMPORT_ROWS``).
    """
    _check_open_pairwise(survey.status, survey.kind, survey.privacy_model)
    central = survey.privacy_model == "central"
    if central and privatized:
        raise Invalid("a central-model survey imports true answers: use privatized=false")
    dialect = session.get_bind().dialect
    max_rows, why = _row_limit(dialect, max_rows, sqlite_max_rows)
    # -- stage, outside the write transaction ---------------------------------
    items = item_index(session, survey.id)
    # Labels as stored (NFC; rows from before labels were normalized too), then ids.
    lookup: dict[str, str] = {
        normalize_label(label): id_ for id_, label in zip(items.ids, items.labels, strict=True)
    }
    lookup.update({id_: id_ for id_ in items.ids})
    rows, refs, eps_list, lines = _parse_import(csv_text, max_rows, survey, lookup, why)
    i, j, y = _canonical(
        rows, items.positions, where=lambda k: f"row {lines[k]}", fields=("item_a", "item_b", "winner")
    )
    del rows
    eps_arr = np.asarray(eps_list)
    ref_index = {ref: k for k, ref in enumerate(dict.fromkeys(refs))}
    who = np.fromiter((ref_index[r] for r in refs), dtype=np.int64, count=len(refs))
    m = len(items)
    k = _first_repeat((who * m + i) * m + j)
    if k is not None:
        raise Conflict(f"row {lines[k]}: respondent {refs[k]!r} answers the same pair twice")
    y_tilde = y if (privatized or central) else privatize(y, eps_arr)  # OS CSPRNG
    del y
    cost = np.zeros(len(ref_index)) if central else np.bincount(who, weights=eps_arr)
    n_rows = np.bincount(who)
    first_row = np.unique(who, return_index=True)[1]  # who numbers refs in order of appearance
    ordered_refs = list(ref_index)
    known = _known_respondents(session, survey.id, ordered_refs)
    now = utcnow()
    respondent_ids, new_respondents = _respondents(
        survey,
        ordered_refs,
        known,
        cost.tolist(),
        n_rows.tolist(),
        [None if central else eps_list[f] for f in first_row.tolist()],
        now,
    )
    if known:
        answered: set[tuple] = set()
        for part in _chunks(sorted(r.id for r in known.values())):
            answered.update(
                map(
                    tuple,
                    session.execute(
                        select(Comparison.respondent_id, Comparison.i, Comparison.j).where(
                            Comparison.respondent_id.in_(part)
                        )
                    ),
                )
            )
        if answered:
            for row in range(len(refs)):
                if (respondent_ids[who[row]], int(i[row]), int(j[row])) in answered:
                    raise Conflict(f"row {lines[row]}: respondent {refs[row]!r} already answered this pair")
        del answered
    rid_arr = np.asarray(respondent_ids, dtype=object)[who]
    comparisons = [
        {
            "survey_id": survey.id,
            "respondent_id": rid,
            "i": a,
            "j": b,
            "y_tilde": t,
            "epsilon": None if central else e,
            "source": "central" if central else "import",
            "created_at": now,
        }
        for rid, a, b, t, e in zip(
            rid_arr.tolist(), i.tolist(), j.tolist(), y_tilde.tolist(), eps_arr.tolist(), strict=True
        )
    ]
    pending = []
    for start in range(0, len(refs), IMPORT_CHUNK):
        part = slice(start, start + IMPORT_CHUNK)
        chunk_who, index = np.unique(who[part], return_inverse=True)
        pending.append(
            {
                "survey_id": survey.id,
                "n": int(i[part].size),
                "payload": encode_batch(
                    i[part],
                    j[part],
                    y_tilde[part],
                    eps_arr[part],
                    respondents=[respondent_ids[w] for w in chunk_who.tolist()],
                    who=index,
                ),
            }
        )
    created = len(new_respondents)
    staged = _StagedImport.stage(
        dialect,
        survey,
        known,
        lambda ref: (float(cost[ref_index[ref]]), int(n_rows[ref_index[ref]])),
        [(Respondent, new_respondents), (Comparison, comparisons), (PendingBatch, pending)],
    )
    del new_respondents, comparisons, pending
    # -- write: re-check what can have changed, then bulk writes ----------------
    held = staged.write(
        session,
        survey.id,
        _check_open_pairwise,
        stored="answers",
        spent_meanwhile=lambda session: _spent_meanwhile(session, survey, known, cost, n_rows, ref_index),
    )
    log.info("survey %s: imported %d comparisons (write transaction %.2f s)", survey.id, len(refs), held)
    return ImportOut(imported=len(refs), respondents_created=created, respondents=len(ref_index))
