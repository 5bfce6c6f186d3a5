"""Surveys, items and the authorization rules around them."""

from __future__ import annotations

import math

import pytest

from tests.helpers.api import ADMIN, analyst_headers, create_survey, register


def test_create_survey_returns_items_and_privacy(client):
    body = {
        "title": "  Which policy matters most?  ",
        "kind": "pairwise",
        "items": ["Housing", "Transit", "Parks"],
        "privacy": {
            "model": "local",
            "epsilon_default": 1.0,
            "epsilon_min": 0.5,
            "epsilon_max": 3.0,
            "respondent_budget": 20.0,
        },
    }
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201
    s = r.json()
    assert s["id"].startswith("srv_") and s["title"] == "Which policy matters most?"
    assert s["status"] == "open" and s["kind"] == "pairwise"
    assert [(i["label"], i["position"]) for i in s["items"]] == [("Housing", 0), ("Transit", 1), ("Parks", 2)]
    assert len({i["id"] for i in s["items"]}) == 3
    p = s["privacy"]
    assert (p["epsilon_default"], p["epsilon_min"], p["epsilon_max"], p["respondent_budget"]) == (
        1,
        0.5,
        3,
        20,
    )
    assert p["flip_probability_default"] == pytest.approx(1 / (1 + math.e))
    assert client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json() == s


def test_privacy_defaults(client):
    s = create_survey(client, items=("x", "y"))
    p = s["privacy"]
    assert p.pop("summary")["budget_policy"] == "capped"  # tests/api/test_privacy_by_default.py
    assert p == {
        "model": "local",
        "epsilon_default": 1.0,
        "epsilon_min": 0.1,
        "epsilon_max": 2.0,
        "respondent_budget": 5.0,
        "respondent_budget_policy": "capped",
        "flip_probability_default": pytest.approx(0.2689414),
        "total_budget": None,
        "max_comparisons_per_respondent": None,
    }
    s = create_survey(client, items=("x", "y"), epsilon_default=8.0, respondent_budget=16.0)
    assert (s["privacy"]["epsilon_min"], s["privacy"]["epsilon_max"]) == (0.1, 8.0)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"title": "t", "items": ["only one"]}, "items"),
        ({"title": "t", "items": ["a", "a"]}, "unique"),
        ({"title": "t", "items": ["a", "  "]}, "empty"),
        ({"title": "", "items": ["a", "b"]}, "title"),
        ({"title": "t", "items": ["a", "b"], "kind": "rating"}, "kind"),
        ({"title": "t", "items": ["a", "b"], "privacy": {"epsilon_default": 0}}, "epsilon_default"),
        ({"title": "t", "items": ["a", "b"], "privacy": {"epsilon_default": 2, "epsilon_max": 1}}, "bounds"),
        ({"title": "t", "items": ["a", "b"], "privacy": {"epsilon_default": 50}}, "epsilon_default"),
        (
            {"title": "t", "items": ["a", "b"], "privacy": {"epsilon_min": 0.5, "respondent_budget": 0.1}},
            "budget",
        ),
        ({"title": "t", "items": ["a", "b"], "privacy": {"model": "central"}}, "central"),
        ({"title": "t", "items": ["a", "b"], "surprise": 1}, "extra field"),
        ({"title": "t\u0000", "items": ["a", "b"]}, "must not contain NUL"),
        ({"title": "t", "items": ["a", "b\u0000"]}, "must not contain NUL"),
        ({"title": "t", "items": ["a", "b"], "privacy": {"epsilon_min": 1e-7}}, "epsilon_min"),
    ],
)
def test_invalid_survey_is_rejected_and_stores_nothing(client, unchanged, body, fragment):
    with unchanged():
        r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 422
    assert fragment in r.text


def test_authorization_on_survey_routes(client, unchanged):
    s = create_survey(client)
    analyst = analyst_headers(client)
    _, respondent = register(client, s["id"])
    body = {"title": "t", "items": ["a", "b"]}
    with unchanged():
        assert client.post("/v1/surveys", json=body).status_code == 401
        r = client.post("/v1/surveys", json=body, headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert client.post("/v1/surveys", json=body, headers=analyst).status_code == 403
        assert client.post("/v1/surveys", json=body, headers=respondent).status_code == 403
        assert (
            client.patch(f"/v1/surveys/{s['id']}", json={"status": "closed"}, headers=analyst).status_code
            == 403
        )
        assert (
            client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["E"]}, headers=analyst).status_code
            == 403
        )
    assert client.get(f"/v1/surveys/{s['id']}", headers=analyst).status_code == 200
    assert client.get(f"/v1/surveys/{s['id']}", headers=respondent).status_code == 403
    assert client.get("/v1/surveys", headers=respondent).status_code == 403
    assert client.get(f"/v1/surveys/{s['id']}").status_code == 401


def test_get_unknown_survey_is_404(client):
    r = client.get("/v1/surveys/srv_doesnotexist", headers=ADMIN)
    assert r.status_code == 404 and "srv_doesnotexist" in r.json()["detail"]


def test_list_surveys_newest_first(client):
    a = create_survey(client)
    b = create_survey(client)
    r = client.get("/v1/surveys?limit=2", headers=ADMIN)
    assert r.status_code == 200
    data = r.json()
    assert data["total"] >= 2 and [s["id"] for s in data["surveys"]] == [b["id"], a["id"]]
    assert client.get("/v1/surveys?limit=0", headers=ADMIN).status_code == 422


def test_the_list_gives_item_counts_in_a_fixed_number_of_queries(client):
    """Each survey of the list is a summary with its item count, and the number of
    statements does not grow with the page (every survey with all its items, one query
    per survey, makes 20 surveys of 10,000 items with long labels a 106 MiB answer)."""
    from sqlalchemy import event

    made = [create_survey(client, items=[f"i{k}" for k in range(n)]) for n in (3, 7, 12)]
    extra = client.post(f"/v1/surveys/{made[0]['id']}/items", json={"items": ["x", "y"]}, headers=ADMIN)
    assert extra.status_code == 201
    page = client.get("/v1/surveys?limit=3", headers=ADMIN).json()["surveys"]
    assert [(s["id"], s["n_items"]) for s in page] == [
        (made[2]["id"], 12),
        (made[1]["id"], 7),
        (made[0]["id"], 5),
    ]
    assert "items" not in page[0] and page[0]["privacy"]["model"] == "local"

    statements: list[str] = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    engine = client.app.state.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        assert client.get("/v1/surveys?limit=2", headers=ADMIN).status_code == 200
        few = len(statements)
        statements.clear()
        assert client.get("/v1/surveys?limit=1000", headers=ADMIN).status_code == 200
        many = len(statements)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert many == few


def test_close_and_reopen(client, unchanged):
    s = create_survey(client)
    _rid, resp = register(client, s["id"])
    r = client.patch(f"/v1/surveys/{s['id']}", json={"status": "closed"}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["status"] == "closed"
    a, b = s["items"][0]["id"], s["items"][1]["id"]
    with unchanged():
        assert client.post(f"/v1/surveys/{s['id']}/respondents", json={}).status_code == 409
        r = client.post(
            f"/v1/surveys/{s['id']}/responses",
            headers=resp,
            json={"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a}]},
        )
        assert r.status_code == 409 and "closed" in r.json()["detail"]
        assert (
            client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["E"]}, headers=ADMIN).status_code
            == 409
        )
    closed = client.get(f"/v1/surveys/{s['id']}/pairs", headers=resp).json()
    assert closed["pairs"] == [] and closed["reason"] == "closed"
    r = client.patch(f"/v1/surveys/{s['id']}", json={"status": "open", "title": "Renamed"}, headers=ADMIN)
    assert r.json()["status"] == "open" and r.json()["title"] == "Renamed"
    with unchanged():
        assert (
            client.patch(f"/v1/surveys/{s['id']}", json={"status": "paused"}, headers=ADMIN).status_code
            == 422
        )
        assert client.patch("/v1/surveys/srv_nope", json={"status": "open"}, headers=ADMIN).status_code == 404


def test_add_items_to_open_survey(client, unchanged):
    s = create_survey(client, items=("A", "B"))
    r = client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["C", "D"]}, headers=ADMIN)
    assert r.status_code == 201
    assert [(i["label"], i["position"]) for i in r.json()] == [("C", 2), ("D", 3)]
    assert len(client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()["items"]) == 4
    with unchanged():
        r = client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["A"]}, headers=ADMIN)
        assert r.status_code == 422 and "already in the survey" in r.text
        assert (
            client.post(f"/v1/surveys/{s['id']}/items", json={"items": []}, headers=ADMIN).status_code == 422
        )
        assert (
            client.post("/v1/surveys/srv_nope/items", json={"items": ["Z"]}, headers=ADMIN).status_code == 404
        )


def test_public_survey_facts_and_the_coverage_matrix(client, unchanged):
    from tests.helpers.api import register

    s = create_survey(client, epsilon_default=1.0, epsilon_min=0.5, epsilon_max=3.0, respondent_budget=10)
    with unchanged():
        r = client.get(f"/v1/surveys/{s['id']}/public")  # no credentials
    assert r.status_code == 200
    public = r.json()
    assert public.pop("privacy_summary") == s["privacy"]["summary"]  # the dashboard's numbers
    assert public == {
        "id": s["id"],
        "title": s["title"],
        "kind": "pairwise",
        "status": "open",
        "n_items": 4,
        "privacy_model": "local",
        "epsilon_default": 1.0,
        "epsilon_min": 0.5,
        "epsilon_max": 3.0,
        "respondent_budget": 10.0,
        "respondent_budget_policy": "capped",
        "max_comparisons_per_respondent": None,
        "goal_met": None,
        "suggestions": None,
        "public_results": False,
        "results_on_finish": False,
        "language": "en",
        "languages": ["en", "es", "de", "fr"],
    }
    assert client.get("/v1/surveys/srv_aaaaaaaaaaaaaaaa/public").status_code == 404
    a, b, c, _ = (it["id"] for it in s["items"])
    _, h = register(client, s["id"], 1.0)
    body = {
        "privatized": False,
        "comparisons": [{"a": a, "b": b, "winner": a}, {"a": c, "b": a, "winner": c}],
    }
    assert client.post(f"/v1/surveys/{s['id']}/responses", json=body, headers=h).status_code == 201
    cov = client.get(f"/v1/surveys/{s['id']}/coverage", headers=ADMIN).json()
    assert cov["counts"][0][1] == cov["counts"][1][0] == 1 and cov["counts"][0][2] == 1
    assert cov["counts"][0][0] is None and cov["counts"][1][2] == 0
    assert (cov["pairs_observed"], cov["pairs_total"]) == (2, 6)
    assert client.get(f"/v1/surveys/{s['id']}/coverage").status_code == 401
    assert client.get(f"/v1/surveys/{s['id']}/coverage", headers=h).status_code == 403
    central = client.post(
        "/v1/surveys",
        json={
            "title": "c",
            "items": ["x", "y"],
            "privacy": {"model": "central", "total_budget": 1, "max_comparisons_per_respondent": 1},
        },
        headers=ADMIN,
    ).json()
    r = client.get(f"/v1/surveys/{central['id']}/coverage", headers=ADMIN)
    assert r.status_code == 409  # which pairs were answered is protected in the central model


def test_a_text_too_long_is_counted_in_characters(client, unchanged):
    """Fields of annotated strings (titles, labels, translations) too long are refused
    with a message that speaks of characters, not "at most 500 items after validation"."""
    with unchanged():
        r = client.post("/v1/surveys", json={"title": "t" * 501, "items": ["a", "b"]}, headers=ADMIN)
        label = client.post("/v1/surveys", json={"title": "t", "items": ["a", "b" * 501]}, headers=ADMIN)
    assert r.status_code == label.status_code == 422
    for resp in (r, label):
        msgs = [e["msg"] for e in resp.json()["detail"]]
        assert "String should have at most 500 characters" in msgs, msgs
        assert not any("items" in m for m in msgs)
