"""The CSV exports put an apostrophe before every text cell a spreadsheet would run as a
formula (docs/how-to/import-export.md); numbers stay numbers and Parquet keeps the text as stored."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pyarrow.parquet as pq

from app.core.csvcells import FORMULA_STARTS, spreadsheet_text, stored_text
from tests.helpers.api import ADMIN, import_comparisons

HOSTILE = ['=HYPERLINK("http://evil","x")', "+1 more", "-5 degrees", "@SUM(A1)", "'quoted", "＝1+1", "Parks"]


def _csv(client, url: str) -> list[dict]:
    r = client.get(url, headers=ADMIN)
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))


def _survey_with_answers(client) -> str:
    r = client.post("/v1/surveys", json={"title": "cells", "items": HOSTILE}, headers=ADMIN)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    ids = [item["id"] for item in r.json()["items"]]
    rows = ["respondent,item_a,item_b,winner,epsilon"]
    rows += [f"r{k},{ids[k]},{ids[k + 1]},{ids[k + k % 2]},1.0" for k in range(len(ids) - 1)]
    import_comparisons(client, sid, rows)
    return sid


def test_items_csv_labels_are_escaped_and_parquet_keeps_them(client):
    sid = _survey_with_answers(client)
    rows = _csv(client, f"/v1/surveys/{sid}/items.csv")
    assert [row["label"] for row in rows] == [spreadsheet_text(label) for label in HOSTILE]
    assert [stored_text(row["label"]) for row in rows] == HOSTILE
    assert rows[-1]["label"] == "Parks" and rows[0]["label"] == "'" + HOSTILE[0]
    r = client.get(f"/v1/surveys/{sid}/items.parquet", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert pq.read_table(pa.BufferReader(r.content)).column("label").to_pylist() == HOSTILE


def test_no_cell_of_a_csv_export_starts_a_formula_and_numbers_stay_numbers(client):
    sid = _survey_with_answers(client)
    comparisons = _csv(client, f"/v1/surveys/{sid}/comparisons.csv")
    assert comparisons and any(float(row["z"]) < 0 for row in comparisons)  # debiased values below 0
    for url in ("items.csv", "comparisons.csv"):
        for row in _csv(client, f"/v1/surveys/{sid}/{url}"):
            for name, cell in row.items():
                if cell and cell[0] in FORMULA_STARTS:
                    float(cell)  # only a number may begin with "-" or "+"
                    assert name in ("z", "epsilon"), (url, name, cell)
