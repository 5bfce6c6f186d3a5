"""Bulk import of ballots (rankings collected elsewhere) into a ranking survey.

The ranking survey's counterpart of :func:`app.services.ingestion.import_comparisons`:
CSV columns ``respondent, ranking, epsilon`` (others, such as the rankings export's
``source`` and ``created_at``, are ignored, so an export imports again), the ranking
as items best → worst joined by ``>`` (the export's form), each by id or label.

``privatized=True``: every ranking is already a synthetic ranking (the Mallows
mechanism at the row's ε, run elsewhere) and lists all the survey's items;
``False``: the server completes each (possibly partial) ranking and privatizes it at
the row's ε (OS CSPRNG), as it does one respondent's ``POST …/rankings``. Only the
synthetic rankings are stored, and no error message names a submitted item.

Every rule of the API applies: ε within bounds, one ranking per respondent (a second
row of a respondent, or a respondent that ranked already, is 409 — so the same file
imported twice stores nothing the second time), the respondent budget. All or nothing,
in one write transaction.
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import time
from typing import IO

import numpy as np
from sqlalchemy import bindparam, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..db.models import Item, PendingBatch, Ranking, Respondent, Survey, new_id, utcnow
from ..db.session import begin_write
from ..limits import MAX_IMPORT_RANKING_ENTRIES, MAX_IMPORT_RANKINGS
from ..stats.rankings import complete_ranking, mallows_privatize
from .aggregation import encode_rankings
from .errors import Conflict, Invalid
from .ingestion import _PSEUDONYM, _Bulk, _chunks, _known_respondents, _over, _Records, _table, parse_epsilon
from .ranking_surveys import RANKING_SEPARATOR, _check_ranking_survey
from .respondents import check_epsilon
from .results.analysis import ImportOut
from .spending import lock_survey, spend_conditions
from .surveys import item_index, normalize_label

__all__ = ["BALLOT_COLUMNS", "import_rankings"]

log = logging.getLogger("privrank.rankings")

BALLOT_COLUMNS = ("respondent", "ranking", "epsilon")
#: Rankings per pending batch (a payload of 4·m + 8 bytes a ranking: ≤ 10 MB at m = 256).
_PENDING_CHUNK = 10_000


def _parse_ballots(
    stream: IO[str], max_rows: int, survey: Survey, lookup: dict[str, int], m: int, complete: bool, why: str
) -> tuple[list[np.ndarray], list[str], list[float], list[int]]:
    """Rows as (item positions best first, pseudonyms, ε's, line numbers); Invalid on bad content,
    naming the row but never a submitted item."""
    records = _Records(stream)
    reader = csv.reader(records)
    try:
        names = [name.strip().lower() for name in next(reader, [])]
    except csv.Error:
        raise Invalid("the CSV cannot be parsed") from None
    except UnicodeDecodeError:
        raise Invalid("the CSV must be UTF-8") from None
    records.taken = 0
    if len(set(names)) != len(names):
        raise Invalid("the CSV header repeats a column")
    column = {name: k for k, name in enumerate(names)}
    missing = [c for c in BALLOT_COLUMNS if c not in column]
    if missing:
        raise Invalid(f"CSV header lacks column(s) {missing}; need {list(BALLOT_COLUMNS)}")
    c_ref, c_rank, c_eps = (column[c] for c in BALLOT_COLUMNS)

    def field(rec: list[str], at: int) -> str:
        return rec[at] if at < len(rec) else ""

    orders: list[np.ndarray] = []
    refs: list[str] = []
    eps_list: list[float] = []
    lines: list[int] = []
    n_records = 0
    try:
        for rec in reader:
            records.taken = 0
            n_records += 1
            if n_records > max_rows:
                raise Invalid(f"at most {max_rows} rows per import{why}; split the file")
            if not rec:
                continue  # a blank line (counted above)
            line = reader.line_num
            ref = field(rec, c_ref).strip()
            if not _PSEUDONYM.fullmatch(ref):
                raise Invalid(
                    f"row {line}: respondent must be 1 to 200 letters, digits or ._:@- "
                    "(starting with a letter or digit)"
                )
            try:
                eps = parse_epsilon(field(rec, c_eps))
            except ValueError:
                raise Invalid(f"row {line}: epsilon is not a number") from None
            try:
                check_epsilon(survey, eps)
            except Invalid as exc:
                raise Invalid(f"row {line}: {exc.detail}") from None
            entries = field(rec, c_rank).split(RANKING_SEPARATOR)
            if len(entries) > m:
                raise Invalid(f"row {line}: the ranking lists more entries than the survey's {m} items")
            try:
                pos = np.fromiter((lookup[normalize_label(x)] for x in entries), dtype=np.int16)
            except KeyError:
                if entries == [""]:
                    raise Invalid(f"row {line}: ranking must list at least one item") from None
                raise Invalid(
                    f"row {line}: the ranking contains an entry that is not an item of this survey "
                    f"(items by id or label, joined by {RANKING_SEPARATOR!r}; give an item whose label "
                    f"contains {RANKING_SEPARATOR!r} by its id)"
                ) from None
            if np.unique(pos).size != pos.size:
                raise Invalid(f"row {line}: the ranking lists an item more than once")
            if complete and pos.size != m:
                raise Invalid(
                    f"row {line}: a privatized ranking must list all {m} items (complete it before "
                    "privatizing: unranked items below, in random order)"
                )
            orders.append(pos)
            refs.append(ref)
            eps_list.append(eps)
            lines.append(line)
    except csv.Error:
        raise Invalid(f"the CSV cannot be parsed after line {reader.line_num}") from None
    except UnicodeDecodeError:
        raise Invalid("the CSV must be UTF-8") from None
    if not orders:
        raise Invalid("the CSV has no data rows")
    return orders, refs, eps_list, lines


def import_rankings(
    session: Session,
    survey: Survey,
    csv_text: str | IO[str],
    privatized: bool,
    max_rows: int = MAX_IMPORT_RANKINGS,
    sqlite_max_rows: int | None = None,
) -> ImportOut:
    """Import rankings collected elsewhere into a ranking survey, all or nothing.

    A pseudonym that is the id of one of this survey's respondents (as in the rankings
    export) is that respondent; any other becomes a respondent of the survey (its ε the
    row's), matched again by later imports. Like the comparisons import, everything is
    parsed, checked, privatized and staged before the write transaction, which re-checks
    what can have changed meanwhile (the survey still open, its items unchanged, the known
    respondents' budgets) and writes in bulk; a ranking stored meanwhile by a respondent
    the import names violates the one-ranking-per-respondent constraint. Any of these fails
    the whole import with 409. Imports into one survey write one at a time.
    """
    _check_ranking_survey(survey.status, survey.kind, survey.privacy_model)
    dialect = session.get_bind().dialect
    why = ""
    if dialect.name == "sqlite" and sqlite_max_rows is not None and sqlite_max_rows < max_rows:
        max_rows = sqlite_max_rows
        why = " on this server (its SQLite database is locked for answers while an import is written)"
    # -- stage, outside the write transaction ---------------------------------
    items = item_index(session, survey.id)
    m = len(items)
    if m * max_rows > MAX_IMPORT_RANKING_ENTRIES:
        max_rows = MAX_IMPORT_RANKING_ENTRIES // m
        why = f" of {m} items (at most {MAX_IMPORT_RANKING_ENTRIES} ranked entries an import)"
    # Labels as stored (NFC), then ids (an id wins over an equal label).
    lookup = {normalize_label(label): k for k, label in enumerate(items.labels)}
    lookup.update(items.positions)
    stream = io.StringIO(csv_text) if isinstance(csv_text, str) else csv_text
    orders, refs, eps_list, lines = _parse_ballots(stream, max_rows, survey, lookup, m, privatized, why)
    n = len(orders)
    seen: dict[str, int] = {}
    for k, ref in enumerate(refs):
        if ref in seen:
            raise Conflict(
                f"row {lines[k]}: respondent {ref!r} has a second ranking (one per respondent; "
                f"the first is on row {lines[seen[ref]]})"
            )
        seen[ref] = k
    eps_arr = np.asarray(eps_list, dtype=float)
    if privatized:
        synthetic = np.stack(orders).astype(np.int64)
    else:
        # Completion and the Mallows draw both use the OS CSPRNG.
        synthetic = mallows_privatize(np.stack([complete_ranking(o, m) for o in orders]), eps_arr)
    del orders
    known = _known_respondents(session, survey.id, refs)
    if known:
        ranked: set[str] = set()
        for part in _chunks(sorted(r.id for r in known.values())):
            ranked.update(
                session.scalars(select(Ranking.respondent_id).where(Ranking.respondent_id.in_(part)))
            )
        for k, ref in enumerate(refs):
            r = known.get(ref)
            if r is not None and r.id in ranked:
                raise Conflict(
                    f"row {lines[k]}: respondent {ref!r} already submitted a ranking (one per respondent)"
                )
    respondent_ids: list[str] = []
    new_respondents: list[dict] = []
    now = utcnow()
    for k, ref in enumerate(refs):
        r = known.get(ref)
        over = _over(
            survey, ref, eps_list[k], 0, 0.0 if r is None else r.spent, 0 if r is None else r.answered
        )
        if over is not None:
            raise Conflict(f"row {lines[k]}: {over.detail}")
        if r is not None:
            respondent_ids.append(r.id)
            continue
        rid = new_id("rsp")
        respondent_ids.append(rid)
        new_respondents.append(
            {
                "id": rid,
                "survey_id": survey.id,
                "token_hash": None,
                "epsilon": eps_list[k],
                "epsilon_spent": eps_list[k],
                "n_comparisons": 0,
                "external_ref": ref,
                "created_at": now,
            }
        )
    rankings = [
        {
            "survey_id": survey.id,
            "respondent_id": rid,
            "ordering": order,
            "epsilon": e,
            "source": "import",
            "created_at": now,
        }
        for rid, order, e in zip(respondent_ids, synthetic.tolist(), eps_list, strict=True)
    ]
    pending = [
        {
            "survey_id": survey.id,
            "n": int(synthetic[start : start + _PENDING_CHUNK].shape[0]),
            "payload": encode_rankings(
                synthetic[start : start + _PENDING_CHUNK], eps_arr[start : start + _PENDING_CHUNK]
            ),
        }
        for start in range(0, n, _PENDING_CHUNK)
    ]
    del synthetic
    created = len(new_respondents)
    table = _table(Respondent)
    spend = (
        update(table)
        .where(
            table.c.id == bindparam("rid"),
            *spend_conditions(survey, table.c.epsilon_spent, table.c.n_comparisons, bindparam("cost"), 0),
        )
        .values(epsilon_spent=table.c.epsilon_spent + bindparam("cost"))
    )
    updates = [
        {"rid": r.id, "cost": eps_list[seen[r.ref]]}
        for r in sorted(known.values(), key=lambda r: r.id)  # one lock order (PostgreSQL)
    ]
    spend_bulk = _Bulk.stage(dialect, spend, updates)
    inserts = [
        _Bulk.stage(dialect, insert(table), new_respondents),
        _Bulk.stage(dialect, insert(_table(Ranking)), rankings),
        _Bulk.stage(dialect, insert(_table(PendingBatch)), pending),
    ]
    del new_respondents, rankings, pending
    # -- write: re-check what can have changed, then bulk writes ----------------
    try:
        begin_write(session)
        started = time.perf_counter()
        if dialect.name == "postgresql":
            # One import per survey at a time (the comparisons import's lock: the same survey).
            digest = hashlib.sha256(f"import:{survey.id}".encode()).digest()[:8]
            session.execute(
                text("SELECT pg_advisory_xact_lock(:k)"), {"k": int.from_bytes(digest, "big", signed=True)}
            )
        lock_survey(session, survey.id, _check_ranking_survey)
        if session.scalar(select(func.count()).select_from(Item).where(Item.survey_id == survey.id)) != m:
            raise Conflict("the survey's items changed while the import was prepared; nothing was imported")
        conn = session.connection()
        if spend_bulk.run(conn) != len(updates):
            raise Conflict(
                "respondents' answers were stored while the import was prepared and a budget no longer "
                "holds; nothing was imported"
            )
        for bulk in inserts:
            bulk.run(conn)
        session.commit()
        held = time.perf_counter() - started
    except IntegrityError:
        session.rollback()
        raise Conflict(
            "the import conflicts with rankings or respondents stored while it was prepared; "
            "nothing was imported"
        ) from None
    except BaseException:
        session.rollback()
        raise
    log.info("survey %s: imported %d rankings (write transaction %.2f s)", survey.id, n, held)
    return ImportOut(imported=n, respondents_created=created, respondents=n)
