"""Answers that were never randomized but declared privatized: the ranking says so.

A frontend bug can send true answers with ``privatized: true`` (here: a CSV import of
true answers declared at ε = 1). Debiasing then pushes win rates out of [0, 1]; the ranking
must answer 200 with scores, refuse intervals with a reason that names the cause, and
report the randomization check in its diagnostics — for every uncertainty setting."""

from __future__ import annotations

import itertools

from tests.helpers.api import ADMIN, analyst_headers, create_survey

ITEMS = ("A", "B", "C", "D", "E")


def _import(client, sid, rows):
    body = "respondent,item_a,item_b,winner,epsilon\n" + "".join(f"{r}\n" for r in rows)
    r = client.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=true",
        content=body,
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text


def test_true_answers_declared_privatized_are_named_in_the_ranking(client):
    s = create_survey(client, items=ITEMS, epsilon_min=0.5, epsilon_max=3.0, respondent_budget="unlimited")
    sid = s["id"]
    rows = [
        f"r{r},{a},{b},{a},1.0" for r in range(60) for a, b in itertools.combinations(ITEMS, 2)
    ]  # the earlier item always wins: consistent true answers
    _import(client, sid, rows)
    analyst = analyst_headers(client)
    for query in ("", "?k=2", "?covariance=model", "?uncertainty=bootstrap"):
        r = client.get(f"/v1/surveys/{sid}/ranking{query}", headers=analyst)
        assert r.status_code == 200, (query, r.text)
        data = r.json()
        u = data["uncertainty"]
        assert not u["available"] and u["reason"] == "unrandomized_answers", (query, u)
        assert "unrandomized" in u["message"] and "privatized: true" in u["message"]
        assert data["diagnostics"]["randomization_p_value"] < 1e-6
        assert [it["label"] for it in data["items"]] == list(ITEMS)  # the scores are still given


def test_honestly_randomized_answers_pass_the_check(client):
    s = create_survey(client, items=ITEMS, epsilon_min=0.5, epsilon_max=3.0, respondent_budget="unlimited")
    sid = s["id"]
    # Half of each pair's reports for each side: what randomized response at ε = 1 produces
    # with no preference — far inside the bound.
    rows = [
        f"r{r},{a},{b},{a if r % 2 else b},1.0"
        for r in range(60)
        for a, b in itertools.combinations(ITEMS, 2)
    ]
    _import(client, sid, rows)
    data = client.get(f"/v1/surveys/{sid}/ranking", headers=analyst_headers(client)).json()
    assert data["diagnostics"]["randomization_p_value"] == 1.0
    assert data["uncertainty"]["reason"] != "unrandomized_answers"
