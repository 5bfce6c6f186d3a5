"""API test fixtures.

The suite runs against SQLite by default. With ``PRIVRANK_TEST_DATABASE`` set to
a PostgreSQL URL (e.g. ``postgresql://postgres@127.0.0.1:5432/test``) it runs
against a fresh database created on that server for this run and dropped after.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.config import Settings, normalize_database_url
from app.db import models
from app.db.migrate import upgrade
from app.main import create_app

ADMIN_KEY = "test-admin-key-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


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


@pytest.fixture(scope="session")
def database_url(tmp_path_factory) -> Iterator[str]:
    target = os.environ.get("PRIVRANK_TEST_DATABASE", "sqlite")
    if target == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'api.db'}"
        upgrade(url)
        yield url
        return
    url, drop = fresh_postgres_database(target)
    try:
        upgrade(url)
        yield url
    finally:
        drop()


@pytest.fixture(scope="session")
def app(database_url):
    application = create_app(
        Settings(
            DATABASE_URL=database_url,
            PRIVRANK_ADMIN_KEY=ADMIN_KEY,
            # Tests register hundreds of respondents from one address; the limits have their own tests.
            PRIVRANK_REGISTER_PER_MINUTE=0,
            PRIVRANK_AUTH_FAILURES_PER_MINUTE=0,
        )
    )
    yield application
    application.state.engine.dispose()


@pytest.fixture
def budget(app):
    """``budget(seconds)``: the analysis time budget of the test app for one test."""
    original = app.state.settings

    def set_budget(seconds: float) -> None:
        app.state.settings = original.model_copy(update={"analysis_seconds": seconds})

    yield set_budget
    app.state.settings = original


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


@pytest.fixture
def db(app):
    """A session on the test database, for looking behind the API."""
    with app.state.session_factory() as session:
        yield session


def database_state(app) -> dict[str, str]:
    """A digest of every row of every table: a rejected request must leave it unchanged
    (not merely the row counts: an UPDATE or a delete-and-insert would pass those)."""
    with app.state.session_factory() as session:
        state = {}
        for table in models.Base.metadata.sorted_tables:
            rows = session.execute(select(table).order_by(*table.primary_key.columns)).all()
            state[table.name] = hashlib.sha256(repr([tuple(r) for r in rows]).encode()).hexdigest()
        return state


@pytest.fixture
def unchanged(app):
    """``with unchanged(): …`` asserts that the block changed nothing in the database."""
    from contextlib import contextmanager

    @contextmanager
    def check():
        before = database_state(app)
        yield
        after = database_state(app)
        changed = [name for name in before if before[name] != after[name]]
        assert not changed, f"a rejected request changed the database: {changed}"

    return check


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


def analyst_headers(client: TestClient) -> dict:
    r = client.post("/v1/keys", json={"label": "analyst"}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}
