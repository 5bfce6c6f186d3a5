"""Apply Alembic migrations programmatically (``privrank migrate``, ``privrank serve``)."""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config

from ..shipped import shipped

__all__ = ["alembic_config", "migrations_dir", "upgrade"]


def migrations_dir() -> Path:
    """The Alembic scripts' directory (:func:`app.core.shipped.shipped`), or
    ``PRIVRANK_MIGRATIONS_DIR``."""
    override = os.environ.get("PRIVRANK_MIGRATIONS_DIR")
    if override:
        return Path(override)
    return shipped("migrations")


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    # ConfigParser interpolation: a literal % in a URL must be doubled.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


#: PostgreSQL advisory lock held while migrating, so that several processes
#: starting at once (workers, replicas) migrate one after the other.
MIGRATION_LOCK = 0x70726976  # "priv"


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision``; a no-op when already there."""
    cfg = alembic_config(url)
    if not url.startswith("postgresql"):
        command.upgrade(cfg, revision)
        return
    from sqlalchemy import text

    from .session import make_engine

    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK})
            conn.commit()
            try:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, revision)
                conn.commit()
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK})
                conn.commit()
    finally:
        engine.dispose()
