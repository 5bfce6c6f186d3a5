"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-21 16:58:03.689973
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("role IN ('admin', 'analyst')", name="ck_api_keys_role"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "surveys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("privacy_model", sa.String(length=16), nullable=False),
        sa.Column("epsilon_default", sa.Float(), nullable=False),
        sa.Column("epsilon_min", sa.Float(), nullable=False),
        sa.Column("epsilon_max", sa.Float(), nullable=False),
        sa.Column("respondent_budget", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('pairwise', 'ranking')", name="ck_surveys_kind"),
        sa.CheckConstraint("privacy_model IN ('local', 'central')", name="ck_surveys_privacy_model"),
        sa.CheckConstraint("status IN ('open', 'closed')", name="ck_surveys_status"),
        sa.CheckConstraint(
            "epsilon_min >= 0.001 AND epsilon_min <= epsilon_default AND epsilon_default <= epsilon_max",
            name="ck_surveys_epsilon_bounds",
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "items",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=500), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("survey_id", "label", name="uq_items_survey_label"),
        sa.UniqueConstraint("survey_id", "position", name="uq_items_survey_position"),
    )
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_items_survey_id"), ["survey_id"], unique=False)

    op.create_table(
        "pair_stats",
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("i", sa.Integer(), nullable=False),
        sa.Column("j", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("sum_y", sa.Float(), nullable=False),
        sa.Column("sum_z", sa.Float(), nullable=False),
        sa.Column("sum_z2", sa.Float(), nullable=False),
        sa.Column("sum_v", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("survey_id", "i", "j"),
    )
    op.create_table(
        "pending_batches",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("pending_batches", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pending_batches_survey_id"), ["survey_id"], unique=False)

    op.create_table(
        "respondents",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=True),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("epsilon_spent", sa.Float(), nullable=False),
        sa.Column("n_comparisons", sa.Integer(), nullable=False),
        sa.Column("external_ref", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("epsilon >= 0.001", name="ck_respondents_epsilon"),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("survey_id", "external_ref", name="uq_respondents_survey_external_ref"),
    )
    with op.batch_alter_table("respondents", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_respondents_survey_id"), ["survey_id"], unique=False)

    op.create_table(
        "survey_stats",
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("n_comparisons", sa.BigInteger(), nullable=False),
        sa.Column("epsilon_min", sa.Float(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("survey_id"),
    )
    op.create_table(
        "comparisons",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("survey_id", sa.String(length=40), nullable=False),
        sa.Column("respondent_id", sa.String(length=40), nullable=False),
        sa.Column("i", sa.Integer(), nullable=False),
        sa.Column("j", sa.Integer(), nullable=False),
        sa.Column("y_tilde", sa.SmallInteger(), nullable=False),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("i < j", name="ck_comparisons_orientation"),
        sa.CheckConstraint("y_tilde IN (0, 1)", name="ck_comparisons_y_tilde"),
        sa.ForeignKeyConstraint(["respondent_id"], ["respondents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["survey_id"], ["surveys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("respondent_id", "i", "j", name="uq_comparisons_respondent_pair"),
    )
    with op.batch_alter_table("comparisons", schema=None) as batch_op:
        batch_op.create_index("ix_comparisons_survey_id_id", ["survey_id", "id"], unique=False)

    op.create_table(
        "idempotency_keys",
        sa.Column("respondent_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["respondent_id"], ["respondents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("respondent_id", "key"),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    with op.batch_alter_table("comparisons", schema=None) as batch_op:
        batch_op.drop_index("ix_comparisons_survey_id_id")

    op.drop_table("comparisons")
    op.drop_table("survey_stats")
    with op.batch_alter_table("respondents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_respondents_survey_id"))

    op.drop_table("respondents")
    with op.batch_alter_table("pending_batches", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pending_batches_survey_id"))

    op.drop_table("pending_batches")
    op.drop_table("pair_stats")
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_items_survey_id"))

    op.drop_table("items")
    op.drop_table("surveys")
    op.drop_table("api_keys")
