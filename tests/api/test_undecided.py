"""“Can't decide” (app.respondents.undecided): a survey-level count, and nothing else —
no pair, no respondent, no time, no budget — bounded by the pairs served: each pair
served to a respondent counts at most once."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.db.models import ParticipationSlot, UndecidedCount
from tests.helpers.api import ADMIN, create_ranking_survey, create_survey, register, writes


def _served(client, sid: str, h: dict, count: int = 1) -> list[dict]:
    r = client.get(f"/v1/surveys/{sid}/pairs", params={"count": count}, headers=h)
    assert r.status_code == 200
    return r.json()["pairs"]


def _count(client, sid: str) -> int:
    return client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["undecided"]


def test_it_counts_and_changes_nothing_else(client, app):
    s = create_survey(client, respondent_budget=3.0)
    sid = s["id"]
    _, h = register(client, sid)
    (pair,) = _served(client, sid, h)
    before = writes(app)
    me = client.get(f"/v1/surveys/{sid}/respondents/me", headers=h).json()
    r = client.post(f"/v1/surveys/{sid}/undecided", json={"ticket": pair["undecided_ticket"]}, headers=h)
    assert r.status_code == 204 and r.content == b""
    after = writes(app)
    # Only the count and one slot changed: no comparison, no budget spent, no respondent row touched.
    assert {t for t in before if before[t] != after[t]} == {"undecided_counts", "participation_slots"}
    assert client.get(f"/v1/surveys/{sid}/respondents/me", headers=h).json() == me
    assert _count(client, sid) == 1
    with app.state.session_factory() as session:
        rows = session.execute(select(UndecidedCount).where(UndecidedCount.survey_id == sid)).scalars().all()
        # The rows hold the survey, a shard number and a count: no respondent, pair or time.
        assert {c.name for c in UndecidedCount.__table__.columns} == {"survey_id", "shard", "n"}
        assert sum(row.n for row in rows) == 1
        # The slot is a survey and a digest: neither the respondent's id, nor an item id, nor
        # the ticket appear in it.
        assert {c.name for c in ParticipationSlot.__table__.columns} == {"survey_id", "digest"}
        digests = session.scalars(select(ParticipationSlot.digest).where(ParticipationSlot.survey_id == sid))
        for digest in digests:
            for secret in (pair["a"], pair["b"], h["Authorization"].split()[1].split(".")[0]):
                assert secret not in digest
            assert pair["undecided_ticket"].split(".")[0] not in digest


def test_a_token_passes_each_served_pair_at_most_once(client):
    """A flood of passes from one token adds at most the distinct pairs it was served."""
    s = create_survey(client, respondent_budget=100.0)  # 4 items: 6 pairs
    sid = s["id"]
    _, h = register(client, sid)
    served = _served(client, sid, h, count=3)
    assert len(served) == 3
    for _ in range(20):
        for pair in served:
            body = {"ticket": pair["undecided_ticket"]}
            r = client.post(f"/v1/surveys/{sid}/undecided", json=body, headers=h)
            assert r.status_code == 204
    assert _count(client, sid) == 3
    # The same pair served again (another visit) carries the same ticket, already spent;
    # whatever is served, the count never exceeds the 6 pairs there are.
    for _ in range(5):
        for pair in _served(client, sid, h, count=6):
            client.post(f"/v1/surveys/{sid}/undecided", json={"ticket": pair["undecided_ticket"]}, headers=h)
    assert _count(client, sid) == 6
    # Another respondent has its own pairs to pass.
    _, h2 = register(client, sid)
    (pair,) = _served(client, sid, h2)
    client.post(f"/v1/surveys/{sid}/undecided", json={"ticket": pair["undecided_ticket"]}, headers=h2)
    assert _count(client, sid) == 7


def test_tickets_not_served_to_the_caller_are_refused(client, unchanged):
    s = create_survey(client)
    sid = s["id"]
    _, h = register(client, sid)
    _, other = register(client, sid)
    (pair,) = _served(client, sid, h)
    x, mac = pair["undecided_ticket"].split(".")
    forged = [
        None,
        {},
        {"ticket": ""},
        {"ticket": x},
        {"ticket": f"{x}.{'A' * len(mac)}"},
        {"ticket": f"{'A' * len(x)}.{mac}"},
        {"ticket": "x" * 65},
        {"ticket": pair["undecided_ticket"], "pair": [pair["a"], pair["b"]]},
    ]
    with unchanged():
        for body in forged:
            r = client.post(f"/v1/surveys/{sid}/undecided", json=body, headers=h)
            assert r.status_code == 422, body
            assert "Traceback" not in r.text and "hmac" not in r.text.lower()
        # Another respondent's ticket does not count for this one.
        body = {"ticket": pair["undecided_ticket"]}
        r = client.post(f"/v1/surveys/{sid}/undecided", json=body, headers=other)
        assert r.status_code == 422
        assert "not issued for a pair served to you" in r.json()["detail"]
    assert _count(client, sid) == 0


def test_concurrent_passes_are_all_counted(app):
    with TestClient(app) as client:
        s = create_survey(client, items=tuple("ABCDEF"), respondent_budget=100.0)  # 15 pairs
        sid = s["id"]
        tokens = [register(client, sid)[1] for _ in range(8)]
        served = {k: _served(client, sid, h, count=10) for k, h in enumerate(tokens)}
        barrier = threading.Barrier(8)

        def passes(k: int, h) -> None:
            barrier.wait()
            for pair in served[k] + served[k]:  # each twice: the second counts nothing
                body = {"ticket": pair["undecided_ticket"]}
                assert client.post(f"/v1/surveys/{sid}/undecided", json=body, headers=h).status_code == 204

        threads = [threading.Thread(target=passes, args=(k, h)) for k, h in enumerate(tokens)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert _count(client, sid) == 80


def test_closed_and_ranking_surveys_refuse_it_and_store_nothing(client, unchanged):
    s = create_survey(client)
    _, h = register(client, s["id"])
    (pair,) = _served(client, s["id"], h)
    client.patch(f"/v1/surveys/{s['id']}", json={"status": "closed"}, headers=ADMIN)
    ranking = create_ranking_survey(client)
    _, hr = register(client, ranking["id"])
    body = {"ticket": pair["undecided_ticket"]}
    with unchanged():
        assert client.post(f"/v1/surveys/{s['id']}/undecided", json=body, headers=h).status_code == 409
        assert client.post(f"/v1/surveys/{ranking['id']}/undecided", json=body, headers=hr).status_code == 409
        assert client.post(f"/v1/surveys/{s['id']}/undecided", json=body).status_code == 401
