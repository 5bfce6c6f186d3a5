"""Fault-injection helpers: a throw-away PostgreSQL cluster of the test's own.

The fault tests stop, start and kill things, so they never touch the shared
server: ``private_postgres`` runs ``initdb`` into a temporary directory and
starts a postmaster on a free port (trust authentication, user ``postgres``).
As root (CI runs as root) the cluster belongs to the ``postgres`` system user
and its binaries run through ``runuser``: PostgreSQL refuses to run as root.

The binaries come from ``pg_config --bindir``, else ``/usr/lib/postgresql/*/bin``.
Without them the tests are skipped on a developer machine but fail under CI
(``CI`` set): a fault test must never pass silently in CI.

``PRIVRANK_FAULT_SECONDS`` (e.g. 30) lengthens the load phases of the fault tests
and adds their long variants; unset, the ordinary ``pytest`` run has short versions
of each (about 50 s for the directory).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.live import LiveServer, free_port

ADMIN_KEY = "fault-admin-key-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def phase_seconds(default: float) -> float:
    """Length of a load phase: ``PRIVRANK_FAULT_SECONDS`` when it asks for longer."""
    return max(default, float(os.environ.get("PRIVRANK_FAULT_SECONDS") or 0))


def long_run() -> bool:
    """``PRIVRANK_FAULT_SECONDS`` asks for the long variants."""
    return phase_seconds(0) > 0


def unavailable(message: str) -> None:
    """Skip on a developer machine, fail under CI."""
    if os.environ.get("CI"):
        pytest.fail(message + " (required in CI)")
    pytest.skip(message)


def _bindir() -> Path | None:
    candidates: list[str] = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)  # newest first
    for d in candidates:
        if (Path(d) / "initdb").is_file() and (Path(d) / "pg_ctl").is_file():
            return Path(d)
    return None


class PrivatePostgres:
    """A PostgreSQL cluster in a temporary directory, on a free port of 127.0.0.1:
    ``start()``, ``stop(mode)``, ``create_database(name)`` (its URL), ``connect(database)``."""

    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found")
        self.bindir = bindir
        self.prefix: list[str] = []
        self.owner: str | None = None
        if os.geteuid() == 0:
            if not shutil.which("runuser"):
                unavailable("running as root, but runuser is missing (PostgreSQL refuses to run as root)")
            try:
                import pwd

                pwd.getpwnam("postgres")
            except KeyError:
                unavailable("running as root, but there is no 'postgres' user to own the cluster")
            self.owner = "postgres"
            self.prefix = ["runuser", "-u", "postgres", "--"]
        # Under /tmp itself (not pytest's tmp_path, whose parents are private to root),
        # so that the postgres user can reach it.
        self.root = Path(tempfile.mkdtemp(prefix="privrank-pg-"))
        if self.owner:
            shutil.chown(self.root, self.owner)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.server_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.running = False
        self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-locale"
        )

    def _run(self, tool: str, *args: str, timeout: float = 120) -> str:
        cmd = [*self.prefix, str(self.bindir / tool), *args]
        out = subprocess.run(cmd, cwd=self.root, capture_output=True, text=True, timeout=timeout, check=False)
        if out.returncode != 0:
            raise RuntimeError(
                f"{tool} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}\n{self.server_log()}"
            )
        return out.stdout

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> float:
        """Start the postmaster and wait until it accepts connections; returns the seconds it took."""
        t0 = time.monotonic()
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=100"
        self._run("pg_ctl", "start", "-w", "-t", "120", "-D", str(self.data), "-l", str(self.log), "-o", opts)
        self.running = True
        return time.monotonic() - t0

    def stop(self, mode: str = "fast") -> float:
        """Stop the postmaster (``fast``: roll back and disconnect every session; ``immediate``:
        abort, recovery at the next start); returns the seconds it took."""
        t0 = time.monotonic()
        self._run("pg_ctl", "stop", "-w", "-t", "120", "-D", str(self.data), "-m", mode)
        self.running = False
        return time.monotonic() - t0

    def create_database(self, name: str) -> str:
        """A new database; returns its URL (``postgresql://``, which the app accepts)."""
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def connect(self, database: str):
        import psycopg

        return psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/{database}", connect_timeout=10)

    def cleanup(self) -> None:
        if self.running or (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


# -- the service under test ------------------------------------------------------


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # the field after (comm) is the state, then ppid
            out.append(int(entry.name))
    return out


def worker_pids(server) -> list[int]:
    """The uvicorn worker processes (multiprocessing's spawned children, not its resource tracker)."""
    out = []
    for pid in children(server.proc.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            out.append(pid)
    return sorted(out)


def serve(pg: PrivatePostgres, workers: int = 2, database: str = "privrank", env: dict | None = None):
    """``privrank serve`` with ``workers`` processes on a new database of ``pg``; returns
    the LiveServer (the caller stops it)."""

    url = pg.create_database(database)
    return LiveServer({"DATABASE_URL": url, "PRIVRANK_ADMIN_KEY": ADMIN_KEY, **(env or {})}, workers=workers)


@dataclass(frozen=True)
class EngineLimits:
    """What bounds a request's wait for the database: one connection attempt (connect_timeout)
    and, when every pooled connection is in use, the wait for one (pool_timeout)."""

    connect_timeout: float
    pool_timeout: float
    pool_capacity: int  # connections one worker may open: pool_size + max_overflow


def engine_limits() -> EngineLimits:
    """The service's own settings, read from the engine it builds (no server contacted)."""
    from sqlalchemy import event

    from app.core.config import Settings
    from app.core.db.session import make_engine

    class _Captured(Exception):
        pass

    seen: dict = {}
    engine = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", Settings().db_pool_size)

    @event.listens_for(engine, "do_connect")
    def _capture(dialect, conn_rec, cargs, cparams):
        seen.update(cparams)
        raise _Captured

    try:
        with pytest.raises(_Captured):
            engine.connect()
        return EngineLimits(
            connect_timeout=float(seen["connect_timeout"]),
            pool_timeout=float(engine.pool.timeout()),
            pool_capacity=engine.pool.size() + engine.pool._max_overflow,
        )
    finally:
        engine.dispose()


# -- acknowledged answers against the database -----------------------------------


def check_acknowledged(pg: PrivatePostgres, survey: dict, result, database: str = "privrank") -> dict:
    """Every comparison acknowledged with a 201 is in the database, once; returns the figures.

    A request can commit and still go unacknowledged (the connection to the client, or the
    database's answer to COMMIT, is lost after the commit): rows may exceed the acknowledged
    comparisons. Each extra row must then belong to a request the load generator sent but
    never saw acknowledged, committed whole (all its pairs, and its Idempotency-Key record).
    Every request is stored whole or not at all, and each respondent's counter of
    comparisons matches its rows (the batch and the budget update commit together)."""
    positions = {item["id"]: item["position"] for item in survey["items"]}

    def canonical(respondent: str, a: str, b: str) -> tuple[str, int, int]:
        i, j = sorted((positions[a], positions[b]))
        return respondent, i, j

    acked: set[tuple[str, int, int]] = set()
    for r in result.acknowledged():
        acked.update(canonical(r.respondent, a, b) for a, b in r.pairs)
    assert len(acked) == result.comparisons_acknowledged(), "a pair was acknowledged twice"

    attempts: dict[str, list] = {}  # Idempotency-Key → the attempts of one request
    for r in result.records:
        if r.kind == "responses":
            attempts.setdefault(r.key, []).append(r)

    with pg.connect(database) as conn:
        rows = conn.execute(
            "SELECT respondent_id, i, j FROM comparisons WHERE survey_id = %s", (survey["id"],)
        ).fetchall()
        keys = set(
            conn.execute(
                "SELECT k.respondent_id, k.key FROM idempotency_keys k "
                "JOIN respondents r ON r.id = k.respondent_id WHERE r.survey_id = %s",
                (survey["id"],),
            ).fetchall()
        )
        counters = dict(
            conn.execute(
                "SELECT id, n_comparisons FROM respondents WHERE survey_id = %s", (survey["id"],)
            ).fetchall()
        )
    stored = set(rows)
    assert len(stored) == len(rows), "a (respondent, pair) is stored twice"
    missing = acked - stored
    assert not missing, f"{len(missing)} acknowledged comparisons are not in the database"

    extra = stored - acked
    unacked_committed = set()
    by_pair = {}  # (respondent, i, j) → the Idempotency-Key of the request that carried it
    for key, tries in attempts.items():
        by_pair.update((canonical(tries[0].respondent, a, b), key) for a, b in tries[0].pairs)
    for row in extra:
        key = by_pair.get(row)
        assert key is not None, f"a stored comparison {row} was never sent"
        tries = attempts[key]
        assert all(t.status != 201 for t in tries), "an extra row belongs to an acknowledged request"
        unacked_committed.add(key)
    for tries in attempts.values():
        whole = {canonical(tries[0].respondent, a, b) for a, b in tries[0].pairs}
        assert whole <= stored or not whole & stored, "a request was stored in part"
    for key in unacked_committed:
        assert (attempts[key][0].respondent, key) in keys, "a request committed without its Idempotency-Key"

    per_respondent: dict[str, int] = {}
    for respondent, _i, _j in rows:
        per_respondent[respondent] = per_respondent.get(respondent, 0) + 1
    for respondent, n in counters.items():
        assert per_respondent.get(respondent, 0) == n, "a respondent's counter disagrees with its rows"

    return {
        "acknowledged_requests": len(result.acknowledged()),
        "acknowledged_comparisons": len(acked),
        "rows": len(rows),
        "extra_rows": len(extra),
        "committed_unacknowledged_requests": len(unacked_committed),
    }
