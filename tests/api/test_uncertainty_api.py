"""Uncertainty, the pairwise matrix, diagnostics and the planner over the API."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from app.stats import fit_debiased_mle
from app.stats.inference import Clusters, confidence, rank_confidence
from tests.helpers.api import ADMIN, analyst_headers, create_survey, import_comparisons, register


@pytest.fixture(scope="module")
def survey(app):
    """6 items with clearly separated true scores; 120 respondents, 10 pairs each."""
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        return _make_survey(client)


def _make_survey(client):
    s = create_survey(
        client,
        items=[f"opt {k}" for k in range(6)],
        epsilon_default=1.0,
        epsilon_min=0.5,
        epsilon_max=2.0,
        respondent_budget=20.0,  # 10 pairs each at ε up to 2
    )
    ids = [it["id"] for it in s["items"]]
    labels = [it["label"] for it in s["items"]]
    theta = np.array([1.5, 1.0, 0.5, -0.5, -1.0, -1.5])
    rng = np.random.default_rng(7)
    all_pairs = [(a, b) for a in range(6) for b in range(a + 1, 6)]
    # Pairs and randomized response drawn here from a seeded generator (privatized on the
    # client), imported in one request: the survey's data, and every figure below, are
    # the same each run.
    lines = ["respondent,item_a,item_b,winner,epsilon"]
    for r in range(120):
        eps = [0.5, 1.0, 2.0][r % 3]
        for x in rng.choice(len(all_pairs), 10, replace=False):
            a, b = all_pairs[x]
            won = rng.random() < 1 / (1 + math.exp(theta[b] - theta[a]))
            if rng.random() >= math.exp(eps) / (1 + math.exp(eps)):  # reported flipped
                won = not won
            lines.append(f"r{r},{labels[a]},{labels[b]},{labels[a] if won else labels[b]},{eps}")
    assert import_comparisons(client, s["id"], lines, privatized=True)["imported"] == 1200
    return s["id"], ids


def export_fit(client, sid, ids):
    return export_fit_and_clusters(client, sid, ids)[0]


def export_fit_and_clusters(client, sid, ids):
    """The library's fit of the exported CSV, and its comparisons grouped by respondent."""
    import csv
    import io

    rows = list(
        csv.DictReader(io.StringIO(client.get(f"/v1/surveys/{sid}/comparisons.csv", headers=ADMIN).text))
    )
    pos = {x: k for k, x in enumerate(ids)}
    i = np.array([pos[r["item_a"]] for r in rows])
    j = np.array([pos[r["item_b"]] for r in rows])
    y = np.array([r["winner"] == r["item_a"] for r in rows], dtype=int)
    eps = np.array([float(r["epsilon"]) for r in rows])
    resp = np.array([r["respondent"] for r in rows])
    return fit_debiased_mle(len(ids), i, j, y, eps), Clusters.from_answers(len(ids), i, j, y, eps, resp)


def test_ranking_reports_intervals_matching_the_library(client, survey):
    sid, ids = survey
    r = client.get(f"/v1/surveys/{sid}/ranking?k=2&confidence=0.9", headers=ADMIN)
    assert r.status_code == 200
    data = r.json()
    fit, clusters = export_fit_and_clusters(client, sid, ids)
    conf = confidence(fit, 0.9, clusters=clusters)
    assert conf.method == "cluster" and conf.n_clusters == 120
    by_id = {it["item_id"]: it for it in data["items"]}
    for k, x in enumerate(ids):
        item = by_id[x]
        assert item["se"] == pytest.approx(conf.se[k], rel=1e-6)
        assert item["ci"] == pytest.approx([conf.lower[k], conf.upper[k]], rel=1e-6)
        assert 1 <= item["rank_ci"][0] <= item["rank_ci"][1] <= 6
        lo, hi = item["rank_ci_simultaneous"]
        assert lo <= item["rank_ci"][0] and item["rank_ci"][1] <= hi  # joint intervals are wider
    assert sum(it["p_top_k"] for it in data["items"]) == pytest.approx(2.0)
    u = data["uncertainty"]
    assert u["available"] and u["method"] == "cluster" and u["covariance"] == "cluster"
    assert u["reason"] is None and u["message"] is None and u["n_clusters"] == 120
    assert (
        "population the respondents were drawn from" in u["estimand"] and "120 respondents" in u["estimand"]
    )
    assert u["interval_critical_value"] == pytest.approx(conf.critical_value)  # t with 119 df
    assert u["corrections"]["ridge"] is True and u["corrections"]["second_order"] is True
    assert data["diagnostics"]["comparisons_per_respondent"] == {
        "respondents": 120,
        "mean": 10.0,
        "min": 10,
        "median": 10.0,
        "max": 10,
    }
    # covariance=model: the model-based sandwich of the library, comparisons independent.
    model = client.get(f"/v1/surveys/{sid}/ranking?k=2&confidence=0.9&covariance=model", headers=ADMIN).json()
    conf_model = confidence(fit, 0.9)
    assert model["uncertainty"]["method"] == "sandwich" and model["uncertainty"]["n_clusters"] is None
    for k, x in enumerate(ids):
        item = next(it for it in model["items"] if it["item_id"] == x)
        assert item["se"] == pytest.approx(conf_model.se[k], rel=1e-6)
    # Simultaneous intervals from pairwise decisions at the reported critical value.
    c = data["uncertainty"]["critical_value"]
    above = (conf.estimate[:, None] - conf.estimate[None, :]) > c * conf.difference_se()
    expected = np.column_stack((1 + above.sum(axis=0), 6 - above.sum(axis=1)))
    np.testing.assert_array_equal([by_id[x]["rank_ci_simultaneous"] for x in ids], expected)
    ranks = rank_confidence(conf.estimate, conf.cov, 0.9, 2, rng=np.random.default_rng(0))
    assert c == pytest.approx(ranks.critical_value, rel=0.05)  # Monte Carlo estimate of the same quantile
    assert set(data["top_k_certain"]) <= set(data["top_k"])
    assert [x for g in data["tiers"] for x in g] == [it["item_id"] for it in data["items"]]
    assert all(len(g) >= 1 for g in data["tied_groups"])
    # The sets' labels alongside their ids, set for set.
    label = {it["item_id"]: it["label"] for it in data["items"]}
    assert data["top_k_labels"] == [label[x] for x in data["top_k"]] and len(data["top_k_labels"]) == 2
    assert data["tied_groups_labels"] == [[label[x] for x in g] for g in data["tied_groups"]]
    assert data["tiers_labels"] == [[label[x] for x in g] for g in data["tiers"]]
    # Repeated reads at the same data version give the very same answer (seeded draws, cache).
    assert client.get(f"/v1/surveys/{sid}/ranking?k=2&confidence=0.9", headers=ADMIN).json() == data


def test_diagnostics_report_privacy_and_connectivity(client, survey):
    sid, _ = survey
    d = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()["diagnostics"]
    assert d["algebraic_connectivity"] > 0 and 0 < d["algebraic_connectivity_normalized"] <= 2
    spend = d["respondent_epsilon_total"]
    assert spend["respondents"] == 120 and spend["min"] == 5.0 and spend["max"] == 20.0
    assert spend["median"] == 10.0
    regime = d["privacy_regime"]
    assert regime["verdict"] == "above" and "more respondents keep sharpening" in regime["explanation"]
    # G = mean coth²(ε/2) over comparisons; the effective ε solves coth²(ε/2) = G.
    assert 1 / math.tanh(regime["effective_epsilon"] / 2) ** 2 == pytest.approx(d["G"])
    assert regime["dividing_line_epsilon"] == pytest.approx(1 / math.sqrt(6 * 1200 / 15))


def test_privacy_regime_below_the_dividing_line(client):
    from app.analysis.diagnostics import privacy_regime

    g = 1 / math.tanh(0.01 / 2) ** 2  # ε = 0.01
    below = privacy_regime(10, 4500, g)  # L = 100 per pair: 1/√(mL) ≈ 0.032
    assert below.verdict == "below" and "raise ε" in below.explanation
    near = privacy_regime(10, 4500, 1 / math.tanh(0.1 / 2) ** 2)
    assert near.verdict == "near"


def test_bootstrap_and_no_uncertainty_options(client, survey):
    sid, _ = survey
    b = client.get(f"/v1/surveys/{sid}/ranking?uncertainty=bootstrap", headers=ADMIN).json()
    assert b["uncertainty"]["method"] == "cluster_bootstrap" and b["uncertainty"]["n_clusters"] == 120
    assert all(it["ci"][0] <= it["score"] <= it["ci"][1] for it in b["items"])
    assert all(it["ci"][0] < it["ci"][1] for it in b["items"])
    p = client.get(f"/v1/surveys/{sid}/ranking?uncertainty=bootstrap&covariance=model", headers=ADMIN).json()
    assert p["uncertainty"]["method"] == "bootstrap"
    assert all(it["ci"][0] <= it["score"] <= it["ci"][1] for it in p["items"])
    n = client.get(f"/v1/surveys/{sid}/ranking?uncertainty=none", headers=ADMIN).json()
    assert n["uncertainty"]["available"] is False and n["items"][0]["se"] is None and n["tied_groups"] is None
    assert n["tied_groups_labels"] is None and n["tiers_labels"] is None
    for query in (
        "uncertainty=magic",
        "confidence=1",
        "confidence=0.2",
        "method=naive_mle&uncertainty=bootstrap",
        "covariance=sandwich",
    ):
        assert client.get(f"/v1/surveys/{sid}/ranking?{query}", headers=ADMIN).status_code == 422, query


def test_pairwise_matrix(client, survey):
    sid, ids = survey
    r = client.get(f"/v1/surveys/{sid}/pairwise?confidence=0.95", headers=analyst_headers(client))
    assert r.status_code == 200
    data = r.json()
    p, lo, hi = (np.array(data[k], dtype=float) for k in ("probability", "lower", "upper"))
    assert [it["item_id"] for it in data["items"]] == ids
    assert np.all(np.isnan(np.diag(p)))
    off = ~np.eye(6, dtype=bool)
    assert np.all((lo[off] <= p[off]) & (p[off] <= hi[off]))
    np.testing.assert_allclose((p + p.T)[off], 1.0, atol=2e-6)
    fit, clusters = export_fit_and_clusters(client, sid, ids)
    conf = confidence(fit, clusters=clusters)
    pp, plo, phi = conf.win_probability()
    # The point is σ(θ̂_a − θ̂_b): same direction as the scores.
    np.testing.assert_array_equal(
        np.sign(pp[off] - 0.5), np.sign((fit.theta[:, None] - fit.theta[None, :])[off])
    )
    np.testing.assert_allclose(p[off], pp[off], atol=2e-6)
    np.testing.assert_allclose(lo[off], plo[off], atol=2e-6)
    np.testing.assert_allclose(hi[off], phi[off], atol=2e-6)
    # The best beats the worst: true σ(3) = 0.95. The estimate's logit has median ~2.4 and
    # sd ~0.5 in this design, so a probability of 1/2 (logit 0) is ~4.8 sd below it (the
    # survey's data are seeded: the same each run).
    assert p[0, 5] > 0.5
    _, h = register(client, sid)
    assert client.get(f"/v1/surveys/{sid}/pairwise", headers=h).status_code == 403


@pytest.mark.slow
def test_plan_endpoint_and_solvers(client):
    """A design plan and both solvers, at the fewest replications a plan takes (20): the
    figures' values are the planner's (tests/stats); here, that the API runs it with the
    design asked for."""
    h = analyst_headers(client)
    r = client.get(
        "/v1/plan?items=6&respondents=60&pairs_per_respondent=5&epsilon=1&k=2&replications=20", headers=h
    )
    assert r.status_code == 200, r.text
    data = r.json()
    p = data["plan"]
    assert data["solve"] == "none" and p["respondent_epsilon_total"] == [5.0]
    assert p["replications"] == 20
    assert 0 <= p["p_exact_top_k"]["mean"] <= 1 and p["p_exact_top_k"]["se"] > 0
    assert p["comparisons_per_pair"] == pytest.approx(300 / 15)
    r = client.get(
        "/v1/plan?items=6&pairs_per_respondent=5&epsilon=0.5,2&epsilon_weights=1,1&k=2"
        "&solve=respondents&target=0.6&replications=20",
        headers=h,
    )
    assert r.status_code == 200 and r.json()["reached"] and r.json()["solution"] >= 1
    r = client.get(
        "/v1/plan?items=6&respondents=300&pairs_per_respondent=5&k=2&solve=epsilon&target=0.6"
        "&replications=20",
        headers=h,
    )
    assert r.status_code == 200 and 0 < r.json()["solution"] <= 10


def test_plan_endpoint_refusals(client):
    h = analyst_headers(client)
    for query in (
        "items=6&pairs_per_respondent=5&k=2&epsilon=1",  # respondents missing
        "items=6&respondents=10&pairs_per_respondent=99&k=2&epsilon=1",
        "items=6&respondents=10&pairs_per_respondent=5&k=2&epsilon=a",
        "items=6&respondents=10&pairs_per_respondent=5&k=2&epsilon=1&solve=respondents",
        "items=6&respondents=10&pairs_per_respondent=5&k=2&epsilon=1&epsilon_weights=1,2",
    ):
        assert client.get(f"/v1/plan?{query}", headers=h).status_code == 422, query
    assert (
        client.get("/v1/plan?items=6&respondents=10&pairs_per_respondent=5&k=2&epsilon=1").status_code == 401
    )


def test_plan_command_line(capsys):
    """``privrank plan`` (app.cli.main, in process; tests/test_cli_plan.py runs the
    installed command): JSON, a solve for respondents, and a refusal with exit code 2."""
    from app.cli import main

    assert main(["plan", "-m", "8", "-L", "100", "-p", "6", "-e", "1", "-k", "2", "-r", "20", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["plan"]["n_items"] == 8 and data["plan"]["replications"] == 20
    argv = ["plan", "-m", "8", "-p", "6", "-e", "1", "-k", "2", "-r", "20", "--solve", "respondents"]
    assert main([*argv, "--target", "0.5"]) == 0
    text = capsys.readouterr().out
    assert "respondents needed" in text and "P(exact top-2 recovered)" in text
    assert main(["plan", "-m", "8", "-p", "6", "-k", "2"]) == 2
    assert "give respondents and epsilon" in capsys.readouterr().err
