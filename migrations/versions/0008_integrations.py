"""integrations: server-to-server registration with an external id

``api_keys.role`` gains "integration" (a key that may only register respondents).
``respondents.external_key``: HMAC-SHA256 of (survey, external id) under the
``external_ids`` service secret, unique per survey; NULL for every other respondent.
The raw external id is never stored.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 02:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_constraint("ck_api_keys_role", type_="check")
        batch.create_check_constraint(
            "ck_api_keys_role", "role IN ('admin', 'analyst', 'moderator', 'integration')"
        )
    with op.batch_alter_table("respondents") as batch:
        batch.add_column(sa.Column("external_key", sa.String(64), nullable=True))
        batch.create_unique_constraint("uq_respondents_survey_external_key", ["survey_id", "external_key"])


def downgrade() -> None:
    with op.batch_alter_table("respondents") as batch:
        batch.drop_constraint("uq_respondents_survey_external_key", type_="unique")
        batch.drop_column("external_key")
    op.execute("DELETE FROM api_keys WHERE role = 'integration'")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_constraint("ck_api_keys_role", type_="check")
        batch.create_check_constraint("ck_api_keys_role", "role IN ('admin', 'analyst', 'moderator')")
