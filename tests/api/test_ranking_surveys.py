"""Ranking surveys over REST: one Mallows-privatized ranking per respondent, consensus by four methods."""

from __future__ import annotations

import csv
import io
import logging
import math

import numpy as np
import pytest
from sqlalchemy import func, select

from app.core.db.models import Ranking
from app.rankings.service import MIN_RANKINGS_FOR_INTERVALS
from app.stats.rankings import borda_aggregate, kemeny_consensus, mallows_log_pmf, ranking_stats
from tests.helpers.api import ADMIN, analyst_headers, register
from tests.helpers.stats import Z

LABELS = ("Housing", "Transit", "Parks", "Schools", "Safety")


def ranking_survey(client, labels=LABELS, **privacy) -> dict:
    body = {"title": "Priorities", "kind": "ranking", "items": list(labels)}
    if privacy:
        body["privacy"] = privacy
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def submit(client, sid, h, ranking, privatized=False, epsilon=None, key=None):
    body = {"privatized": privatized, "ranking": ranking}
    if epsilon is not None:
        body["epsilon"] = epsilon
    headers = {**h, "Idempotency-Key": key} if key else h
    return client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)


def test_question_lists_the_items_in_a_fresh_random_order(client):
    s = ranking_survey(client)
    _, h = register(client, s["id"], 2.0)
    orders = set()
    for _ in range(30):
        q = client.get(f"/v1/surveys/{s['id']}/question", headers=h)
        assert q.status_code == 200
        body = q.json()
        assert sorted(it["label"] for it in body["items"]) == sorted(LABELS)
        orders.add(tuple(it["id"] for it in body["items"]))
    assert len(orders) > 10  # 120 orders possible
    assert body["answered"] is False and body["epsilon"] == 2.0
    assert body["mallows_b"] == pytest.approx(2.0 / 4)
    assert body["adjacent_swap_probability"] == pytest.approx(1 / (1 + math.exp(0.5)))
    # Pairwise surveys have pairs, not a question; ranking surveys have no pairs.
    assert client.get(f"/v1/surveys/{s['id']}/pairs", headers=h).status_code == 409
    from tests.helpers.api import create_survey

    p = create_survey(client)
    _, hp = register(client, p["id"])
    assert client.get(f"/v1/surveys/{p['id']}/question", headers=hp).status_code == 409


def test_a_ranking_is_privatized_and_stored_once(client, db, unchanged, caplog):
    s = ranking_survey(client, respondent_budget=5.0)
    ids = [it["id"] for it in s["items"]]
    rid, h = register(client, s["id"], 1.0)
    given = [ids[3], ids[0], ids[4], ids[1], ids[2]]
    with caplog.at_level(logging.DEBUG):
        r = submit(client, s["id"], h, given)
    assert r.status_code == 201, r.text
    assert r.json() == {
        "accepted": 1,
        "epsilon_spent": 1.0,
        "epsilon_total": 1.0,
        "budget_remaining": 4.0,
        "comparisons_remaining": None,
    }
    row = db.scalars(select(Ranking).where(Ranking.respondent_id == rid)).one()
    assert sorted(row.ordering) == list(range(5)) and row.source == "server" and row.epsilon == 1.0
    # The given ranking never reaches a log line (its ids in order, or any of its ids).
    text = caplog.text
    assert not any(i in text for i in ids)
    me = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=h).json()
    assert me["ranked"] is True and me["budget_remaining"] == 4.0
    assert client.get(f"/v1/surveys/{s['id']}/question", headers=h).json()["answered"] is True
    with unchanged():
        again = submit(client, s["id"], h, given)
    assert again.status_code == 409 and "one per respondent" in again.json()["detail"]


def test_partial_rankings_are_completed_and_client_rankings_stored_as_sent(client, db, monkeypatch):
    from app.rankings import service as ranking_surveys

    seen = []
    real = ranking_surveys.mallows_privatize

    def spy(order, epsilon, rng=None):
        out = real(order, epsilon, rng)
        seen.append((order.tolist(), epsilon, out.tolist()))
        return out

    monkeypatch.setattr(ranking_surveys, "mallows_privatize", spy)
    s = ranking_survey(client)
    ids = [it["id"] for it in s["items"]]
    rid, h = register(client, s["id"], 1.5)
    assert submit(client, s["id"], h, [ids[2], ids[4]]).status_code == 201
    ((completed, eps, out),) = seen
    assert completed[:2] == [2, 4] and sorted(completed[2:]) == [0, 1, 3] and eps == 1.5
    stored = db.scalars(select(Ranking).where(Ranking.respondent_id == rid)).one().ordering
    assert stored == out  # what is stored is the mechanism's output
    rid2, h2 = register(client, s["id"], 1.0)
    synthetic = [ids[1], ids[0], ids[2], ids[4], ids[3]]
    r = submit(client, s["id"], h2, synthetic, privatized=True, epsilon=0.5)
    assert r.status_code == 201 and r.json()["epsilon_spent"] == 0.5
    db.rollback()  # a fresh snapshot
    row = db.scalars(select(Ranking).where(Ranking.respondent_id == rid2)).one()
    assert row.ordering == [1, 0, 2, 4, 3] and row.source == "client" and row.epsilon == 0.5


def test_bad_rankings_are_refused_without_echo(client, unchanged):
    s = ranking_survey(client, epsilon_min=0.5, epsilon_max=4.0, epsilon_default=1.0, respondent_budget=0.8)
    ids = [it["id"] for it in s["items"]]
    _, h = register(client, s["id"], 0.5)
    secret = "itm_zzzzzzzzzzzzzzzz"
    with unchanged():
        cases = [
            ({"privatized": False, "ranking": []}, 422),
            ({"privatized": False, "ranking": [ids[0], ids[0]]}, 422),
            ({"privatized": False, "ranking": [ids[0], secret]}, 422),
            ({"privatized": True, "epsilon": 1.0, "ranking": ids[:3]}, 422),  # privatized must be full
            ({"privatized": True, "ranking": ids}, 422),  # no ε
            ({"privatized": True, "epsilon": 9.0, "ranking": ids}, 422),  # out of bounds
            ({"privatized": False, "epsilon": 3.0, "ranking": ids}, 422),  # ε belongs to the respondent
            (
                {
                    "privatized": False,
                    "ranking": ids,
                    "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[0]}],
                },
                422,
            ),
            ({"privatized": False, "ranking": [*ids, ids[0]]}, 422),
        ]
        for body, code in cases:
            r = client.post(f"/v1/surveys/{s['id']}/responses", json=body, headers=h)
            assert r.status_code == code, (body, r.text)
            assert secret not in r.text and ids[0] not in r.text
        # ε = 1 > the budget 0.8: refused at registration (not even one ranking could be given).
        r = client.post(f"/v1/surveys/{s['id']}/respondents", json={"epsilon": 1.0})
        assert r.status_code == 422 and "budget" in r.json()["detail"]
        r = client.post(
            f"/v1/surveys/{s['id']}/responses",
            json={"privatized": False, "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[0]}]},
            headers=h,
        )
        assert r.status_code == 409 and "rankings" in r.json()["detail"]
    closed = client.patch(f"/v1/surveys/{s['id']}", json={"status": "closed"}, headers=ADMIN)
    assert closed.status_code == 200
    with unchanged():
        assert submit(client, s["id"], h, ids).status_code == 409
    from tests.helpers.api import create_survey

    p = create_survey(client)
    _, hp = register(client, p["id"])
    pids = [it["id"] for it in p["items"]]
    with unchanged():
        r = submit(client, p["id"], hp, pids)
        assert r.status_code == 409 and "pairwise" in r.json()["detail"]


def test_idempotent_retry_returns_the_first_answer(client, db, unchanged):
    s = ranking_survey(client)
    ids = [it["id"] for it in s["items"]]
    rid, h = register(client, s["id"], 1.0)
    first = submit(client, s["id"], h, ids, key="k1")
    with unchanged():
        again = submit(client, s["id"], h, list(reversed(ids)), key="k1")  # order is not part of the key
        assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
        assert again.json() == first.json()
        other = submit(client, s["id"], h, ids, privatized=True, epsilon=1.0, key="k1")
        assert other.status_code == 409
    db.rollback()
    assert db.scalar(select(func.count()).select_from(Ranking).where(Ranking.respondent_id == rid)) == 1


def test_server_side_privatization_uses_the_respondents_epsilon(client, db, monkeypatch):
    """30 respondents, 10 at each of ε = 0.5, 1 and 2, submit the same ranking (m = 3):
    the mechanism is called with each respondent's own ε, and what is stored is its
    output (a spy: exact). What is stored follows the Mallows law at b = ε/(m−1): the
    number of stored rankings equal to the input is Σ P(output = input) = 10.4 ± Z·2.5,
    at most 21, which a server storing the input (30) or privatizing at ε = 8 (~29) is
    not. The law itself is tested in tests/stats; the draws come from the test's seeded
    source."""
    from app.rankings import service as ranking_surveys

    seen = []
    real = ranking_surveys.mallows_privatize

    def spy(order, epsilon, rng=None):
        out = real(order, epsilon, rng)
        seen.append((float(epsilon), out.tolist()))
        return out

    monkeypatch.setattr(ranking_surveys, "mallows_privatize", spy)
    s = ranking_survey(client, labels=("x", "y", "z"))
    ids = [it["id"] for it in s["items"]]
    given = [ids[2], ids[0], ids[1]]
    center = np.array([2, 0, 1])
    n = 30
    respondents = []
    for k in range(n):
        eps = (0.5, 1.0, 2.0)[k % 3]
        rid, h = register(client, s["id"], eps)
        assert submit(client, s["id"], h, given).status_code == 201
        respondents.append((rid, eps))
    assert [e for e, _ in seen] == [e for _, e in respondents]
    stored = dict(
        db.execute(select(Ranking.respondent_id, Ranking.ordering).where(Ranking.survey_id == s["id"])).all()
    )
    assert [stored[rid] for rid, _ in respondents] == [out for _, out in seen]
    same = sum(stored[rid] == center.tolist() for rid, _ in respondents)
    p = np.array([math.exp(mallows_log_pmf(center, center, eps)) for _, eps in respondents])
    assert abs(same - p.sum()) <= Z * math.sqrt(float(np.sum(p * (1 - p)))), (same, p.sum())


@pytest.fixture(scope="module")
def answered(app):
    """60 respondents at ε = 8 whose true ranking is Transit > Schools > Housing > Safety > Parks
    (made once for the module's tests, which only read it).

    b = 2 per pair: adjacent items swap with probability 0.12, so the mean positions of
    neighbours differ by ~15 standard errors and every method recovers the order."""
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        s = ranking_survey(client, epsilon_max=10.0)
        ids = {it["label"]: it["id"] for it in s["items"]}
        truth = ["Transit", "Schools", "Housing", "Safety", "Parks"]
        for _ in range(60):
            _, h = register(client, s["id"], 8.0)
            assert submit(client, s["id"], h, [ids[x] for x in truth]).status_code == 201
    return s, ids, truth


@pytest.mark.parametrize("method", ["borda", "lehmer", "kemeny", "btl"])
def test_consensus_by_each_method(client, answered, method):
    s, ids, truth = answered
    analyst = analyst_headers(client)
    r = client.get(f"/v1/surveys/{s['id']}/ranking?method={method}&k=2", headers=analyst)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["method"] == method
    assert [it["label"] for it in body["items"]] == truth
    assert body["order"] == [ids[x] for x in truth] and body["top_k"] == [ids["Transit"], ids["Schools"]]
    assert body["top_k_labels"] == ["Transit", "Schools"]
    if body["tied_groups"] is not None:
        label = {it["item_id"]: it["label"] for it in body["items"]}
        assert body["tied_groups_labels"] == [[label[x] for x in g] for g in body["tied_groups"]]
        assert body["tiers_labels"] == [[label[x] for x in g] for g in body["tiers"]]
    assert [it["rank"] for it in body["items"]] == [1, 2, 3, 4, 5]
    d = body["diagnostics"]
    assert d["rankings"] == 60 and d["items"] == 5 and d["epsilon_min"] == 8.0
    assert d["mean_kendall_distance"] == pytest.approx(d["kendall_objective"] / 60)
    means = [it["mean_position"] for it in body["items"]]
    assert means == sorted(means) and 1 <= means[0] < means[-1] <= 5
    if method in ("borda", "btl"):
        assert body["uncertainty"]["available"] is True
        assert all(it["se"] > 0 and it["ci"][0] < it["score"] < it["ci"][1] for it in body["items"])
        assert body["items"][0]["rank_ci"][0] == 1 and body["top_k_certain"] == body["top_k"]
        assert sum(it["p_top_k"] for it in body["items"]) == pytest.approx(2.0, abs=1e-6)
        assert body["uncertainty"]["reason_code"] is None and body["uncertainty"]["min_rankings"] is None
    else:
        assert body["uncertainty"]["available"] is False and body["items"][0]["score"] is None
        # Why, in a sentence for API clients and as a code for the dashboard's translations.
        assert body["uncertainty"]["reason"].endswith("has no standard errors")
        assert body["uncertainty"]["reason_code"] == "no_standard_errors"
    if method == "kemeny":
        assert d["exact"] is True and d["lower_bound"] <= d["kendall_objective"]
    if method == "borda":
        assert body["items"][0]["score"] == pytest.approx(5 - body["items"][0]["mean_position"])


@pytest.mark.parametrize("method", ["borda", "btl"])
def test_too_few_rankings_for_intervals_say_so_by_code(client, method):
    s = ranking_survey(client, epsilon_max=10.0)
    order = [it["id"] for it in s["items"]]
    for _ in range(3):
        _, h = register(client, s["id"], 8.0)
        assert submit(client, s["id"], h, order).status_code == 201
    u = client.get(f"/v1/surveys/{s['id']}/ranking?method={method}", headers=ADMIN).json()["uncertainty"]
    assert u["available"] is False
    assert u["reason"].startswith(f"intervals need at least {MIN_RANKINGS_FOR_INTERVALS} rankings"), u
    assert u["reason_code"] == "too_few_rankings" and u["min_rankings"] == MIN_RANKINGS_FOR_INTERVALS


def test_default_method_and_refusals(client, answered, unchanged):
    s, _, _ = answered
    r = client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN)
    assert r.status_code == 200 and r.json()["method"] == "borda"
    # The same data give the same consensus on every read (tie-breaks seeded by the data version).
    assert client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN).json() == r.json()
    at90 = client.get(f"/v1/surveys/{s['id']}/ranking?method=btl&confidence=0.9", headers=ADMIN)
    assert at90.status_code == 200 and at90.json()["uncertainty"]["level"] == 0.9
    with unchanged():
        for url in (
            "ranking?method=debiased_mle",
            "ranking?method=kemeny&lambda=2",
            "ranking?uncertainty=bootstrap",
            "ranking?k=9",
            # Every level is its own cached computation: two decimals only, as for pairwise
            # surveys (150 levels 1e-7 apart would add 228 MB of cached consensus).
            "ranking?method=btl&confidence=0.9000001",
            "ranking?confidence=0.955",
        ):
            assert client.get(f"/v1/surveys/{s['id']}/{url}", headers=ADMIN).status_code == 422, url
        for url in ("pairwise", "comparisons.csv"):
            r = client.get(f"/v1/surveys/{s['id']}/{url}", headers=ADMIN)
            assert r.status_code == 409 and "rankings" in r.json()["detail"], url
    _, h = register(client, s["id"])
    assert client.get(f"/v1/surveys/{s['id']}/ranking", headers=h).status_code == 403
    empty = ranking_survey(client)
    assert client.get(f"/v1/surveys/{empty['id']}/ranking", headers=ADMIN).status_code == 409


def test_rankings_csv_reproduces_the_consensus(client, answered):
    s, _ids, _ = answered
    r = client.get(f"/v1/surveys/{s['id']}/rankings.csv", headers=ADMIN)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert len(rows) == 60 and set(rows[0]) == {"respondent", "epsilon", "source", "ranking", "created_at"}
    position = {it["id"]: it["position"] for it in s["items"]}
    orders = np.array([[position[x] for x in row["ranking"].split(">")] for row in rows])
    stats = ranking_stats(orders)
    api = client.get(f"/v1/surveys/{s['id']}/ranking?method=borda", headers=ADMIN).json()
    by_id = {it["item_id"]: it for it in api["items"]}
    for item in s["items"]:
        assert by_id[item["id"]]["mean_position"] == pytest.approx(stats.mean_position[item["position"]])
    kem = client.get(f"/v1/surveys/{s['id']}/ranking?method=kemeny", headers=ADMIN).json()
    assert kem["diagnostics"]["kendall_objective"] == kemeny_consensus(stats).objective
    lib = borda_aggregate(stats, 0)
    if len(set(stats.position_sum.tolist())) == 5:  # no exact ties: the order is determined
        assert api["order"] == [s["items"][x]["id"] for x in lib]
    from tests.helpers.api import create_survey

    p = create_survey(client)
    assert client.get(f"/v1/surveys/{p['id']}/rankings.csv", headers=ADMIN).status_code == 409


def test_items_and_size_limits(client, unchanged):
    s = ranking_survey(client)
    assert (
        client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["Jobs"]}, headers=ADMIN).status_code
        == 201
    )
    ids = [it["id"] for it in client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()["items"]]
    _, h = register(client, s["id"], 1.0)
    assert submit(client, s["id"], h, ids).status_code == 201
    with unchanged():
        r = client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["Arts"]}, headers=ADMIN)
        assert r.status_code == 409 and "already has rankings" in r.json()["detail"]
        r = client.post(
            "/v1/surveys",
            json={"title": "t", "kind": "ranking", "items": [f"i{k}" for k in range(257)]},
            headers=ADMIN,
        )
        assert r.status_code == 422 and "256" in r.json()["detail"]
        r = client.post(
            "/v1/surveys",
            json={
                "title": "t",
                "kind": "ranking",
                "items": ["a", "b"],
                "privacy": {"model": "central", "total_budget": 1, "max_comparisons_per_respondent": 1},
            },
            headers=ADMIN,
        )
        assert r.status_code == 422
