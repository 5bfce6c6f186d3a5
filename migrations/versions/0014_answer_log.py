"""answer log: each fold's answers with who gave them, for the cluster-robust sums

``answer_log``: one row per fold of a survey's pending batches, the folded answers with
their respondents, at the version the fold gave the survey. ``survey_stats.answer_log``:
whether every folded answer of the survey is in the log. Surveys with answers folded
before this revision (or answers waiting to be folded, which do not say who gave them)
get false: their next ranking starts their log from ``comparisons``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "answer_log",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column(
            "survey_id", sa.String(40), sa.ForeignKey("surveys.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.UniqueConstraint("survey_id", "version", name="uq_answer_log_survey_version"),
    )
    with op.batch_alter_table("survey_stats") as batch:
        batch.add_column(sa.Column("answer_log", sa.Boolean(), nullable=False, server_default=sa.true()))
    op.execute(
        "UPDATE survey_stats SET answer_log = false WHERE n_comparisons > 0 OR EXISTS "
        "(SELECT 1 FROM pending_batches p WHERE p.survey_id = survey_stats.survey_id)"
    )


def downgrade() -> None:
    with op.batch_alter_table("survey_stats") as batch:
        batch.drop_column("answer_log")
    op.drop_table("answer_log")
