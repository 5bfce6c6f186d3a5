"""A batch of answers as stored, on the suite's database (SQLite, or PostgreSQL with
``PRIVRANK_TEST_DATABASE``): the rows, the pending batch, the spend and the key's record
of one write path; its round trips; and refusals inside it that store nothing.

On PostgreSQL the write path spends, locks and looks the key up in one statement and
stores in another (app.respondents.spending, app.respondents.ingestion); on SQLite it takes a
statement per step. Both must leave the same rows.
"""

from __future__ import annotations

import itertools
import random
import uuid

import numpy as np
import pytest
from sqlalchemy import event, select

from app.analysis.aggregation import decode_batch
from app.core.db.models import Comparison, IdempotencyRecord, PendingBatch, Respondent
from tests.helpers.api import ADMIN, register

ITEMS = 30


def _survey(client, budget: float | str) -> tuple[str, list[str]]:
    body = {
        "title": "batches",
        "items": [f"item {k}" for k in range(ITEMS)],
        "privacy": {"epsilon_default": 1.0, "respondent_budget": budget},
    }
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    s = r.json()
    return s["id"], [i["id"] for i in s["items"]]


@pytest.fixture
def survey(client):
    return _survey(client, "unlimited")


def _batch(ids: list[str], pairs, rng: random.Random) -> list[dict]:
    """Comparisons of ``pairs`` (positions) in random orientation with random winners."""
    out = []
    for i, j in pairs:
        a, b = (ids[i], ids[j]) if rng.random() < 0.5 else (ids[j], ids[i])
        out.append({"a": a, "b": b, "winner": a if rng.random() < 0.5 else b})
    return out


def _post(client, sid, headers, comparisons, key=None, privatized=True, epsilon=1.0):
    h = {**headers, **({"Idempotency-Key": key} if key else {})}
    body = {"privatized": privatized, "comparisons": comparisons}
    if privatized:
        body["epsilon"] = epsilon
    return client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)


def test_a_batch_stores_its_rows_pending_batch_spend_and_receipt(client, db, survey):
    sid, ids = survey
    rng = random.Random(30)
    pairs = list(itertools.combinations(range(ITEMS), 2))
    rng.shuffle(pairs)
    pairs = pairs[:300]
    comparisons = _batch(ids, pairs, rng)
    rid, h = register(client, sid, 1.0)
    key = uuid.uuid4().hex
    pending_before = set(db.scalars(select(PendingBatch.id)))
    r = _post(client, sid, h, comparisons, key=key)
    assert r.status_code == 201, r.text
    receipt = r.json()
    db.commit()  # a new snapshot (SQLite's read transaction would not see the request's)
    assert receipt["accepted"] == 300 and receipt["epsilon_spent"] == 300.0
    # Client-privatized answers are stored as reported, canonically oriented (i < j).
    position = {x: k for k, x in enumerate(ids)}
    expected = sorted(
        (
            min(position[c["a"]], position[c["b"]]),
            max(position[c["a"]], position[c["b"]]),
            int(position[c["winner"]] == min(position[c["a"]], position[c["b"]])),
        )
        for c in comparisons
    )
    rows = db.execute(
        select(Comparison.i, Comparison.j, Comparison.y_tilde, Comparison.epsilon, Comparison.source).where(
            Comparison.respondent_id == rid
        )
    ).all()
    assert sorted((i, j, y) for i, j, y, _, _ in rows) == expected
    assert {(e, s) for _, _, _, e, s in rows} == {(1.0, "client")}
    (pending,) = db.scalars(select(PendingBatch).where(PendingBatch.id.notin_(pending_before))).all()
    batch = decode_batch(pending.payload)
    assert pending.survey_id == sid and pending.n == 300
    assert sorted(zip(batch.i.tolist(), batch.j.tolist(), batch.y_tilde.tolist(), strict=True)) == expected
    assert np.all(batch.epsilon == 1.0)
    respondent = db.get(Respondent, rid)
    assert (respondent.epsilon_spent, respondent.n_comparisons) == (300.0, 300)
    record = db.get(IdempotencyRecord, (rid, key))
    assert record is not None and record.response == receipt
    # The retry gets the first receipt and stores nothing more.
    again = _post(client, sid, h, comparisons, key=key)
    assert again.status_code == 201 and again.json() == receipt
    assert again.headers["Idempotent-Replayed"] == "true"
    assert db.scalar(select(Respondent.n_comparisons).where(Respondent.id == rid)) == 300


def test_a_batch_takes_three_statements_on_postgresql(app, client, survey):
    """Authentication with the survey, spend-lock-lookup, store (besides BEGIN and COMMIT)
    on PostgreSQL; on SQLite one statement per step."""
    sid, ids = survey
    rng = random.Random(31)
    pairs = list(itertools.combinations(range(ITEMS), 2))
    _, h = register(client, sid, 1.0)
    assert _post(client, sid, h, _batch(ids, pairs[:10], rng)).status_code == 201  # items cached
    statements: list[str] = []

    def note(conn, cursor, statement, parameters, context, executemany):
        if not statement.startswith("BEGIN"):  # SQLite's, emitted as statements
            statements.append(statement)

    engine = app.state.engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        r = _post(client, sid, h, _batch(ids, pairs[10:400], rng), key=uuid.uuid4().hex)
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert r.status_code == 201, r.text
    postgres = engine.dialect.name == "postgresql"
    # SQLite: respondent with survey, key, survey lock, spend, comparisons, pending batch, key's record.
    assert len(statements) == (3 if postgres else 7), statements


def test_a_pair_answered_before_inside_a_batch_is_409_and_stores_nothing(client, db, survey, unchanged):
    sid, ids = survey
    rng = random.Random(32)
    pairs = list(itertools.combinations(range(ITEMS), 2))
    rng.shuffle(pairs)
    rid, h = register(client, sid, 1.0)
    assert _post(client, sid, h, _batch(ids, pairs[:50], rng)).status_code == 201
    # 300 new pairs with one answered before at position 123.
    repeated = [*pairs[50:173], pairs[7], *pairs[173:349]]
    key = uuid.uuid4().hex
    with unchanged():
        r = _post(client, sid, h, _batch(ids, repeated, rng), key=key)
    assert r.status_code == 409, r.text
    assert r.json()["detail"].startswith("comparisons[123]: this respondent already answered the pair")
    # Rolled back: the next request of the same respondent (even with the same key)
    # stores as if the refused one had never come.
    fresh = _batch(ids, pairs[50:349], rng)
    r = _post(client, sid, h, fresh, key=key)
    assert r.status_code == 201, r.text
    assert r.json()["epsilon_total"] == 349.0
    assert db.scalar(select(Respondent.n_comparisons).where(Respondent.id == rid)) == 349
    stored = db.scalars(select(Comparison.id).where(Comparison.respondent_id == rid)).all()
    assert len(stored) == 349


def test_a_batch_refused_by_the_survey_or_the_budget_stores_nothing(client, db, unchanged):
    sid, ids = _survey(client, 100.0)
    rng = random.Random(33)
    pairs = list(itertools.combinations(range(ITEMS), 2))
    rid, h = register(client, sid, 1.0)
    # Over the budget: 101 comparisons at ε = 1.
    with unchanged():
        r = _post(client, sid, h, _batch(ids, pairs[:101], rng))
    assert r.status_code == 409 and "budget" in r.json()["detail"]
    assert client.patch(f"/v1/surveys/{sid}", json={"status": "closed"}, headers=ADMIN).status_code == 200
    with unchanged():
        r = _post(client, sid, h, _batch(ids, pairs[:10], rng), key=uuid.uuid4().hex)
    assert r.status_code == 409 and r.json()["detail"] == "the survey is closed"
    assert db.scalar(select(Respondent.epsilon_spent).where(Respondent.id == rid)) == 0.0
