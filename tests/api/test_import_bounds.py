"""A CSV import costs memory in proportion to what it keeps, not several copies of its body.

The body is read as it is parsed, one record at a time: never held as bytes, as decoded
text and as a copy (four bytes a character, 1.67 GB for a 250 MiB body with a wide
ignored column), and a body of blank lines is refused at the row limit rather than
parsed whole before "no data rows".
"""

from __future__ import annotations

import io
import tracemalloc
from types import SimpleNamespace

import pytest

from app.respondents import imports
from tests.helpers.api import ADMIN, create_survey

SURVEY = SimpleNamespace(privacy_model="local", epsilon_min=0.1, epsilon_max=10.0, epsilon_default=1.0)


def _stream(body: bytes) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(body), encoding="utf-8-sig", newline="")


def test_parsing_a_wide_body_does_not_copy_it():
    """600 rows with a 100 kB ignored column (57 MiB): the parse allocates a few MiB at
    most (one row at a time), where decoding and copying the body took 287 MiB."""
    pad = "x" * 100_000
    body = (
        "respondent,item_a,item_b,winner,epsilon,notes\n"
        + "".join(f"r{k},A,B,A,1.0,{pad}\n" for k in range(600))
    ).encode()
    tracemalloc.start()
    try:
        rows, refs, eps, lines = imports._parse_import(_stream(body), 10**6, SURVEY, {"A": "A", "B": "B"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"\n{len(body) / 2**20:.0f} MiB body: parse peak {peak / 2**20:.1f} MiB")
    assert len(rows) == 600 and refs[-1] == "r599" and eps[0] == 1.0 and lines[-1] == 601
    assert peak < 8 * 2**20


class _CountingStream:
    """A text stream that counts the lines read from it."""

    def __init__(self, stream: io.TextIOWrapper) -> None:
        self.stream = stream
        self.lines = 0

    def readline(self, size: int = -1) -> str:
        line = self.stream.readline(size)
        self.lines += bool(line)
        return line


def test_blank_lines_count_towards_the_row_limit():
    """A body of 3,000,000 blank lines with a limit of 1,000 rows is refused after reading
    the header and 1,001 lines, not parsed to its end."""
    stream = _CountingStream(
        _stream(("respondent,item_a,item_b,winner,epsilon\n" + "\n" * 3_000_000).encode())
    )
    with pytest.raises(imports.Invalid, match="at most 1000 rows per import"):
        imports._parse_import(stream, 1_000, SURVEY, {})
    assert stream.lines == 1 + 1_001
    with pytest.raises(imports.Invalid, match="no data rows"):
        imports._parse_import(_stream(b"respondent,item_a,item_b,winner,epsilon\n\n\n"), 10, SURVEY, {})


@pytest.mark.parametrize("where", ["row", "header", "quoted"])
def test_a_row_of_commas_is_refused_before_it_is_held(where):
    """csv.reader makes a field of every comma and holds the whole record: a 20 MiB row of
    commas would hold ~230 MiB (~3 GB for a 256 MiB body) before the row is looked at. A
    record, the header too, is at most 2**20 characters, however it spans lines."""
    header = "respondent,item_a,item_b,winner,epsilon"
    commas = "," * (20 * 2**20)
    body = {
        "row": f"{header}\nr,A,B,A,1{commas}\n",
        "header": f"{header}{commas}\nr,A,B,A,1\n",
        "quoted": f"{header}\nr,A,B,A,1," + '"\n",' * (5 * 2**20) + "\n",
    }[where].encode()
    tracemalloc.start()
    try:
        with pytest.raises(imports.Invalid, match="longer than 1048576 characters"):
            imports._parse_import(_stream(body), 10**6, SURVEY, {"A": "A", "B": "B"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, peak


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\xff\xfe", "UTF-8"),  # in the header
        (b"respondent,item_a,item_b,winner,epsilon\nr,A,B,A,1\nr2,A,\xc3(,A,1\n", "UTF-8"),  # in a row
        (b"", "lacks column"),
        (b"respondent,item_a,item_b,winner,epsilon\nr,A,B,A\n", "epsilon"),  # a short row
        # float() reads these (as 1 and 2): not plain decimal numbers, so refused.
        (b"respondent,item_a,item_b,winner,epsilon\nr,A,B,A,0_1\n", "epsilon is not a number"),
        ("respondent,item_a,item_b,winner,epsilon\nr,A,B,A,\u0662\n".encode(), "epsilon is not a number"),
    ],
)
def test_bad_bodies_are_422_through_the_api(client, body, message):
    s = create_survey(client, items=("A", "B", "C"))
    r = client.post(
        f"/v1/surveys/{s['id']}/comparisons/import?privatized=true",
        content=body,
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 422 and message in r.json()["detail"], r.text
