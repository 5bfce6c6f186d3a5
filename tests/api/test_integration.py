"""Integration keys: server-to-server registration with an ``external_id``.

An integration key registers respondents without the per-address limit (its own
per-key limit instead) and may name the person by its own ``external_id``: the same
id in the same survey is the same respondent, with a new token each time (the old
one stops working). Only an HMAC digest of the id is stored; the raw id reaches
neither the database nor the logs. The key can do nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.db import models
from app.core.db.models import Respondent, ServiceSecret
from tests.helpers.api import ADMIN, analyst_headers, create_survey, make_app, register


def _integration(client: TestClient, label: str = "crm") -> dict:
    r = client.post("/v1/keys", json={"label": label, "role": "integration"}, headers=ADMIN)
    assert r.status_code == 201, r.text
    assert r.json()["role"] == "integration"
    return {"Authorization": f"Bearer {r.json()['key']}"}


def _register(client: TestClient, sid: str, headers: dict, **body) -> dict:
    r = client.post(f"/v1/surveys/{sid}/respondents", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def _bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def _ext() -> str:
    return f"person-{uuid.uuid4().hex}"


def test_only_an_admin_mints_an_integration_key_and_whoami_names_it(client):
    analyst = analyst_headers(client)
    r = client.post("/v1/keys", json={"role": "integration"}, headers=analyst)
    assert r.status_code == 403
    key = _integration(client)
    assert client.get("/v1/whoami", headers=key).json() == {"role": "integration", "survey_id": None}


def test_the_same_external_id_is_the_same_respondent_with_a_new_token(client):
    s = create_survey(client, respondent_budget=50)
    other = create_survey(client)
    key = _integration(client)
    ext = _ext()
    first = _register(client, s["id"], key, external_id=ext)
    second = _register(client, s["id"], key, external_id=ext)
    assert second["respondent_id"] == first["respondent_id"]
    assert second["token"] != first["token"]
    # The token rotates: the old one stops working, the new one works.
    me = f"/v1/surveys/{s['id']}/respondents/me"
    assert client.get(me, headers=_bearer(first["token"])).status_code == 401
    assert client.get(me, headers=_bearer(second["token"])).status_code == 200
    # Another id, or the same id in another survey, or no id: other respondents.
    assert _register(client, s["id"], key, external_id=_ext())["respondent_id"] != first["respondent_id"]
    elsewhere = _register(client, other["id"], key, external_id=ext)
    assert elsewhere["respondent_id"] != first["respondent_id"]
    assert _register(client, s["id"], key)["respondent_id"] != first["respondent_id"]
    # Exact comparison: case and white space make another id.
    assert _register(client, s["id"], key, external_id=ext.upper())["respondent_id"] != first["respondent_id"]


def test_a_new_token_cannot_answer_a_pair_again_or_reset_the_budget(client):
    s = create_survey(client, respondent_budget=50)
    a, b = s["items"][0]["id"], s["items"][1]["id"]
    key = _integration(client)
    ext = _ext()
    first = _register(client, s["id"], key, external_id=ext, epsilon=1.0)
    answer = {"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a}]}
    r = client.post(f"/v1/surveys/{s['id']}/responses", json=answer, headers=_bearer(first["token"]))
    assert r.status_code == 201
    second = _register(client, s["id"], key, external_id=ext)
    assert second["epsilon"] == 1.0 and second["budget_remaining"] == pytest.approx(49.0)
    r = client.post(f"/v1/surveys/{s['id']}/responses", json=answer, headers=_bearer(second["token"]))
    assert r.status_code == 409
    me = client.get(f"/v1/surveys/{s['id']}/respondents/me", headers=_bearer(second["token"])).json()
    assert me["comparisons"] == 1


def test_another_epsilon_for_a_known_external_id_is_refused(client, unchanged):
    s = create_survey(client, epsilon_min=0.5, epsilon_max=2.0)
    key = _integration(client)
    ext = _ext()
    first = _register(client, s["id"], key, external_id=ext, epsilon=1.0)
    with unchanged():
        r = client.post(
            f"/v1/surveys/{s['id']}/respondents", json={"external_id": ext, "epsilon": 2.0}, headers=key
        )
    assert r.status_code == 409 and ext not in r.text
    again = _register(client, s["id"], key, external_id=ext, epsilon=1.0)
    assert again["respondent_id"] == first["respondent_id"]


def test_external_id_from_anyone_else_is_403_and_bad_values_422(client, unchanged):
    s = create_survey(client)
    key = _integration(client)
    _, respondent = register(client, s["id"])
    revoked = client.post("/v1/keys", json={"role": "integration"}, headers=ADMIN).json()
    assert client.delete(f"/v1/keys/{revoked['id']}", headers=ADMIN).status_code == 204
    url = f"/v1/surveys/{s['id']}/respondents"
    others = {
        "anonymous": {},
        "garbage": {"Authorization": "Bearer key_aaaaaaaaaaaaaaaa.nope"},
        "respondent": respondent,
        "analyst": analyst_headers(client),
        "moderator": analyst_headers(client, role="moderator"),
        "admin": ADMIN,
        "revoked integration": _bearer(revoked["key"]),
    }
    ext = _ext()
    with unchanged():
        for who, headers in others.items():
            r = client.post(url, json={"external_id": ext}, headers=headers)
            assert r.status_code == 403, (who, r.status_code)
            assert ext not in r.text
        for bad in ["", "x" * 201, "tab\there", "nul\x00", 12345, ["a"]]:
            r = client.post(url, json={"external_id": bad}, headers=key)
            assert r.status_code == 422, (bad, r.status_code)
            if isinstance(bad, str) and bad:
                assert bad not in r.text
    # Without external_id every one of them still registers as before (credentials ignored).
    for headers in others.values():
        assert client.post(url, json={}, headers=headers).status_code == 201
    # 200 printable characters (any script) are fine.
    assert client.post(url, json={"external_id": "é" * 200}, headers=key).status_code == 201


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/v1/surveys"),
        ("get", "/v1/surveys"),
        ("get", "/v1/surveys/{sid}"),
        ("patch", "/v1/surveys/{sid}"),
        ("get", "/v1/surveys/{sid}/ranking"),
        ("get", "/v1/surveys/{sid}/comparisons.csv"),
        ("get", "/v1/surveys/{sid}/coverage"),
        ("get", "/v1/surveys/{sid}/suggestions"),
        ("get", "/v1/surveys/{sid}/pairs"),
        ("get", "/v1/surveys/{sid}/respondents/me"),
        ("post", "/v1/keys"),
        ("get", "/v1/keys"),
        ("get", "/v1/plan"),
        ("get", "/v1/site"),
    ],
)
def test_an_integration_key_can_do_nothing_else(client, method, path):
    s = create_survey(client)
    key = _integration(client)
    body = {"title": "x"} if method == "patch" else {"title": "t", "items": ["a", "b"]}
    r = client.request(
        method.upper(),
        path.replace("{sid}", s["id"]),
        headers=key,
        json=body if method != "get" else None,
    )
    assert r.status_code == 403, r.text


def test_the_database_holds_only_a_keyed_digest(private_url):
    app = make_app(private_url)
    try:
        with TestClient(app) as client:
            s = create_survey(client)
            key = _integration(client)
            raw = [f"alice.{uuid.uuid4().hex}@example.org", f"EMP-{uuid.uuid4().hex[:8]}", "Ünïcödé 東京 ✓"]
            ids = {ext: _register(client, s["id"], key, external_id=ext)["respondent_id"] for ext in raw}
            _register(client, s["id"], key, external_id=raw[0])
            with app.state.session_factory() as session:
                secret = session.scalar(
                    select(ServiceSecret.value).where(ServiceSecret.name == "external_ids")
                )
                assert secret is not None and len(secret) == 32
                everything = []
                for table in models.Base.metadata.sorted_tables:
                    everything += [repr(tuple(row)) for row in session.execute(select(table)).all()]
                for ext, rid in ids.items():
                    stored = session.get(Respondent, rid).external_key
                    message = f"privrank external id v1\0{s['id']}\0{ext}".encode()
                    assert stored == hmac.new(bytes(secret), message, hashlib.sha256).hexdigest()
                    # Not an unkeyed hash either (a reader without the secret cannot test guesses).
                    assert stored != hashlib.sha256(ext.encode()).hexdigest()
            dump = "\n".join(everything)
            for ext in raw:
                for form in {ext, ext.lower(), ext.upper(), ext.encode().hex(), repr(ext.encode())}:
                    assert form not in dump, f"{ext!r} is in the database"
    finally:
        app.state.engine.dispose()


def test_no_external_id_reaches_the_logs(client, caplog):
    s = create_survey(client, epsilon_min=0.5, epsilon_max=2.0)
    key = _integration(client)
    ext, too_long = f"LOGGED-ID-{uuid.uuid4().hex}", "LONG-" + "z" * 300
    url = f"/v1/surveys/{s['id']}/respondents"
    loggers = [
        logging.getLogger(n) for n in ("", "sqlalchemy.engine", "sqlalchemy.pool", "privrank", "uvicorn")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO if lg.name == "sqlalchemy.engine" else logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG):
            assert client.post(url, json={"external_id": ext, "epsilon": 1.0}, headers=key).status_code == 201
            assert client.post(url, json={"external_id": ext}, headers=key).status_code == 201
            assert client.post(url, json={"external_id": ext, "epsilon": 2.0}, headers=key).status_code == 409
            assert client.post(url, json={"external_id": ext}).status_code == 403
            assert client.post(url, json={"external_id": too_long}, headers=key).status_code == 422
            assert (
                client.post(
                    "/v1/surveys/svy_aaaaaaaaaaaaaaaa/respondents", json={"external_id": ext}, headers=key
                ).status_code
                == 404
            )
    finally:
        for lg, lvl in zip(loggers, levels, strict=True):
            lg.setLevel(lvl)
    assert caplog.records, "nothing was logged: the capture is not working"
    assert any(r.name.startswith("sqlalchemy.engine") for r in caplog.records), "SQL logging was not captured"
    text = "\n".join(
        f"{r.name} {r.getMessage()} {r.exc_text or ''} {getattr(r, 'args', '')}" for r in caplog.records
    )
    assert ext not in text and too_long not in text and "LOGGED-ID" not in text


def test_integration_keys_skip_the_address_limit_and_have_their_own(private_url):
    app = make_app(private_url, PRIVRANK_REGISTER_PER_MINUTE=2, PRIVRANK_INTEGRATION_PER_MINUTE=5)
    try:
        with TestClient(app) as client:
            s = create_survey(client)
            url = f"/v1/surveys/{s['id']}/respondents"
            key, spare = _integration(client, "one"), _integration(client, "two")
            # The address's anonymous allowance is used up …
            assert [client.post(url, json={}).status_code for _ in range(3)] == [201, 201, 429]
            # … yet one integration key registers more than it from the same address,
            # with and without external_id, up to its own limit.
            codes = [
                client.post(url, json={"external_id": f"p{n}"} if n % 2 else {}, headers=key).status_code
                for n in range(5)
            ]
            assert codes == [201] * 5
            r = client.post(url, json={"external_id": "p9"}, headers=key)
            assert r.status_code == 429 and float(r.headers["Retry-After"]) > 0
            assert "integration key" in r.json()["detail"]
            # Nothing was stored by the refused one.
            with app.state.session_factory() as session:
                assert (
                    len(session.scalars(select(Respondent.id).where(Respondent.survey_id == s["id"])).all())
                    == 7
                )
            # Each key has its own bucket; the anonymous one is still empty.
            assert client.post(url, json={"external_id": "p9"}, headers=spare).status_code == 201
            assert client.post(url, json={}).status_code == 429
    finally:
        app.state.engine.dispose()


def test_concurrent_registrations_of_one_external_id_make_one_respondent(app, db):
    n = 8
    with TestClient(app) as client:
        s = create_survey(client)
        key = _integration(client)
        ext = _ext()
        barrier = threading.Barrier(n)
        answers: list[dict] = []
        lock = threading.Lock()

        def go() -> None:
            barrier.wait()
            r = client.post(f"/v1/surveys/{s['id']}/respondents", json={"external_id": ext}, headers=key)
            with lock:
                answers.append({"status": r.status_code, **r.json()})

        threads = [threading.Thread(target=go) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [a["status"] for a in answers] == [201] * n, answers
        assert len({a["respondent_id"] for a in answers}) == 1
        rows = db.scalars(select(Respondent).where(Respondent.survey_id == s["id"])).all()
        assert len(rows) == 1 and rows[0].external_key is not None
        # Every answer carried a new token; the one written last is the one that works.
        me = f"/v1/surveys/{s['id']}/respondents/me"
        working = [a for a in answers if client.get(me, headers=_bearer(a["token"])).status_code == 200]
        assert len(working) == 1


def test_losing_the_insert_race_returns_the_winner(client, db, monkeypatch):
    """The unique (survey, external_key) constraint decides a race: a registration that
    saw no respondent but lost the insert rotates the winner's token instead."""
    from app.respondents import service as respondents

    s = create_survey(client)
    key = _integration(client)
    ext = _ext()
    first = _register(client, s["id"], key, external_id=ext)
    real = respondents._reissue
    calls = []

    def blind_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            return None  # as if the other registration had not committed yet
        return real(*args, **kwargs)

    monkeypatch.setattr(respondents, "_reissue", blind_once)
    second = _register(client, s["id"], key, external_id=ext)
    assert len(calls) == 2
    assert second["respondent_id"] == first["respondent_id"] and second["token"] != first["token"]
    assert len(db.scalars(select(Respondent).where(Respondent.survey_id == s["id"])).all()) == 1
