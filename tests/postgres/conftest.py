"""PostgreSQL-only tests and a live ``privrank serve`` process.

``PRIVRANK_TEST_POSTGRES`` names the server (default: this project's CI server,
``postgresql://postgres@127.0.0.1:5432/test``); each test run creates its own
database there and drops it afterwards. When the server is unreachable the tests
are skipped on a developer machine but fail under CI (``CI`` set): a missing
service must never pass silently in CI.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.api.conftest import fresh_postgres_database

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, database_url: str, admin_key: str, workers: int = 2) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "PRIVRANK_ADMIN_KEY": admin_key,
            "PRIVRANK_LOG_LEVEL": "warning",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port), "--workers", str(workers)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        import httpx2

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"privrank serve exited:\n{self.proc.stdout.read()}")
            try:
                if httpx2.get(self.base + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("privrank serve did not become ready")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out
