"""API test fixtures.

The suite runs against SQLite by default. With ``PRIVRANK_TEST_DATABASE`` set to
a PostgreSQL URL (e.g. ``postgresql://postgres@127.0.0.1:5432/test``) it runs
against a fresh database created on that server for this run and dropped after.
Each xdist worker has its own. The database counts the writes to each table
(``tests.helpers.api.track_writes``), so ``unchanged()`` costs the same however many
rows the suite has stored.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.core.db.migrate import upgrade
from tests.helpers.api import fresh_postgres_database, make_app, private_database, track_writes, writes


@pytest.fixture(scope="session")
def database_url(tmp_path_factory) -> Iterator[str]:
    target = os.environ.get("PRIVRANK_TEST_DATABASE", "sqlite")
    if target == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'api.db'}"
        upgrade(url)
        track_writes(url)
        yield url
        return
    url, drop = fresh_postgres_database(target)
    try:
        upgrade(url)
        track_writes(url)
        yield url
    finally:
        drop()


@pytest.fixture
def private_url(database_url, tmp_path) -> Iterator[str]:
    """A migrated database of the suite's kind for one test that fills it with more than
    the shared one should carry, or needs it empty."""
    with private_database(database_url, tmp_path) as url:
        yield url


@pytest.fixture(scope="session")
def app(database_url):
    application = make_app(database_url)
    yield application
    application.state.engine.dispose()


@pytest.fixture
def budget(app):
    """``budget(seconds)``: the analysis time budget of the test app for one test."""
    original = app.state.settings

    def set_budget(seconds: float) -> None:
        app.state.settings = app.state.settings.model_copy(update={"analysis_seconds": seconds})

    yield set_budget
    app.state.settings = original


@pytest.fixture
def inline(app):
    """``inline(seconds)``: PRIVRANK_INLINE_SECONDS of the test app for one test (the
    predicted time beyond which a bootstrap or a plan asked synchronously is a job)."""
    original = app.state.settings

    def set_inline(seconds: float) -> None:
        app.state.settings = app.state.settings.model_copy(update={"inline_seconds": seconds})

    yield set_inline
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


@pytest.fixture
def unchanged(app):
    """``with unchanged(): …`` asserts that the block wrote nothing to the database (no
    row of any table inserted, updated or deleted by a committed transaction)."""
    from contextlib import contextmanager

    @contextmanager
    def check():
        before = writes(app)
        yield
        after = writes(app)
        changed = [name for name in before if before[name] != after[name]]
        assert not changed, f"a rejected request changed the database: {changed}"

    return check
