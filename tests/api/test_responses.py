"""POST …/responses: private ingestion, every error path, idempotency."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.core.db.models import Comparison, IdempotencyRecord, PendingBatch, Respondent
from tests.helpers.api import ADMIN, analyst_headers, create_survey, register


def post(client, sid, headers, comparisons, privatized=False, epsilon=None, key=None):
    body = {"privatized": privatized, "comparisons": comparisons}
    if epsilon is not None:
        body["epsilon"] = epsilon
    h = dict(headers)
    if key:
        h["Idempotency-Key"] = key
    return client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)


@pytest.fixture
def survey(client):
    s = create_survey(
        client,
        items=("A", "B", "C", "D"),
        epsilon_default=1.0,
        epsilon_min=0.5,
        epsilon_max=2.0,
        respondent_budget=3.0,
    )
    ids = [i["id"] for i in s["items"]]
    return s["id"], ids


def test_server_privatized_batch_is_stored_canonically(client, db, survey):
    sid, (a, b, c, d) = survey
    rid, h = register(client, sid, 1.0)
    r = post(client, sid, h, [{"a": b, "b": a, "winner": b}, {"a": c, "b": d, "winner": d}])
    assert r.status_code == 201
    assert r.json() == {
        "accepted": 2,
        "epsilon_spent": 2.0,
        "epsilon_total": 2.0,
        "budget_remaining": 1.0,
        "comparisons_remaining": None,
    }
    rows = db.scalars(select(Comparison).where(Comparison.respondent_id == rid).order_by(Comparison.i)).all()
    assert [(x.i, x.j, x.source, x.epsilon) for x in rows] == [(0, 1, "server", 1.0), (2, 3, "server", 1.0)]
    assert all(x.y_tilde in (0, 1) for x in rows)
    assert db.scalar(select(func.count()).select_from(PendingBatch)) >= 1
    me = client.get(f"/v1/surveys/{sid}/respondents/me", headers=h).json()
    assert (me["comparisons"], me["epsilon_total"], me["budget_remaining"]) == (2, 2.0, 1.0)


def test_client_privatized_batch_keeps_the_reported_winner(client, db, survey):
    sid, (a, b, c, d) = survey
    rid, h = register(client, sid, 1.0)
    r = post(
        client,
        sid,
        h,
        [{"a": a, "b": c, "winner": c}, {"a": d, "b": b, "winner": d}],
        privatized=True,
        epsilon=0.75,
    )
    assert r.status_code == 201 and r.json()["epsilon_spent"] == 1.5
    rows = db.scalars(select(Comparison).where(Comparison.respondent_id == rid).order_by(Comparison.i)).all()
    # (a, c): c won → i=0 lost → ỹ = 0; (d, b) → (1, 3), d won → ỹ = 0
    assert [(x.i, x.j, x.y_tilde, x.source, x.epsilon) for x in rows] == [
        (0, 2, 0, "client", 0.75),
        (1, 3, 0, "client", 0.75),
    ]


SECRET = "WINNER-SECRET-7f3a"


@pytest.mark.parametrize(
    ("make", "status", "fragment"),
    [
        (lambda a, b: {"comparisons": [{"a": "itm_unknown", "b": b, "winner": b}]}, 422, "not an item"),
        (lambda a, b: {"comparisons": [{"a": a, "b": a, "winner": a}]}, 422, "two different"),
        (lambda a, b: {"comparisons": [{"a": a, "b": b, "winner": SECRET}]}, 422, "one of its two items"),
        (lambda a, b: {"comparisons": []}, 422, "comparisons"),
        (lambda a, b: {"comparisons": [{"a": a, "b": b}]}, 422, "winner"),
        (lambda a, b: {"comparisons": [{"a": a, "b": b, "winner": a, "extra": SECRET}]}, 422, "extra"),
        (lambda a, b: {"privatized": True, "comparisons": [{"a": a, "b": b, "winner": a}]}, 422, "required"),
        (
            lambda a, b: {"privatized": True, "epsilon": 2.5, "comparisons": [{"a": a, "b": b, "winner": a}]},
            422,
            "bounds",
        ),
        (
            lambda a, b: {
                "privatized": False,
                "epsilon": 2.0,
                "comparisons": [{"a": a, "b": b, "winner": a}],
            },
            422,
            "registered epsilon",
        ),
        (
            lambda a, b: {"comparisons": [{"a": a, "b": b, "winner": a}, {"a": b, "b": a, "winner": a}]},
            409,
            "repeats a pair",
        ),
        (lambda a, b: {"comparisons": [{"a": a, "b": b, "winner": 7}]}, 422, "winner"),
    ],
)
def test_rejected_batches_store_nothing_and_never_echo_answers(
    client, survey, unchanged, make, status, fragment
):
    sid, (a, b, _, _) = survey
    _, h = register(client, sid, 1.0)
    body = {"privatized": False, **make(a, b)}
    with unchanged():
        r = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)
    assert r.status_code == status, r.text
    assert fragment in r.text
    assert SECRET not in r.text


def test_raw_json_errors_do_not_echo_the_body(client, survey, unchanged):
    sid, (a, b, _, _) = survey
    _, h = register(client, sid, 1.0)
    raw = f'{{"privatized": false, "comparisons": [{{"a": "{a}", "b": "{b}", "winner": "{SECRET}"'
    with unchanged():
        r = client.post(
            f"/v1/surveys/{sid}/responses", content=raw, headers={**h, "Content-Type": "application/json"}
        )
    assert r.status_code == 422 and SECRET not in r.text


def test_a_pair_answered_before_is_409(client, survey, unchanged):
    sid, (a, b, c, _) = survey
    _, h = register(client, sid, 1.0)
    assert post(client, sid, h, [{"a": a, "b": b, "winner": a}]).status_code == 201
    with unchanged():
        r = post(client, sid, h, [{"a": c, "b": a, "winner": c}, {"a": b, "b": a, "winner": b}])
    assert r.status_code == 409 and "already answered" in r.json()["detail"]
    # Another respondent may answer the same pair.
    _, h2 = register(client, sid, 1.0)
    assert post(client, sid, h2, [{"a": a, "b": b, "winner": b}]).status_code == 201


def test_budget_is_enforced_all_or_nothing(client, db, survey, unchanged):
    sid, (a, b, c, d) = survey  # budget 3.0
    rid, h = register(client, sid, 1.0)
    assert (
        post(client, sid, h, [{"a": a, "b": b, "winner": a}, {"a": a, "b": c, "winner": a}]).status_code
        == 201
    )
    with unchanged():
        r = post(client, sid, h, [{"a": a, "b": d, "winner": a}, {"a": b, "b": c, "winner": b}])
    assert r.status_code == 409 and "budget" in r.json()["detail"]
    assert db.get(Respondent, rid).epsilon_spent == 2.0
    r = post(client, sid, h, [{"a": a, "b": d, "winner": a}])
    assert r.status_code == 201 and r.json()["budget_remaining"] == 0.0
    with unchanged():
        assert (
            post(client, sid, h, [{"a": b, "b": c, "winner": b}], privatized=True, epsilon=0.5).status_code
            == 409
        )


def test_batch_size_limit(client, unchanged):
    labels = [f"item {k}" for k in range(50)]
    s = create_survey(client, items=labels, respondent_budget="unlimited")  # a batch beyond any cap
    ids = [i["id"] for i in s["items"]]
    _, h = register(client, s["id"], 1.0)
    pairs = [{"a": ids[x], "b": ids[y], "winner": ids[x]} for x in range(50) for y in range(x + 1, 50)]
    assert len(pairs) == 1225
    with unchanged():
        r = post(client, s["id"], h, pairs[:1001])
    assert r.status_code == 422 and "between 1 and 1000" in r.text
    assert post(client, s["id"], h, pairs[:1000]).status_code == 201


def test_respondents_cannot_write_to_other_surveys(client, survey, unchanged):
    sid, (a, b, _, _) = survey
    other = create_survey(client)
    _, h_other = register(client, other["id"])
    analyst = analyst_headers(client)
    body = [{"a": a, "b": b, "winner": a}]
    with unchanged():
        assert post(client, sid, h_other, body).status_code == 403
        assert post(client, sid, analyst, body).status_code == 403
        assert post(client, sid, ADMIN, body).status_code == 403
        assert post(client, sid, {}, body).status_code == 401


def test_ranking_surveys_refuse_pairwise_answers(client, unchanged):
    r = client.post(
        "/v1/surveys", json={"title": "r", "kind": "ranking", "items": ["x", "y", "z"]}, headers=ADMIN
    )
    s = r.json()
    _, h = register(client, s["id"])
    a, b = s["items"][0]["id"], s["items"][1]["id"]
    with unchanged():
        r = post(client, s["id"], h, [{"a": a, "b": b, "winner": a}])
    assert r.status_code == 409 and "rankings" in r.text


def test_idempotency_key_replays_the_first_answer(client, db, survey, unchanged):
    sid, (a, b, c, _) = survey
    rid, h = register(client, sid, 1.0)
    body = [{"a": a, "b": b, "winner": a}, {"a": b, "b": c, "winner": c}]
    first = post(client, sid, h, body, key="retry-1")
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    stored = db.scalar(select(func.count()).select_from(Comparison).where(Comparison.respondent_id == rid))
    with unchanged():
        again = post(client, sid, h, body, key="retry-1")
        # A retry is recognized by its pairs, not its winners (which a server-side
        # retry may legitimately not know): the first answer comes back.
        flipped = post(
            client, sid, h, [{"a": a, "b": b, "winner": b}, {"a": b, "b": c, "winner": b}], key="retry-1"
        )
    assert again.status_code == 201 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert flipped.status_code == 201 and flipped.json() == first.json()
    assert (
        db.scalar(select(func.count()).select_from(Comparison).where(Comparison.respondent_id == rid))
        == stored
    )
    with unchanged():
        other = post(client, sid, h, [{"a": a, "b": c, "winner": a}], key="retry-1")
    assert other.status_code == 409 and "Idempotency-Key" in other.json()["detail"]
    record = db.get(IdempotencyRecord, (rid, "retry-1"))
    assert record.response == first.json()
    # Keys are per respondent; a failed request does not consume its key.
    _, h2 = register(client, sid, 1.0)
    assert post(client, sid, h2, body, key="retry-1").status_code == 201
    with unchanged():
        assert post(client, sid, h2, [{"a": a, "b": a, "winner": a}], key="retry-2").status_code == 422
    assert post(client, sid, h2, [{"a": a, "b": c, "winner": a}], key="retry-2").status_code == 201


def test_idempotent_replay_survives_closing(client, survey):
    sid, (a, b, _, _) = survey
    _, h = register(client, sid, 1.0)
    first = post(client, sid, h, [{"a": a, "b": b, "winner": a}], key="k")
    client.patch(f"/v1/surveys/{sid}", json={"status": "closed"}, headers=ADMIN)
    again = post(client, sid, h, [{"a": a, "b": b, "winner": a}], key="k")
    assert again.status_code == 201 and again.json() == first.json()
    assert post(client, sid, h, [{"a": a, "b": b, "winner": a}], key="new").status_code == 409
