"""Text cells of the CSV files privrank writes, made safe to open in a spreadsheet.

A spreadsheet evaluates a cell that begins with ``=``, ``+``, ``-`` or ``@`` (and,
in some, a tab or a carriage return before one) as a formula: a respondent's
suggestion ``=HYPERLINK(…)`` would run in the analyst's spreadsheet (OWASP, "CSV
Injection"). Every text cell of an export goes through :func:`spreadsheet_text`,
which puts an apostrophe before such a cell, and before a cell that already begins
with an apostrophe, so that the rule can be undone exactly (:func:`stored_text`).
Numbers are written as numbers (a negative score stays ``-0.5``). docs/how-to/import-export.md.

Dependency-free: the service's exports (``app.analysis.export``) and the CLI's
(``app.cli.exporter``) both use it.
"""

from __future__ import annotations

__all__ = ["FORMULA_STARTS", "csv_cell", "spreadsheet_text", "stored_text"]

#: First characters that make a spreadsheet read a cell as a formula, with their
#: full-width forms (which some spreadsheets fold to the ASCII ones).
FORMULA_STARTS = frozenset("=+-@\t\r\n＝＋－＠")
_ESCAPE = "'"


def spreadsheet_text(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows as text: an apostrophe before a cell
    that begins with a formula character or with an apostrophe; any other unchanged."""
    if text and (text[0] in FORMULA_STARTS or text[0] == _ESCAPE):
        return _ESCAPE + text
    return text


def stored_text(cell: str) -> str:
    """The text a cell of :func:`spreadsheet_text` came from (its inverse)."""
    return cell[1:] if cell.startswith(_ESCAPE) else cell


def csv_cell(value) -> str | int:
    """A typed value as an export's CSV writes it: None empty, floats by ``repr`` (they
    round-trip exactly), text through :func:`spreadsheet_text`, anything else as it is."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return spreadsheet_text(value)
    return value
