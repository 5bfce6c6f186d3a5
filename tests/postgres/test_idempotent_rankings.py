"""A ranking sent again with its ``Idempotency-Key`` while the first copy commits
(app.respondents.spending): the copy gets the first answer (201, replayed), or the
key's conflict for another request — never "already submitted" (PostgreSQL, whose
statements each see what committed before them)."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db.models import Ranking
from app.respondents import spending
from tests.helpers.api import make_app

ADMIN = {"Authorization": "Bearer k"}
ITEMS = ["a", "b", "c", "d", "e"]


def _setup(postgres_url):
    from app.core.db.migrate import upgrade

    upgrade(postgres_url)
    return make_app(postgres_url, "k")


def _survey(c: TestClient) -> tuple[str, list[str]]:
    s = c.post("/v1/surveys", json={"title": "r", "kind": "ranking", "items": ITEMS}, headers=ADMIN).json()
    return s["id"], [it["id"] for it in s["items"]]


def _respondent(c: TestClient, sid: str) -> dict:
    reg = c.post(f"/v1/surveys/{sid}/respondents", json={}).json()
    return {"Authorization": f"Bearer {reg['token']}"}


def test_a_copy_that_passed_the_replay_check_before_the_first_committed_is_replayed(
    postgres_url, monkeypatch
):
    """The interleaving forced: copy B reads no record for its key, then copy A commits
    the ranking, then B goes on. B is A's retry: the same request gets A's receipt; a
    request of another shape with the same key gets the key's conflict."""
    app = _setup(postgres_url)
    real = spending.lock_survey
    held, go = threading.Event(), threading.Event()
    gate = {"first": threading.Lock()}

    def gated(session, survey_id, check):
        if gate["first"].acquire(blocking=False):  # the first copy to get here waits for the other
            held.set()
            assert go.wait(30)
        return real(session, survey_id, check)

    monkeypatch.setattr(spending, "lock_survey", gated)
    try:
        with TestClient(app) as c:
            sid, ids = _survey(c)
            same = {"privatized": False, "ranking": ids[:2]}
            other_shape = {"privatized": True, "epsilon": 1.0, "ranking": ids}
            for copy_b, expected in ((same, 201), (other_shape, 409)):
                gate["first"] = threading.Lock()
                held.clear()
                go.clear()
                h = {**_respondent(c, sid), "Idempotency-Key": "ranking-1"}
                url = f"/v1/surveys/{sid}/responses"
                late: list = []
                b = threading.Thread(
                    target=lambda body=copy_b, h=h, url=url, late=late: late.append(
                        c.post(url, json=body, headers=h)
                    )
                )
                b.start()
                assert held.wait(30)
                a = c.post(url, json=same, headers=h)
                assert a.status_code == 201, a.text
                go.set()
                b.join(60)
                (r,) = late
                assert r.status_code == expected, r.text
                if expected == 201:
                    assert r.json() == a.json() and r.headers["idempotent-replayed"] == "true"
                else:
                    assert (
                        r.json()["detail"] == "this Idempotency-Key was already used for a different request"
                    )
    finally:
        app.state.engine.dispose()


def test_fifty_concurrent_copies_of_one_ranking_all_get_its_receipt(postgres_url):
    """50 copies of one request with one key at once, three times (threads against the
    in-process app): one ranking stored per respondent and every copy answered 201 with
    the first receipt."""
    app = _setup(postgres_url)
    try:
        _fifty(app)
    finally:
        app.state.engine.dispose()


def _fifty(app) -> None:
    with TestClient(app) as c:
        sid, ids = _survey(c)
        for attempt in range(3):
            h = {**_respondent(c, sid), "Idempotency-Key": f"ranking-{attempt}"}
            body = {"privatized": False, "ranking": ids}
            barrier = threading.Barrier(50)
            out: list = [None] * 50

            def post(k, h=h, body=body, barrier=barrier, out=out):
                barrier.wait()
                out[k] = c.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)

            threads = [threading.Thread(target=post, args=(k,)) for k in range(50)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            codes = sorted(r.status_code for r in out)
            assert codes == [201] * 50, [r.text for r in out if r.status_code != 201][:3]
            assert len({r.text for r in out}) == 1  # one receipt
    with app.state.session_factory() as s:
        n = s.execute(select(func.count()).select_from(Ranking).where(Ranking.survey_id == sid))
        assert n.scalar_one() == 3
