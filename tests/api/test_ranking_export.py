"""GET …/ranking, GET …/comparisons.csv and the bulk import."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from sqlalchemy import func, select

from app.core.db.models import Comparison, Respondent
from app.stats import debias, fit_debiased_mle, fit_naive_mle
from tests.helpers.api import ADMIN, analyst_headers, create_survey, register


def answer(client, sid, h, triples, privatized=False, epsilon=None):
    body = {"privatized": privatized, "comparisons": [{"a": a, "b": b, "winner": w} for a, b, w in triples]}
    if epsilon is not None:
        body["epsilon"] = epsilon
    r = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)
    assert r.status_code == 201, r.text


def export(client, sid, headers=ADMIN):
    r = client.get(f"/v1/surveys/{sid}/comparisons.csv", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(r.text)))


def refit(rows, ids, method=fit_debiased_mle, lam=None):
    pos = {x: k for k, x in enumerate(ids)}
    i = np.array([pos[r["item_a"]] for r in rows], dtype=int)
    j = np.array([pos[r["item_b"]] for r in rows], dtype=int)
    y = np.array([r["winner"] == r["item_a"] for r in rows], dtype=int)
    eps = np.array([float(r["epsilon"]) for r in rows])
    return method(len(ids), i, j, y, eps, lam)


@pytest.fixture
def small_survey(client):
    # Every respondent answers all 6 pairs at ε up to 3: a cap of 18.
    s = create_survey(
        client, items=("A", "B", "C", "D"), epsilon_min=0.5, epsilon_max=3.0, respondent_budget=18.0
    )
    ids = [i["id"] for i in s["items"]]
    rng = np.random.default_rng(0)
    for _ in range(12):
        _, h = register(client, s["id"], float(rng.choice([0.5, 1.0, 3.0])))
        triples = []
        for x in range(4):
            for y in range(x + 1, 4):
                triples.append((ids[y], ids[x], ids[x] if rng.random() < 0.7 else ids[y]))
        answer(client, s["id"], h, triples)
    return s["id"], ids


def test_ranking_matches_the_library_on_the_export(client, small_survey):
    sid, ids = small_survey
    r = client.get(f"/v1/surveys/{sid}/ranking?k=2", headers=ADMIN)
    assert r.status_code == 200
    data = r.json()
    assert data["method"] == "debiased_mle"
    rows = export(client, sid)
    assert len(rows) == 12 * 6
    fit = refit(rows, ids)
    scores = {it["item_id"]: it["score"] for it in data["items"]}
    np.testing.assert_allclose([scores[x] for x in ids], fit.theta, atol=1e-10)
    assert [it["rank"] for it in data["items"]] == sorted(it["rank"] for it in data["items"])
    assert data["items"][0]["rank"] == 1 and data["top_k"] == [it["item_id"] for it in data["items"][:2]]
    assert all(it["comparisons"] == 36 for it in data["items"])
    d = data["diagnostics"]
    assert (d["respondents"], d["comparisons"], d["pairs_observed"], d["pairs_total"]) == (12, 72, 6, 6)
    assert d["connected"] and d["components"] is None and d["converged"]
    eps = np.array([float(r["epsilon"]) for r in rows])
    assert d["lambda"] == pytest.approx(np.mean(1 / np.tanh(eps / 2) ** 2))  # default λ = G(ε)
    assert d["G"] == pytest.approx(d["lambda"]) and d["H"] == pytest.approx(1 / np.tanh(0.25))
    assert d["lambda_source"].startswith("default") and d["epsilon_min"] == 0.5
    assert abs(sum(scores.values())) < 1e-9


def test_naive_method_and_explicit_lambda(client, small_survey):
    sid, ids = small_survey
    rows = export(client, sid)
    r = client.get(f"/v1/surveys/{sid}/ranking?method=naive_mle&lambda=0.3", headers=ADMIN).json()
    ref = refit(rows, ids, fit_naive_mle, 0.3)
    scores = {it["item_id"]: it["score"] for it in r["items"]}
    np.testing.assert_allclose([scores[x] for x in ids], ref.theta, atol=1e-10)
    assert r["diagnostics"]["lambda"] == 0.3 and r["diagnostics"]["lambda_source"] == "query"
    assert r["top_k"] is None


@pytest.mark.parametrize("query", ["method=borda", "lambda=0", "lambda=-1", "k=0", "k=5", "lambda=abc"])
def test_invalid_ranking_queries(client, small_survey, query):
    sid, _ = small_survey
    assert client.get(f"/v1/surveys/{sid}/ranking?{query}", headers=ADMIN).status_code == 422


def test_ranking_authorization(client, small_survey):
    sid, _ = small_survey
    _, h = register(client, sid)
    assert client.get(f"/v1/surveys/{sid}/ranking").status_code == 401
    assert client.get(f"/v1/surveys/{sid}/ranking", headers=h).status_code == 403
    assert client.get(f"/v1/surveys/{sid}/ranking", headers=analyst_headers(client)).status_code == 200
    assert client.get("/v1/surveys/srv_nope/ranking", headers=ADMIN).status_code == 404
    assert client.get(f"/v1/surveys/{sid}/comparisons.csv", headers=h).status_code == 403
    assert client.get(f"/v1/surveys/{sid}/comparisons.csv").status_code == 401


def test_ranking_of_an_empty_and_a_disconnected_survey(client):
    s = create_survey(client, items=("A", "B", "C", "D"))
    ids = [i["id"] for i in s["items"]]
    r = client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN).json()
    assert [it["score"] for it in r["items"]] == [0.0] * 4 and [it["rank"] for it in r["items"]] == [1] * 4
    assert r["diagnostics"]["comparisons"] == 0 and r["diagnostics"]["ties"]
    _, h = register(client, s["id"])
    answer(client, s["id"], h, [(ids[0], ids[1], ids[0]), (ids[2], ids[3], ids[3])])
    d = client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN).json()["diagnostics"]
    assert not d["connected"] and d["n_components"] == 2
    assert sorted(map(sorted, d["components"])) == sorted([sorted(ids[:2]), sorted(ids[2:])])


def test_new_answers_and_new_items_refresh_the_ranking(client, small_survey):
    sid, ids = small_survey
    first = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    again = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    assert again == first  # cached at the same data version
    new = client.post(f"/v1/surveys/{sid}/items", json={"items": ["E"]}, headers=ADMIN).json()[0]["id"]
    _, h = register(client, sid, 1.0)
    answer(client, sid, h, [(new, ids[0], new), (new, ids[1], new)])
    after = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    assert after["diagnostics"]["data_version"] > first["diagnostics"]["data_version"]
    assert after["diagnostics"]["comparisons"] == 74 and len(after["items"]) == 5
    fit = refit(export(client, sid), [*ids, new])
    scores = {it["item_id"]: it["score"] for it in after["items"]}
    np.testing.assert_allclose([scores[x] for x in [*ids, new]], fit.theta, atol=1e-10)


def test_csv_columns_and_values(client, db):
    s = create_survey(client, items=("A", "B", "C"))
    ids = [i["id"] for i in s["items"]]
    rid, h = register(client, s["id"], 1.0)
    answer(
        client, s["id"], h, [(ids[2], ids[0], ids[2]), (ids[1], ids[2], ids[1])], privatized=True, epsilon=2.0
    )
    rows = export(client, s["id"])
    assert list(rows[0]) == ["respondent", "item_a", "item_b", "winner", "epsilon", "z", "created_at"]
    assert [(r["respondent"], r["item_a"], r["item_b"], r["winner"]) for r in rows] == [
        (rid, ids[0], ids[2], ids[2]),
        (rid, ids[1], ids[2], ids[1]),
    ]
    for r in rows:
        assert float(r["epsilon"]) == 2.0
        assert float(r["z"]) == float(debias(int(r["winner"] == r["item_a"]), 2.0))
        assert r["created_at"].endswith("Z")


def test_import_privatized_round_trip_and_raw(client, db, small_survey, unchanged):
    sid, ids = small_survey
    rows = export(client, sid)
    target = create_survey(
        client, items=("A", "B", "C", "D"), epsilon_min=0.5, epsilon_max=3.0, respondent_budget=18.0
    )  # the source survey's cap
    # Items by label in the target survey: map the source's ids to labels.
    labels = dict(zip(ids, ["A", "B", "C", "D"], strict=True))
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["respondent", "item_a", "item_b", "winner", "epsilon", "z", "created_at"])
    for r in rows:
        w.writerow(
            [
                r["respondent"],
                labels[r["item_a"]],
                labels[r["item_b"]],
                labels[r["winner"]],
                r["epsilon"],
                r["z"],
                r["created_at"],
            ]
        )
    url = f"/v1/surveys/{target['id']}/comparisons/import"
    r = client.post(
        url + "?privatized=true", content=out.getvalue(), headers={**ADMIN, "Content-Type": "text/csv"}
    )
    assert r.status_code == 201, r.text
    assert r.json() == {"imported": 72, "respondents": 12, "respondents_created": 12}
    a = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    b = client.get(f"/v1/surveys/{target['id']}/ranking", headers=ADMIN).json()
    sa = {labels[it["item_id"]]: it["score"] for it in a["items"]}
    sb = {it["label"]: it["score"] for it in b["items"]}
    assert sa == pytest.approx(sb, abs=1e-10)
    # Importing the same rows again: every respondent already answered those pairs.
    with unchanged():
        r = client.post(
            url + "?privatized=true", content=out.getvalue(), headers={**ADMIN, "Content-Type": "text/csv"}
        )
    assert r.status_code == 409
    raw = "respondent,item_a,item_b,winner,epsilon\np1,A,B,A,1.0\np1,A,C,C,1.0\np2,B,C,B,0.5\n"
    r = client.post(url + "?privatized=false", content=raw, headers={**ADMIN, "Content-Type": "text/csv"})
    assert r.status_code == 201 and r.json()["respondents_created"] == 2
    srcs = db.scalars(select(Comparison.source).where(Comparison.survey_id == target["id"])).all()
    assert set(srcs) == {"import"} and len(srcs) == 75
    p1 = db.scalar(
        select(Respondent).where(Respondent.survey_id == target["id"], Respondent.external_ref == "p1")
    )
    assert p1.epsilon_spent == 2.0 and p1.n_comparisons == 2 and p1.token_hash is None


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ("respondent,item_a,item_b,winner\np,A,B,A\n", 422, "epsilon"),
        ("respondent,item_a,item_b,winner,epsilon\n", 422, "no data rows"),
        ("respondent,item_a,item_b,winner,epsilon\np,A,Z,A,1\n", 422, "row 2: item_b"),
        ("respondent,item_a,item_b,winner,epsilon\np,A,B,A,1\np,A,A,A,1\n", 422, "row 3"),
        ("respondent,item_a,item_b,winner,epsilon\np,A,B,SECRET-X,1\n", 422, "winner must be one"),
        ("respondent,item_a,item_b,winner,epsilon\np,A,B,A,9\n", 422, "bounds"),
        ("respondent,item_a,item_b,winner,epsilon\np,A,B,A,x\n", 422, "not a number"),
        ("respondent,item_a,item_b,winner,epsilon\np,A,B,A,1\np,B,A,A,1\n", 409, "same pair twice"),
        ("respondent,item_a,item_b,winner,epsilon\n,A,B,A,1\n", 422, "respondent"),
    ],
)
def test_import_errors_store_nothing(client, unchanged, body, status, fragment):
    s = create_survey(client, items=("A", "B", "C"), epsilon_min=0.5, epsilon_max=3.0)
    with unchanged():
        r = client.post(
            f"/v1/surveys/{s['id']}/comparisons/import?privatized=false",
            content=body,
            headers={**ADMIN, "Content-Type": "text/csv"},
        )
    assert r.status_code == status, r.text
    assert fragment in r.text and "SECRET-X" not in r.text


def test_import_budget_and_authorization(client, unchanged):
    s = create_survey(client, items=("A", "B", "C"), respondent_budget=1.5)
    url = f"/v1/surveys/{s['id']}/comparisons/import?privatized=true"
    body = "respondent,item_a,item_b,winner,epsilon\np,A,B,A,1\np,A,C,A,1\n"
    analyst = analyst_headers(client)
    with unchanged():
        r = client.post(url, content=body, headers={**ADMIN, "Content-Type": "text/csv"})
        assert r.status_code == 409 and "budget" in r.text
        assert client.post(url, content=body, headers=analyst).status_code == 403
        assert client.post(url, content=body).status_code == 401
        assert (
            client.post(f"/v1/surveys/{s['id']}/comparisons/import", content=body, headers=ADMIN).status_code
            == 422
        )  # privatized is required
        assert client.post(url, content=b"\xff\xfe", headers=ADMIN).status_code == 422


def test_count_of_stored_rows_is_exact(client, db, small_survey):
    sid, _ = small_survey
    assert db.scalar(select(func.count()).select_from(Comparison).where(Comparison.survey_id == sid)) == 72
