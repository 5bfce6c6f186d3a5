"""Limits on suggestions (app.services.suggestions, README "Limits on suggestions"): a
survey accepts at most ``per_hour`` suggestions per clock hour and ``max_total`` in all,
on top of each respondent's ``per_respondent``; the batching that hides authorship is
unchanged (a batch is published whole, so each limit leaves room for one)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from app.db.models import HeldContribution, Item, Suggestion, to_hour, utcnow
from app.services import suggestions as suggestions_module
from tests.helpers.api import ADMIN, analyst_headers, register


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
