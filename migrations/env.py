"""Alembic environment: the URL comes from privrank's settings (DATABASE_URL)
unless the caller put one in the config (``privrank migrate`` and the tests do)."""

from __future__ import annotations

from alembic import context

from app.core.config import get_settings
from app.core.db.models import Base
from app.core.db.session import make_engine

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or get_settings().database_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is None:
        engine = make_engine(_url())
        with engine.connect() as connection:
            _run(connection)
        engine.dispose()
    else:
        _run(connectable)


def _run(connection) -> None:
    # render_as_batch: SQLite cannot ALTER most constraints in place.
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        # A batch migration rebuilds a table by copy, drop and rename; with foreign keys
        # on, the drop would cascade into every child row. The pragma is a no-op inside
        # a transaction, so it goes to the driver before Alembic begins one; integrity
        # is checked with foreign_key_check before the migration commits.
        if connection.in_transaction():  # pragma: no cover - env always gets a fresh connection
            raise RuntimeError("SQLite migrations need a connection outside any transaction")
        connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
    try:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"the migration left rows with dangling foreign keys: {broken[:5]}")
    finally:
        if sqlite:
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
