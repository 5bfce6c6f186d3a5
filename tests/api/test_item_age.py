"""Rankings say when each item joined the survey and how many comparisons it has, so
that an item added late — with few comparisons and a wide interval — reads as young,
not as uncertain for no reason."""

from __future__ import annotations

from datetime import datetime

from tests.helpers.api import ADMIN, create_survey, register


def _answer_all(client, sid, ids, respondents, winner_first=True):
    for _ in range(respondents):
        _, h = register(client, sid)
        comps = [
            {"a": a, "b": b, "winner": a if winner_first else b}
            for k, a in enumerate(ids)
            for b in ids[k + 1 :]
        ]
        assert (
            client.post(
                f"/v1/surveys/{sid}/responses", json={"privatized": False, "comparisons": comps}, headers=h
            ).status_code
            == 201
        )


def test_a_late_item_shows_its_age_and_few_comparisons(client):
    s = create_survey(client, items=("A", "B", "C"), respondent_budget="unlimited")
    sid, first_ids = s["id"], [it["id"] for it in s["items"]]
    _answer_all(client, sid, first_ids, 30)
    assert client.post(f"/v1/surveys/{sid}/items", json={"items": ["D"]}, headers=ADMIN).status_code == 201
    ids = [it["id"] for it in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]]
    late = ids[-1]
    _answer_all(client, sid, ids, 5)
    ranking = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    by_id = {it["item_id"]: it for it in ranking["items"]}
    when = {k: datetime.fromisoformat(v["added_at"]) for k, v in by_id.items()}
    assert all(when[late] > when[x] for x in first_ids)  # the late item is the youngest
    assert by_id[late]["comparisons"] == 5 * 3 and all(
        by_id[x]["comparisons"] == 30 * 2 + 5 * 3 for x in first_ids
    )
    # Every item of the list carries both, whatever the uncertainty could say.
    assert all("added_at" in it and "comparisons" in it for it in ranking["items"])
