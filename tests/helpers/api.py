"""Calls the API tests make over and over: create surveys, register respondents, mint
an analyst key; a fresh PostgreSQL database; the writes counted in the test database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from fastapi.testclient import TestClient

from app.core.config import normalize_database_url
from app.core.db import models

ADMIN_KEY = "test-admin-key-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}

#: Hostile strings (SQL, HTML, format strings, unicode, spreadsheet formulas) used as labels.
PAYLOADS = [
    "Robert'); DROP TABLE surveys;--",
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "<svg onload=alert(1)>",
    "' OR '1'='1",
    "Ünïcödé — 東京 — 🚇 — עברית — \u202eRTL override",
    "%s %d {0} ${x} {{7*7}}",
    '=HYPERLINK("http://evil")',
]


def fresh_postgres_database(server_url: str) -> tuple[str, callable]:
    """Create an empty database on the server of ``server_url``; returns its URL and a dropper."""
    import psycopg

    name = f"privrank_test_{uuid.uuid4().hex[:12]}"
    conninfo = server_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = normalize_database_url(server_url).rpartition("/")
    url = f"{base}/{name}"

    def drop() -> None:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return url, drop


#: The table in which the test databases count the writes to every other table.
WRITES = "privrank_test_writes"

_NOTE_WRITE = f"""
CREATE FUNCTION {WRITES}_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        INSERT INTO {WRITES} (name) VALUES (TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END $$
"""


def track_writes(url: str) -> None:
    """Make the database at ``url`` count the rows written to each table of the models
    (inserted, updated or deleted by a committed transaction), for :func:`writes`.

    SQLite: a row trigger adds one to the table's count (writers are serialized anyway).
    PostgreSQL: a statement trigger that saw rows (its transition table is not empty)
    appends one row naming the table, so concurrent writers never wait on each other.
    A rolled-back transaction leaves no count; an UPDATE that matches no row adds none.
    """
    from sqlalchemy import text

    from app.core.db.session import make_engine

    engine = make_engine(url)
    names = [t.name for t in models.Base.metadata.sorted_tables]
    try:
        with engine.begin() as conn:
            if engine.dialect.name == "sqlite":
                conn.execute(text(f"CREATE TABLE {WRITES} (name TEXT PRIMARY KEY, n INTEGER NOT NULL)"))
                for name in names:
                    conn.execute(text(f"INSERT INTO {WRITES} VALUES ('{name}', 0)"))
                    for event in ("INSERT", "UPDATE", "DELETE"):
                        conn.execute(
                            text(
                                f'CREATE TRIGGER {WRITES}_{name}_{event.lower()} AFTER {event} ON "{name}" '
                                f"BEGIN UPDATE {WRITES} SET n = n + 1 WHERE name = '{name}'; END"
                            )
                        )
            else:
                conn.execute(text(f"CREATE TABLE {WRITES} (name TEXT NOT NULL)"))
                conn.execute(text(_NOTE_WRITE))
                for name in names:
                    for event, side in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
                        conn.execute(
                            text(
                                f'CREATE TRIGGER {WRITES}_{event.lower()} AFTER {event} ON "{name}" '
                                f"REFERENCING {side} TABLE AS changed FOR EACH STATEMENT "
                                f"EXECUTE FUNCTION {WRITES}_note()"
                            )
                        )
    finally:
        engine.dispose()


def writes(app) -> dict[str, int]:
    """How many writes each table of the models has had (a database of
    :func:`track_writes`): a rejected request must leave every count as it was. O(1) in
    the rows stored, unlike reading them all."""
    from sqlalchemy import text

    with app.state.session_factory() as session:
        if session.get_bind().dialect.name == "sqlite":
            rows = session.execute(text(f"SELECT name, n FROM {WRITES}")).all()
        else:
            rows = session.execute(text(f"SELECT name, count(*) FROM {WRITES} GROUP BY name")).all()
    counts = {t.name: 0 for t in models.Base.metadata.sorted_tables}
    counts.update({name: int(n) for name, n in rows})
    return counts


def create_survey(client: TestClient, items=("A", "B", "C", "D"), **privacy) -> dict:
    body = {"title": "Test survey", "items": list(items)}
    if privacy:
        body["privacy"] = privacy
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def create_ranking_survey(client: TestClient, items=("a", "b", "c")) -> dict:
    r = client.post(
        "/v1/surveys", json={"title": "r", "kind": "ranking", "items": list(items)}, headers=ADMIN
    )
    assert r.status_code == 201, r.text
    return r.json()


def create_central_survey(client: TestClient, items=("a", "b", "c"), budget=100.0, per_respondent=3) -> dict:
    privacy = {"model": "central", "total_budget": budget, "max_comparisons_per_respondent": per_respondent}
    r = client.post(
        "/v1/surveys", json={"title": "c", "items": list(items), "privacy": privacy}, headers=ADMIN
    )
    assert r.status_code == 201, r.text
    return r.json()


def register(client: TestClient, survey_id: str, epsilon: float | None = None) -> tuple[str, dict]:
    body = {} if epsilon is None else {"epsilon": epsilon}
    r = client.post(f"/v1/surveys/{survey_id}/respondents", json=body)
    assert r.status_code == 201, r.text
    data = r.json()
    return data["respondent_id"], {"Authorization": f"Bearer {data['token']}"}


def analyst_headers(client: TestClient, role: str = "analyst") -> dict:
    """Headers of a newly minted analyst (or ``role``: moderator) key."""
    r = client.post("/v1/keys", json={"label": role, "role": role}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


@contextmanager
def private_database(database_url: str, tmp_path) -> Iterator[str]:
    """A migrated database of the same kind as the suite's, for a test that fills it with
    more than the shared one should carry (every ``unchanged()`` digests the shared one)."""
    from app.core.db.migrate import upgrade

    if database_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'private.db'}"
        upgrade(url)
        yield url
        return
    url, drop = fresh_postgres_database(database_url.rsplit("/", 1)[0] + "/test")
    try:
        upgrade(url)
        yield url
    finally:
        drop()


def make_app(url: str, admin_key: str | None = ADMIN_KEY, **settings):
    """The service for an in-process test client, on the database at ``url``. Rate limits
    are off unless a test sets them (tests register hundreds of respondents from one
    address; the limits have tests of their own); other settings by their environment
    names, e.g. ``PRIVRANK_SQLITE_MAX_IMPORT_ROWS=2``."""
    from app.core.config import Settings
    from app.main import create_app

    values = {
        "PRIVRANK_REGISTER_PER_MINUTE": 0,
        "PRIVRANK_AUTH_FAILURES_PER_MINUTE": 0,
        "PRIVRANK_SUGGEST_PER_HOUR": 0,
        **settings,
    }
    if admin_key is not None:
        values["PRIVRANK_ADMIN_KEY"] = admin_key
    return create_app(Settings(DATABASE_URL=url, **values))


def import_comparisons(client: TestClient, survey_id: str, rows: list[str], privatized: bool = True) -> dict:
    """``POST …/comparisons/import`` of the CSV lines ``rows`` (header first); asserts 201
    and returns the answer (``imported``: the rows stored)."""
    r = client.post(
        f"/v1/surveys/{survey_id}/comparisons/import?privatized={str(privatized).lower()}",
        content="\n".join(rows) + "\n",
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    return r.json()


def import_survey(client: TestClient, n_items: int, n_respondents: int, per: int, seed: int) -> str:
    """A survey whose respondents each answered ``per`` distinct random pairs (CSV import)."""
    s = create_survey(client, items=[f"x{k}" for k in range(n_items)], respondent_budget="unlimited")
    rng = np.random.default_rng(seed)
    theta = np.linspace(2.0, -2.0, n_items)
    lines = ["respondent,item_a,item_b,winner,epsilon"]
    for r in range(n_respondents):
        pairs: set[tuple[int, int]] = set()
        while len(pairs) < per:
            a, b = rng.choice(n_items, 2, replace=False)
            pairs.add((min(a, b), max(a, b)))
        for a, b in sorted(pairs):
            won = rng.random() < 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
            lines.append(f"r{r},x{a},x{b},x{a if won else b},2.0")
    r = client.post(
        f"/v1/surveys/{s['id']}/comparisons/import?privatized=false",
        content=("\n".join(lines) + "\n").encode(),
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    return s["id"]
