"""central model: releases, nullable epsilon bounds

Central-model surveys have a total privacy budget and a per-respondent
contribution bound instead of respondents' ε bounds; their stored comparisons are
true answers without ε. Downgrading deletes central surveys (their rows cannot
satisfy the old constraints).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 17:55:04.937366
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "releases",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("unit", sa.String(length=16), nullable=False),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("k", sa.Integer(), nullable=True),
        sa.Column("data_version", sa.BigInteger(), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=40), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("method IN ('perturbed_mle', 'noisy_counts')", name="ck_releases_method"),
        sa.CheckConstraint("unit IN ('edge', 'individual')", name="ck_releases_unit"),
        sa.CheckConstraint("epsilon > 0 AND cost > 0", name="ck_releases_epsilon"),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("survey_id", "idempotency_key", name="uq_releases_survey_idempotency_key"),
    )
    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_releases_survey_id"), ["survey_id"], unique=False)

    with op.batch_alter_table("comparisons", schema=None) as batch_op:
        batch_op.alter_column("epsilon", existing_type=sa.FLOAT(), nullable=True)

    with op.batch_alter_table("respondents", schema=None) as batch_op:
        batch_op.alter_column("epsilon", existing_type=sa.FLOAT(), nullable=True)
        batch_op.drop_constraint("ck_respondents_epsilon", type_="check")
        batch_op.create_check_constraint("ck_respondents_epsilon", "epsilon IS NULL OR epsilon >= 0.001")

    with op.batch_alter_table("surveys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("total_budget", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("max_comparisons", sa.Integer(), nullable=True))
        batch_op.alter_column("epsilon_default", existing_type=sa.FLOAT(), nullable=True)
        batch_op.alter_column("epsilon_min", existing_type=sa.FLOAT(), nullable=True)
        batch_op.alter_column("epsilon_max", existing_type=sa.FLOAT(), nullable=True)
        batch_op.drop_constraint("ck_surveys_epsilon_bounds", type_="check")
        batch_op.create_check_constraint(
            "ck_surveys_privacy",
            "(privacy_model = 'local' AND epsilon_min >= 0.001 AND epsilon_min <= epsilon_default "
            "AND epsilon_default <= epsilon_max) OR "
            "(privacy_model = 'central' AND total_budget > 0 AND max_comparisons >= 1)",
        )


def downgrade() -> None:
    # Delete central surveys with their dependent rows explicitly: SQLite migrations run
    # with foreign keys off (table rebuilds would otherwise cascade), so nothing cascades.
    central = "(SELECT id FROM surveys WHERE privacy_model = 'central')"
    op.execute(
        "DELETE FROM idempotency_keys WHERE respondent_id IN "
        f"(SELECT id FROM respondents WHERE survey_id IN {central})"
    )
    for table in (
        "releases",
        "comparisons",
        "pending_batches",
        "pair_stats",
        "survey_stats",
        "respondents",
        "items",
    ):
        op.execute(f"DELETE FROM {table} WHERE survey_id IN {central}")
    op.execute("DELETE FROM surveys WHERE privacy_model = 'central'")
    with op.batch_alter_table("surveys", schema=None) as batch_op:
        batch_op.drop_constraint("ck_surveys_privacy", type_="check")
        batch_op.create_check_constraint(
            "ck_surveys_epsilon_bounds",
            "epsilon_min >= 0.001 AND epsilon_min <= epsilon_default AND epsilon_default <= epsilon_max",
        )
        batch_op.alter_column("epsilon_max", existing_type=sa.FLOAT(), nullable=False)
        batch_op.alter_column("epsilon_min", existing_type=sa.FLOAT(), nullable=False)
        batch_op.alter_column("epsilon_default", existing_type=sa.FLOAT(), nullable=False)
        batch_op.drop_column("max_comparisons")
        batch_op.drop_column("total_budget")

    with op.batch_alter_table("respondents", schema=None) as batch_op:
        batch_op.drop_constraint("ck_respondents_epsilon", type_="check")
        batch_op.create_check_constraint("ck_respondents_epsilon", "epsilon >= 0.001")
        batch_op.alter_column("epsilon", existing_type=sa.FLOAT(), nullable=False)

    with op.batch_alter_table("comparisons", schema=None) as batch_op:
        batch_op.alter_column("epsilon", existing_type=sa.FLOAT(), nullable=False)

    with op.batch_alter_table("releases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_releases_survey_id"))

    op.drop_table("releases")
