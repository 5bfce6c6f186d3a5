"""PostgreSQL-only tests and a live ``privrank serve`` process.

``PRIVRANK_TEST_POSTGRES`` names the server (default: this project's CI server,
``postgresql://postgres@127.0.0.1:5432/test``); each test run creates its own
database there and drops it afterwards. When the server is unreachable the tests
are skipped on a developer machine but fail under CI (``CI`` set): a missing
service must never pass silently in CI.
"""

from __future__ import annotations

import os

import pytest

from tests.helpers.api import fresh_postgres_database

DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def _reachable(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


@pytest.fixture(scope="session")
def postgres_server() -> str:
    url = os.environ.get("PRIVRANK_TEST_POSTGRES", DEFAULT)
    if not _reachable(url):
        message = f"PostgreSQL is not reachable at {url}"
        if os.environ.get("CI"):
            pytest.fail(message + " (required in CI)")
        pytest.skip(message)
    return url


@pytest.fixture
def postgres_url(postgres_server):
    url, drop = fresh_postgres_database(postgres_server)
    yield url
    drop()
