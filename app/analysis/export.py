"""The releasable data: privatized comparisons as CSV.

Columns: ``respondent`` (the id returned at registration, or the pseudonym an import
created), ``item_a``, ``item_b`` (item ids, in the stored orientation), ``winner`` (the
reported — privatized — winner), ``epsilon``, ``z`` (the debiased value of eq. (1),
oriented towards ``item_a``) and ``created_at`` (UTC, ISO 8601, rounded down to the
hour). Floats are written with ``repr`` so they round-trip exactly;
``app.stats.fit_debiased_mle`` on these rows reproduces the service's ranking. Rows
carry no arrival order (:func:`iter_comparison_rows`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from ..core.csvcells import csv_cell
from ..core.db.models import Comparison, Item, Respondent, to_hour
from ..stats import debias

__all__ = [
    "CSV_COLUMNS",
    "HOUR_BLOCK",
    "ITEM_COLUMNS",
    "csv_chunks",
    "iso_utc",
    "iter_comparison_rows",
    "iter_comparisons_csv",
    "iter_item_rows",
    "iter_items_csv",
]

CSV_COLUMNS = ("respondent", "item_a", "item_b", "winner", "epsilon", "z", "created_at")
#: Most answers sorted together (an hour's answers, or a block of them): bounds the memory
#: of an export whatever the survey's rate of answers.
HOUR_BLOCK = 50_000
#: The items export: where each item came from and when, never who proposed it (an item
#: suggested by a participant has no author anywhere: app.participation.suggestions).
ITEM_COLUMNS = ("item", "position", "label", "source", "status", "added_at", "approved_at")


def iso_utc(ts) -> str:
    """A UTC timestamp in ISO 8601 with a ``Z``."""
    text = ts.isoformat()
    return text.replace("+00:00", "Z") if "+" in text else text + "Z"


def iter_comparison_rows(session: Session, survey_id: str, chunk: int = 5000) -> Iterator[list[tuple]]:
    """The comparisons export's rows (:data:`CSV_COLUMNS`), typed — ``epsilon`` and ``z`` floats,
    ``created_at`` a UTC datetime rounded down to the hour — in batches of at most ``chunk``,
    streaming from the database; within an hour (or a block of :data:`HOUR_BLOCK`), ordered
    by respondent and pair, not by arrival.

    Neither the rows' times nor their order says which respondent answered just before
    another, or just before an item was first served — the alignment that would
    otherwise narrow down who completed a batch of suggestions
    (:mod:`app.participation.suggestions`). An hour with more than :data:`HOUR_BLOCK` answers
    is sorted in blocks of that many, so that the work per block stays bounded."""
    item_a, item_b = aliased(Item), aliased(Item)
    query = (
        select(
            Comparison.respondent_id,
            Respondent.external_ref,
            item_a.id,
            item_b.id,
            Comparison.y_tilde,
            Comparison.epsilon,
            Comparison.created_at,
        )
        .join(Respondent, Respondent.id == Comparison.respondent_id)
        # Item ids by position in the same statement, so items added meanwhile cannot break it.
        .join(item_a, (item_a.survey_id == Comparison.survey_id) & (item_a.position == Comparison.i))
        .join(item_b, (item_b.survey_id == Comparison.survey_id) & (item_b.position == Comparison.j))
        .where(Comparison.survey_id == survey_id)
        .order_by(Comparison.id)
        .execution_options(yield_per=chunk)
    )
    block: list[tuple] = []
    for part in session.execute(query).partitions():
        rid, ext, a_ids, b_ids, y, eps, created = zip(*part, strict=True)
        z = debias(np.asarray(y), np.asarray(eps, dtype=float)).tolist()
        for k in range(len(part)):
            hour = to_hour(created[k])
            if block and (hour != block[-1][6] or len(block) >= HOUR_BLOCK):
                yield from _sorted_chunks(block, chunk)
                block = []
            block.append(
                (
                    ext[k] or rid[k],
                    a_ids[k],
                    b_ids[k],
                    a_ids[k] if y[k] == 1 else b_ids[k],
                    float(eps[k]),
                    z[k],
                    hour,
                )
            )
    if block:
        yield from _sorted_chunks(block, chunk)


def _sorted_chunks(rows: list[tuple], chunk: int) -> Iterator[list[tuple]]:
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    for start in range(0, len(rows), chunk):
        yield rows[start : start + chunk]


def iter_comparisons_csv(session: Session, survey_id: str, chunk: int = 5000) -> Iterator[str]:
    """Yield the CSV in chunks of rows, streaming from the database."""
    yield from csv_chunks(CSV_COLUMNS, iter_comparison_rows(session, survey_id, chunk))


def iter_item_rows(session: Session, survey_id: str) -> Iterator[list[tuple]]:
    """The items export's rows (:data:`ITEM_COLUMNS`), typed: ``position`` an int, ``added_at``
    and ``approved_at`` UTC datetimes (``approved_at`` None for an item never approved); one
    batch (a survey holds at most ``MAX_ITEMS``)."""
    yield [
        (
            item.id,
            item.position,
            item.label,
            item.source,
            item.status,
            item.created_at,
            item.approved_at,
        )
        for item in session.scalars(select(Item).where(Item.survey_id == survey_id).order_by(Item.position))
    ]


def iter_items_csv(session: Session, survey_id: str) -> Iterator[str]:
    """The survey's items as CSV (one chunk: a survey holds at most ``MAX_ITEMS``)."""
    yield from csv_chunks(ITEM_COLUMNS, iter_item_rows(session, survey_id))


def _csv_value(value) -> str | int:
    """A typed export value as the CSV writes it: datetimes in UTC ISO 8601, the rest by
    :func:`app.core.csvcells.csv_cell` (floats exactly, text safe to open in a spreadsheet)."""
    return iso_utc(value) if isinstance(value, datetime) else csv_cell(value)


def csv_chunks(columns: Sequence[str], batches: Iterable[list[tuple]]) -> Iterator[str]:
    """The CSV of typed row batches: the header, then one chunk of text per batch."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for rows in batches:
        writer.writerows(tuple(_csv_value(v) for v in row) for row in rows)
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    yield buf.getvalue()
