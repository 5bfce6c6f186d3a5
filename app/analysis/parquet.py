"""The exports as Parquet: the same rows as the CSVs, with column types.

pyarrow is an optional extra (``pip install 'privrank[parquet]'``); without it the Parquet
exports are refused with :class:`ParquetUnavailable` (501) and the CSVs still work. Each
batch of rows (:func:`app.analysis.export.iter_comparison_rows` and the like, streaming
from the database) is written as one row group, so memory holds one batch at a time.
Types: identifiers and labels ``string``; ``epsilon`` and ``z`` ``double``; ``position``
``int64``; times ``timestamp[us, tz=UTC]`` (``approved_at`` null for an item never
approved). The ``ranking`` column is the CSV's text (item ids best → worst, joined by
``>``), so both files hold the same values row for row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import IO

from ..core.errors import NotInstalled
from ..rankings.service import RANKINGS_CSV_COLUMNS
from .export import CSV_COLUMNS, ITEM_COLUMNS

__all__ = [
    "COMPARISON_TYPES",
    "ITEM_TYPES",
    "MEDIA_TYPE",
    "RANKING_TYPES",
    "ParquetUnavailable",
    "require_pyarrow",
    "write_parquet",
]

MEDIA_TYPE = "application/vnd.apache.parquet"
INSTALL_HINT = "Parquet exports need pyarrow: install privrank[parquet] (pip install 'privrank[parquet]')"

#: Each export's column types, in its columns' order.
COMPARISON_TYPES = dict(
    zip(CSV_COLUMNS, ("string", "string", "string", "string", "double", "double", "timestamp"), strict=True)
)
RANKING_TYPES = dict(
    zip(RANKINGS_CSV_COLUMNS, ("string", "double", "string", "string", "timestamp"), strict=True)
)
ITEM_TYPES = dict(
    zip(
        ITEM_COLUMNS, ("string", "int64", "string", "string", "string", "timestamp", "timestamp"), strict=True
    )
)


class ParquetUnavailable(NotInstalled):
    """pyarrow is not installed on this server (501)."""


def require_pyarrow():
    """The ``pyarrow`` module, or :class:`ParquetUnavailable`."""
    try:
        import pyarrow
        import pyarrow.parquet  # the writer lives in this submodule
    except ImportError:
        raise ParquetUnavailable(INSTALL_HINT) from None
    return pyarrow


def _schema(pa, types: dict[str, str]):
    kinds = {
        "string": pa.string(),
        "double": pa.float64(),
        "int64": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    return pa.schema([pa.field(name, kinds[kind], nullable=True) for name, kind in types.items()])


def write_parquet(out: IO[bytes], types: dict[str, str], batches: Iterable[Sequence[tuple]]) -> None:
    """Write typed row batches (tuples in ``types``' column order) into ``out``, one row group
    per non-empty batch; a file with no rows still carries the schema."""
    pa = require_pyarrow()
    schema = _schema(pa, types)
    with pa.parquet.ParquetWriter(out, schema, compression="zstd") as writer:
        for rows in batches:
            if not rows:
                continue
            columns = list(zip(*rows, strict=True))
            writer.write_table(
                pa.Table.from_arrays(
                    [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)],
                    schema=schema,
                )
            )
