"""release ledger: each release's first items in a column of their own

The ledger (``GET …/releases``) shows each release's first 10 items. Reading them
from ``result`` loaded every release's whole result (1.1 MB of JSON at 10,000 items)
to show ten; ``top`` holds them, written with the release and filled here for the
releases already stored.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Items of a release's result kept in ``top`` (app.releases.service.LEDGER_TOP).
TOP = 10


def upgrade() -> None:
    with op.batch_alter_table("releases") as batch:
        batch.add_column(sa.Column("top", sa.JSON(), nullable=True))
    releases = sa.table(
        "releases", sa.column("id", sa.String), sa.column("result", sa.JSON), sa.column("top", sa.JSON)
    )
    conn = op.get_bind()
    rows = conn.execute(sa.select(releases.c.id, releases.c.result)).all()
    for rid, result in rows:
        conn.execute(
            releases.update().where(releases.c.id == rid).values(top=(result or {}).get("items", [])[:TOP])
        )
    with op.batch_alter_table("releases") as batch:
        batch.alter_column("top", existing_type=sa.JSON(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("releases") as batch:
        batch.drop_column("top")
