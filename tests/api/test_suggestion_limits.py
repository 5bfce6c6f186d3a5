"""Limits on suggestions (app.participation.suggestions, docs/how-to/moderate.md, "Limits on suggestions"): a
survey accepts at most ``per_hour`` suggestions per clock hour and ``max_total`` in all,
on top of each respondent's ``per_respondent``; the batching that hides authorship is
unchanged (a batch is published whole, so each limit leaves room for one). A client
address sends at most ``PRIVRANK_SUGGEST_PER_HOUR`` suggestions an hour, whatever its
tokens (app.participation.router)."""

from __future__ import annotations

from datetime import timedelta

import httpx2
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db.models import HeldContribution, Item, Suggestion, to_hour, utcnow
from app.participation import suggestions as suggestions_module
from tests.helpers.api import ADMIN, ADMIN_KEY, analyst_headers, make_app, register, writes
from tests.helpers.live import LiveServer


def _survey(client, **settings) -> str:
    body = {
        "title": "Ideas",
        "items": ["Parks", "Bike lanes", "Libraries"],
        "suggestions": {"enabled": True, "moderation": "after", **settings},
    }
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _suggest(client, sid, headers, label):
    return client.post(f"/v1/surveys/{sid}/suggestions", json={"label": label}, headers=headers)


def _counts(app, sid) -> tuple[int, int, int]:
    with app.state.session_factory() as session:
        items = session.scalar(select(func.count()).where(Item.survey_id == sid, Item.source == "suggested"))
        stored = session.scalar(select(func.count()).where(Suggestion.survey_id == sid))
        held = session.scalar(select(func.count()).where(HeldContribution.survey_id == sid))
    return int(items or 0), int(stored or 0), int(held or 0)


def test_defaults_are_set_and_shown(client):
    sid = _survey(client)
    got = client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["suggestions"]
    assert (got["per_hour"], got["max_total"], got["per_respondent"], got["batch"]) == (100, 1000, 3, 5)


def test_a_flood_in_moderation_after_stops_at_the_hourly_limit(client, app, monkeypatch):
    """Many throw-away respondents suggesting at once: at most per_hour suggestions (and
    so items) per clock hour; the next hour takes more."""
    now = utcnow()
    monkeypatch.setattr(suggestions_module, "utcnow", lambda: now)
    sid = _survey(client, per_respondent=3, batch=2, per_hour=10)
    codes = []
    for k in range(12):
        _, h = register(client, sid)
        for n in range(3):
            r = _suggest(client, sid, h, f"idea {k}-{n}")
            codes.append(r.status_code)
            if r.status_code == 429:
                assert r.json()["code"] == "suggestions_hourly"
                assert "at most 10 suggestions an hour" in r.json()["detail"]
                wait = int(r.headers["Retry-After"])
                assert 1 <= wait <= (to_hour(now) + timedelta(hours=1) - now).total_seconds() + 1
    items, stored, held = _counts(app, sid)
    assert stored == items == 10  # each published batch became items at once; not one more
    assert codes.count(429) > 0 and held <= 1 * 3  # what waits is below one batch
    # The next hour takes suggestions again.
    later = to_hour(now) + timedelta(hours=1, minutes=5)
    monkeypatch.setattr(suggestions_module, "utcnow", lambda: later)
    _, h1 = register(client, sid)
    _, h2 = register(client, sid)
    assert _suggest(client, sid, h1, "next hour one").status_code == 202
    assert _suggest(client, sid, h2, "next hour two").status_code == 202
    assert _counts(app, sid)[1] > 10


def test_the_total_limit_counts_all_but_rejected_suggestions(client, app):
    sid = _survey(client, moderation="before", per_respondent=2, batch=2, max_total=4)
    moderator = analyst_headers(client, role="moderator")
    accepted = 0
    refusals = []
    for k in range(4):
        _, h = register(client, sid)
        for n in range(2):
            r = _suggest(client, sid, h, f"proposal {k}-{n}")
            if r.status_code == 202:
                accepted += 1
            else:
                refusals.append(r)
    assert _counts(app, sid)[1] == 4
    assert refusals and all(r.status_code == 409 for r in refusals)
    assert {r.json()["code"] for r in refusals} == {"suggestions_full"}
    assert "all the suggestions it accepts (4)" in refusals[0].json()["detail"]
    # Rejecting two makes room for one more batch.
    queue = client.get(f"/v1/surveys/{sid}/suggestions", headers=moderator).json()["suggestions"]
    for q in queue[:2]:
        r = client.post(
            f"/v1/surveys/{sid}/suggestions/{q['id']}/reject", json={"reason": "off topic"}, headers=moderator
        )
        assert r.status_code == 200, r.text
    _, a = register(client, sid)
    _, b = register(client, sid)
    assert _suggest(client, sid, a, "room again").status_code == 202
    assert _suggest(client, sid, b, "room again too").status_code == 202
    assert _counts(app, sid)[1] == 6


def test_limits_are_checked(client):
    bad = [
        {"per_hour": 4, "batch": 5},  # below one batch
        {"per_hour": 10_001},
        {"max_total": 1, "batch": 2},
        {"max_total": 10_001},
        {"per_hour": True},
        {"max_total": "100"},
    ]
    for settings in bad:
        body = {"title": "t", "items": ["a", "b"], "suggestions": {"enabled": True, **settings}}
        r = client.post("/v1/surveys", json=body, headers=ADMIN)
        assert r.status_code == 422, settings
        assert "Traceback" not in r.text


def _from(app, address: str) -> TestClient:
    """A client of ``app`` (its lifespan run by another) calling from ``address``."""
    return TestClient(app, client=(address, 50000))


def test_one_address_is_limited_whatever_its_tokens_and_others_still_get_through(database_url):
    """Throw-away tokens from one address (3 an hour): the 4th suggestion is refused with
    429 and Retry-After, stores nothing and uses none of the token's allowance; another
    address is not affected and the survey's own hourly allowance is left to it."""
    app = make_app(database_url, PRIVRANK_SUGGEST_PER_HOUR=3)
    with TestClient(app) as admin:
        flood, other = _from(app, "203.0.113.7"), _from(app, "198.51.100.20")
        sid = _survey(admin, per_respondent=3, batch=2, per_hour=100)
        tokens = [register(flood, sid)[1] for _ in range(4)]
        assert [_suggest(flood, sid, tokens[k], f"idea {k}").status_code for k in range(3)] == [202] * 3
        before = writes(app)
        refused = [_suggest(flood, sid, tokens[k], f"more {k}") for k in (0, 3)]
        assert writes(app) == before  # nothing stored: no suggestion, no held row, no slot
        for r in refused:
            assert r.status_code == 429, r.text
            assert r.json()["code"] == "suggestions_address"
            assert "too many suggestions from this address (at most 3 an hour)" in r.json()["detail"]
            assert 1 <= int(r.headers["Retry-After"]) <= 1200  # 3 an hour: a token every 20 min
        # Another address suggests, with a token of the flooding address too: the refusal
        # used none of its allowance.
        ok = _suggest(other, sid, tokens[3], "from elsewhere")
        assert ok.status_code == 202 and ok.json()["remaining"] == 2
        _, mine = register(other, sid)
        assert _suggest(other, sid, mine, "mine").status_code == 202
        assert _counts(app, sid)[1] == 4  # two batches of 2 published (moderation "after")
    app.state.engine.dispose()


def test_refused_suggestions_cost_their_address_nothing(database_url):
    """Behind one address (3 an hour), a respondent whose own allowance is used up keeps
    sending: each refusal (409) gives the address's token back, so two colleagues behind
    the same address still suggest — and then the address limit holds."""
    app = make_app(database_url, PRIVRANK_SUGGEST_PER_HOUR=3)
    with TestClient(app) as admin:
        office = _from(app, "203.0.113.50")
        sid = _survey(admin, per_respondent=1, batch=2, per_hour=100)
        eager = register(office, sid)[1]
        assert _suggest(office, sid, eager, "first").status_code == 202
        again = [_suggest(office, sid, eager, f"again {k}") for k in range(5)]
        assert [(r.status_code, r.json()["code"]) for r in again] == [(409, "suggestion_limit")] * 5
        colleagues = [register(office, sid)[1] for _ in range(3)]
        codes = [_suggest(office, sid, c, f"colleague {k}").status_code for k, c in enumerate(colleagues)]
        assert codes == [202, 202, 429]
    app.state.engine.dispose()


def test_the_survey_hourly_limit_still_applies_with_the_address_limit(database_url, monkeypatch):
    """Both limits at once (3 an address, 4 a survey-hour): the address limit refuses what
    the survey would still take, and the survey refuses a fresh address once its hour is
    taken."""
    now = utcnow()
    monkeypatch.setattr(suggestions_module, "utcnow", lambda: now)
    app = make_app(database_url, PRIVRANK_SUGGEST_PER_HOUR=3)
    with TestClient(app) as admin:
        sid = _survey(admin, per_respondent=3, batch=2, per_hour=4)
        one, two, three = (_from(app, f"192.0.2.{k}") for k in (1, 2, 3))
        codes = [_suggest(one, sid, register(one, sid)[1], f"idea {k}").status_code for k in range(4)]
        assert codes == [202, 202, 202, 429]  # one batch published, one suggestion held
        assert _suggest(two, sid, register(two, sid)[1], "second address").status_code == 202
        assert _counts(app, sid)[1] == 4  # the survey's hour is taken
        r = _suggest(three, sid, register(three, sid)[1], "third address")
        assert r.status_code == 429 and r.json()["code"] == "suggestions_hourly"
        assert int(r.headers["Retry-After"]) <= (to_hour(now) + timedelta(hours=1) - now).total_seconds() + 1
        assert _counts(app, sid)[1] == 4
    app.state.engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [False, True])
def test_the_address_is_the_forwarded_one_only_from_a_trusted_proxy(trusted, tmp_path):
    """The suggestion limit (1 an hour) sees the address the registration limit sees:
    without PRIVRANK_FORWARDED_ALLOW_IPS a claimed X-Forwarded-For changes nothing; with
    the proxy trusted, each forwarded address has its own bucket (and a second suggestion
    from the first address is refused)."""
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/fwd.db", "PRIVRANK_ADMIN_KEY": ADMIN_KEY}
    env["PRIVRANK_SUGGEST_PER_HOUR"] = "1"
    if trusted:
        env["PRIVRANK_FORWARDED_ALLOW_IPS"] = "127.0.0.1"
    server = LiveServer(env)
    try:
        body = {"title": "t", "items": ["a", "b"], "suggestions": {"enabled": True, "batch": 2}}
        sid = httpx2.post(server.base + "/v1/surveys", json=body, headers=ADMIN).json()["id"]
        codes = []
        for address in ("203.0.113.1", "203.0.113.2", "203.0.113.1"):
            forwarded = {"X-Forwarded-For": address}
            token = httpx2.post(
                server.base + f"/v1/surveys/{sid}/respondents", json={}, headers=forwarded
            ).json()["token"]
            r = httpx2.post(
                server.base + f"/v1/surveys/{sid}/suggestions",
                json={"label": f"from {address}"},
                headers={**forwarded, "Authorization": f"Bearer {token}"},
            )
            codes.append(r.status_code)
    finally:
        server.stop()
    assert codes == ([202, 202, 429] if trusted else [202, 429, 429])
