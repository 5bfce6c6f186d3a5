"""Privacy by default (a finite per-respondent cap unless the admin opts out explicitly), the
survey's privacy summary, and each respondent's privacy receipt (``GET …/respondents/me``)."""

from __future__ import annotations

import json
import math
import typing
from pathlib import Path

import pytest
from sqlalchemy import update

from app.core.db.models import Survey
from app.privacy.results import BudgetPolicy, PrivacySummary, ReceiptAnswer
from tests.helpers.api import (
    ADMIN,
    create_central_survey,
    create_ranking_survey,
    create_survey,
    register,
    writes,
)


def _bound(eps: float) -> float:
    return math.exp(eps) / (1.0 + math.exp(eps))


def _answer(client, sid, headers, pairs, epsilon=None):
    body = {
        "privatized": epsilon is not None,
        "comparisons": [{"a": a, "b": b, "winner": a} for a, b in pairs],
    }
    if epsilon is not None:
        body["epsilon"] = epsilon
    return client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)


def _pairs(s):
    ids = [it["id"] for it in s["items"]]
    return [(ids[i], ids[j]) for i in range(len(ids)) for j in range(i + 1, len(ids))]


def test_a_survey_without_a_budget_gets_the_default_cap_and_it_holds(client):
    s = create_survey(client, items=[f"i{k}" for k in range(6)])
    p = s["privacy"]
    assert (p["epsilon_default"], p["epsilon_min"], p["epsilon_max"]) == (1.0, 0.1, 2.0)
    assert p["respondent_budget"] == 5.0 and p["respondent_budget_policy"] == "capped"
    summary = p["summary"]
    assert summary["budget_policy"] == "capped" and summary["answers_at_default"] == 5
    assert summary["guess_bound_default"] == pytest.approx(_bound(1.0))
    assert summary["guess_bound_max"] == pytest.approx(_bound(2.0))
    assert summary["guess_bound_budget"] == pytest.approx(_bound(5.0))
    # Five answers at the default ε spend the cap; a sixth is refused and nothing is stored.
    _, h = register(client, s["id"])
    pairs = _pairs(s)
    assert _answer(client, s["id"], h, pairs[:5]).status_code == 201
    before = writes(client.app)
    r = _answer(client, s["id"], h, pairs[5:6])
    assert r.status_code == 409 and "budget" in r.json()["detail"]
    assert writes(client.app) == before
    assert client.get(f"/v1/surveys/{s['id']}/pairs", headers=h).json()["reason"] == "budget_spent"


def test_an_explicit_null_budget_is_the_default_not_an_opt_out(client):
    s = create_survey(client, respondent_budget=None)
    assert s["privacy"]["respondent_budget"] == 5.0
    assert s["privacy"]["respondent_budget_policy"] == "capped"


def test_opting_out_is_explicit_and_shown(client):
    s = create_survey(client, items=[f"i{k}" for k in range(5)], respondent_budget="unlimited")
    p = s["privacy"]
    assert p["respondent_budget"] is None and p["respondent_budget_policy"] == "unlimited"
    assert p["summary"]["budget_policy"] == "unlimited" and p["summary"]["answers_at_default"] == 10
    public = client.get(f"/v1/surveys/{s['id']}/public").json()
    assert public["respondent_budget_policy"] == "unlimited"
    assert public["privacy_summary"]["budget_policy"] == "unlimited"
    listed = next(x for x in client.get("/v1/surveys", headers=ADMIN).json()["surveys"] if x["id"] == s["id"])
    assert listed["privacy"]["respondent_budget_policy"] == "unlimited"
    # No cap: every pair, at the largest ε.
    _, h = register(client, s["id"], epsilon=2.0)
    assert _answer(client, s["id"], h, _pairs(s)).status_code == 201


@pytest.mark.parametrize(
    ("privacy", "message"),
    [
        ({"respondent_budget": "none"}, "unlimited"),  # only "unlimited" opts out
        ({"respondent_budget": 0}, "greater than 0"),
        ({"epsilon_max": 8.0}, "above the default respondent budget"),
        ({"respondent_budget": 0.05}, "from epsilon_min to 100"),
        ({"respondent_budget": 1e300}, "from epsilon_min to 100"),  # a cap that protects nothing
    ],
)
def test_budget_settings_that_are_refused(client, privacy, message):
    before = writes(client.app)
    r = client.post(
        "/v1/surveys", json={"title": "t", "items": ["a", "b"], "privacy": privacy}, headers=ADMIN
    )
    assert r.status_code == 422 and message in r.text
    assert writes(client.app) == before


def test_a_large_epsilon_max_needs_a_chosen_budget(client):
    s = create_survey(client, epsilon_max=8.0, respondent_budget=16.0)
    assert s["privacy"]["respondent_budget"] == 16.0


def test_central_surveys_take_no_respondent_budget_even_unlimited(client):
    privacy = {"model": "central", "total_budget": 2, "max_comparisons_per_respondent": 1}
    r = client.post(
        "/v1/surveys",
        json={"title": "c", "items": ["a", "b"], "privacy": {**privacy, "respondent_budget": "unlimited"}},
        headers=ADMIN,
    )
    assert r.status_code == 422


def test_a_ranking_survey_is_capped_at_one_ranking(client):
    s = create_ranking_survey(client, items=("a", "b", "c", "d"))
    p = s["privacy"]
    assert p["respondent_budget"] == p["epsilon_max"] == 2.0 and p["respondent_budget_policy"] == "capped"
    summary = p["summary"]
    assert summary["swap_probability_default"] == pytest.approx(1 / (1 + math.exp(1.0 / 3)))
    assert summary["epsilon_whole_ranking_default"] == pytest.approx(2.0)
    assert summary["guess_bound_whole_ranking_default"] == pytest.approx(_bound(2.0))


def test_a_survey_stored_without_a_cap_keeps_it_and_shows_unset(client):
    s = create_survey(client, items=[f"i{k}" for k in range(4)])
    with client.app.state.session_factory() as session:  # as stored before caps were the default
        session.execute(update(Survey).where(Survey.id == s["id"]).values(respondent_budget=None))
        session.commit()
    got = client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()["privacy"]
    assert got["respondent_budget"] is None and got["respondent_budget_policy"] == "unset"
    assert got["summary"]["budget_policy"] == "unset" and got["summary"]["answers_at_default"] == 6
    _, h = register(client, s["id"], epsilon=2.0)
    assert _answer(client, s["id"], h, _pairs(s)).status_code == 201  # 12 > 5: no cap applies
    r = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=h).json()["receipt"]
    assert r["budget_policy"] == "unset" and r["respondent_budget"] is None and r["budget_remaining"] is None
    assert r["epsilon_total"] == pytest.approx(12.0)


def test_central_summary_states_the_release_budget(client):
    s = create_central_survey(client, budget=3.0, per_respondent=2)
    summary = s["privacy"]["summary"]
    assert summary["model"] == "central" and summary["accounting"] == "pure"
    assert summary["total_budget"] == 3.0 and summary["guess_bound_total"] == pytest.approx(_bound(3.0))
    assert summary["max_comparisons_per_respondent"] == 2 and s["privacy"]["respondent_budget_policy"] is None


def _zcdp_survey(client, total_budget: float, per_respondent: int) -> dict:
    """A central survey of three items accounting in zCDP at δ = 10⁻⁶."""
    privacy = {
        "model": "central",
        "total_budget": total_budget,
        "max_comparisons_per_respondent": per_respondent,
        "accounting": "zcdp",
        "delta": 1e-6,
    }
    r = client.post(
        "/v1/surveys", json={"title": "z", "items": ["a", "b", "c"], "privacy": privacy}, headers=ADMIN
    )
    assert r.status_code == 201, r.text
    return r.json()


def test_a_zcdp_summary_states_its_delta_and_the_matching_guess_bound(client):
    """(ε, δ)-DP bounds a guess by (e^ε + δ)/(1 + e^ε) (Kairouz, Oh & Viswanath 2015)."""
    summary = _zcdp_survey(client, 2.0, 3)["privacy"]["summary"]
    assert (summary["accounting"], summary["delta"], summary["total_budget"]) == ("zcdp", 1e-6, 2.0)
    e = math.exp(2.0)
    assert summary["guess_bound_total"] == pytest.approx((e + 1e-6) / (1 + e), rel=1e-12)
    assert summary["guess_bound_total"] > _bound(2.0)


def test_a_survey_taking_suggestions_states_its_batch(client):
    body = {"title": "ideas", "items": ["a", "b"], "suggestions": {"batch": 7}}
    s = client.post("/v1/surveys", json=body, headers=ADMIN).json()
    assert s["privacy"]["summary"]["suggestion_batch"] == 7
    public = client.get(f"/v1/surveys/{s['id']}/public").json()
    assert public["privacy_summary"]["suggestion_batch"] == 7
    plain = client.post("/v1/surveys", json={"title": "plain", "items": ["a", "b"]}, headers=ADMIN).json()
    assert plain["privacy"]["summary"]["suggestion_batch"] is None


def test_the_receipt_adds_up(client):
    s = create_survey(client, items=[f"i{k}" for k in range(5)], epsilon_min=0.2, respondent_budget=4.0)
    _, h = register(client, s["id"], epsilon=0.5)
    pairs = _pairs(s)
    empty = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=h).json()["receipt"]
    assert empty["answers"] == [] and empty["epsilon_total"] == 0 and empty["budget_remaining"] == 4.0
    assert _answer(client, s["id"], h, pairs[:3]).status_code == 201  # the server flips, ε 0.5
    assert _answer(client, s["id"], h, pairs[3:4], epsilon=1.5).status_code == 201  # flipped on the device
    me = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=h).json()
    r = me["receipt"]
    eps = [a["epsilon"] for a in r["answers"]]
    assert eps == [0.5, 0.5, 0.5, 1.5]
    assert [a["randomized_on"] for a in r["answers"]] == ["server"] * 3 + ["device"]
    assert {a["mechanism"] for a in r["answers"]} == {"randomized_response"}
    assert [tuple(a["items"]) for a in r["answers"]] == pairs[:4]
    labels = {it["id"]: it["label"] for it in s["items"]}
    assert all(a["labels"] == [labels[x] for x in a["items"]] for a in r["answers"])
    for a in r["answers"]:
        assert a["guess_bound"] == pytest.approx(_bound(a["epsilon"]))
        assert a["flip_probability"] == pytest.approx(1 - _bound(a["epsilon"]))
        assert set(a) >= {"kind", "items", "labels", "mechanism", "epsilon"}
        assert "winner" not in a and "y_tilde" not in a  # the stored answer is not echoed
    assert r["answers_total"] == 4
    assert r["epsilon_total"] == pytest.approx(sum(eps)) == pytest.approx(me["epsilon_total"])
    assert r["budget_remaining"] == pytest.approx(4.0 - sum(eps)) == pytest.approx(me["budget_remaining"])
    assert r["guess_bound_total"] == pytest.approx(_bound(sum(eps)))
    assert r["guess_bound_budget"] == pytest.approx(_bound(4.0))
    # A page of the receipt; the totals still cover every answer.
    page = client.get(f"/v1/surveys/{s['id']}/respondents/me?limit=2&offset=1", headers=h).json()["receipt"]
    assert [tuple(a["items"]) for a in page["answers"]] == pairs[1:3]
    assert page["answers_total"] == 4 and page["epsilon_total"] == pytest.approx(3.0)
    assert client.get(f"/v1/surveys/{s['id']}/respondents/me?limit=1001", headers=h).status_code == 422


def test_the_receipt_labels_are_in_the_respondents_language(client):
    body = {
        "title": "t",
        "items": ["House", "Park"],
        "item_translations": {"es": ["Casa", "Parque"]},
    }
    s = client.post("/v1/surveys", json=body, headers=ADMIN).json()
    _, h = register(client, s["id"])
    assert _answer(client, s["id"], h, _pairs(s)).status_code == 201
    r = client.get(f"/v1/surveys/{s['id']}/respondents/me?lang=es", headers=h).json()["receipt"]
    assert r["answers"][0]["labels"] == ["Casa", "Parque"]


def test_one_respondent_never_reads_anothers_receipt(client):
    s = create_survey(client, items=[f"i{k}" for k in range(4)])
    other = create_survey(client, items=["x", "y"])
    _, h1 = register(client, s["id"])
    _, h2 = register(client, s["id"])
    pairs = _pairs(s)
    assert _answer(client, s["id"], h1, pairs[:2]).status_code == 201
    assert _answer(client, s["id"], h2, pairs[2:3]).status_code == 201
    r2 = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=h2).json()["receipt"]
    assert [tuple(a["items"]) for a in r2["answers"]] == pairs[2:3] and r2["answers_total"] == 1
    assert client.get(f"/v1/surveys/{other['id']}/respondents/me", headers=h1).status_code in (401, 403)
    assert client.get(f"/v1/surveys/{s['id']}/respondents/me").status_code == 401
    # Admin and analyst keys are not respondents: they read no receipt either.
    assert client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=ADMIN).status_code in (401, 403)


def test_a_ranking_receipt_names_no_order(client):
    s = create_ranking_survey(client, items=("a", "b", "c", "d"))
    _, h = register(client, s["id"], epsilon=1.5)
    ids = [it["id"] for it in s["items"]]
    r = client.post(f"/v1/surveys/{s['id']}/responses", json={"privatized": False, "ranking": ids}, headers=h)
    assert r.status_code == 201
    receipt = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=h).json()["receipt"]
    (a,) = receipt["answers"]
    assert a["kind"] == "ranking" and a["mechanism"] == "mallows" and a["randomized_on"] == "server"
    assert a["items"] == [] and a["n_items"] == 4 and a["epsilon"] == 1.5
    assert a["guess_bound"] == pytest.approx(_bound(1.5))
    assert a["swap_probability"] == pytest.approx(1 / (1 + math.exp(1.5 / 3)))
    assert a["epsilon_whole_ranking"] == pytest.approx(3.0)
    assert a["guess_bound_whole_ranking"] == pytest.approx(_bound(3.0))
    assert receipt["epsilon_total"] == 1.5 and receipt["budget_remaining"] == pytest.approx(0.5)


def test_a_central_receipt_counts_answers_and_the_releases_spent(client):
    s = create_central_survey(client, budget=3.0, per_respondent=2)
    _, h = register(client, s["id"])
    pairs = _pairs(s)
    assert _answer(client, s["id"], h, pairs[:1]).status_code == 201
    r = client.post(
        f"/v1/surveys/{s['id']}/releases",
        json={"method": "noisy_counts", "unit": "individual", "epsilon": 1.0},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    receipt = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=h).json()["receipt"]
    (a,) = receipt["answers"]
    assert a["mechanism"] == "none" and a["epsilon"] is None and tuple(a["items"]) == pairs[0]
    assert receipt["release_budget"] == 3.0 and receipt["release_epsilon_spent"] == pytest.approx(1.0)
    assert receipt["guess_bound_total"] == pytest.approx(_bound(1.0))
    assert receipt["comparisons_remaining"] == 1 and receipt["epsilon_total"] is None


def test_a_zcdp_receipt_states_the_same_guess_bound_as_the_summary(client):
    s = _zcdp_survey(client, 3.0, 2)
    sid = s["id"]
    _, h = register(client, sid)
    assert _answer(client, sid, h, _pairs(s)[:1]).status_code == 201
    r = client.post(
        f"/v1/surveys/{sid}/releases",
        json={"method": "noisy_counts", "unit": "individual", "rho": 0.125},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    receipt = client.get(f"/v1/surveys/{sid}/respondents/me", headers=h).json()["receipt"]
    spent = receipt["release_epsilon_spent"]
    e = math.exp(spent)
    assert receipt["guess_bound_total"] == pytest.approx((e + 1e-6) / (1 + e), rel=1e-12)


CATALOGS = Path(__file__).resolve().parents[2] / "static" / "i18n"


@pytest.mark.parametrize("catalog", ["respond.en", "respond.es", "respond.de", "respond.fr", "dashboard.en"])
def test_every_value_the_pages_put_in_words_has_its_message(catalog):
    """The pages build some keys from the API's values (summary.budget.<policy>,
    summary.central.<accounting>; receipt.on.<where>, receipt.mechanism.<mechanism>): each
    value the API can send has its message."""
    messages = json.loads((CATALOGS / f"{catalog}.json").read_text(encoding="utf-8"))
    accounting = typing.get_args(typing.get_args(PrivacySummary.model_fields["accounting"].annotation)[0])
    wanted = {f"summary.budget.{p}" for p in typing.get_args(BudgetPolicy)}
    wanted |= {f"summary.central.{a}" for a in accounting}
    if catalog.startswith("respond"):
        where = typing.get_args(ReceiptAnswer.model_fields["randomized_on"].annotation)
        mechanisms = typing.get_args(ReceiptAnswer.model_fields["mechanism"].annotation)
        wanted |= {f"receipt.on.{w}" for w in where} | {f"receipt.mechanism.{m}" for m in mechanisms}
    wanted.add("summary.suggestions")
    assert {"summary.budget.unset", "summary.central.pure", "summary.central.zcdp"} <= wanted  # found
    assert wanted - set(messages) == set()
