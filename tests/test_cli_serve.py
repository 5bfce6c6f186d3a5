"""`privrank serve` and `privrank migrate` as real processes on the SQLite default."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx2
import pytest

from tests.helpers.live import LiveServer

KEY_LINE = re.compile(r"^\s+(key_[a-z0-9]+\.\S+)$", re.MULTILINE)


@pytest.mark.slow
def test_serve_migrates_generates_an_admin_key_once_and_serves(tmp_path):
    """No DATABASE_URL: the default SQLite file in the working directory. Migrating at
    start-up logs no Alembic plugin or step lines, and nothing logs a traceback."""
    server = LiveServer({}, cwd=str(tmp_path))
    try:
        keys = KEY_LINE.findall(server.output())
        assert len(keys) == 1, server.output()
        # Where the dashboard is, on every start.
        assert f"the dashboard is at http://127.0.0.1:{server.port}/\n" in server.output()
        assert httpx2.get(f"{server.base}/").status_code == 200
        admin = {"Authorization": f"Bearer {keys[0]}"}
        r = httpx2.post(f"{server.base}/v1/surveys", json={"title": "t", "items": ["a", "b"]}, headers=admin)
        assert r.status_code == 201
        assert httpx2.get(f"{server.base}/openapi.json").status_code == 200
    finally:
        out = server.stop()
    assert (tmp_path / "privrank.db").exists()
    # Second start: the key exists (only its hash is stored) and is not printed again.
    server = LiveServer({}, cwd=str(tmp_path))
    try:
        assert KEY_LINE.findall(server.output()) == []
        assert f"the dashboard is at http://127.0.0.1:{server.port}/\n" in server.output()
        assert "admin key" not in server.output()
        r = httpx2.get(f"{server.base}/v1/surveys", headers=admin)
        assert r.status_code == 200 and r.json()["total"] == 1
    finally:
        server.stop()
    assert keys[0].split(".", 1)[1] not in (tmp_path / "privrank.db").read_bytes().decode("latin-1")
    assert "Traceback" not in out and "alembic" not in out.lower()


@pytest.mark.slow
def test_migrate_command(tmp_path):
    url = f"sqlite:///{tmp_path}/m.db"
    for _ in range(2):  # idempotent
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "migrate"],
            env={"DATABASE_URL": url, "PATH": ""},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "latest schema" in done.stdout


@pytest.mark.slow
def test_an_unreachable_database_is_one_line_naming_database_url(tmp_path):
    """No traceback (it was 112 lines), the URL without its password, the driver's reason."""
    url = "postgresql://privrank:s3cret-pw@127.0.0.1:1/nowhere"
    for command in ("migrate", "serve"):
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", command],
            env={"DATABASE_URL": url, "PATH": "", "PRIVRANK_ADMIN_KEY": "k" * 32},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done.stderr
        err = done.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("privrank: cannot use the database at DATABASE_URL="), err
        assert "127.0.0.1:1/nowhere" in err[0] and "s3cret-pw" not in done.stderr + done.stdout
        assert "Traceback" not in done.stderr


def test_version_prints_the_packages_version():
    from app import __version__

    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"privrank {__version__}\n"


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000/"),
        ("0.0.0.0", "http://localhost:8000/"),
        ("::", "http://localhost:8000/"),
        ("::1", "http://[::1]:8000/"),
        ("survey.example.org", "http://survey.example.org:8000/"),
    ],
)
def test_the_dashboard_url_for_each_kind_of_host(host, url):
    from app.cli.service import dashboard_url

    assert dashboard_url(host, 8000) == url
