"""item archive: an item can be archived (retired for good, its answers kept)

``items.status`` takes "archived" too; ``surveys.archived``: the positions of a survey's
archived items (they are also in ``surveys.withheld``), left out of the item limits and of
the rankings. Downgrading makes archived items hidden again (still withheld, no longer
left out of the limits).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27 18:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.drop_constraint("ck_items_status", type_="check")
        batch.create_check_constraint("ck_items_status", "status IN ('live', 'hidden', 'review', 'archived')")
    with op.batch_alter_table("surveys") as batch:
        batch.add_column(sa.Column("archived", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.execute("UPDATE items SET status = 'hidden' WHERE status = 'archived'")
    with op.batch_alter_table("surveys") as batch:
        batch.drop_column("archived")
    with op.batch_alter_table("items") as batch:
        batch.drop_constraint("ck_items_status", type_="check")
        batch.create_check_constraint("ck_items_status", "status IN ('live', 'hidden', 'review')")
