"""held contributions: suggestions and flags published in batches

``held_contributions``: a suggestion or flag waiting until respondents of ``batch``
different tokens have one waiting (app.participation.suggestions); deleted when its batch is
published. Surveys that take suggestions get ``suggestions.batch`` = 5, the default.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 15:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The default batch of app.surveys.service (a migration keeps its own copy).
BATCH = 5


def upgrade() -> None:
    op.create_table(
        "held_contributions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "survey_id", sa.String(40), sa.ForeignKey("surveys.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("author", sa.String(64), nullable=False),
        sa.Column("label", sa.String(500), nullable=True),
        sa.Column("item_id", sa.String(40), nullable=True),
        sa.Column("digest", sa.String(64), nullable=True),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("moderation", sa.String(16), nullable=False),
        sa.CheckConstraint("kind IN ('suggestion', 'flag')", name="ck_held_contributions_kind"),
        sa.CheckConstraint("moderation IN ('before', 'after')", name="ck_held_contributions_moderation"),
    )
    op.create_index("ix_held_contributions_survey_kind", "held_contributions", ["survey_id", "kind"])
    surveys = sa.table("surveys", sa.column("id", sa.String), sa.column("suggestions", sa.JSON))
    conn = op.get_bind()
    for sid, settings in conn.execute(sa.select(surveys.c.id, surveys.c.suggestions)).all():
        if settings and "batch" not in settings:
            conn.execute(
                surveys.update().where(surveys.c.id == sid).values(suggestions={**settings, "batch": BATCH})
            )


def downgrade() -> None:
    op.drop_index("ix_held_contributions_survey_kind", "held_contributions")
    op.drop_table("held_contributions")
