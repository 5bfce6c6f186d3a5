"""Archiving an item (PATCH …/items/{iid} {"status": "archived"};
docs/how-to/moderate.md, "Archiving an item"): it is no longer served, no longer counts
toward the item limits and is left out of the rankings, while its stored answers stay."""

from __future__ import annotations

import numpy as np
import pytest

from app.analysis import diagnostics, intervals
from app.participation import moderation
from app.surveys import items
from app.surveys import service as surveys
from tests.helpers.api import ADMIN, analyst_headers, create_ranking_survey, register

EPS = 2.0


def _survey(client, labels, **extra) -> dict:
    body = {"title": "Archive", "items": list(labels), "privacy": {"respondent_budget": 100.0}, **extra}
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def _answers(labels, n_respondents: int, seed: int) -> list[list[tuple[str, str, str]]]:
    """Every respondent's randomized answers to all pairs (ε = 2, BTL), as labels: the
    data is fixed here (privatized: true), so two surveys can be given the same answers."""
    rng = np.random.default_rng(seed)
    theta = np.linspace(1.0, -1.0, len(labels))
    keep = np.exp(EPS) / (1 + np.exp(EPS))
    out = []
    for _ in range(n_respondents):
        mine = []
        for a in range(len(labels)):
            for b in range(a + 1, len(labels)):
                first = rng.random() < 1 / (1 + np.exp(theta[b] - theta[a]))
                reported = first if rng.random() < keep else not first
                mine.append((labels[a], labels[b], labels[a] if reported else labels[b]))
        out.append(mine)
    return out


def _send(client, survey: dict, answers, skip: str | None = None) -> None:
    ids = {i["label"]: i["id"] for i in survey["items"]}
    for mine in answers:
        _, h = register(client, survey["id"], epsilon=EPS)
        comparisons = [{"a": ids[a], "b": ids[b], "winner": ids[w]} for a, b, w in mine if skip not in (a, b)]
        body = {"privatized": True, "epsilon": EPS, "comparisons": comparisons}
        r = client.post(f"/v1/surveys/{survey['id']}/responses", json=body, headers=h)
        assert r.status_code == 201, r.text


def _archive(client, sid, item_id, headers=ADMIN, status="archived"):
    return client.patch(f"/v1/surveys/{sid}/items/{item_id}", json={"status": status}, headers=headers)


def test_an_archived_item_is_left_out_of_the_ranking_as_if_it_had_never_been_there(client):
    """The ranking after archiving E equals the ranking of a survey that never had E,
    given the same answers about the other items (same data, same estimator)."""
    labels = ["A", "B", "C", "D", "E"]
    answers = _answers(labels, 20, seed=5)
    s = _survey(client, labels, public_results=True)
    _send(client, s, answers)
    sid = s["id"]
    e = next(i["id"] for i in s["items"] if i["label"] == "E")
    before = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    assert len(before["items"]) == 5 and before["diagnostics"]["comparisons"] == 200
    moderator = analyst_headers(client, role="moderator")
    r = _archive(client, sid, e, moderator)
    assert r.status_code == 200 and r.json()["status"] == "archived"
    after = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    assert e not in {i["item_id"] for i in after["items"]} and len(after["items"]) == 4
    assert after["diagnostics"]["comparisons"] == 120 and after["diagnostics"]["pairs_total"] == 6
    # A survey that never had E, with the same answers about A … D.
    never = _survey(client, labels[:4])
    _send(client, never, answers, skip="E")
    reference = client.get(f"/v1/surveys/{never['id']}/ranking", headers=ADMIN).json()
    got = {i["label"]: (i["score"], i["ci"], i["comparisons"]) for i in after["items"]}
    want = {i["label"]: (i["score"], i["ci"], i["comparisons"]) for i in reference["items"]}
    assert got.keys() == want.keys()
    for label in got:
        assert got[label][2] == want[label][2]
        # The same convex problem solved from a different warm start: equal to the solver's
        # tolerance, far below the intervals' width (~0.5 here).
        assert got[label][0] == pytest.approx(want[label][0], abs=1e-6)
        assert got[label][1] == pytest.approx(want[label][1], abs=1e-5)
    # The public page leaves it out too, and does not count it as hidden.
    out = client.get(f"/v1/surveys/{sid}/results").json()
    assert e not in {i["item_id"] for i in out["items"]} and out["withheld"] == 0
    # Its answers stay stored: the export still has all 200.
    csv = client.get(f"/v1/surveys/{sid}/comparisons.csv", headers=ADMIN).text
    assert len(csv.strip().splitlines()) == 1 + 200
    # It is no longer served, and new answers about it are refused.
    _, h = register(client, sid, epsilon=EPS)
    served = client.get(f"/v1/surveys/{sid}/pairs?count=100", headers=h).json()["pairs"]
    assert len(served) == 6 and all(e not in (p["a"], p["b"]) for p in served)
    a = s["items"][0]["id"]
    body = {"privatized": True, "epsilon": EPS, "comparisons": [{"a": a, "b": e, "winner": e}]}
    assert client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h).status_code == 409
    # Restored, it is ranked again with its answers.
    assert _archive(client, sid, e, status="live").status_code == 200
    again = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    assert [i["item_id"] for i in again["items"]] == [i["item_id"] for i in before["items"]]


def test_archiving_brings_back_the_intervals(client, monkeypatch):
    """Intervals are computed up to MAX_ITEMS_COVARIANCE items: the archived ones do not count."""
    monkeypatch.setattr(intervals, "MAX_ITEMS_COVARIANCE", 4)
    monkeypatch.setattr(diagnostics, "MAX_ITEMS_COVARIANCE", 4)
    labels = ["A", "B", "C", "D", "E"]
    s = _survey(client, labels)
    _send(client, s, _answers(labels, 20, seed=9))
    sid = s["id"]
    over = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()["uncertainty"]
    assert over["available"] is False and over["reason"] == "too_many_items"
    assert _archive(client, sid, s["items"][2]["id"]).status_code == 200
    now = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()["uncertainty"]
    assert now["available"] is True


def test_archived_items_do_not_count_toward_the_item_limit(client, monkeypatch):
    monkeypatch.setattr(items, "MAX_ITEMS", 5)
    monkeypatch.setattr(surveys, "MAX_ITEMS", 5)
    monkeypatch.setattr(moderation, "MAX_ITEMS", 5)
    s = _survey(client, ["A", "B", "C", "D"])
    sid = s["id"]
    add = client.post(f"/v1/surveys/{sid}/items", json={"items": ["E"]}, headers=ADMIN)
    assert add.status_code == 201, add.text
    full = client.post(f"/v1/surveys/{sid}/items", json={"items": ["F"]}, headers=ADMIN)
    assert full.status_code == 422 and "at most 5 items" in full.json()["detail"]
    # Hidden items still count; archived ones do not.
    assert _archive(client, sid, s["items"][0]["id"], status="hidden").status_code == 200
    assert client.post(f"/v1/surveys/{sid}/items", json={"items": ["F"]}, headers=ADMIN).status_code == 422
    assert _archive(client, sid, s["items"][0]["id"]).status_code == 200
    assert client.post(f"/v1/surveys/{sid}/items", json={"items": ["F"]}, headers=ADMIN).status_code == 201
    # Restoring it would take the survey past its limit: 409, nothing changed.
    back = _archive(client, sid, s["items"][0]["id"], status="live")
    assert back.status_code == 409 and "archive another first" in back.json()["detail"]
    got = client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()
    assert [i["status"] for i in got["items"]] == ["archived", "live", "live", "live", "live", "live"]


def test_who_may_archive_and_where(client):
    s = _survey(client, ["A", "B", "C"])
    item = s["items"][0]["id"]
    _, respondent = register(client, s["id"])
    assert _archive(client, s["id"], item, respondent).status_code == 403
    assert _archive(client, s["id"], item, analyst_headers(client)).status_code == 403
    ranking = create_ranking_survey(client)
    r = _archive(client, ranking["id"], ranking["items"][0]["id"])
    assert r.status_code == 409 and "cannot be archived" in r.json()["detail"]
    bad = client.patch(f"/v1/surveys/{s['id']}/items/{item}", json={"status": "deleted"}, headers=ADMIN)
    assert bad.status_code == 422


def test_jobs_count_the_items_a_ranking_ranks(client):
    """A job is checked against the items its ranking or plan sees: with one of five items
    archived, k = 5 is refused before the job is stored, and a plan's scores take four
    values (one per item still ranked)."""
    labels = ["A", "B", "C", "D", "E"]
    s = _survey(client, labels)
    sid = s["id"]
    _send(client, s, _answers(labels, 12, seed=2))
    assert _archive(client, sid, s["items"][4]["id"]).status_code == 200
    r = client.post(f"/v1/surveys/{sid}/jobs", json={"kind": "ranking", "k": 5}, headers=ADMIN)
    assert r.status_code == 422 and "between 1 and the number of items (4)" in r.text, r.text
    body = {"kind": "plan", "k": 2, "respondents": 20, "replications": 20, "scores": [1.0, 0.5, 0.0, -0.5]}
    r = client.post(f"/v1/surveys/{sid}/jobs", json=body, headers=ADMIN)
    assert r.status_code in (201, 202), r.text
