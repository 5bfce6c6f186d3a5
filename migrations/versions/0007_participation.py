"""participatory surveys: suggestions, moderation, flags, public results, catch-up counts

``surveys.suggestions`` (JSON settings or NULL), ``surveys.public_results`` and
``surveys.results_on_finish``, ``surveys.withheld`` (positions of items not served:
hidden, or back in review). ``items.source`` ("seed", "added", "suggested"),
``items.status`` ("live", "hidden", "review"), ``items.flags``, ``items.approved_at``.
``suggestions``: the text of a proposal and its moderation, with no link to its author
(``received_at`` is kept to the hour). ``item_flags``: one keyed digest per flag, under a
key the database never holds (the respondent's token), so repeats count once.
``participation_slots``: a respondent's used suggestion and flag allowances, as digests
keyed with its token (no respondent column: the respondent's own row is never written
when it suggests or flags).
``survey_stats.item_counts``: comparisons per item (packed), for new items' catch-up.
``api_keys.role`` gains "moderator". Existing items are seeds, live.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("surveys") as batch:
        batch.add_column(sa.Column("suggestions", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("public_results", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(
            sa.Column("results_on_finish", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("withheld", sa.JSON(), nullable=True))
    with op.batch_alter_table("items") as batch:
        batch.add_column(sa.Column("source", sa.String(16), nullable=False, server_default="seed"))
        batch.add_column(sa.Column("status", sa.String(16), nullable=False, server_default="live"))
        batch.add_column(sa.Column("flags", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_check_constraint("ck_items_source", "source IN ('seed', 'added', 'suggested')")
        batch.create_check_constraint("ck_items_status", "status IN ('live', 'hidden', 'review')")
    with op.batch_alter_table("survey_stats") as batch:
        batch.add_column(sa.Column("item_counts", sa.LargeBinary(), nullable=True))
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_constraint("ck_api_keys_role", type_="check")
        batch.create_check_constraint("ck_api_keys_role", "role IN ('admin', 'analyst', 'moderator')")
    op.create_table(
        "suggestions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "survey_id", sa.String(40), sa.ForeignKey("surveys.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("label", sa.String(500), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(500), nullable=True),
        sa.Column("item_id", sa.String(40), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(40), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'approved', 'rejected', 'merged')", name="ck_suggestions_status"
        ),
    )
    op.create_index("ix_suggestions_survey_status", "suggestions", ["survey_id", "status"])
    op.create_table(
        "participation_slots",
        sa.Column(
            "survey_id", sa.String(40), sa.ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("digest", sa.String(64), primary_key=True),
    )
    op.create_table(
        "item_flags",
        sa.Column("item_id", sa.String(40), sa.ForeignKey("items.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("digest", sa.String(64), primary_key=True),
    )


def downgrade() -> None:
    op.drop_table("item_flags")
    op.drop_table("participation_slots")
    op.drop_index("ix_suggestions_survey_status", "suggestions")
    op.drop_table("suggestions")
    op.execute("DELETE FROM api_keys WHERE role = 'moderator'")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_constraint("ck_api_keys_role", type_="check")
        batch.create_check_constraint("ck_api_keys_role", "role IN ('admin', 'analyst')")
    with op.batch_alter_table("survey_stats") as batch:
        batch.drop_column("item_counts")
    with op.batch_alter_table("items") as batch:
        batch.drop_constraint("ck_items_status", type_="check")
        batch.drop_constraint("ck_items_source", type_="check")
        batch.drop_column("approved_at")
        batch.drop_column("flags")
        batch.drop_column("status")
        batch.drop_column("source")
    with op.batch_alter_table("surveys") as batch:
        batch.drop_column("withheld")
        batch.drop_column("results_on_finish")
        batch.drop_column("public_results")
        batch.drop_column("suggestions")
