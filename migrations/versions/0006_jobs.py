"""jobs (long analyses run outside the request), service secrets, "can't decide" counts

One row per job (``app.jobs.service``): kind, parameters, status, progress, result,
the runner holding it and its heartbeat. ``service_secrets``: random secrets every
instance shares through the database (the salt of the rate limits' Redis keys).
``undecided_counts``: a survey's count of "can't decide" answers, in shards.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 21:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("survey_id", sa.String(40), sa.ForeignKey("surveys.id", ondelete="CASCADE"), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.String(500), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("runner", sa.String(120), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_by", sa.String(40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('ranking', 'bootstrap', 'plan', 'design')", name="ck_jobs_kind"),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'done', 'failed', 'cancelled')", name="ck_jobs_status"
        ),
        sa.CheckConstraint("progress >= 0 AND progress <= 1", name="ck_jobs_progress"),
    )
    op.create_index("ix_jobs_survey_id", "jobs", ["survey_id"])
    op.create_index("ix_jobs_status_heartbeat", "jobs", ["status", "heartbeat_at"])
    op.create_table(
        "service_secrets",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )

    op.create_table(
        "undecided_counts",
        sa.Column(
            "survey_id", sa.String(40), sa.ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("shard", sa.SmallInteger(), primary_key=True),
        sa.Column("n", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("undecided_counts")
    op.drop_table("service_secrets")
    op.drop_index("ix_jobs_status_heartbeat", "jobs")
    op.drop_index("ix_jobs_survey_id", "jobs")
    op.drop_table("jobs")
