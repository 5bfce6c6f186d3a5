"""“Can't decide” (app.services.undecided): a survey-level count, and nothing else —
no pair, no respondent, no time, no budget."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.db.models import UndecidedCount
from tests.helpers.api import ADMIN, create_ranking_survey, create_survey, register, writes


def test_it_counts_and_changes_nothing_else(client, app):
    s = create_survey(client, respondent_budget=3.0)
    sid = s["id"]
    _, h = register(client, sid)
    before = writes(app)
    me = client.get(f"/v1/surveys/{sid}/respondents/me", headers=h).json()
    r = client.post(f"/v1/surveys/{sid}/undecided", headers=h)
    assert r.status_code == 204 and r.content == b""
    after = writes(app)
    # Only the count's table changed: no comparison, no budget spent, no respondent row touched.
    assert {t for t in before if before[t] != after[t]} == {"undecided_counts"}
    assert client.get(f"/v1/surveys/{sid}/respondents/me", headers=h).json() == me
    assert client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["undecided"] == 1
    with app.state.session_factory() as session:
        rows = session.execute(select(UndecidedCount).where(UndecidedCount.survey_id == sid)).scalars().all()
        # The rows hold the survey, a shard number and a count: no respondent, pair or time.
        assert {c.name for c in UndecidedCount.__table__.columns} == {"survey_id", "shard", "n"}
        assert sum(row.n for row in rows) == 1


def test_concurrent_passes_are_all_counted(app):
    with TestClient(app) as client:
        s = create_survey(client)
        tokens = [register(client, s["id"])[1] for _ in range(8)]
        barrier = threading.Barrier(8)

        def passes(h) -> None:
            barrier.wait()
            for _ in range(10):
                assert client.post(f"/v1/surveys/{s['id']}/undecided", headers=h).status_code == 204

        threads = [threading.Thread(target=passes, args=(h,)) for h in tokens]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert client.get(f"/v1/surveys/{s['id']}", headers=ADMIN).json()["undecided"] == 80


def test_closed_and_ranking_surveys_refuse_it_and_store_nothing(client, unchanged):
    s = create_survey(client)
    _, h = register(client, s["id"])
    client.patch(f"/v1/surveys/{s['id']}", json={"status": "closed"}, headers=ADMIN)
    ranking = create_ranking_survey(client)
    _, hr = register(client, ranking["id"])
    with unchanged():
        assert client.post(f"/v1/surveys/{s['id']}/undecided", headers=h).status_code == 409
        assert client.post(f"/v1/surveys/{ranking['id']}/undecided", headers=hr).status_code == 409
        assert client.post(f"/v1/surveys/{s['id']}/undecided").status_code == 401
