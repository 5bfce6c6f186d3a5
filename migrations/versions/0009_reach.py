"""reach: languages, embedding, and a federated site's declared ε

``surveys.language``: the survey's default language for respondents (a catalog code such
as "en", "es", "de", "fr"); ``?lang=`` and ``Accept-Language`` choose among the catalogs
first. ``surveys.embed_origins``: the origins allowed to frame the respondent page
(a JSON list; NULL or []: none, ``frame-ancestors 'none'``).
``items.translations``: {language: label} for the item's label in other languages.
``round_sites.epsilon`` / ``round_sites.privatization``: what a site declared with its
masked message ("mallows" with its ε, or "none"); NULL for contributions made before.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 04:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("surveys") as batch:
        batch.add_column(sa.Column("language", sa.String(16), nullable=False, server_default="en"))
        batch.add_column(sa.Column("embed_origins", sa.JSON(), nullable=True))
    with op.batch_alter_table("items") as batch:
        batch.add_column(sa.Column("translations", sa.JSON(), nullable=True))
    with op.batch_alter_table("round_sites") as batch:
        batch.add_column(sa.Column("epsilon", sa.Float(), nullable=True))
        batch.add_column(sa.Column("privatization", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("round_sites") as batch:
        batch.drop_column("privatization")
        batch.drop_column("epsilon")
    with op.batch_alter_table("items") as batch:
        batch.drop_column("translations")
    with op.batch_alter_table("surveys") as batch:
        batch.drop_column("embed_origins")
        batch.drop_column("language")
