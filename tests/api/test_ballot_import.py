"""POST …/rankings/import: ballots collected elsewhere, into a ranking survey, all or nothing.

The realistic input is the Debian 2002 leader election (PrefLib 00002-00000001, 475
ballots, many partial) from tests/data.
"""

from __future__ import annotations

import asyncio
import csv
import io
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select

from app.core.body_limit import BodyLimit
from app.core.db.models import PendingBatch, Ranking, Respondent
from app.rankings import ballot_import
from app.stats.preflib import read_preflib
from tests.helpers.api import ADMIN, analyst_headers, create_survey, register

DEBIAN = Path(__file__).resolve().parents[1] / "data" / "preflib-debian" / "00002-00000001.soi"
SECRET = "Secret choice"  # a label that no error message may repeat


def ranking_survey(client, labels, **privacy) -> dict:
    body = {"title": "Ballots", "kind": "ranking", "items": list(labels)}
    if privacy:
        body["privacy"] = privacy
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def post(client, sid, body: str, privatized: bool, headers=ADMIN):
    return client.post(
        f"/v1/surveys/{sid}/rankings/import?privatized={str(privatized).lower()}",
        content=body.encode(),
        headers={**headers, "Content-Type": "text/csv"},
    )


def ballots_csv(rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["respondent", "ranking", "epsilon"])
    w.writerows(rows)
    return buf.getvalue()


def stored(db, sid):
    return db.execute(
        select(Ranking.respondent_id, Ranking.ordering, Ranking.epsilon, Ranking.source)
        .where(Ranking.survey_id == sid)
        .order_by(Ranking.id)
    ).all()


def test_debian_ballots_import_and_rank_like_the_election(client, db):
    """475 real ballots (41 distinct, many leaving items unranked), by label, privatized by
    the server: all stored as complete synthetic rankings, one new respondent each, the
    budget spent, and the Borda consensus matches the ballots' own (ε = 10, m = 4: an
    adjacent swap has probability 3.4%)."""
    ballots = read_preflib(DEBIAN)
    voters = ballots.expand()
    s = ranking_survey(client, ballots.names, epsilon_max=10.0, respondent_budget=10.0)
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    body = ballots_csv(
        (f"debian-2002-{k}", ">".join(ballots.names[x] for x in order), "10")
        for k, order in enumerate(voters)
    )
    assert any(len(o) < 4 for o in voters)  # partial ballots are part of the test
    r = post(client, sid, body, privatized=False)
    assert r.status_code == 201, r.text
    assert r.json() == {"imported": 475, "respondents": 475, "respondents_created": 475}
    rows = stored(db, sid)
    assert len(rows) == 475
    assert all(sorted(o) == [0, 1, 2, 3] and e == 10.0 and src == "import" for _, o, e, src in rows)
    # Privatized: not every stored ranking is the ballot's completion.
    changed = sum(list(o[: len(v)]) != list(v) for (_, o, _, _), v in zip(rows, voters, strict=True))
    assert 0 < changed < 475 * 0.5
    spent = db.execute(
        select(Respondent.external_ref, Respondent.epsilon, Respondent.epsilon_spent).where(
            Respondent.survey_id == sid
        )
    ).all()
    assert len(spent) == 475 and all(e == 10.0 and sp == 10.0 for _, e, sp in spent)
    # The ballots' mean positions (unranked items share the remaining places on average).
    mean = np.zeros(4)
    for v in voters:
        rest = [x for x in range(4) if x not in v]
        for p, x in enumerate(v):
            mean[x] += p
        for x in rest:
            mean[x] += len(v) + (len(rest) - 1) / 2
    mean /= len(voters)
    c = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN)
    assert c.status_code == 200, c.text
    got = c.json()
    assert got["diagnostics"]["rankings"] == 475
    assert got["order"] == [ids[x] for x in np.argsort(mean)]
    assert got["order"][0] == ids[ballots.names.index("Bdale Garbee")]  # the election's winner
    by_id = {it["item_id"]: it["mean_position"] for it in got["items"]}
    np.testing.assert_allclose([by_id[x] - 1 for x in ids], mean, atol=0.15)


def test_privatized_rankings_are_stored_as_given_by_id_and_label(client, db):
    s = ranking_survey(client, ("A", "B", "C"))
    sid, (a, b, c) = s["id"], [it["id"] for it in s["items"]]
    body = ballots_csv([("v1", f"{c}>{a}>{b}", "1.5"), ("v2", "B>C>A", "2")])
    r = post(client, sid, body, privatized=True)
    assert r.status_code == 201, r.text
    assert [(o, e, src) for _, o, e, src in stored(db, sid)] == [
        ([2, 0, 1], 1.5, "import"),
        ([1, 2, 0], 2.0, "import"),
    ]
    assert db.scalar(select(func.count()).select_from(PendingBatch).where(PendingBatch.survey_id == sid)) <= 1
    # The export is an import file (extra columns ignored, ids as items, respondents by id): its
    # respondents have ranked already, so importing it again is refused whole.
    export = client.get(f"/v1/surveys/{sid}/rankings.csv", headers=ADMIN).text
    assert post(client, sid, export, privatized=True).status_code == 409  # the same respondents: ranked


def test_a_privatized_ranking_must_be_complete(client, unchanged):
    s = ranking_survey(client, ("A", "B", "C"))
    with unchanged():
        r = post(client, s["id"], ballots_csv([("v1", "A>B>C", "1"), ("v2", "A>B", "1")]), privatized=True)
    assert r.status_code == 422 and "row 3" in r.json()["detail"] and "all 3 items" in r.json()["detail"]


@pytest.mark.parametrize(
    ("rows", "status", "words"),
    [
        ([("v1", f"A>{SECRET}>Nope", "1")], 422, "not an item of this survey"),
        ([("v1", f"A>{SECRET}>A", "1")], 422, "more than once"),
        ([("v1", f"A>B>{SECRET}>A", "1")], 422, "more entries than"),
        ([("v1", "", "1")], 422, "at least one item"),
        ([("v1", "A>B", "50")], 422, "epsilon must lie within"),
        ([("v1", "A>B", "x")], 422, "epsilon is not a number"),
        # float() reads these (as 5 and 2): not plain decimal numbers, so refused.
        ([("v1", "A>B", "0_5")], 422, "epsilon is not a number"),
        ([("v1", "A>B", "\u0662")], 422, "epsilon is not a number"),
        ([("=cmd()", "A>B", "1")], 422, "respondent must be"),
        ([("v1", "A>B", "1"), ("v2", "B", "1"), ("v1", f"{SECRET}", "1")], 409, "second ranking"),
    ],
)
def test_bad_rows_are_refused_whole_naming_no_item(client, unchanged, rows, status, words):
    s = ranking_survey(client, ("A", "B", SECRET))
    good = [("ok-1", "A>B", "1"), ("ok-2", "B>A", "1")]
    with unchanged():
        r = post(client, s["id"], ballots_csv(good + rows), privatized=False)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert words in detail and SECRET not in detail and "Nope" not in detail
    assert "row " in detail


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("respondent,ranking\nv1,A>B\n", "lacks column"),
        ("respondent,ranking,epsilon\n\n\n", "no data rows"),
        ("respondent,ranking,epsilon,ranking\nv1,A,1,A\n", "repeats a column"),
    ],
)
def test_bad_files_are_422(client, unchanged, body, words):
    s = ranking_survey(client, ("A", "B"))
    with unchanged():
        r = post(client, s["id"], body, privatized=False)
    assert r.status_code == 422 and words in r.json()["detail"], r.text


def test_a_row_of_very_many_fields_is_refused_before_it_is_held(client, unchanged):
    """csv.reader makes a field of every comma and holds the whole record (a 256 MiB body of
    commas would take ~3 GB): a row is at most 2**20 characters, so fields, the header's too,
    however the row spans lines."""
    s = ranking_survey(client, ("A", "B"))
    header = "respondent,ranking,epsilon"
    many = 2**20 + 1
    bodies = [
        f"{header}\nv1,A>B,1" + "," * many + "\n",
        f"{header}\nv1,A>B,1," + '"\n",' * (many // 4) + "\n",  # one record over many short lines
        header + "," * many + "\nv1,A>B,1\n",
    ]
    with unchanged():
        for body in bodies:
            r = post(client, s["id"], body, privatized=False)
            assert r.status_code == 422 and "longer than 1048576 characters" in r.json()["detail"], r.text[
                :200
            ]
    # Rows within the bound are fine, however many of them.
    rows = "".join(f"v{k},A>B,1" + "," * (2**20 - 20) + "\n" for k in range(3))
    r = post(client, s["id"], header + "\n" + rows, privatized=False)
    assert r.status_code == 201 and r.json()["imported"] == 3, r.text


def test_importing_the_same_file_twice_stores_it_once(client, db, unchanged):
    s = ranking_survey(client, ("A", "B", "C"))
    body = ballots_csv([("v1", "A>B>C", "1"), ("v2", "C>B", "1")])
    assert post(client, s["id"], body, privatized=False).status_code == 201
    with unchanged():
        r = post(client, s["id"], body, privatized=False)
    assert r.status_code == 409 and "row 2: respondent 'v1' already submitted a ranking" in r.json()["detail"]
    assert len(stored(db, s["id"])) == 2


def test_registered_respondents_by_id_and_their_budget(client, db, unchanged):
    s = ranking_survey(client, ("A", "B", "C"), respondent_budget=3.0, epsilon_max=5.0)
    sid = s["id"]
    rid, h = register(client, sid, 2.0)
    # A registered respondent named by id gets the imported ranking, and pays for it.
    r = post(client, sid, ballots_csv([(rid, "A>B>C", "2"), ("new-1", "B", "1")]), privatized=False)
    assert r.status_code == 201 and r.json() == {"imported": 2, "respondents": 2, "respondents_created": 1}
    assert db.get(Respondent, rid).epsilon_spent == 2.0
    # Over a budget (a new respondent's ε is its first ranking's): 409, nothing stored.
    rid2, _ = register(client, sid, 1.0)
    with unchanged():
        over = post(client, sid, ballots_csv([("new-2", "A", "1"), (rid2, "A", "4")]), privatized=False)
    assert over.status_code == 409 and "row 3" in over.json()["detail"] and "budget" in over.json()["detail"]
    # The respondent who ranked by import cannot rank again through the API.
    first = s["items"][0]["id"]
    again = client.post(
        f"/v1/surveys/{sid}/responses", json={"privatized": False, "ranking": [first]}, headers=h
    )
    assert again.status_code == 409 and "already submitted a ranking" in again.json()["detail"]


def test_only_an_open_ranking_survey_and_only_admins(client, unchanged):
    pairwise = create_survey(client, items=("A", "B"))
    s = ranking_survey(client, ("A", "B"))
    body = ballots_csv([("v1", "A>B", "1")])
    analyst = analyst_headers(client)
    _, h = register(client, s["id"], 1.0)
    with unchanged():
        r = post(client, pairwise["id"], body, privatized=False)
        assert r.status_code == 409 and "pairwise" in r.json()["detail"]
        assert post(client, s["id"], body, False, headers=analyst).status_code == 403
        assert post(client, s["id"], body, False, headers=h).status_code in (401, 403)
        assert post(client, "srv_nope", body, False).status_code == 404
    assert client.patch(f"/v1/surveys/{s['id']}", json={"status": "closed"}, headers=ADMIN).status_code == 200
    with unchanged():
        r = post(client, s["id"], body, privatized=False)
    assert r.status_code == 409 and "closed" in r.json()["detail"]


def test_row_limits(client, unchanged, monkeypatch):
    """Rankings × items are bounded: the row limit shrinks with the survey's size."""
    monkeypatch.setattr(ballot_import, "MAX_IMPORT_RANKING_ENTRIES", 30)
    s = ranking_survey(client, ("A", "B", "C"))
    with unchanged():
        r = post(client, s["id"], ballots_csv([(f"v{k}", "A", "1") for k in range(11)]), privatized=False)
    assert r.status_code == 422 and "at most 10 rows per import" in r.json()["detail"], r.text
    ok = post(client, s["id"], ballots_csv([(f"v{k}", "A", "1") for k in range(10)]), privatized=False)
    assert ok.status_code == 201, ok.text


def test_the_import_body_limit_applies_to_ballots():
    """Bodies above the general limit but within the import limit pass on both imports."""
    seen: list[str] = []

    async def endpoint(scope, receive, send):
        seen.append(scope["path"])

    async def refused(path: str) -> bool:
        limit = BodyLimit(endpoint, limit=10, import_limit=1000)
        sent: list[dict] = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "path": path, "headers": [(b"content-length", b"500")]}
        await limit(scope, receive, send)
        return bool(sent) and sent[0]["status"] == 413

    assert not asyncio.run(refused("/v1/surveys/s/rankings/import"))
    assert not asyncio.run(refused("/v1/surveys/s/comparisons/import"))
    assert asyncio.run(refused("/v1/surveys/s/rankings"))
    assert seen == ["/v1/surveys/s/rankings/import", "/v1/surveys/s/comparisons/import"]
