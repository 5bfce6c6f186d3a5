"""Bulk import of answers from CSV: the comparisons import, and the machinery the ballot
import (:mod:`app.rankings.ballot_import`) shares with it — reading records with a size
bound, checking each row's ε, resolving pseudonyms to respondents, staging the rows and
storing them in one transaction (docs/how-to/import-export.md).

Like answers through the API, imported winners are randomized on arrival with the row's
ε unless the file says they already are; true winners are never stored.
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO

import numpy as np
from sqlalchemy import Connection, Dialect, UpdateBase, bindparam, insert, or_, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..analysis.aggregation import encode_batch
from ..analysis.results import ImportOut
from ..core.db.models import Base, Comparison, PendingBatch, Respondent, Survey, new_id, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid
from ..stats import privatize
from ..surveys.items import item_index
from ..surveys.labels import normalize_label
from .ingestion import ComparisonIn, canonical, check_open_pairwise, first_repeat
from .service import check_epsilon
from .spending import exceeded, lock_survey, spend_conditions, table_of

__all__ = [
    "MAX_RECORD_CHARS",
    "ImportCsv",
    "StagedImport",
    "chunks",
    "import_comparisons",
    "import_respondents",
    "known_respondents",
    "parse_epsilon",
    "record_field",
    "row_epsilon",
    "row_limit",
]

log = logging.getLogger("privrank.ingestion")

#: Rows per pending batch written by an import (keeps each payload under ~1.7 MB).
IMPORT_CHUNK = 100_000

_REQUIRED = ("respondent", "item_a", "item_b", "winner", "epsilon")
#: Pseudonyms in imported CSVs: plain identifiers (no spreadsheet formulas, no control characters).
_PSEUDONYM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}")
#: Bound parameters per IN list (PostgreSQL allows at most 65,535 per statement).
_IN_CHUNK = 10_000


def chunks(values: list, size: int = _IN_CHUNK):
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


def record_field(rec: list[str], at: int) -> str:
    return rec[at] if at < len(rec) else ""


class ImportCsv:
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
                ref = record_field(rec, c_ref).strip()
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


def row_epsilon(survey: Survey, text: str, line: int) -> float:
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

    ``csv_text``: the text, or a text stream (read as it is parsed; see :class:`ImportCsv`)."""
    central = survey.privacy_model == "central"
    required = [c for c in _REQUIRED if not (central and c == "epsilon")]
    table = ImportCsv(csv_text, required, max_rows, why)
    c_a, c_b, c_win = (table.column[c] for c in ("item_a", "item_b", "winner"))
    c_eps = None if central else table.column["epsilon"]
    rows: list[ComparisonIn] = []
    refs: list[str] = []
    eps_list: list[float] = []
    lines: list[int] = []
    for line, ref, rec in table.rows():
        # A central survey's rows are true answers (an epsilon column, if any, is ignored).
        eps = math.inf if c_eps is None else row_epsilon(survey, record_field(rec, c_eps), line)
        a = normalize_label(record_field(rec, c_a))
        b = normalize_label(record_field(rec, c_b))
        winner = normalize_label(record_field(rec, c_win))
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


def known_respondents(session: Session, survey_id: str, refs: list[str]) -> dict[str, _Known]:
    """This survey's respondents whose pseudonym (external_ref) or id is one of ``refs``, by ref."""
    table = Respondent.__table__
    found: dict[str, _Known] = {}
    wanted = set(refs)
    for part in chunks(refs):
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
    now = known_respondents(session, survey.id, list(known))
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


def row_limit(dialect: Dialect, max_rows: int, sqlite_max_rows: int | None) -> tuple[int, str]:
    """The rows one import may have on this database, and why, when lower than ``max_rows``
    (for the refusal): on SQLite the write holds the lock for which every answer waits."""
    if dialect.name == "sqlite" and sqlite_max_rows is not None and sqlite_max_rows < max_rows:
        return sqlite_max_rows, _SQLITE_LIMIT_WHY
    return max_rows, ""


def import_respondents(
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
class StagedImport:
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
    ) -> StagedImport:
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
    check_open_pairwise(survey.status, survey.kind, survey.privacy_model)
    central = survey.privacy_model == "central"
    if central and privatized:
        raise Invalid("a central-model survey imports true answers: use privatized=false")
    dialect = session.get_bind().dialect
    max_rows, why = row_limit(dialect, max_rows, sqlite_max_rows)
    # -- stage, outside the write transaction ---------------------------------
    items = item_index(session, survey.id)
    # Labels as stored (NFC; rows from before labels were normalized too), then ids.
    lookup: dict[str, str] = {
        normalize_label(label): id_ for id_, label in zip(items.ids, items.labels, strict=True)
    }
    lookup.update({id_: id_ for id_ in items.ids})
    rows, refs, eps_list, lines = _parse_import(csv_text, max_rows, survey, lookup, why)
    i, j, y = canonical(
        rows, items.positions, where=lambda k: f"row {lines[k]}", fields=("item_a", "item_b", "winner")
    )
    del rows
    eps_arr = np.asarray(eps_list)
    ref_index = {ref: k for k, ref in enumerate(dict.fromkeys(refs))}
    who = np.fromiter((ref_index[r] for r in refs), dtype=np.int64, count=len(refs))
    m = len(items)
    k = first_repeat((who * m + i) * m + j)
    if k is not None:
        raise Conflict(f"row {lines[k]}: respondent {refs[k]!r} answers the same pair twice")
    y_tilde = y if (privatized or central) else privatize(y, eps_arr)  # OS CSPRNG
    del y
    cost = np.zeros(len(ref_index)) if central else np.bincount(who, weights=eps_arr)
    n_rows = np.bincount(who)
    first_row = np.unique(who, return_index=True)[1]  # who numbers refs in order of appearance
    ordered_refs = list(ref_index)
    known = known_respondents(session, survey.id, ordered_refs)
    now = utcnow()
    respondent_ids, new_respondents = import_respondents(
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
        for part in chunks(sorted(r.id for r in known.values())):
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
    staged = StagedImport.stage(
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
        check_open_pairwise,
        stored="answers",
        spent_meanwhile=lambda session: _spent_meanwhile(session, survey, known, cost, n_rows, ref_index),
    )
    log.info("survey %s: imported %d comparisons (write transaction %.2f s)", survey.id, len(refs), held)
    return ImportOut(imported=len(refs), respondents_created=created, respondents=len(ref_index))
