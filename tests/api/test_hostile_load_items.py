"""Concurrency and hostile load: the survey's items are shared between requests only
as plain values, never as ORM objects bound to (or expired by) another request's session.

Shared ORM ``Item`` rows would fail in two ways, which these tests provoke. A request
that rolls back (any 409 in the write transaction) expires them, and from then on
every error message naming a pair (a pair repeated within a batch, a pair answered
before) reads an expired, detached object: 500 ``DetachedInstanceError`` for the
worker's whole life. Concurrent requests lazily load another request's objects
through that request's session, from another thread (PostgreSQL: "concurrent
operations are not permitted", a few 500s in 40 concurrent posts of one pair).
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import func, select

from app.core.db.models import Comparison
from tests.helpers.api import ADMIN, create_survey, register


def _post(client, sid, headers, pairs):
    body = {"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a} for a, b in pairs]}
    return client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)


def test_conflicts_after_a_rolled_back_request_stay_409(client, db):
    s = create_survey(client, items=("A", "B", "C", "D"), epsilon_default=1.0, respondent_budget=3.0)
    sid = s["id"]
    a, b, c, d = (it["id"] for it in s["items"])
    rid, h = register(client, sid, 1.0)
    # Loads the items, then rolls back in the write transaction: over the budget.
    over = _post(client, sid, h, [(a, b), (a, c), (a, d), (b, c)])
    assert over.status_code == 409, over.text
    assert "over the privacy budget" in over.json()["detail"]
    # The conflict messages name the pair by its items' ids (read from the shared items).
    repeated = _post(client, sid, h, [(a, b), (b, a)])
    assert repeated.status_code == 409, repeated.text
    assert repeated.json()["detail"] == f"comparisons[1] repeats a pair already in this request ({a}, {b})"
    assert _post(client, sid, h, [(a, b)]).status_code == 201
    again = _post(client, sid, h, [(c, d), (b, a)])
    assert again.status_code == 409, again.text
    assert again.json()["detail"] == f"comparisons[1]: this respondent already answered the pair ({a}, {b})"
    # And once more after that rollback, and from another respondent of the same survey.
    assert _post(client, sid, h, [(a, b)]).status_code == 409
    _, h2 = register(client, sid, 1.0)
    assert _post(client, sid, h2, [(c, d), (d, c)]).status_code == 409
    assert db.scalar(select(func.count()).select_from(Comparison).where(Comparison.survey_id == sid)) == 1
    assert db.scalar(select(func.count()).where(Comparison.respondent_id == rid)) == 1


def test_items_added_later_are_found_and_named(client):
    s = create_survey(client, items=("A", "B"), epsilon_default=1.0)
    sid = s["id"]
    a, b = (it["id"] for it in s["items"])
    _, h = register(client, sid, 1.0)
    assert _post(client, sid, h, [(a, b)]).status_code == 201
    added = client.post(f"/v1/surveys/{sid}/items", json={"items": ["C"]}, headers=ADMIN)
    assert added.status_code == 201, added.text
    c = added.json()[0]["id"]
    r = _post(client, sid, h, [(a, c), (c, a)])
    assert r.status_code == 409, r.text
    assert r.json()["detail"] == f"comparisons[1] repeats a pair already in this request ({a}, {c})"
    assert _post(client, sid, h, [(c, b)]).status_code == 201


def test_40_concurrent_posts_of_one_pair_store_it_once(client, db):
    """One respondent posts the same pair 40 times at once (40 threads released together,
    the service answering them concurrently from its thread pool, each on its own
    session): exactly one is stored and acknowledged, the 39 others are 409, none is a
    5xx. Twice, with another pair: the second burst starts after the first one's
    rollbacks."""
    s = create_survey(client, items=("a", "b", "c"))
    sid = s["id"]
    a, b, c = (it["id"] for it in s["items"])
    rid, h = register(client, sid)
    workers = 40
    bursts = []
    with ThreadPoolExecutor(workers) as pool:
        for x, y in ((a, b), (c, b)):
            start = threading.Barrier(workers)

            def one(_, x=x, y=y, start=start):
                start.wait(30)
                r = _post(client, sid, h, [(x, y)])
                return r.status_code, r.text

            bursts.append((sorted((x, y), key=[a, b, c].index), list(pool.map(one, range(workers)))))
    for (x, y), out in bursts:
        codes = Counter(status for status, _ in out)
        assert codes == {201: 1, 409: workers - 1}, (codes, [t for s_, t in out if s_ >= 500][:3])
        conflicts = {text for status, text in out if status == 409}
        assert conflicts <= {
            f'{{"detail":"comparisons[0]: this respondent already answered the pair ({x}, {y})"}}',
            '{"detail":"a pair in this request was answered concurrently by the same respondent"}',
        }, conflicts
    stored = db.execute(select(Comparison.i, Comparison.j).where(Comparison.respondent_id == rid)).all()
    assert sorted(map(tuple, stored)) == [(0, 1), (1, 2)]
