"""Engine and session factory for SQLite and PostgreSQL."""

from __future__ import annotations

import time

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["PING_AFTER_IDLE", "begin_write", "make_engine", "make_session_factory", "pool_capacity"]

#: Seconds a pooled PostgreSQL connection may have been idle and still be handed out
#: without a ping. The pool hands out its most recently used connection first, so under
#: load connections come back within milliseconds and are never pinged (a ping is a round
#: trip per request); one idle longer — the server restarted, a firewall or
#: ``idle_session_timeout`` closed it — is pinged, and a failed ping replaces every
#: pooled connection. A connection that dies within this window fails its statement,
#: which invalidates the pool and answers 503, as any request during an outage does.
PING_AFTER_IDLE = 1.0


def pool_capacity(engine: Engine) -> int:
    """Connections the engine's pool opens at most (``pool_size + max_overflow``)."""
    pool = engine.pool
    size = getattr(pool, "size", None)
    overflow = getattr(pool, "_max_overflow", 0)
    if not callable(size):
        return 1
    return int(size()) + max(0, int(overflow))


def make_engine(url: str, pool_size: int = 10) -> Engine:
    """Create the engine: a pool of ``pool_size`` connections plus as many overflow
    connections, on SQLite as on PostgreSQL (``PRIVRANK_DB_POOL_SIZE``).

    ``hide_parameters`` keeps bound values out of exception messages (and so out
    of logs): a failed statement never reveals the data it carried.

    SQLite: WAL journal, foreign keys on, and transactions opened by
    :func:`begin_write` start with ``BEGIN IMMEDIATE`` so that writers queue on
    the database lock (with a busy timeout) instead of failing when a read
    transaction would have to be upgraded after another writer committed.
    """
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_timeout=10,
            hide_parameters=True,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn, _record):
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):
            immediate = conn.get_execution_options().get("sqlite_immediate")
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=10,
        pool_use_lifo=True,
        hide_parameters=True,
        connect_args={"connect_timeout": 5},
    )

    @event.listens_for(engine, "connect")
    @event.listens_for(engine, "checkin")
    def _idle_from(_dbapi_conn, record):  # a new connection is known alive: no ping
        record.info["idle_from"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_conn, record, _proxy):
        idle_from = record.info.pop("idle_from", None)
        if idle_from is not None and time.monotonic() - idle_from < PING_AFTER_IDLE:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:  # the pool replaces its connections and tries again
            raise InvalidatePoolError() from exc
        if alive is False:
            raise InvalidatePoolError()

    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False, autoflush=False)


def begin_write(session: Session) -> None:
    """Start a write transaction (SQLite: ``BEGIN IMMEDIATE``).

    SQLite: a read transaction the session already has open (say, from
    authenticating the caller) is ended first — a SQLite reader upgraded to a
    writer fails when another writer committed in between — so it must not hold
    unflushed changes. Objects loaded before stay usable; re-read rows the write
    depends on. PostgreSQL (READ COMMITTED): every statement sees what committed
    before it started, so the open transaction simply continues as the write
    transaction — ending it would cost a COMMIT, a pool checkout with its ping
    and a BEGIN, a quarter of a single-answer request's round trips.
    """
    if session.in_transaction():
        if session.new or session.dirty or session.deleted:
            raise RuntimeError("begin_write() would commit unflushed changes")
        if session.get_bind().dialect.name != "sqlite":
            return
        session.commit()
    session.connection(execution_options={"sqlite_immediate": True})
