"""Admin keys in the database: ``privrank admin-key rotate``, and the key generated on first
start revoked once ``PRIVRANK_ADMIN_KEY`` is configured."""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
import pytest

from app.core.auth import ADMIN, ANALYST, authenticate, create_key, ensure_admin_key
from app.core.db.migrate import upgrade
from app.core.db.models import ApiKey
from app.core.db.session import make_engine, make_session_factory
from app.keys.service import GENERATED_LABEL, revoke_generated_admin_keys, rotate_admin_key
from tests.helpers.cli import privrank
from tests.helpers.live import LiveServer

KEY_LINE = re.compile(r"^\s+(key_[a-z0-9]+\.\S+)$", re.MULTILINE)


def _cli(url: str, *args: str, admin_key: str | None = None):
    if admin_key is None:
        return privrank(*args, env={"DATABASE_URL": url}, unset=("PRIVRANK_ADMIN_KEY",))
    return privrank(*args, env={"DATABASE_URL": url, "PRIVRANK_ADMIN_KEY": admin_key})


@pytest.fixture
def database(tmp_path):
    url = f"sqlite:///{tmp_path}/keys.db"
    upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    yield url, factory
    engine.dispose()


def _role(factory, key: str, env_key: str | None = None) -> str | None:
    with factory() as session:
        who = authenticate(session, key, env_key)
        return None if who is None else who.role


def test_migrate_revokes_the_generated_key_once_the_environment_key_is_set(database):
    url, factory = database
    with factory() as session:
        generated = ensure_admin_key(session, None)
        _, analyst = create_key(session, "reader", ANALYST)
    assert generated is not None and _role(factory, generated) == ADMIN

    done = _cli(url, "migrate", admin_key="env-admin")
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stdout.splitlines() if "revoked" in x]
    assert len(lines) == 1 and "PRIVRANK_ADMIN_KEY" in lines[0] and generated.split(".")[0] in lines[0]
    assert _role(factory, generated) is None  # the generated key no longer works
    assert _role(factory, analyst) == ANALYST  # other keys are kept
    assert _role(factory, "env-admin", "env-admin") == ADMIN

    again = _cli(url, "migrate", admin_key="env-admin")  # nothing left to revoke: nothing said
    assert again.returncode == 0 and "revoked" not in again.stdout
    without = _cli(url, "migrate")  # without the variable nothing is revoked either
    assert without.returncode == 0 and "revoked" not in without.stdout


def test_the_functions_touch_only_generated_admin_keys(database):
    _, factory = database
    with factory() as session:
        generated = ensure_admin_key(session, None)
        assert revoke_generated_admin_keys(session, None) == []  # no environment key: kept
        new_id, rotated, revoked = rotate_admin_key(session)
        assert revoked == [generated.split(".")[0]]  # rotation revokes every other admin key
        assert revoke_generated_admin_keys(session, "env") == []  # already revoked
        labels = {k.id: (k.label, k.revoked_at is None) for k in session.query(ApiKey)}
    assert labels[new_id] == ("minted by privrank admin-key rotate", True)
    assert labels[generated.split(".")[0]] == (GENERATED_LABEL, False)
    assert _role(factory, rotated) == ADMIN and _role(factory, generated) is None


def test_admin_key_rotate_prints_a_new_key_once_and_revokes_the_others(database):
    url, factory = database
    with factory() as session:
        first = ensure_admin_key(session, None)
        _, moderator = create_key(session, "mod", "moderator")
    assert first is not None

    done = _cli(url, "admin-key", "rotate")
    assert done.returncode == 0, done.stderr
    keys = KEY_LINE.findall(done.stdout)
    assert len(keys) == 1 and "shown only this once" in done.stdout
    assert f"revoked 1 other admin key(s): {first.split('.')[0]}" in done.stdout
    assert _role(factory, keys[0]) == ADMIN and _role(factory, first) is None
    assert _role(factory, moderator) == "moderator"

    second = _cli(url, "admin-key", "rotate", "--label", "ops 2026-11", admin_key="env-admin")
    assert second.returncode == 0, second.stderr
    newer = KEY_LINE.findall(second.stdout)
    assert (
        len(newer) == 1
        and newer != keys
        and "PRIVRANK_ADMIN_KEY (environment) is not affected" in second.stdout
    )
    assert _role(factory, keys[0]) is None and _role(factory, newer[0]) == ADMIN
    with factory() as session:
        assert session.get(ApiKey, newer[0].split(".")[0]).label == "ops 2026-11"
    stored = Path(url.removeprefix("sqlite:///")).read_bytes().decode("latin-1")
    assert newer[0].split(".", 1)[1] not in stored  # only the hash is stored


def test_admin_key_rotate_on_an_unusable_database_is_one_line(tmp_path):
    done = _cli(f"sqlite:///{tmp_path}/empty.db", "admin-key", "rotate")  # no schema
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "DATABASE_URL" in done.stderr
    assert KEY_LINE.findall(done.stdout) == []


@pytest.mark.slow
def test_serve_revokes_the_generated_key_when_the_environment_key_is_configured(tmp_path):
    url = f"sqlite:///{tmp_path}/serve.db"
    server = LiveServer({"DATABASE_URL": url})
    try:
        keys = KEY_LINE.findall(server.output())
        assert len(keys) == 1, server.output()
    finally:
        server.stop()
    server = LiveServer({"DATABASE_URL": url, "PRIVRANK_ADMIN_KEY": "env-admin"})
    try:
        out = server.output()
        assert "admin key generated on first start" in out and "was revoked" in out, out
        assert keys[0].split(".")[0] in out and keys[0] not in out
        old = httpx2.get(f"{server.base}/v1/surveys", headers={"Authorization": f"Bearer {keys[0]}"})
        assert old.status_code == 401
        env = httpx2.get(f"{server.base}/v1/surveys", headers={"Authorization": "Bearer env-admin"})
        assert env.status_code == 200
    finally:
        server.stop()
