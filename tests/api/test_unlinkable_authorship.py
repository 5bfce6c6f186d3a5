"""Who suggested or flagged what cannot be told (app.participation.suggestions,
docs/how-to/moderate.md, "Who suggested what cannot be told"): the alignment attacks of
an analyst and of a database reader, run on a realistic sequence of respondents, do no
better than guessing within a batch.

A batch publishes one contribution of each of k different respondents in a uniformly
random order, so an attacker who even knows which k respondents a batch holds names the
author of a contribution with probability 1/k: over B batches the number named correctly
by any fixed rule has mean at most B (one per batch). Per batch it is the number of fixed
points of a uniform permutation (or at most 1 for a rule that names one respondent for
the whole batch), whose tail is at most that of Poisson(1); the sum over B independent
batches has at most the tail of Poisson(B). Each test asserts at most :func:`_bound`
correct, the smallest c with P(Poisson(B) ≥ c) ≤ 10⁻³. A control run with batches of
one (set in the database, below what the API accepts) shows the same attacks name almost
every author when contributions are published as they arrive.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import math

import numpy as np
import pytest
from sqlalchemy import text

from app.core.db.models import Survey
from tests.helpers.api import ADMIN, analyst_headers, register

#: Respondents in the sequence, of whom SUGGESTERS suggest one item and FLAGGERS (others)
#: flag one seed item, each at the end of its session.
RESPONDENTS, SUGGESTERS, FLAGGERS = 90, 40, 20
BATCH = 5
SEEDS = [f"Seed idea {k}" for k in range(8)]


def _bound(batches: int, alpha: float = 1e-3) -> int:
    """The smallest c with P(Poisson(batches) ≥ c) ≤ alpha."""
    c, tail = 0, 1.0
    while tail > alpha:
        tail -= math.exp(-batches) * batches**c / math.factorial(c)
        c += 1
    return c


def _run(client, app, batch: int, seed: int) -> dict:
    """The sequence: respondents one after another answer four pairs; suggesters then
    suggest, flaggers then flag. Returns the ground truth and what an attacker reads."""
    body = {
        "title": "City ideas",
        "items": SEEDS,
        "suggestions": {"enabled": True, "moderation": "after", "flag_threshold": 100, "batch": 2},
    }
    s = client.post("/v1/surveys", json=body, headers=ADMIN).json()
    sid = s["id"]
    if batch != 2:  # the control: a batch of one, below what the API accepts
        with app.state.session_factory() as session:
            row = session.get(Survey, sid)
            row.suggestions = {**row.suggestions, "batch": batch}
            session.commit()
    rng = np.random.default_rng(seed)
    order = rng.permutation(RESPONDENTS)
    suggesters = set(order[:SUGGESTERS].tolist())
    flaggers = set(order[SUGGESTERS : SUGGESTERS + FLAGGERS].tolist())
    author: dict[str, str] = {}  # label → respondent id
    flagger: dict[str, str] = {}  # flag digest → respondent id
    for r in range(RESPONDENTS):
        rid, h = register(client, sid)
        pairs = client.get(f"/v1/surveys/{sid}/pairs?count=4", headers=h).json()["pairs"]
        answers = [{"a": p["a"], "b": p["b"], "winner": p[rng.choice(["a", "b"])]} for p in pairs]
        sent = client.post(
            f"/v1/surveys/{sid}/responses", json={"privatized": False, "comparisons": answers}, headers=h
        )
        assert sent.status_code == 201, sent.text
        if r in suggesters:
            label = f"Suggested idea {r}"
            assert (
                client.post(f"/v1/surveys/{sid}/suggestions", json={"label": label}, headers=h).status_code
                == 202
            )
            author[label] = rid
        if r in flaggers:
            item = s["items"][int(rng.integers(len(SEEDS)))]["id"]
            assert client.post(f"/v1/surveys/{sid}/items/{item}/flag", headers=h).status_code == 204
            token = h["Authorization"].split()[1]
            flagger[
                hmac.new(token.encode(), f"privrank flag v1:{item}".encode(), hashlib.sha256).hexdigest()
            ] = rid
    analyst = analyst_headers(client)
    items = list(
        csv.DictReader(io.StringIO(client.get(f"/v1/surveys/{sid}/items.csv", headers=analyst).text))
    )
    rows = list(
        csv.DictReader(io.StringIO(client.get(f"/v1/surveys/{sid}/comparisons.csv", headers=analyst).text))
    )
    with app.state.session_factory() as session:
        conn = session.connection()
        postgres = conn.dialect.name == "postgresql"
        # The order a database reader sees rows arrive in: SQLite's rowid; on PostgreSQL the
        # writing transaction's id, then the row's place in the heap (which, as pages are
        # reused, need not follow arrival).
        physical = "xmin::text::bigint, {t}ctid" if postgres else "{t}rowid"
        db_items = conn.execute(
            text(
                f"SELECT id, label{', xmin::text' if postgres else ''} FROM items "
                f"WHERE survey_id = :s AND source = 'suggested' ORDER BY {physical.format(t='')}"
            ),
            {"s": sid},
        ).all()
        db_flags = conn.execute(
            text(
                "SELECT f.digest FROM item_flags f JOIN items i ON i.id = f.item_id "
                f"WHERE i.survey_id = :s ORDER BY {physical.format(t='f.').replace('xmin', 'f.xmin')}"
            ),
            {"s": sid},
        ).all()
        last_answer = dict(
            conn.execute(
                text(
                    "SELECT respondent_id, max(id) FROM comparisons WHERE survey_id = :s "
                    "GROUP BY respondent_id"
                ),
                {"s": sid},
            ).all()
        )
        held = conn.execute(
            text("SELECT count(*) FROM held_contributions WHERE survey_id = :s"), {"s": sid}
        ).scalar()
    return {
        "author": author,
        "flagger": flagger,
        "items": items,
        "rows": rows,
        "db_items": db_items,
        "db_flags": db_flags,
        "last_answer": last_answer,
        "held": held,
        "postgres": postgres,
    }


def _match_in_order(contributions: list, people: list[str], last: dict[str, int]) -> list[str]:
    """The alignment: the k-th contribution (in the order the attacker sees) to the k-th of
    ``people`` by the order of their last answer."""
    ranked = sorted(people, key=lambda p: last[p])
    return ranked[: len(contributions)]


def _attacks(run: dict) -> dict[str, tuple[int, int]]:
    """Each attack's (correct, attempted)."""
    author, flagger = run["author"], run["flagger"]
    suggested = [it for it in run["items"] if it["source"] == "suggested"]
    out = {}
    # Analyst who knows when each respondent took part (side knowledge, here the order of
    # their last answers): (1) items by position matched to the suggesters (also known to
    # the attacker: the strongest case) in that order.
    last = run["last_answer"]
    by_position = sorted(suggested, key=lambda it: int(it["position"]))
    guesses = _match_in_order(by_position, list(author.values()), last)
    out["analyst: positions"] = (
        sum(author[it["label"]] == g for it, g in zip(by_position, guesses, strict=True)),
        len(by_position),
    )
    # With the export alone, its row order standing for time:
    row_of_last = {r["respondent"]: k for k, r in enumerate(run["rows"])}
    # (2) Catch-up: an item first answered right after its author's last answer.
    first_row = {}
    for k, r in enumerate(run["rows"]):
        for item in (r["item_a"], r["item_b"]):
            first_row.setdefault(item, k)
    correct = 0
    for it in suggested:
        before = [p for p, k in row_of_last.items() if k < first_row.get(it["item"], len(run["rows"]))]
        if before:
            correct += author[it["label"]] == max(before, key=row_of_last.__getitem__)
    out["analyst: first answers"] = (correct, len(suggested))
    # Database reader: the items' and the flags' order of arrival as stored, matched to the
    # authors (flaggers) by their last answer's id.
    db_items = run["db_items"]
    guesses = _match_in_order(db_items, list(author.values()), last)
    out["database: item rows"] = (
        sum(author[row[1]] == g for row, g in zip(db_items, guesses, strict=True)),
        len(db_items),
    )
    guesses = _match_in_order(run["db_flags"], list(flagger.values()), last)
    out["database: flag rows"] = (
        sum(flagger[row[0]] == g for row, g in zip(run["db_flags"], guesses, strict=True)),
        len(run["db_flags"]),
    )
    return out


@pytest.mark.slow
def test_alignment_attacks_do_no_better_than_guessing_within_a_batch(client, app):
    run = _run(client, app, BATCH, seed=5)
    assert run["held"] == 0  # every batch completed: 40 and 20 contributions, batches of 5
    assert len(run["db_items"]) == SUGGESTERS and len(run["db_flags"]) == FLAGGERS
    # What the analyst reads has no order of arrival: suggested items of a batch share
    # one time (the hour), and answers carry the hour only.
    suggested = [it for it in run["items"] if it["source"] == "suggested"]
    assert {(it["added_at"][14:], it["approved_at"][14:]) for it in suggested} == {("00:00Z", "00:00Z")}
    assert {r["created_at"][14:] for r in run["rows"]} == {"00:00Z"}
    if run["postgres"]:  # each batch written by one transaction
        assert len({row[2] for row in run["db_items"]}) == SUGGESTERS // BATCH
    attacks = _attacks(run)
    for name, (correct, attempted) in attacks.items():
        batches = attempted // BATCH
        assert correct <= _bound(batches), (name, correct, attempted, _bound(batches))


@pytest.mark.slow
def test_the_attacks_name_the_authors_of_contributions_published_as_they_arrive(client, app):
    """The control: the same attacks on batches of one name almost every author in what a
    database reader sees (rows in order of arrival), which is what batches take away."""
    run = _run(client, app, 1, seed=5)
    attacks = _attacks(run)
    for name in ("analyst: positions", "database: item rows", "database: flag rows"):
        correct, attempted = attacks[name]
        assert correct >= 0.9 * attempted, (name, correct, attempted)


@pytest.mark.parametrize("batches", [1, 4, 8])
def test_the_bound_is_the_poisson_tail(batches):
    c = _bound(batches)
    tail = 1 - sum(math.exp(-batches) * batches**j / math.factorial(j) for j in range(c))
    assert tail <= 1e-3 < tail + math.exp(-batches) * batches ** (c - 1) / math.factorial(c - 1)
