"""GET …/comparisons.parquet, …/rankings.parquet, …/items.parquet: the CSV exports' rows,
typed, read back with pyarrow; a server without pyarrow answers 501."""

from __future__ import annotations

import csv
import io
import sys
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.analysis import parquet
from app.analysis.export import iso_utc
from app.core.csvcells import spreadsheet_text
from tests.helpers.api import (
    ADMIN,
    analyst_headers,
    create_central_survey,
    create_ranking_survey,
    create_survey,
    register,
)

TS = pa.timestamp("us", tz="UTC")


def get_csv(client, url, headers=ADMIN) -> list[dict]:
    r = client.get(url, headers=headers)
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))


def get_parquet(client, url, headers=ADMIN) -> pa.Table:
    r = client.get(url, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/vnd.apache.parquet"
    assert r.headers["content-disposition"].endswith('.parquet"')
    return pq.read_table(io.BytesIO(r.content))


def as_csv_text(value) -> str:
    """A Parquet value as the CSV export writes it (text with the spreadsheet rule of
    :mod:`app.core.csvcells`: Parquet keeps the text as stored)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime):
        assert value.utcoffset().total_seconds() == 0
        return iso_utc(value.astimezone(UTC).replace(tzinfo=None))
    if isinstance(value, str):
        return spreadsheet_text(value)
    return str(value)


def assert_same_rows(table: pa.Table, rows: list[dict]) -> None:
    assert table.column_names == list(rows[0]) if rows else True
    got = [{k: as_csv_text(v) for k, v in rec.items()} for rec in table.to_pylist()]
    assert got == rows


def test_comparisons_parquet_equals_the_csv(client):
    # All 3 pairs at ε up to 3: a cap of 9.
    s = create_survey(client, items=("A", "B", "C"), epsilon_min=0.5, epsilon_max=3.0, respondent_budget=9.0)
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    for eps in (0.5, 1.0, 3.0):
        _, h = register(client, sid, eps)
        body = {
            "privatized": False,
            "comparisons": [
                {"a": ids[0], "b": ids[1], "winner": ids[0]},
                {"a": ids[2], "b": ids[1], "winner": ids[1]},
            ],
        }
        assert client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h).status_code == 201
    imported = "respondent,item_a,item_b,winner,epsilon\next-1,A,C,C,1.25\n"
    r = client.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=true",
        content=imported,
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    analyst = analyst_headers(client)
    table = get_parquet(client, f"/v1/surveys/{sid}/comparisons.parquet", analyst)
    assert table.schema == pa.schema(
        [
            ("respondent", pa.string()),
            ("item_a", pa.string()),
            ("item_b", pa.string()),
            ("winner", pa.string()),
            ("epsilon", pa.float64()),
            ("z", pa.float64()),
            ("created_at", TS),
        ]
    )
    rows = get_csv(client, f"/v1/surveys/{sid}/comparisons.csv", analyst)
    assert len(rows) == 7 and table.num_rows == 7
    assert_same_rows(table, rows)
    # Within the hour, respondent by respondent (not in order of arrival).
    respondents = table.column("respondent").to_pylist()
    assert respondents == sorted(respondents) and respondents[0] == "ext-1"
    eps = dict(zip(respondents, table.column("epsilon").to_pylist(), strict=True))
    assert sorted(eps.values()) == [0.5, 1.0, 1.25, 3.0]
    assert {(t.minute, t.second, t.microsecond) for t in table.column("created_at").to_pylist()} == {
        (0, 0, 0)
    }


def test_rankings_parquet_equals_the_csv(client):
    s = create_ranking_survey(client, items=("a", "b", "c", "d"))
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    for _ in range(3):
        _, h = register(client, sid, 2.0)
        body = {"privatized": False, "ranking": [ids[2], ids[0]]}
        assert client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h).status_code == 201
    ballots = "respondent,ranking,epsilon\nvoter-1,d>c>b>a,1.5\n"
    r = client.post(
        f"/v1/surveys/{sid}/rankings/import?privatized=true",
        content=ballots,
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    table = get_parquet(client, f"/v1/surveys/{sid}/rankings.parquet")
    assert table.schema == pa.schema(
        [
            ("respondent", pa.string()),
            ("epsilon", pa.float64()),
            ("source", pa.string()),
            ("ranking", pa.string()),
            ("created_at", TS),
        ]
    )
    rows = get_csv(client, f"/v1/surveys/{sid}/rankings.csv")
    assert len(rows) == 4
    assert_same_rows(table, rows)
    assert table.column("ranking").to_pylist()[-1] == ">".join(reversed(ids))
    assert table.column("source").to_pylist() == ["server", "server", "server", "import"]
    # A pairwise survey has no rankings; a ranking survey no comparisons.
    pairwise = create_survey(client)
    r = client.get(f"/v1/surveys/{pairwise['id']}/rankings.parquet", headers=ADMIN)
    assert r.status_code == 409 and "comparisons.parquet" in r.json()["detail"]
    assert client.get(f"/v1/surveys/{sid}/comparisons.parquet", headers=ADMIN).status_code == 409


def test_items_parquet_equals_the_csv(client):
    s = create_survey(client, items=("Parks", "Ünïcödé — 東京", '=HYPERLINK("x")'))
    sid = s["id"]
    r = client.post(f"/v1/surveys/{sid}/items", json={"items": ["Night buses"]}, headers=ADMIN)
    assert r.status_code in (200, 201), r.text
    table = get_parquet(client, f"/v1/surveys/{sid}/items.parquet")
    assert table.schema == pa.schema(
        [
            ("item", pa.string()),
            ("position", pa.int64()),
            ("label", pa.string()),
            ("source", pa.string()),
            ("status", pa.string()),
            ("added_at", TS),
            ("approved_at", TS),
        ]
    )
    rows = get_csv(client, f"/v1/surveys/{sid}/items.csv")
    assert len(rows) == 4
    assert_same_rows(table, rows)
    assert table.column("position").to_pylist() == [0, 1, 2, 3]
    assert table.column("label").to_pylist()[1:3] == ["Ünïcödé — 東京", '=HYPERLINK("x")']
    assert rows[2]["label"] == """'=HYPERLINK("x")"""
    assert table.column("approved_at").null_count == sum(r["approved_at"] == "" for r in rows)


def test_empty_exports_carry_the_schema(client):
    s = create_survey(client)
    table = get_parquet(client, f"/v1/surveys/{s['id']}/comparisons.parquet")
    assert table.num_rows == 0 and table.schema.field("created_at").type == TS


def test_central_surveys_have_no_comparisons_export(client):
    c = create_central_survey(client)
    r = client.get(f"/v1/surveys/{c['id']}/comparisons.parquet", headers=ADMIN)
    assert r.status_code == 409


def test_each_batch_is_written_as_it_arrives():
    """One row group per batch, each written before the next batch is asked for (so memory
    holds one batch, whatever the export's size)."""
    out = io.BytesIO()
    sizes: list[int] = []

    def batches():
        for k in range(4):
            sizes.append(out.tell())
            yield [
                (f"itm_{k}_{n}", n, "x" * 50, "seed", "live", datetime(2026, 1, 1, tzinfo=UTC), None)
                for n in range(500)
            ]

    parquet.write_parquet(out, parquet.ITEM_TYPES, batches())
    assert sizes[1] < sizes[2] < sizes[3]  # the file grew with each batch
    out.seek(0)
    f = pq.ParquetFile(out)
    assert f.num_row_groups == 4 and f.metadata.num_rows == 2000


def test_without_pyarrow_the_parquet_exports_are_501(client, monkeypatch):
    s = create_ranking_survey(client)
    p = create_survey(client)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow → ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    for url in (
        f"/v1/surveys/{p['id']}/comparisons.parquet",
        f"/v1/surveys/{s['id']}/rankings.parquet",
        f"/v1/surveys/{s['id']}/items.parquet",
    ):
        r = client.get(url, headers=ADMIN)
        assert r.status_code == 501, (url, r.text)
        assert "install privrank[parquet]" in r.json()["detail"]
    # The CSVs do not need it.
    assert client.get(f"/v1/surveys/{s['id']}/items.csv", headers=ADMIN).status_code == 200
    with pytest.raises(parquet.ParquetUnavailable):
        parquet.require_pyarrow()
