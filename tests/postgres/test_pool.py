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
        first = _backend(engine)  # a new connection: pinged once
        assert len(pings) == 1
        for _ in range(5):
            assert _backend(engine) == first  # the same connection, straight back
        assert len(pings) == 1
    finally:
        engine.dispose()


def test_a_connection_the_server_closed_while_idle_is_replaced(postgres_server, monkeypatch):
    monkeypatch.setattr(db_session, "PING_AFTER_IDLE", 0.2)
    engine = make_engine(normalize_database_url(postgres_server), pool_size=1)
    try:
        first = _backend(engine)
        with psycopg.connect(postgres_server.replace("postgresql+psycopg://", "postgresql://")) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first,))
        time.sleep(0.3)  # idle longer than the window: pinged, found dead, replaced
        second = _backend(engine)
        assert second != first
    finally:
        engine.dispose()
