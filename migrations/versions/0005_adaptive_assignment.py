"""adaptive assignment and goals: how a survey serves pairs, and when it is done

``surveys.assignment`` ("balanced" or "adaptive"), ``surveys.goal`` (JSON: the top-K
set or the whole ranking, at a level), ``surveys.ticket_key`` (the key of the tickets
that vouch for served pairs), and ``survey_stats.goal_state`` (the confidence
sequences' state, packed). Existing surveys are balanced and have no goal.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 18:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("surveys") as batch:
        batch.add_column(sa.Column("assignment", sa.String(16), nullable=False, server_default="balanced"))
        batch.add_column(sa.Column("goal", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("ticket_key", sa.String(64), nullable=True))
        batch.create_check_constraint("ck_surveys_assignment", "assignment IN ('balanced', 'adaptive')")
    with op.batch_alter_table("survey_stats") as batch:
        batch.add_column(sa.Column("goal_state", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("survey_stats") as batch:
        batch.drop_column("goal_state")
    with op.batch_alter_table("surveys") as batch:
        batch.drop_constraint("ck_surveys_assignment", type_="check")
        batch.drop_column("ticket_key")
        batch.drop_column("goal")
        batch.drop_column("assignment")
