"""ranking surveys and federated rounds

Ranking surveys store one synthetic (Mallows-privatized) ranking per
respondent and fold their sufficient statistics into ``ranking_stats``;
federated rounds hold the sites' public keys and masked messages. Downgrading
drops these tables (and with them every stored ranking and round).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 18:14:55.499618
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "federated_rounds",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("n_sites", sa.Integer(), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("created_by", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("method IN ('borda', 'lehmer')", name="ck_federated_rounds_method"),
        sa.CheckConstraint("status IN ('open', 'complete', 'cancelled')", name="ck_federated_rounds_status"),
        sa.CheckConstraint("n_sites >= 2", name="ck_federated_rounds_sites"),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("federated_rounds", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_federated_rounds_survey_id"), ["survey_id"], unique=False)

    op.create_table(
        "ranking_stats",
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("survey_id"),
    )
    op.create_table(
        "rankings",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("respondent_id", sa.String(length=40), nullable=False),
        sa.Column("ordering", sa.JSON(), nullable=False),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("epsilon >= 0.001", name="ck_rankings_epsilon"),
        sa.ForeignKeyConstraint(["respondent_id"], ["respondents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("respondent_id", name="uq_rankings_respondent"),
    )
    with op.batch_alter_table("rankings", schema=None) as batch_op:
        batch_op.create_index("ix_rankings_survey_id_id", ["survey_id", "id"], unique=False)

    op.create_table(
        "round_sites",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("round_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("public_key", sa.String(length=64), nullable=True),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("masked", sa.LargeBinary(), nullable=True),
        sa.Column("masked_sha256", sa.String(length=64), nullable=True),
        sa.Column("contributed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["round_id"], ["federated_rounds.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("round_id", "name", name="uq_round_sites_round_name"),
        sa.UniqueConstraint("round_id", "position", name="uq_round_sites_round_position"),
    )
    with op.batch_alter_table("round_sites", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_round_sites_round_id"), ["round_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("round_sites", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_round_sites_round_id"))

    op.drop_table("round_sites")
    with op.batch_alter_table("rankings", schema=None) as batch_op:
        batch_op.drop_index("ix_rankings_survey_id_id")

    op.drop_table("rankings")
    op.drop_table("ranking_stats")
    with op.batch_alter_table("federated_rounds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_federated_rounds_survey_id"))

    op.drop_table("federated_rounds")
