"""A central survey's respondents and stored comparisons, for the operator's dashboard."""

from __future__ import annotations

from tests.helpers.api import ADMIN, analyst_headers, create_central_survey, create_survey, register


def _answer(client, sid, headers, pairs):
    body = {"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a} for a, b in pairs]}
    r = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)
    assert r.status_code in (200, 201), r.text


def test_a_central_survey_counts_its_respondents_and_comparisons(client):
    s = create_central_survey(client, items=("a", "b", "c", "d"))
    url = f"/v1/surveys/{s['id']}"
    fresh = client.get(url, headers=ADMIN).json()
    assert (fresh["respondents"], fresh["comparisons"]) == (0, 0)
    a, b, c, d = (it["id"] for it in s["items"])
    _, one = register(client, s["id"])
    _, two = register(client, s["id"])
    register(client, s["id"])  # registered, never answered
    _answer(client, s["id"], one, [(a, b), (c, d)])
    _answer(client, s["id"], two, [(a, c)])
    now = client.get(url, headers=analyst_headers(client)).json()
    assert (now["respondents"], now["comparisons"]) == (3, 3)


def test_a_local_survey_leaves_the_counts_out(client):
    s = create_survey(client)
    register(client, s["id"], epsilon=1.0)
    out = client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()
    assert out["respondents"] is None and out["comparisons"] is None


def test_a_moderator_does_not_get_a_central_surveys_counts(client):
    """The counts are the operator's (docs/reference/api.md): a moderator reads the survey's settings and
    items, with null where the operator sees how many respondents and answers there are."""
    s = create_central_survey(client, items=("a", "b", "c"))
    a, b, c = (it["id"] for it in s["items"])
    _, one = register(client, s["id"])
    _answer(client, s["id"], one, [(a, b), (b, c)])
    url = f"/v1/surveys/{s['id']}"
    for operator in (ADMIN, analyst_headers(client)):
        out = client.get(url, headers=operator).json()
        assert (out["respondents"], out["comparisons"]) == (1, 2)
    seen = client.get(url, headers=analyst_headers(client, role="moderator"))
    assert seen.status_code == 200, seen.text
    assert seen.json()["respondents"] is None and seen.json()["comparisons"] is None
    assert [it["id"] for it in seen.json()["items"]] == [a, b, c]  # the settings and items stay theirs


def test_a_moderator_does_not_get_a_central_surveys_undecided_count(client):
    """“Can't decide” is a survey-wide count like the other two (docs/how-to/privacy.md): exact for the
    operator, null for a moderator."""
    s = create_central_survey(client, items=("a", "b", "c"))
    sid = s["id"]
    _, one = register(client, sid)
    (pair,) = client.get(f"/v1/surveys/{sid}/pairs", params={"count": 1}, headers=one).json()["pairs"]
    r = client.post(f"/v1/surveys/{sid}/undecided", json={"ticket": pair["undecided_ticket"]}, headers=one)
    assert r.status_code == 204, r.text
    url = f"/v1/surveys/{sid}"
    for operator in (ADMIN, analyst_headers(client)):
        assert client.get(url, headers=operator).json()["undecided"] == 1
    seen = client.get(url, headers=analyst_headers(client, role="moderator"))
    assert seen.status_code == 200, seen.text
    assert seen.json()["undecided"] is None
    # The survey list's summaries carry no count at all.
    listed = client.get("/v1/surveys", headers=analyst_headers(client, role="moderator")).json()
    assert all("undecided" not in summary for summary in listed["surveys"])
