"""``privrank export``: one survey's releasable data, items and current ranking as files
for pandas and R.

It talks to a running service over HTTP with an admin or analyst key, like ``privrank
plan --survey``, and writes the items, the privatized data (none for a central-model
survey) and the current ranking into one directory, with a ``README.txt`` saying how to
load them (:func:`export_survey` lists the files), as CSV or Parquet (``--format``).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..core.csvcells import csv_cell
from ..core.keyed_http import RedirectRefused, open_keyed

__all__ = ["ExportError", "export_survey"]

#: The ranking file's columns and their types, in order; a column is written when the
#: ranking has it (``ci`` and ``rank_ci`` are split into lower and upper bounds).
RANKING_COLUMNS: dict[str, str] = {
    "rank": "int64",
    "item": "string",
    "label": "string",
    "score": "double",
    "se": "double",
    "ci_lower": "double",
    "ci_upper": "double",
    "rank_ci_lower": "int64",
    "rank_ci_upper": "int64",
    "mean_position": "double",
    "comparisons": "int64",
    "noisy_wins": "int64",
}

_DESCRIBE = {
    "items": "item (id), position (int), label, source (seed, added, suggested), status (live, hidden, "
    "review), added_at, approved_at (UTC; empty if never approved)",
    "comparisons": "respondent, item_a, item_b (item ids), winner (the privatized answer), epsilon, "
    "z (the debiased value towards item_a), created_at (UTC, rounded down to the hour; within an hour "
    "the rows are listed by respondent, not in order of arrival)",
    "rankings": "respondent, epsilon, source (server, client or import: who privatized), ranking "
    "(item ids best to worst joined by '>'; the Mallows mechanism's output, never the given ranking), "
    "created_at (UTC)",
    "ranking": "rank (1 = best), item (id), label, score, se, ci_lower/ci_upper (score interval), "
    "rank_ci_lower/rank_ci_upper (rank interval), mean_position (ranking surveys), comparisons "
    "(pairwise surveys), noisy_wins (a noisy_counts release); empty where the ranking has no value",
}


class ExportError(Exception):
    """A one-line reason the export failed."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class _Client:
    server: str
    key: str

    def open(self, path: str):
        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self.key}"}, method="GET"
        )
        try:
            return open_keyed(request, timeout=600)
        except urllib.error.HTTPError as exc:
            try:
                detail = json.load(exc).get("detail")
            except (ValueError, AttributeError):
                detail = exc.reason
            raise ExportError(f"GET {path}: the server answered {exc.code}: {detail}") from None
        except RedirectRefused as exc:
            raise ExportError(str(exc.reason) + " as --server") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ExportError(f"cannot reach {self.server}: {exc}") from None

    def json(self, path: str):
        with self.open(path) as response:
            try:
                return json.load(response)
            except ValueError:  # a proxy's or another server's page, say
                raise ExportError(
                    f"GET {path}: the answer is not JSON: is --server the service's address?"
                ) from None

    def download(self, path: str, target: Path) -> None:
        """Stream the body into ``target`` (a ``.part`` file: :func:`export_survey` renames it)."""
        with self.open(path) as response, open(target, "wb") as out:
            shutil.copyfileobj(response, out, 64 * 2**10)


def _part(target: Path) -> Path:
    return target.with_name(target.name + ".part")


def _ranking_rows(items: list[dict]) -> list[dict]:
    rows = []
    for it in items:
        row = {"rank": it.get("rank"), "item": it.get("item_id"), "label": it.get("label")}
        for name in ("score", "se", "mean_position", "comparisons", "noisy_wins"):
            row[name] = it.get(name)
        ci, rank_ci = it.get("ci") or (None, None), it.get("rank_ci") or (None, None)
        row["ci_lower"], row["ci_upper"] = ci
        row["rank_ci_lower"], row["rank_ci_upper"] = rank_ci
        rows.append(row)
    return rows


def _columns(rows: list[dict]) -> list[str]:
    """The ranking columns some row has a value for (rank, item and label always)."""
    return [
        name
        for name in RANKING_COLUMNS
        if name in ("rank", "item", "label") or any(r.get(name) is not None for r in rows)
    ]


def _write_ranking(rows: list[dict], part: Path, fmt: str) -> list[str]:
    """Write the ranking into ``part`` (a ``.part`` file: :func:`export_survey` renames it)."""
    columns = _columns(rows)
    if fmt == "csv":
        with open(part, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(columns)
            for r in rows:
                writer.writerow([csv_cell(r[c]) for c in columns])
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        kinds = {"int64": pa.int64(), "string": pa.string(), "double": pa.float64()}
        schema = pa.schema([pa.field(c, kinds[RANKING_COLUMNS[c]]) for c in columns])
        table = pa.Table.from_pylist([{c: r[c] for c in columns} for r in rows], schema=schema)
        pq.write_table(table, part)
    return columns


def _readme(
    survey: dict, files: dict[str, str], ranking_note: str, columns: list[str] | None, fmt: str
) -> str:
    lines = [
        f"privrank export of survey {survey['id']}: {survey.get('title', '')}",
        f"kind: {survey.get('kind')}; privacy model: {(survey.get('privacy') or {}).get('model')}",
        "",
        "Files (times are UTC):",
    ]
    for what, name in files.items():
        lines.append(f"  {name}: {_DESCRIBE[what]}")
    if columns is not None:
        lines.append(f"  ranking.{fmt} holds the columns: {', '.join(columns)}")
    lines.append(f"  The ranking: {ranking_note}")
    if "comparisons" not in files and "rankings" not in files:
        lines.append("  No data file: a central-model survey's true answers never leave the service.")
    lines += ["", "Load them in pandas:", "  import pandas as pd"]
    for name in [*files.values(), *([f"ranking.{fmt}"] if columns is not None else [])]:
        var = name.split(".")[0]
        call = "pd.read_csv" if fmt == "csv" else "pd.read_parquet"
        lines.append(f'  {var} = {call}("{name}")')
    lines += ["", "Load them in R:"]
    if fmt == "parquet":
        lines.append("  library(arrow)")
    for name in [*files.values(), *([f"ranking.{fmt}"] if columns is not None else [])]:
        var = name.split(".")[0]
        call = (
            f'read.csv("{name}", stringsAsFactors = FALSE)'
            if fmt == "csv"
            else f'arrow::read_parquet("{name}")'
        )
        lines.append(f"  {var} <- {call}")
    if "rankings" in files:
        lines += [
            "",
            "Split a ranking into item ids: rankings['ranking'].str.split('>') in pandas, "
            'strsplit(rankings$ranking, ">", fixed = TRUE) in R.',
        ]
    if fmt == "csv":
        lines += [
            "",
            "A text cell that begins with = + - @ (or their full-width forms), a tab, a line break or an",
            "apostrophe has an apostrophe put before it, so that a spreadsheet shows it instead of running",
            "it as a formula. The text",
            'as stored: drop that first apostrophe (items[\'label\'].str.replace("^\'", "", regex=True)',
            'in pandas, sub("^\'", "", items$label) in R).',
        ]
    return "\n".join(lines) + "\n"


def export_survey(
    server: str, key: str, survey_id: str, out_dir: Path, fmt: str = "csv", force: bool = False
) -> list[Path]:
    """Write the export; the files written. :class:`ExportError` with a one-line reason.

    Into ``out_dir``:

    * ``items.csv`` — ``GET …/items.csv`` (or ``.parquet``);
    * ``comparisons.csv`` (local pairwise surveys) or ``rankings.csv`` (ranking surveys)
      — the privatized data, ``GET …/comparisons.csv`` / ``…/rankings.csv``; a
      central-model survey has none (its true answers never leave the service);
    * ``ranking.csv`` — the current ranking, one row per item: ``GET …/ranking`` (the
      debiased MLE for pairwise surveys, the Borda consensus for ranking surveys) or, for
      a central-model survey, its newest release (``GET …/releases``);
    * ``README.txt`` — what each file and column holds and how to load them.

    With ``fmt="parquet"`` the data files are the service's Parquet exports and
    ``ranking.parquet`` is written here (pyarrow, the ``privrank[parquet]`` extra).
    Downloads go to ``*.part`` files, all renamed once every one is complete (an export
    that fails half-way leaves no file of it, nor a mix of new and older files); nothing
    is overwritten without ``force`` (checked before anything is fetched). Redirects are
    not followed: the key would go with them, to wherever the answer points.
    """
    if fmt not in ("csv", "parquet"):
        raise ExportError("--format must be csv or parquet", 2)
    if not server.startswith(("http://", "https://")):
        raise ExportError("--server must be an http:// or https:// URL", 2)
    if fmt == "parquet":
        try:
            import pyarrow.parquet  # noqa: F401 - checked before anything is fetched
        except ImportError:
            raise ExportError("--format parquet needs pyarrow: install privrank[parquet]", 2) from None
    client = _Client(server.rstrip("/"), key)
    base = f"/v1/surveys/{urllib.parse.quote(survey_id, safe='')}"
    survey = client.json(base)
    kind, model = survey.get("kind"), (survey.get("privacy") or {}).get("model")
    files = {"items": f"items.{fmt}"}
    if kind == "ranking":
        files["rankings"] = f"rankings.{fmt}"
    elif model == "local":
        files["comparisons"] = f"comparisons.{fmt}"
    targets = [out_dir / name for name in [*files.values(), f"ranking.{fmt}", "README.txt"]]
    existing = [t.name for t in targets if t.exists()]
    if existing and not force:
        raise ExportError(f"{out_dir} already holds {', '.join(existing)}; use --force to overwrite", 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        _stage(client, base, survey, files, out_dir, fmt, written)
        # Every file is complete: only now do they replace a previous export's.
        for target in written:
            os.replace(_part(target), target)
    finally:
        for target in targets:
            _part(target).unlink(missing_ok=True)
    if force and out_dir / f"ranking.{fmt}" not in written:
        (out_dir / f"ranking.{fmt}").unlink(missing_ok=True)  # not an older survey state's
    return written


def _stage(
    client: _Client, base: str, survey: dict, files: dict[str, str], out_dir: Path, fmt: str, written: list
) -> None:
    """Write each file of the export as its ``.part`` (``written`` gets the final names)."""
    kind, model = survey.get("kind"), (survey.get("privacy") or {}).get("model")
    for name in files.values():
        client.download(f"{base}/{name}", _part(out_dir / name))
        written.append(out_dir / name)
    # The ranking: the estimate (local surveys) or the newest release (central surveys).
    rows: list[dict] | None = None
    if model == "central":
        ledger = client.json(f"{base}/releases?limit=1")
        newest = (ledger.get("releases") or [None])[0]
        if newest is None:
            note = "none: the survey has no release yet (POST …/releases)"
        else:
            release = client.json(f"{base}/releases/{urllib.parse.quote(newest['id'], safe='')}")
            rows = _ranking_rows(release["result"]["items"])
            note = (
                f"the newest release {release['id']} ({release['method']}, epsilon {release['epsilon']:g}, "
                f"{release['created_at']})"
            )
    else:
        try:
            ranking = client.json(f"{base}/ranking")
        except ExportError as exc:
            if "answered 409" not in str(exc):
                raise
            note = f"none: {exc}"
        else:
            rows = _ranking_rows(ranking["items"])
            method = ranking.get("method")
            note = f"GET /ranking with method {method} (" + (
                "the Borda consensus of the synthetic rankings)" if kind == "ranking" else "the debiased MLE)"
            )
    columns = None
    if rows is not None:
        columns = _write_ranking(rows, _part(out_dir / f"ranking.{fmt}"), fmt)
        written.append(out_dir / f"ranking.{fmt}")
    readme = out_dir / "README.txt"
    _part(readme).write_text(_readme(survey, files, note, columns, fmt), encoding="utf-8")
    written.append(readme)
