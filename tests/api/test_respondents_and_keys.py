"""Respondent registration, the respondent's own account, analyst keys."""

from __future__ import annotations

import math

import pytest

from app.core.auth import hash_secret
from app.core.db.models import ApiKey, Respondent
from tests.helpers.api import ADMIN, create_survey, register


def test_register_with_default_and_chosen_epsilon(client, db):
    s = create_survey(client, epsilon_default=1.0, epsilon_min=0.5, epsilon_max=2.0, respondent_budget=10.0)
    r = client.post(f"/v1/surveys/{s['id']}/respondents")  # no body at all
    assert r.status_code == 201
    data = r.json()
    assert data["respondent_id"].startswith("rsp_") and data["epsilon"] == 1.0
    assert data["flip_probability"] == pytest.approx(1 / (1 + math.e))
    assert data["budget_remaining"] == 10.0
    r = client.post(f"/v1/surveys/{s['id']}/respondents", json={"epsilon": 2.0})
    assert r.status_code == 201 and r.json()["epsilon"] == 2.0
    # Only the token's hash is stored.
    row = db.get(Respondent, data["respondent_id"])
    secret = data["token"].split(".", 1)[1]
    assert row.token_hash == hash_secret(secret) and secret not in row.token_hash


@pytest.mark.parametrize("eps", [0.49, 2.01, 0, -1, 1e308])
def test_register_epsilon_out_of_bounds_is_422(client, unchanged, eps):
    s = create_survey(client, epsilon_default=1.0, epsilon_min=0.5, epsilon_max=2.0)
    with unchanged():
        r = client.post(f"/v1/surveys/{s['id']}/respondents", json={"epsilon": eps})
    assert r.status_code == 422 and "bounds" in r.text


def test_register_errors(client, unchanged):
    s = create_survey(client)
    with unchanged():
        assert client.post("/v1/surveys/srv_nope/respondents", json={}).status_code == 404
        r = client.post(f"/v1/surveys/{s['id']}/respondents", json={"epsilon": "high"})
        assert r.status_code == 422 and "high" not in r.text  # inputs are never echoed


def test_me_reports_own_account_only(client):
    s = create_survey(client, respondent_budget=5.0)
    rid, headers = register(client, s["id"], 1.0)
    r = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=headers)
    assert r.status_code == 200
    receipt = r.json().pop("receipt")  # its own tests: tests/api/test_privacy_by_default.py
    assert receipt["answers"] == [] and receipt["epsilon_total"] == 0.0 and receipt["budget_remaining"] == 5.0
    assert {k: v for k, v in r.json().items() if k != "receipt"} == {
        "respondent_id": rid,
        "survey_id": s["id"],
        "epsilon": 1.0,
        "comparisons": 0,
        "epsilon_total": 0.0,
        "budget_remaining": 5.0,
        "comparisons_remaining": None,
        "ranked": None,
    }
    other = create_survey(client)
    assert client.get(f"/v1/surveys/{other['id']}/respondents/me", headers=headers).status_code == 403
    assert client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=ADMIN).status_code == 403
    assert client.get(f"/v1/surveys/{s['id']}/respondents/me").status_code == 401
    bad = {"Authorization": f"Bearer {rid}.wrongsecret"}
    assert client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=bad).status_code == 401


def test_analyst_keys_lifecycle(client, db, unchanged):
    r = client.post("/v1/keys", json={"label": "data team"}, headers=ADMIN)
    assert r.status_code == 201
    data = r.json()
    key = data["key"]
    assert data["role"] == "analyst" and data["label"] == "data team" and data["revoked_at"] is None
    row = db.get(ApiKey, data["id"])
    assert row.secret_hash == hash_secret(key.split(".", 1)[1])
    analyst = {"Authorization": f"Bearer {key}"}
    assert client.get("/v1/surveys", headers=analyst).status_code == 200
    page = client.get("/v1/keys", headers=ADMIN).json()
    listed = page["keys"]
    assert listed[0]["id"] == data["id"] and page["total"] >= len(listed)  # newest first
    assert client.get("/v1/keys?limit=1", headers=ADMIN).json()["keys"] == [listed[0]]
    assert client.get("/v1/keys?limit=1001", headers=ADMIN).status_code == 422
    assert all("key" not in k and "secret_hash" not in k for k in listed)
    with unchanged():
        assert client.post("/v1/keys", json={}, headers=analyst).status_code == 403
        assert client.get("/v1/keys", headers=analyst).status_code == 403
        assert client.post("/v1/keys", json={"role": "admin"}, headers=ADMIN).status_code == 422
        assert client.delete("/v1/keys/key_nope", headers=ADMIN).status_code == 404
    assert client.delete(f"/v1/keys/{data['id']}", headers=ADMIN).status_code == 204
    assert client.get("/v1/surveys", headers=analyst).status_code == 401
    assert client.post("/v1/keys", headers=ADMIN).status_code == 201  # body optional


def test_malformed_tokens_are_401(client):
    for token in ("", "garbage", "key_x.", ".secret", "rsp_" + "x" * 60 + ".s", "key_nope.secret"):
        r = client.get("/v1/surveys", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 401, token
    assert client.get("/v1/surveys", headers={"Authorization": "Basic abc"}).status_code == 401


def test_a_request_authenticates_its_caller_once(app, client, db, monkeypatch):
    """The respondent dependency and ``principal`` share the caller a request found: a
    route naming both would make one authentication query, not two."""
    from fastapi.security import HTTPAuthorizationCredentials
    from starlette.requests import Request

    from app.core import auth, deps

    s = create_survey(client, items=("A", "B"))
    _, headers = register(client, s["id"], 1.0)
    token = headers["Authorization"].partition(" ")[2]
    calls: list[str] = []
    real = auth.authenticate
    monkeypatch.setattr(auth, "authenticate", lambda *a: calls.append("auth") or real(*a))
    request = Request({"type": "http", "app": app, "headers": [], "client": ("203.0.113.9", 1)})
    credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)
    survey, respondent = deps.respondent_of_survey(s["id"], request, credentials, db)
    who = deps.principal(request, credentials, db)
    assert survey.id == s["id"] and who.respondent_id == respondent.id
    assert calls == ["auth"]
