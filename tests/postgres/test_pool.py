"""The PostgreSQL pool pings a connection only after it sat idle (app.core.db.session)."""

from __future__ import annotations

import time

import psycopg
from sqlalchemy import text

from app.core.config import normalize_database_url
from app.core.db import session as db_session
from app.core.db.session import make_engine


def _backend(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


def test_a_connection_back_within_the_window_is_not_pinged(postgres_server, monkeypatch):
    engine = make_engine(normalize_database_url(postgres_server), pool_size=1)
    pings: list[int] = []
    real = engine.dialect.do_ping
    monkeypatch.setattr(engine.dialect, "do_ping", lambda conn: pings.append(1) or real(conn))
    try:
        first = _backend(engine)  # a new connection: known alive, not pinged
        for _ in range(5):
            assert _backend(engine) == first  # the same connection, straight back
        assert pings == []
    finally:
        engine.dispose()


def test_connections_the_server_closed_while_idle_are_replaced_all(postgres_server, monkeypatch):
    """A failed ping replaces every pooled connection, not only the one pinged: the
    others died with it (a restart), and one used within the window is not pinged."""
    monkeypatch.setattr(db_session, "PING_AFTER_IDLE", 0.2)
    engine = make_engine(normalize_database_url(postgres_server), pool_size=2)
    try:
        with engine.connect() as a, engine.connect() as b:  # two pooled connections
            pids = {c.execute(text("SELECT pg_backend_pid()")).scalar_one() for c in (a, b)}
        with psycopg.connect(postgres_server.replace("postgresql+psycopg://", "postgresql://")) as admin:
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.3)  # idle longer than the window: pinged, found dead, the pool replaced
        first = _backend(engine)
        monkeypatch.setattr(db_session, "PING_AFTER_IDLE", 100.0)  # from now on: no pings
        with engine.connect() as a, engine.connect() as b:  # both usable without a ping
            after = {c.execute(text("SELECT pg_backend_pid()")).scalar_one() for c in (a, b)}
        assert first not in pids and not after & pids
    finally:
        engine.dispose()
