"""Item labels are one label whatever their Unicode normalization form.

"é" precomposed (U+00E9) and "e" followed by a combining acute accent (U+0301) look
the same to everyone; before, they became two items of one survey. Labels are stored
in NFC, checked for uniqueness in NFC and looked up (CSV imports) in NFC. Case is kept
and counts: "Café" and "café" are two items.
"""

from __future__ import annotations

import unicodedata

from sqlalchemy import select

from app.core.db.models import Comparison, Item
from tests.helpers.api import ADMIN, create_survey

COMPOSED = "Caf\u00e9"
DECOMPOSED = "Cafe\u0301"


def test_the_two_forms_differ_as_strings():
    assert COMPOSED != DECOMPOSED
    assert unicodedata.normalize("NFC", DECOMPOSED) == COMPOSED


def test_creating_a_survey_with_both_forms_is_refused(client, unchanged):
    with unchanged():
        r = client.post(
            "/v1/surveys", json={"title": "t", "items": [COMPOSED, "Tea", DECOMPOSED]}, headers=ADMIN
        )
    assert r.status_code == 422, r.text
    assert "repeated" in r.json()["detail"]


def test_labels_are_stored_in_nfc(client, db):
    s = create_survey(client, items=(DECOMPOSED, "Tea"))
    assert [it["label"] for it in s["items"]] == [COMPOSED, "Tea"]
    stored = db.scalars(select(Item.label).where(Item.survey_id == s["id"]).order_by(Item.position)).all()
    assert stored == [COMPOSED, "Tea"]


def test_adding_the_other_form_later_is_refused(client, unchanged):
    s = create_survey(client, items=(COMPOSED, "Tea"))
    with unchanged():
        r = client.post(f"/v1/surveys/{s['id']}/items", json={"items": [DECOMPOSED]}, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert "already in the survey" in r.json()["detail"]
    # Case counts: another label, another item.
    r = client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["caf\u00e9"]}, headers=ADMIN)
    assert r.status_code == 201, r.text


def test_a_label_stored_before_normalization_still_clashes(client, db, unchanged):
    """A row written before labels were normalized (decomposed in the database) still
    blocks its other form, and an import naming it in either form finds it."""
    s = create_survey(client, items=("Tea", "Milk"))
    item = db.scalar(select(Item).where(Item.survey_id == s["id"], Item.label == "Milk"))
    item.label = DECOMPOSED
    db.commit()
    with unchanged():
        r = client.post(f"/v1/surveys/{s['id']}/items", json={"items": [COMPOSED]}, headers=ADMIN)
    assert r.status_code == 422, r.text
    body = f"respondent,item_a,item_b,winner,epsilon\np1,{COMPOSED},Tea,Tea,1\np2,Tea,{DECOMPOSED},Tea,1\n"
    r = client.post(
        f"/v1/surveys/{s['id']}/comparisons/import?privatized=true",
        content=body.encode(),
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["imported"] == 2


def test_an_import_names_an_item_by_either_form(client, db):
    s = create_survey(client, items=(COMPOSED, "Tea", "Milk"))
    sid = s["id"]
    body = (
        "respondent,item_a,item_b,winner,epsilon\n"
        f"p1,{DECOMPOSED},Tea,{DECOMPOSED},1\n"
        f"p1,Milk,{COMPOSED},{COMPOSED},1\n"
        f"p2, {DECOMPOSED} ,Milk,Milk,1\n"
    )
    r = client.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=true",
        content=body.encode(),
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    assert r.json() == {"imported": 3, "respondents": 2, "respondents_created": 2}
    rows = db.execute(
        select(Comparison.i, Comparison.j, Comparison.y_tilde)
        .where(Comparison.survey_id == sid)
        .order_by(Comparison.id)
    ).all()
    # Café is item 0: it won its two comparisons (y = 1: i won), Milk (2) beat it for p2.
    assert [tuple(x) for x in rows] == [(0, 1, 1), (0, 2, 1), (0, 2, 0)]
