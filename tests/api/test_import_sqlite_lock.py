"""Concurrency and hostile load: a bulk import does not lock respondents out.

On SQLite a write transaction holds the database's only write lock; every answer
waits for it (up to the 30 s busy timeout, then 503). An import therefore parses,
checks, randomizes and stages everything first — the rows already in the driver's
form — and its write transaction only re-checks what can have changed (the survey's
status, the known respondents' budgets, and pairs answered or pseudonyms created
meanwhile, through unique constraints) and writes in bulk: the same few statements
for 500 rows as for 20,000. The tests run on the suite's database (SQLite by default;
PostgreSQL with ``PRIVRANK_TEST_DATABASE``).
"""

from __future__ import annotations

import csv
import io
import random

from sqlalchemy import event, func, select, update

from app.core.db.models import Comparison, Respondent
from app.respondents import imports
from tests.helpers.api import ADMIN, create_survey, make_app, register


def _csv(rows) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["respondent", "item_a", "item_b", "winner", "epsilon"])
    w.writerows(rows)
    return out.getvalue()


class _ImportWatch:
    """What an import does, in order (:attr:`events`): its per-row work (``parse``,
    ``privatize``, ``respondents``, ``convert``: rows put in the driver's form),
    ``begin_write``, then ``commit``; and the statements it executes in between
    (:attr:`statements`, by their first word). ``meanwhile`` runs once the respondents
    are staged (event ``meanwhile``)."""

    def __init__(self, monkeypatch, engine, meanwhile=None) -> None:
        self.events: list[str] = []
        self.statements: list[str] = []
        self._conn = None

        def spy(name, real, then=None):
            def wrapped(*args, **kwargs):
                self.events.append(name)
                out = real(*args, **kwargs)
                if then is not None:
                    then()
                    self.events.append("meanwhile")
                return out

            return wrapped

        monkeypatch.setattr(imports, "_parse_import", spy("parse", imports._parse_import))
        monkeypatch.setattr(imports, "privatize", spy("privatize", imports.privatize))
        monkeypatch.setattr(
            imports, "import_respondents", spy("respondents", imports.import_respondents, meanwhile)
        )
        convert = spy("convert", imports._Bulk.stage.__func__)
        monkeypatch.setattr(imports._Bulk, "stage", classmethod(convert))
        real_begin = imports.begin_write

        def begin_write(session):
            real_begin(session)
            self.events.append("begin_write")
            self._conn = session.connection()

        monkeypatch.setattr(imports, "begin_write", begin_write)

        def executed(conn, cursor, statement, *_):
            if conn is self._conn:
                self.statements.append(statement.split()[0])

        def committed(conn):
            if conn is self._conn:
                self.events.append("commit")
                self._conn = None

        self._engine = engine
        self._listeners = {"before_cursor_execute": executed, "commit": committed}
        for name, fn in self._listeners.items():
            event.listen(engine, name, fn)

    def close(self) -> None:
        for name, fn in self._listeners.items():
            event.remove(self._engine, name, fn)


def test_an_import_writes_in_the_same_few_statements_for_500_rows_as_for_20000(client, app, monkeypatch):
    """Two imports randomized by the server: 500 rows (10 answers each from 45 known and 5
    new respondents) and 20,000 (100 each from 180 known and 20 new). Everything per row
    or per respondent happens before the write transaction begins, and the transaction
    runs the same few statements for both (the survey's lock, the known respondents'
    budgets re-checked and spent, one bulk insert per table), so an answer waits for a
    large import's write no longer than for a small one's, beyond the bulk writes
    themselves. A respondent's answer sent while the large import is being staged is
    stored at once: the staging holds no write lock."""
    rng = random.Random(13)
    labels = [f"item {k}" for k in range(60)]
    pairs = [(a, b) for x, a in enumerate(labels) for b in labels[x + 1 :]]
    s = create_survey(client, items=labels, respondent_budget="unlimited")  # sites answer every pair
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    url = f"/v1/surveys/{sid}/comparisons/import?privatized=false"
    csv_headers = {**ADMIN, "Content-Type": "text/csv"}
    chosen = {f"site-{k}": rng.sample(pairs, 101) for k in range(250)}
    everyone = list(chosen)
    small_refs, large_refs = everyone[:50], everyone[50:]  # the first 45 and 180 of each are known
    known = small_refs[:45] + large_refs[:180]
    r = client.post(
        url,
        content=_csv((ref, a, b, a, "1.0") for ref in known for a, b in chosen[ref][:1]),
        headers=csv_headers,
    )
    assert r.status_code == 201, r.text
    _, h = register(client, sid)
    answered: list[int] = []

    def answer() -> None:
        body = {"privatized": False, "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[0]}]}
        answered.append(client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h).status_code)

    watched = []
    for names, per, meanwhile in ((small_refs, 10, None), (large_refs, 100, answer)):
        rows = _csv(
            (ref, a, b, rng.choice((a, b)), "1.0") for ref in names for a, b in chosen[ref][1 : 1 + per]
        )
        with monkeypatch.context() as patched:
            watch = _ImportWatch(patched, app.state.engine, meanwhile)
            try:
                r = client.post(url, content=rows, headers=csv_headers)
            finally:
                watch.close()
        assert r.status_code == 201, r.text
        watched.append((r.json(), watch))
    (small_out, small), (large_out, large) = watched
    assert small_out == {"imported": 500, "respondents_created": 5, "respondents": 50}
    assert large_out == {"imported": 20_000, "respondents_created": 20, "respondents": 200}
    for watch in (small, large):
        assert watch.events.index("begin_write") == len(watch.events) - 2, watch.events
        assert watch.events[-1] == "commit"
        assert {"parse", "privatize", "respondents", "convert"} <= set(watch.events[:-2])
    assert "meanwhile" in large.events[:-2] and answered == [201]
    # PostgreSQL also takes the survey's import lock (pg_advisory_xact_lock).
    locks = ["SELECT"] * (2 if app.state.engine.dialect.name == "postgresql" else 1)
    assert small.statements == large.statements == [*locks, "UPDATE", "INSERT", "INSERT", "INSERT"]


def _import(client, sid, body):
    return client.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=true",
        content=body,
        headers={**ADMIN, "Content-Type": "text/csv"},
    )


def _meanwhile(monkeypatch, app, write) -> None:
    """Run ``write`` (a function of a session) in its own transaction just before the
    import's write transaction begins: after the import has staged everything."""
    real = imports.begin_write

    def begin_after_another_write(session):
        with app.state.session_factory() as other:
            write(other)
            other.commit()
        real(session)

    monkeypatch.setattr(imports, "begin_write", begin_after_another_write)


def _stored(db, sid) -> int:
    return db.scalar(select(func.count()).select_from(Comparison).where(Comparison.survey_id == sid))


def test_a_budget_spent_while_the_import_was_staged_fails_it_whole(client, app, db, monkeypatch):
    s = create_survey(client, items=("A", "B", "C"), respondent_budget=2.0)
    sid = s["id"]
    rid, _ = register(client, sid, 1.0)
    # The respondent (named by its id, as in the service's export) has 2 - 0 left when staged.
    body = f"respondent,item_a,item_b,winner,epsilon\nnew-1,A,B,A,1\n{rid},A,B,A,1\n{rid},A,C,C,1\n"
    _meanwhile(
        monkeypatch,
        app,
        lambda other: other.execute(update(Respondent).where(Respondent.id == rid).values(epsilon_spent=1.0)),
    )
    r = _import(client, sid, body)
    assert r.status_code == 409, r.text
    assert r.json()["detail"] == (
        f"respondent {rid!r} would exceed the privacy budget (answers stored while the import was "
        "prepared); nothing was imported"
    )
    assert _stored(db, sid) == 0
    refs = db.scalars(select(Respondent.external_ref).where(Respondent.survey_id == sid)).all()
    assert refs == [None]  # new-1 was not created
    assert db.get(Respondent, rid, populate_existing=True).epsilon_spent == 1.0


def test_a_pair_answered_while_the_import_was_staged_fails_it_whole(client, app, db, monkeypatch):
    s = create_survey(client, items=("A", "B", "C"))
    sid = s["id"]
    rid, _ = register(client, sid, 1.0)
    body = f"respondent,item_a,item_b,winner,epsilon\nnew-1,A,B,A,1\n{rid},B,C,B,1\n"

    def answer(other):
        other.add(
            Comparison(survey_id=sid, respondent_id=rid, i=1, j=2, y_tilde=1, epsilon=1.0, source="client")
        )

    _meanwhile(monkeypatch, app, answer)
    r = _import(client, sid, body)
    assert r.status_code == 409, r.text
    assert "stored while it was prepared; nothing was imported" in r.json()["detail"]
    assert _stored(db, sid) == 1  # the answer stored meanwhile, nothing of the import
    assert db.scalar(select(func.count()).where(Respondent.survey_id == sid)) == 1


def test_a_survey_closed_while_the_import_was_staged_takes_nothing(client, app, db, monkeypatch):
    from app.core.db.models import Survey

    s = create_survey(client, items=("A", "B", "C"))
    sid = s["id"]
    _meanwhile(
        monkeypatch,
        app,
        lambda other: other.execute(update(Survey).where(Survey.id == sid).values(status="closed")),
    )
    r = _import(client, sid, "respondent,item_a,item_b,winner,epsilon\np,A,B,A,1\n")
    assert r.status_code == 409 and r.json()["detail"] == "the survey is closed", r.text
    assert _stored(db, sid) == 0
    assert db.scalar(select(func.count()).where(Respondent.survey_id == sid)) == 0


def test_a_pseudonym_created_while_the_import_was_staged_fails_it_whole(client, app, db, monkeypatch):
    s = create_survey(client, items=("A", "B", "C"))
    sid = s["id"]
    body = "respondent,item_a,item_b,winner,epsilon\np-1,A,B,A,1\np-2,A,C,A,1\n"
    # A concurrent import of p-2 commits first.
    _meanwhile(
        monkeypatch,
        app,
        lambda other: other.add(
            Respondent(id="rsp_aaaaaaaaaaaaaaaa", survey_id=sid, epsilon=1.0, external_ref="p-2")
        ),
    )
    r = _import(client, sid, body)
    assert r.status_code == 409, r.text
    assert "nothing was imported" in r.json()["detail"]
    assert _stored(db, sid) == 0
    refs = db.scalars(select(Respondent.external_ref).where(Respondent.survey_id == sid)).all()
    assert refs == ["p-2"]


def test_sqlite_bounds_the_rows_of_one_import(database_url):
    """``PRIVRANK_SQLITE_MAX_IMPORT_ROWS`` applies on SQLite only: one more row is 422 and
    stores nothing; PostgreSQL (no database-wide write lock) keeps its 1,000,000."""
    from fastapi.testclient import TestClient

    application = make_app(database_url, PRIVRANK_SQLITE_MAX_IMPORT_ROWS=2)
    try:
        with TestClient(application) as c:
            sid = create_survey(c, items=("A", "B", "C"))["id"]
            two = "respondent,item_a,item_b,winner,epsilon\np,A,B,A,1\np,A,C,A,1\n"
            three = two + "q,B,C,B,1\n"
            r = _import(c, sid, three)
            if database_url.startswith("sqlite"):
                assert r.status_code == 422, r.text
                assert r.json()["detail"] == (
                    "at most 2 rows per import on this server (its SQLite database is locked for "
                    "answers while an import is written); split the file"
                )
                with application.state.session_factory() as db:
                    assert _stored(db, sid) == 0
                r = _import(c, sid, two)
                assert r.status_code == 201 and r.json()["imported"] == 2, r.text
            else:
                assert r.status_code == 201 and r.json()["imported"] == 3, r.text
    finally:
        application.state.engine.dispose()
