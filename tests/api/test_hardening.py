"""Races, hostile input and privacy details found in review, each pinned by a test."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.analysis import fits
from app.core.db.models import Comparison, IdempotencyRecord, Item, new_id
from app.respondents import ingestion
from app.stats import mechanisms
from tests.helpers.api import ADMIN, PAYLOADS, create_survey, make_app, register


def post(client, sid, headers, comparisons, key=None, privatized=False, epsilon=None):
    body = {"privatized": privatized, "comparisons": comparisons}
    if epsilon is not None:
        body["epsilon"] = epsilon
    h = {**headers, "Idempotency-Key": key} if key else headers
    return client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)


def test_epsilon_floor_is_enforced_everywhere(client, unchanged):
    with unchanged():
        r = client.post(
            "/v1/surveys",
            json={"title": "t", "items": ["a", "b"], "privacy": {"epsilon_default": 1e-7}},
            headers=ADMIN,
        )
        assert r.status_code == 422 and "epsilon_default" in r.text
    s = create_survey(client, items=("a", "b"), epsilon_default=0.01, epsilon_min=0.001, epsilon_max=1.0)
    _, h = register(client, s["id"], 0.001)
    a, b = (it["id"] for it in s["items"])
    with unchanged():
        assert (
            post(
                client, s["id"], h, [{"a": a, "b": b, "winner": a}], privatized=True, epsilon=1e-7
            ).status_code
            == 422
        )
    assert post(client, s["id"], h, [{"a": a, "b": b, "winner": a}]).status_code == 201
    assert client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN).status_code == 200
    assert client.get("/v1/surveys", headers=ADMIN).status_code == 200


def test_concurrent_copies_of_a_request_all_get_the_first_answer(app, client, db):
    """A client retrying while its first attempt is still in flight."""
    s = create_survey(client, items=[f"i{k}" for k in range(6)], respondent_budget=3.0)
    ids = [it["id"] for it in s["items"]]
    body = [
        {"a": ids[0], "b": ids[1], "winner": ids[0]},
        {"a": ids[2], "b": ids[3], "winner": ids[3]},
        {"a": ids[4], "b": ids[5], "winner": ids[4]},
    ]  # the whole budget
    for _ in range(3):
        rid, h = register(client, s["id"], 1.0)
        answers: list = []
        start = threading.Barrier(4)

        def send(h=h, answers=answers, start=start):
            with TestClient(app) as c:
                start.wait()
                answers.append(post(c, s["id"], h, body, key="retry"))

        threads = [threading.Thread(target=send) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.status_code for r in answers] == [201] * 4, [r.text for r in answers]
        assert len({r.text for r in answers}) == 1
        assert sum(r.headers.get("idempotent-replayed") == "true" for r in answers) == 3
        db.rollback()  # a fresh snapshot
        stored = db.scalar(
            select(func.count()).select_from(Comparison).where(Comparison.respondent_id == rid)
        )
        assert stored == 3


def test_idempotency_fingerprint_does_not_depend_on_the_answers(client, db):
    s = create_survey(client, items=("A", "B", "C"))
    a, b, c = (it["id"] for it in s["items"])
    prints = []
    for winners, orient in (((a, b), False), ((b, c), True)):
        rid, h = register(client, s["id"], 1.0)
        first = [{"a": a, "b": b, "winner": winners[0]}, {"a": b, "b": c, "winner": winners[1]}]
        if orient:  # the same pairs, listed in another order and orientation
            first = [{"a": c, "b": b, "winner": winners[1]}, {"a": b, "b": a, "winner": winners[0]}]
        assert post(client, s["id"], h, first, key="k").status_code == 201
        db.rollback()  # a fresh snapshot
        prints.append(db.get(IdempotencyRecord, (rid, "k")).fingerprint)
    assert prints[0] == prints[1]


def test_no_answer_is_stored_once_closing_has_returned(client, db, monkeypatch):
    """Close the survey in the window between validation and the write: the write
    must see it (it re-reads the survey under a lock) and refuse."""
    s = create_survey(client, items=("A", "B"))
    a, b = (it["id"] for it in s["items"])
    _, h = register(client, s["id"], 1.0)
    real = ingestion.privatize

    def close_meanwhile(*args, **kwargs):
        assert (
            client.patch(f"/v1/surveys/{s['id']}", json={"status": "closed"}, headers=ADMIN).status_code
            == 200
        )
        return real(*args, **kwargs)

    monkeypatch.setattr(ingestion, "privatize", close_meanwhile)
    r = post(client, s["id"], h, [{"a": a, "b": b, "winner": a}])
    assert r.status_code == 409 and "closed" in r.text
    assert db.scalar(select(func.count()).select_from(Comparison).where(Comparison.survey_id == s["id"])) == 0


def test_items_added_while_a_ranking_is_computed(app, client, monkeypatch):
    s = create_survey(client, items=("A", "B", "C", "D"))
    ids = [it["id"] for it in s["items"]]
    _, h = register(client, s["id"], 1.0)
    assert post(client, s["id"], h, [{"a": ids[0], "b": ids[1], "winner": ids[0]}]).status_code == 201
    real = fits.read_snapshot
    done = []

    def add_item_and_answer_first(session, survey_id, n_items, need_stats=lambda v: True):
        if not done:
            done.append(1)
            with app.state.session_factory() as other:  # another request, committed meanwhile
                other.add(Item(id=new_id("itm"), survey_id=s["id"], position=4, label="E"))
                other.commit()
            new = client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()["items"][-1]["id"]
            assert post(client, s["id"], h, [{"a": new, "b": ids[2], "winner": new}]).status_code == 201
            with app.state.session_factory() as other:
                from app.analysis.aggregation import fold_pending

                fold_pending(other, s["id"])
        return real(session, survey_id, n_items, need_stats)

    monkeypatch.setattr(fits, "read_snapshot", add_item_and_answer_first)
    r = client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN)
    assert r.status_code == 200, r.text
    # A consistent answer either way: SQLite reads the request's snapshot (4 items,
    # 1 comparison); PostgreSQL sees the new rows and re-reads the items (5, 2).
    n_items, n_comp = len(r.json()["items"]), r.json()["diagnostics"]["comparisons"]
    assert (n_items, n_comp) in ((4, 1), (5, 2))
    assert (n_items, n_comp) == ((5, 2) if app.state.engine.dialect.name == "postgresql" else (4, 1))
    after = client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN).json()
    assert len(after["items"]) == 5 and after["diagnostics"]["comparisons"] == 2


def test_reimporting_the_own_export_is_refused(client, unchanged):
    s = create_survey(client, items=("A", "B", "C"))
    a, b, c = (it["id"] for it in s["items"])
    _, h = register(client, s["id"], 1.0)
    assert (
        post(client, s["id"], h, [{"a": a, "b": b, "winner": a}, {"a": b, "b": c, "winner": c}]).status_code
        == 201
    )
    csv_text = client.get(f"/v1/surveys/{s['id']}/comparisons.csv", headers=ADMIN).text
    with unchanged():
        r = client.post(
            f"/v1/surveys/{s['id']}/comparisons/import?privatized=true",
            content=csv_text,
            headers={**ADMIN, "Content-Type": "text/csv"},
        )
    assert r.status_code == 409 and "already answered" in r.text


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("respondent,item_a,item_b,winner,epsilon\n=HYPERLINK(x),A,B,A,1\n", "respondent must be"),
        ("respondent,item_a,item_b,winner,epsilon\np,A,B,A,1\n\np,Z,B,A,1\n", "row 4"),
        ("respondent,respondent,item_a,item_b,winner,epsilon\np,p,A,B,A,1\n", "repeats a column"),
        (
            'respondent,item_a,item_b,winner,epsilon\np,A,B,A,1\n"' + "x" * 140_000 + '",A,B,A,1\n',
            "cannot be parsed",
        ),
    ],
)
def test_hostile_csv_imports(client, unchanged, body, fragment):
    s = create_survey(client, items=("A", "B", "C"))
    with unchanged():
        r = client.post(
            f"/v1/surveys/{s['id']}/comparisons/import?privatized=true",
            content=body,
            headers={**ADMIN, "Content-Type": "text/csv"},
        )
    assert r.status_code == 422, r.text
    assert fragment in r.text


def test_hostile_paths_queries_and_bodies(client, unchanged):
    with unchanged():
        assert client.post("/v1/surveys/a%00b/respondents", json={}).status_code == 404
        assert client.get("/v1/surveys/a%00b", headers=ADMIN).status_code == 404
        assert client.get(f"/v1/surveys?offset={10**30}", headers=ADMIN).status_code == 422
        r = client.post("/v1/keys", json={"label": "x\u0000y"}, headers=ADMIN)
        assert r.status_code == 422 and r.headers["content-type"] == "application/json"
        huge = "x" * (9 * 2**20)
        r = client.post("/v1/surveys", content=huge, headers={**ADMIN, "Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["detail"].startswith("the request body exceeds")


def _chunks(total: int, size: int = 2**20):
    """A body of ``total`` bytes sent chunked (no Content-Length): a JSON string's inside."""
    yield b'{"title": "'
    sent = 0
    while sent < total:
        part = min(size, total - sent)
        yield b"x" * part
        sent += part
    yield b'", "items": ["a", "b"]}'


def test_a_chunked_body_over_the_limit_is_413(app, client, unchanged):
    limit = app.state.settings.max_body_bytes
    with unchanged():
        r = client.post(
            "/v1/surveys", content=_chunks(limit + 1), headers={**ADMIN, "Content-Type": "application/json"}
        )
        assert "content-length" not in {k.lower() for k in r.request.headers}
        assert r.status_code == 413, r.text
        assert r.json() == {"detail": f"the request body exceeds {limit} bytes"}
    # Under the limit, chunked is read as any body (the title is too long: the model's 422).
    r = client.post(
        "/v1/surveys", content=_chunks(2**20), headers={**ADMIN, "Content-Type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "title"], r.text


def test_unexpected_errors_are_json_500_without_details(app, monkeypatch):
    from app.surveys import router as routes

    def boom(*args, **kwargs):
        raise RuntimeError("secret detail SECRET-XYZ")

    monkeypatch.setattr(routes.svc, "list_surveys", boom)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/v1/surveys", headers=ADMIN)
    assert r.status_code == 500 and r.json() == {"detail": "internal error"}
    assert "SECRET-XYZ" not in r.text


def test_the_last_admin_key_cannot_be_revoked(tmp_path):
    from app.core.auth import ensure_admin_key
    from app.core.config import Settings
    from app.core.db.migrate import upgrade
    from app.main import create_app

    url = f"sqlite:///{tmp_path}/keys.db"
    upgrade(url)
    app = create_app(Settings(DATABASE_URL=url))  # no PRIVRANK_ADMIN_KEY
    with app.state.session_factory() as session:
        key = ensure_admin_key(session, None)
        assert ensure_admin_key(session, None) is None  # only once
    h = {"Authorization": f"Bearer {key}"}
    with TestClient(app) as c:
        key_id = key.split(".")[0]
        r = c.delete(f"/v1/keys/{key_id}", headers=h)
        assert r.status_code == 409 and "last admin key" in r.text
        # The way out it names exists: admin keys are minted only by the CLI's rotation.
        assert "privrank admin-key rotate" in r.json()["detail"]
        assert c.get("/v1/keys", headers=h).status_code == 200
    app.state.engine.dispose()


def test_server_side_randomization_draws_from_the_os_csprng(client, monkeypatch):
    calls = Counter()
    real = mechanisms.system_uniform

    def spy(size):
        calls["system_uniform"] += 1
        return real(size)

    monkeypatch.setattr(mechanisms, "system_uniform", spy)
    s = create_survey(client, items=("A", "B"))
    a, b = (it["id"] for it in s["items"])
    _, h = register(client, s["id"], 1.0)
    assert post(client, s["id"], h, [{"a": a, "b": b, "winner": a}]).status_code == 201
    assert calls["system_uniform"] == 1


def test_least_answered_pairs_first_with_many_items(client):
    m = 8
    s = create_survey(client, items=[f"i{k}" for k in range(m)], respondent_budget="unlimited")
    ids = [it["id"] for it in s["items"]]
    pairs = list(itertools.combinations(ids, 2))
    answered, fresh = pairs[:20], pairs[20:]  # 8 pairs stay unanswered
    for chunk in (answered[:10], answered[10:]):
        _, h = register(client, s["id"])
        assert post(client, s["id"], h, [{"a": x, "b": y, "winner": x} for x, y in chunk]).status_code == 201
    _, h = register(client, s["id"])
    got = client.get(f"/v1/surveys/{s['id']}/pairs?count=8", headers=h).json()["pairs"]
    assert {frozenset((p["a"], p["b"])) for p in got} == {frozenset(p) for p in fresh}


def test_registration_and_failed_authentication_are_rate_limited(database_url):
    """Per client address: the 4th registration within a minute (limit 3) gets 429 with
    Retry-After and stores nothing; after 2 failed authentications (limit 2) a configured
    admin key shorter than 20 characters is refused with 429 until the bucket refills, so
    it cannot be guessed faster (long and issued credentials stay valid: test_admission)."""
    from fastapi.testclient import TestClient

    app = make_app(
        database_url, "limits-admin", PRIVRANK_REGISTER_PER_MINUTE=3, PRIVRANK_AUTH_FAILURES_PER_MINUTE=2
    )
    admin = {"Authorization": "Bearer limits-admin"}
    with TestClient(app) as c:
        sid = c.post("/v1/surveys", json={"title": "t", "items": ["a", "b"]}, headers=admin).json()["id"]
        codes = [c.post(f"/v1/surveys/{sid}/respondents", json={}).status_code for _ in range(4)]
        assert codes == [201, 201, 201, 429]
        r = c.post(f"/v1/surveys/{sid}/respondents", json={})
        assert (
            r.status_code == 429
            and int(r.headers["retry-after"]) >= 1
            and "registrations" in r.json()["detail"]
        )
        assert c.get("/v1/surveys", headers=admin).status_code == 200
        bad = {"Authorization": "Bearer key_aaaaaaaaaaaaaaaa.guess"}
        assert [c.get("/v1/surveys", headers=bad).status_code for _ in range(2)] == [401, 401]
        r = c.get("/v1/surveys", headers=admin)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert c.get("/healthz").status_code == 200  # unauthenticated endpoints stay up
    app.state.engine.dispose()


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("::ffff:203.0.113.7", "203.0.113.7"),  # IPv4-mapped: the IPv4 client
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::1", "2001:db8:1:2::/64"),
        ("::1", "::/64"),
        ("testclient", "testclient"),
    ],
)
def test_a_limit_counts_an_ipv6_client_by_its_64(host, key):
    from app.core.ratelimit import client_key

    assert client_key(host) == key


def test_fresh_ipv6_addresses_in_one_64_share_a_registration_bucket(database_url):
    """A client that takes a new address of its /64 for every registration is still one
    client (limit 3 a minute); a client of another /64 is not affected."""
    from fastapi.testclient import TestClient

    app = make_app(database_url, "limits-admin", PRIVRANK_REGISTER_PER_MINUTE=3)
    admin = {"Authorization": "Bearer limits-admin"}
    with TestClient(app) as c:
        sid = c.post("/v1/surveys", json={"title": "t", "items": ["a", "b"]}, headers=admin).json()["id"]
        codes = []
        for k in range(4):
            hopper = TestClient(app, client=(f"2001:db8:5:6::{k + 1:x}", 50000))
            codes.append(hopper.post(f"/v1/surveys/{sid}/respondents", json={}).status_code)
        assert codes == [201, 201, 201, 429]
        neighbour = TestClient(app, client=("2001:db8:5:7::1", 50000))
        assert neighbour.post(f"/v1/surveys/{sid}/respondents", json={}).status_code == 201
    app.state.engine.dispose()


def test_rate_limiter_refills_over_time(monkeypatch):
    from app.core import ratelimit

    now = [1000.0]
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: now[0])
    lim = ratelimit.RateLimiter({"x": 60, "off": 0})
    assert all(lim.take("x", "ip") is None for _ in range(60))
    wait = lim.take("x", "ip")
    assert wait == pytest.approx(1.0)  # 60 per minute: one token a second
    assert lim.take("x", "other") is None  # per client
    now[0] += 1.0
    assert lim.take("x", "ip") is None and lim.take("x", "ip") is not None
    assert all(lim.take("off", "ip") is None for _ in range(1000))


def test_a_per_hour_limit_refills_one_token_every_hour_over_its_size(monkeypatch):
    from app.core import ratelimit

    now = [1000.0]
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: now[0])
    lim = ratelimit.RateLimiter({"x": 60}, per_hour={"suggestions": 4})
    assert all(lim.take("suggestions", "ip") is None for _ in range(4))
    assert lim.take("suggestions", "ip") == pytest.approx(900.0)  # 4 an hour: one every 15 min
    assert lim.take("suggestions", "other") is None  # per client
    now[0] += 899.0
    assert lim.take("suggestions", "ip") == pytest.approx(1.0)
    now[0] += 1.0
    assert lim.take("suggestions", "ip") is None and lim.take("suggestions", "ip") is not None
    with pytest.raises(ValueError):
        ratelimit.RateLimiter({"x": 1}, per_hour={"x": 1})


def test_a_token_given_back_can_be_taken_again_but_never_overfills(monkeypatch):
    from app.core import ratelimit

    now = [1000.0]
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: now[0])
    lim = ratelimit.RateLimiter({}, per_hour={"suggestions": 2})
    assert lim.take("suggestions", "ip") is None and lim.take("suggestions", "ip") is None
    assert lim.take("suggestions", "ip") is not None
    lim.give_back("suggestions", "ip")  # the second request was refused after its take
    assert lim.take("suggestions", "ip") is None
    assert lim.take("suggestions", "ip") is not None
    # Giving back to a full (or never used) bucket adds nothing beyond its size.
    for _ in range(5):
        lim.give_back("suggestions", "fresh")
    assert [lim.take("suggestions", "fresh") is None for _ in range(3)] == [True, True, False]
    lim.give_back("off", "ip")  # no limit: nothing to give back


def test_hostile_labels_are_stored_and_returned_verbatim(client, db):
    """SQL, HTML, format-string and unicode payloads are data: stored as given, returned
    as JSON strings, and every table still there."""
    r = client.post("/v1/surveys", json={"title": PAYLOADS[1], "items": PAYLOADS}, headers=ADMIN)
    assert r.status_code == 201, r.text
    s = r.json()
    assert s["title"] == PAYLOADS[1] and [it["label"] for it in s["items"]] == PAYLOADS
    again = client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()
    assert [it["label"] for it in again["items"]] == PAYLOADS
    assert client.get("/v1/surveys", headers=ADMIN).status_code == 200  # the table survived
    _, h = register(client, s["id"])
    pair = client.get(f"/v1/surveys/{s['id']}/pairs?count=1", headers=h).json()["pairs"][0]
    assert {pair["a_label"], pair["b_label"]} <= set(PAYLOADS)
    assert client.get(f"/v1/surveys/{s['id']}/public").json()["title"] == PAYLOADS[1]
    # The exported data name items by id, never by label (no spreadsheet formulas).
    body = {"privatized": False, "comparisons": [{"a": pair["a"], "b": pair["b"], "winner": pair["a"]}]}
    assert client.post(f"/v1/surveys/{s['id']}/responses", json=body, headers=h).status_code == 201
    csv_text = client.get(f"/v1/surveys/{s['id']}/comparisons.csv", headers=ADMIN).text
    assert "HYPERLINK" not in csv_text and "<script>" not in csv_text
