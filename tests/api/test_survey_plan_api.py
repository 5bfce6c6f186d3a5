"""GET /v1/surveys/{sid}/plan: how many more respondents certify the top-K, from where a survey stands."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.api import (
    ADMIN,
    create_central_survey,
    create_ranking_survey,
    create_survey,
)

LABELS = ("A", "B", "C", "D", "E", "F")
THETA = np.array([1.5, 0.9, 0.3, -0.3, -0.9, -1.5])


def _import(client, sid, n_respondents, pairs_each, epsilon, seed):
    """Privatized answers of ``n_respondents`` BTL respondents (through the bulk import)."""
    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(len(LABELS), 1)
    p = 1.0 / (1.0 + np.exp(epsilon))
    rows = ["respondent,item_a,item_b,winner,epsilon"]
    for r in range(n_respondents):
        for x in rng.choice(a.size, pairs_each, replace=False):
            i, j = a[x], b[x]
            won = rng.random() < 1 / (1 + np.exp(THETA[j] - THETA[i]))
            won ^= rng.random() < p
            rows.append(f"r{r},{LABELS[i]},{LABELS[j]},{LABELS[i] if won else LABELS[j]},{epsilon}")
    r = client.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=true",
        content="\n".join(rows) + "\n",
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text


@pytest.fixture
def running(client):
    # 5 pairs each at ε 2: a cap of 10.
    s = create_survey(client, items=LABELS, epsilon_min=0.5, epsilon_max=3.0, respondent_budget=10.0)
    _import(client, s["id"], 40, 5, 2.0, seed=1)
    return s


@pytest.mark.slow
def test_plan_from_the_survey_own_fit(client, running):
    sid = running["id"]
    url = f"/v1/surveys/{sid}/plan?k=2&replications=40"
    r = client.get(url, headers=ADMIN)
    assert r.status_code == 200, r.text
    out = r.json()
    plan = out["plan"]
    assert out["scores"] == "fit" and out["tau_source"] == "estimated"
    assert plan["current_respondents"] == 40 and plan["current_comparisons"] == 200
    # The scores planned from are the ranking's scores.
    ranking = client.get(f"/v1/surveys/{sid}/ranking?k=2", headers=ADMIN).json()
    by_id = {it["item_id"]: it["score"] for it in ranking["items"]}
    assert {it["item_id"]: it["score"] for it in out["items"]} == pytest.approx(by_id, abs=1e-9)
    lo, hi = out["tau_interval"]
    assert lo <= out["tau_estimate"] <= hi and out["tau"] == out["tau_estimate"]
    # The assumption, in words: where the scores come from, the design, the clustering.
    text = plan["assumption"]
    for fragment in ("current estimates", "current 40 respondents", "least-answered", "τ", "top 2"):
        assert fragment in text, (fragment, text)
    # The search's answer is reproducible: asking for exactly that many gives the same prediction.
    assert out["reached"] is True and out["solution"] > 0 and out["search_limit"] is None
    assert plan["p_certified"]["mean"] >= 0.8
    again = client.get(f"{url}&respondents={out['solution']}", headers=ADMIN).json()
    assert again["plan"] == plan and again["target"] is None and again["reached"] is None
    # Out of reach: the search says where it stopped.
    far = client.get(f"{url}&target=0.99&max_respondents=20", headers=ADMIN).json()
    assert far["reached"] is False and far["solution"] is None and far["search_limit"] == "max_respondents"
    assert far["plan"]["added_respondents"] == 20
    # Fewer respondents than the solution fall short of the target; none added certify less.
    now = client.get(f"{url}&respondents=0", headers=ADMIN).json()["plan"]
    assert now["p_certified"]["mean"] < 0.8
    assert now["added_respondents"] == 0 and now["added_comparisons"] == 0
    # Certified-and-correct never exceeds certified.
    assert plan["p_certified_correct"]["mean"] <= plan["p_certified"]["mean"]


def test_pilot_scores_design_and_tau_override(client, running):
    sid = running["id"]
    base = f"/v1/surveys/{sid}/plan?k=2&replications=30&respondents=200"
    wide = client.get(base + "&scores=3,2,1,0,-1,-2&tau=0", headers=ADMIN).json()
    narrow = client.get(base + "&scores=0.2,0.1,0,-0.1,-0.2,-0.3&tau=0", headers=ADMIN).json()
    assert wide["scores"] == "pilot" and wide["tau_source"] == "query" and wide["tau"] == 0
    assert "pilot scores" in wide["plan"]["assumption"]
    # Items one apart are certified far more often than items a tenth apart.
    assert wide["plan"]["p_certified"]["mean"] > narrow["plan"]["p_certified"]["mean"] + 0.5
    design = client.get(base + "&pairs_per_respondent=15&epsilon=0.5", headers=ADMIN).json()
    assert design["plan"]["added_comparisons"] == 200 * 15
    assert "15 pairs at ε = 0.5" in design["plan"]["assumption"]


def test_empty_survey_needs_pilot_scores_and_a_design(client):
    s = create_survey(client, items=LABELS)
    url = f"/v1/surveys/{s['id']}/plan?k=1&replications=20"
    r = client.get(url, headers=ADMIN)
    assert r.status_code == 409 and "pilot scores" in r.json()["detail"]
    assert client.get(url + "&scores=1,0,0,0,0,-1", headers=ADMIN).status_code == 422
    r = client.get(
        url + "&scores=2,0,0,0,0,-1&pairs_per_respondent=5&epsilon=2&respondents=50", headers=ADMIN
    )
    assert r.status_code == 200, r.text
    plan = r.json()["plan"]
    assert plan["current_respondents"] == 0 and plan["added_comparisons"] == 250
    assert r.json()["tau_estimate"] is None


@pytest.mark.parametrize(
    "query",
    [
        "k=6",  # k must be below the number of items
        "k=0",
        "k=2&scores=1,2,3",  # one score per item
        "k=2&scores=a,b,c,d,e,f",
        "k=2&target=1",
        "k=2&replications=5000",
        "k=2&tau=-1",
        "k=2&pairs_per_respondent=3",  # a design needs ε too
        "k=2&pairs_per_respondent=100&epsilon=1",  # more pairs than exist
        "k=2&respondents=1000000&replications=1000",  # unbounded work
        "k=2&scores=1,0,0,0,0,nan",
    ],
)
def test_bad_parameters_are_422(client, running, query):
    r = client.get(f"/v1/surveys/{running['id']}/plan?{query}", headers=ADMIN)
    assert r.status_code == 422, (query, r.text)


def test_surveys_it_cannot_plan(client):
    for s in (create_ranking_survey(client), create_central_survey(client)):
        r = client.get(f"/v1/surveys/{s['id']}/plan?k=1", headers=ADMIN)
        assert r.status_code == 409, r.text
    assert client.get("/v1/surveys/nope/plan?k=1", headers=ADMIN).status_code == 404
    big = create_survey(client, items=[f"item {x}" for x in range(101)])
    assert client.get(f"/v1/surveys/{big['id']}/plan?k=1", headers=ADMIN).status_code == 422
