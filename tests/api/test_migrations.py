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


def test_upgrade_a_fresh_database_from_nothing(tmp_path):
    url = f"sqlite:///{tmp_path}/fresh.db"
    upgrade(url)
    engine = make_engine(url)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == "0001"
    engine.dispose()
