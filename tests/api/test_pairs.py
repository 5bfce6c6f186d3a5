"""GET …/pairs: unanswered pairs, least-answered first, within the budget."""

from __future__ import annotations

import itertools
import math
from collections import Counter

from tests.helpers.api import ADMIN, analyst_headers, create_central_survey, create_survey, register
from tests.helpers.stats import Z


def fetch(client, sid, h, count):
    r = client.get(f"/v1/surveys/{sid}/pairs?count={count}", headers=h)
    assert r.status_code == 200, r.text
    return [(p["a"], p["b"]) for p in r.json()["pairs"]]


def answer(client, sid, h, pairs):
    body = {"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a} for a, b in pairs]}
    r = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)
    assert r.status_code == 201, r.text


def test_pairs_are_distinct_unanswered_and_labelled(client):
    s = create_survey(client, items=("A", "B", "C", "D", "E"), respondent_budget=10.0)  # all 10 pairs at ε 1
    labels = {i["id"]: i["label"] for i in s["items"]}
    _, h = register(client, s["id"])
    r = client.get(f"/v1/surveys/{s['id']}/pairs?count=4", headers=h).json()["pairs"]
    assert len(r) == 4
    assert all(labels[p["a"]] == p["a_label"] and labels[p["b"]] == p["b_label"] for p in r)
    got = fetch(client, s["id"], h, 10)
    assert len(got) == 10 and len({frozenset(p) for p in got}) == 10  # all 10 pairs, each once
    answer(client, s["id"], h, got[:7])
    rest = fetch(client, s["id"], h, 10)
    assert {frozenset(p) for p in rest} == {frozenset(p) for p in got[7:]}
    answer(client, s["id"], h, rest)
    assert fetch(client, s["id"], h, 5) == []


def test_least_answered_pairs_come_first(client):
    s = create_survey(client, items=("A", "B", "C", "D"))
    ids = [i["id"] for i in s["items"]]
    all_pairs = list(itertools.combinations(ids, 2))
    # Four respondents answer pairs 0-2; the 3 others stay unanswered.
    for _ in range(4):
        _, h = register(client, s["id"])
        answer(client, s["id"], h, all_pairs[:3])
    _, h = register(client, s["id"])
    first = fetch(client, s["id"], h, 3)
    assert {frozenset(p) for p in first} == {frozenset(p) for p in all_pairs[3:]}


def test_ties_are_broken_at_random_and_orientation_varies(client):
    """60 new respondents each ask for one pair of 8 items, none answered: the 28 pairs
    are equally least-answered, so the pair is uniform and its orientation a coin flip.
    A fixed choice would give one pair 60 times (or one orientation). Bounds at Z
    standard deviations: a pair's count is Binomial(60, 1/28), 2.1 ± Z·1.4, so at most
    8; the pairs never served number 3.2 ± Z·1.4, so at least 19 distinct pairs are
    served; each orientation is Binomial(60, 1/2), 30 ± Z·3.9, so at least 13. The
    draws come from the test's seeded source: the outcome is the same on every run."""
    s = create_survey(client, items=[f"i{k}" for k in range(8)])
    firsts = Counter()
    orient = Counter()
    n, pairs = 60, 28
    for _ in range(n):
        _, h = register(client, s["id"])
        ((a, b),) = fetch(client, s["id"], h, 1)
        firsts[frozenset((a, b))] += 1
        orient[a < b] += 1
    p = 1 / pairs
    assert max(firsts.values()) <= n * p + Z * math.sqrt(n * p * (1 - p)), firsts
    # Pairs never served: mean k·q₁, variance k·q₁(1 − q₁) + k(k − 1)(q₂ − q₁²), with
    # q₁ = (1 − 1/k)ⁿ and q₂ = (1 − 2/k)ⁿ the chances that one, or two, are never drawn.
    q1, q2 = (1 - p) ** n, (1 - 2 * p) ** n
    unseen_mean = pairs * q1
    unseen_sd = math.sqrt(pairs * q1 * (1 - q1) + pairs * (pairs - 1) * (q2 - q1 * q1))
    assert pairs - len(firsts) <= unseen_mean + Z * unseen_sd, firsts
    assert min(orient[True], orient[False]) >= n / 2 - Z * math.sqrt(n / 4), orient


def test_pairs_respect_the_budget(client):
    s = create_survey(client, items=("A", "B", "C", "D"), epsilon_default=1.0, respondent_budget=2.5)
    _, h = register(client, s["id"], 1.0)
    got = fetch(client, s["id"], h, 6)
    assert len(got) == 2  # ⌊2.5 / 1.0⌋
    answer(client, s["id"], h, got[:1])
    assert len(fetch(client, s["id"], h, 6)) == 1
    answer(client, s["id"], h, fetch(client, s["id"], h, 6))
    assert fetch(client, s["id"], h, 6) == []


def test_pairs_authorization_and_validation(client):
    s = create_survey(client)
    other = create_survey(client)
    _, h_other = register(client, other["id"])
    _, h = register(client, s["id"])
    url = f"/v1/surveys/{s['id']}/pairs"
    assert client.get(url).status_code == 401
    assert client.get(url, headers=h_other).status_code == 403
    assert client.get(url, headers=ADMIN).status_code == 403
    assert client.get(url, headers=analyst_headers(client)).status_code == 403
    assert client.get(url + "?count=0", headers=h).status_code == 422
    assert client.get(url + "?count=101", headers=h).status_code == 422
    assert len(client.get(url, headers=h).json()["pairs"]) == 1  # default count


def _served(client, sid, h, count):
    r = client.get(f"/v1/surveys/{sid}/pairs?count={count}", headers=h)
    assert r.status_code == 200, r.text
    return r.json()


def test_fewer_pairs_than_asked_come_with_the_reason(client):
    """A closed survey, a spent budget, the central answer limit and a respondent who
    has answered everything each say why, not {"pairs": []} alone."""
    s = create_survey(client, items=("A", "B", "C"), epsilon_default=1.0, respondent_budget=2.0)
    sid = s["id"]
    _, h = register(client, sid)
    first = _served(client, sid, h, 3)
    assert len(first["pairs"]) == 2 and first["reason"] == "budget_spent"  # ε = 1 each, 2 in all
    assert "privacy budget" in first["message"]
    answer(client, sid, h, [(p["a"], p["b"]) for p in first["pairs"]])
    spent = _served(client, sid, h, 1)
    assert spent["pairs"] == [] and spent["reason"] == "budget_spent"

    _, h2 = register(client, sid)
    two = _served(client, sid, h2, 2)
    assert len(two["pairs"]) == 2 and two["reason"] is None and two["message"] is None

    open_ = create_survey(client, items=("A", "B", "C"))
    _, h3 = register(client, open_["id"])
    everything = _served(client, open_["id"], h3, 5)
    assert len(everything["pairs"]) == 3 and everything["reason"] == "all_answered"
    answer(client, open_["id"], h3, [(p["a"], p["b"]) for p in everything["pairs"]])
    assert _served(client, open_["id"], h3, 1)["reason"] == "all_answered"

    r = client.patch(f"/v1/surveys/{sid}", json={"status": "closed"}, headers=ADMIN)
    assert r.status_code == 200
    closed = _served(client, sid, h2, 1)
    assert closed["pairs"] == [] and closed["reason"] == "closed" and "closed" in closed["message"]

    central = create_central_survey(client, per_respondent=2)
    _, hc = register(client, central["id"])
    capped = _served(client, central["id"], hc, 3)
    assert len(capped["pairs"]) == 2 and capped["reason"] == "answer_limit"
