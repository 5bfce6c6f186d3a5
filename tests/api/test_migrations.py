"""The schema exists only through Alembic, and the migrations match the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.db.migrate import upgrade
from app.db.models import Base
from app.db.session import make_engine


def test_migrations_create_exactly_the_models(database_url):
    engine = make_engine(database_url)
    try:
        upgrade(database_url)  # idempotent: already at head
        with engine.connect() as conn:
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata
            )
            tables = set(inspect(conn).get_table_names())
        assert diff == []
        assert {t.name for t in Base.metadata.sorted_tables} | {"alembic_version"} == tables
    finally:
        engine.dispose()


def _head() -> str:
    from alembic.script import ScriptDirectory

    from app.db.migrate import alembic_config

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def test_upgrade_a_fresh_database_from_nothing(tmp_path):
    url = f"sqlite:///{tmp_path}/fresh.db"
    upgrade(url)
    engine = make_engine(url)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == _head()
    engine.dispose()


def test_every_migration_downgrades_and_upgrades_again(database_url, tmp_path):
    """Walk the whole history down to nothing and back, on a scratch database of
    the same kind as the suite's."""
    from alembic import command

    from app.db.migrate import alembic_config

    if database_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path}/walk.db"
        drop = None
    else:
        from tests.api.conftest import fresh_postgres_database

        url, drop = fresh_postgres_database(database_url.rsplit("/", 1)[0] + "/test")
    try:
        upgrade(url)
        command.downgrade(alembic_config(url), "base")
        upgrade(url)
        engine = make_engine(url)
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == _head()
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata
            )
        engine.dispose()
        assert diff == []
    finally:
        if drop:
            drop()
