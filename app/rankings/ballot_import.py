"""Bulk import of ballots (rankings collected elsewhere) into a ranking survey.

The ranking survey's counterpart of :func:`app.respondents.imports.import_comparisons`:
a CSV of ``respondent, ranking, epsilon`` (the rankings export's form, so an export
imports again), rankings already synthetic (``privatized=True``) or completed and
privatized by the server. Only the synthetic rankings are stored, no error message names
a submitted item, every rule of the API applies, and the import is all or nothing, in
one write transaction (:func:`import_rankings`).
"""

from __future__ import annotations

import logging
from typing import IO

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..analysis.aggregation import encode_rankings
from ..analysis.results import ImportOut
from ..core.db.models import Item, PendingBatch, Ranking, Respondent, Survey, utcnow
from ..core.errors import Conflict, Invalid
from ..core.limits import MAX_IMPORT_RANKING_ENTRIES, MAX_IMPORT_RANKINGS
from ..respondents.imports import (
    ImportCsv,
    StagedImport,
    chunks,
    import_respondents,
    known_respondents,
    record_field,
    row_epsilon,
    row_limit,
)
from ..stats.rankings import complete_ranking, mallows_privatize
from ..surveys.items import item_index
from ..surveys.labels import normalize_label
from .service import RANKING_SEPARATOR, _check_ranking_survey

__all__ = ["BALLOT_COLUMNS", "import_rankings"]

log = logging.getLogger("privrank.rankings")

BALLOT_COLUMNS = ("respondent", "ranking", "epsilon")
#: Rankings per pending batch (a payload of 4·m + 8 bytes a ranking: ≤ 10 MB at m = 256).
_PENDING_CHUNK = 10_000


def _parse_ballots(
    csv_text: str | IO[str],
    max_rows: int,
    survey: Survey,
    lookup: dict[str, int],
    m: int,
    complete: bool,
    why: str,
) -> tuple[list[np.ndarray], list[str], list[float], list[int]]:
    """Rows as (item positions best first, pseudonyms, ε's, line numbers); Invalid on bad content,
    naming the row but never a submitted item."""
    table = ImportCsv(csv_text, list(BALLOT_COLUMNS), max_rows, why)
    c_rank, c_eps = table.column["ranking"], table.column["epsilon"]
    orders: list[np.ndarray] = []
    refs: list[str] = []
    eps_list: list[float] = []
    lines: list[int] = []
    for line, ref, rec in table.rows():
        eps = row_epsilon(survey, record_field(rec, c_eps), line)
        entries = record_field(rec, c_rank).split(RANKING_SEPARATOR)
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

    CSV columns ``respondent, ranking, epsilon`` (others, such as the rankings export's
    ``source`` and ``created_at``, are ignored, so an export imports again), the ranking
    as items best → worst joined by ``>`` (the export's form), each by id or label.
    ``privatized=True``: every ranking is already a synthetic ranking (the Mallows
    mechanism at the row's ε, run elsewhere) and lists all the survey's items;
    ``False``: the server completes each (possibly partial) ranking and privatizes it at
    the row's ε (OS CSPRNG), as it does one respondent's ``POST …/rankings``. Only the
    synthetic rankings are stored, and no error message names a submitted item. Every
    rule of the API applies: ε within bounds, one ranking per respondent (a second row
    of a respondent, or a respondent that ranked already, is 409 — so the same file
    imported twice stores nothing the second time), the respondent budget.
    """
    _check_ranking_survey(survey.status, survey.kind, survey.privacy_model)
    dialect = session.get_bind().dialect
    max_rows, why = row_limit(dialect, max_rows, sqlite_max_rows)
    # -- stage, outside the write transaction ---------------------------------
    items = item_index(session, survey.id)
    m = len(items)
    if m * max_rows > MAX_IMPORT_RANKING_ENTRIES:
        max_rows = MAX_IMPORT_RANKING_ENTRIES // m
        why = f" of {m} items (at most {MAX_IMPORT_RANKING_ENTRIES} ranked entries an import)"
    # Labels as stored (NFC), then ids (an id wins over an equal label).
    lookup = {normalize_label(label): k for k, label in enumerate(items.labels)}
    lookup.update(items.positions)
    orders, refs, eps_list, lines = _parse_ballots(csv_text, max_rows, survey, lookup, m, privatized, why)
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
    known = known_respondents(session, survey.id, refs)
    if known:
        ranked: set[str] = set()
        for part in chunks(sorted(r.id for r in known.values())):
            ranked.update(
                session.scalars(select(Ranking.respondent_id).where(Ranking.respondent_id.in_(part)))
            )
        for k, ref in enumerate(refs):
            r = known.get(ref)
            if r is not None and r.id in ranked:
                raise Conflict(
                    f"row {lines[k]}: respondent {ref!r} already submitted a ranking (one per respondent)"
                )
    now = utcnow()
    # A ranking costs its ε and counts no comparisons.
    respondent_ids, new_respondents = import_respondents(
        survey, refs, known, eps_list, [0] * n, eps_list, now, where=lambda k: f"row {lines[k]}"
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
    staged = StagedImport.stage(
        dialect,
        survey,
        known,
        lambda ref: (eps_list[seen[ref]], 0),
        [(Respondent, new_respondents), (Ranking, rankings), (PendingBatch, pending)],
    )
    del new_respondents, rankings, pending

    def items_unchanged(session: Session) -> None:
        if session.scalar(select(func.count()).select_from(Item).where(Item.survey_id == survey.id)) != m:
            raise Conflict("the survey's items changed while the import was prepared; nothing was imported")

    # -- write: re-check what can have changed, then bulk writes ----------------
    held = staged.write(
        session,
        survey.id,
        _check_ranking_survey,
        stored="rankings",
        spent_meanwhile=lambda session: Conflict(
            "respondents' answers were stored while the import was prepared and a budget no longer "
            "holds; nothing was imported"
        ),
        recheck=items_unchanged,
    )
    log.info("survey %s: imported %d rankings (write transaction %.2f s)", survey.id, n, held)
    return ImportOut(imported=n, respondents_created=created, respondents=n)
