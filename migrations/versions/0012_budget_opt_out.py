"""budget opt-out: a local survey's explicit choice of no per-respondent cap

``surveys.respondent_budget_unlimited``: true when the admin created the survey with
``"respondent_budget": "unlimited"``. New local surveys have a finite cap unless they opt
out this way; a survey stored with neither a cap nor the opt-out keeps its settings (no cap
applies) and the API shows its budget policy as "unset".

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27 15:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("surveys") as batch:
        batch.add_column(
            sa.Column("respondent_budget_unlimited", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("surveys") as batch:
        batch.drop_column("respondent_budget_unlimited")
