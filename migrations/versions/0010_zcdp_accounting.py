"""zcdp accounting: a central survey's privacy accounting, and each release's ρ

``surveys.accounting``: how a central survey's releases are charged — "pure" (the sum
of their person-level ε, basic composition) or "zcdp" (the sum of their person-level ρ,
shown as (ε, δ) at ``surveys.delta``); see docs/mechanisms.md §2.6. Existing surveys
keep "pure", and ``delta`` is NULL for them. ``releases.rho``: a zCDP release's ρ in its
unit (NULL for a pure ε-DP release); ``releases.cost_rho``: the person-level ρ a zCDP
survey was charged (NULL in pure surveys).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 15:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("surveys") as batch:
        batch.add_column(sa.Column("accounting", sa.String(8), nullable=False, server_default="pure"))
        batch.add_column(sa.Column("delta", sa.Float(), nullable=True))
        batch.create_check_constraint(
            "ck_surveys_accounting",
            "(accounting = 'pure' AND delta IS NULL) OR "
            "(accounting = 'zcdp' AND privacy_model = 'central' AND delta > 0 AND delta < 1)",
        )
    with op.batch_alter_table("releases") as batch:
        batch.add_column(sa.Column("rho", sa.Float(), nullable=True))
        batch.add_column(sa.Column("cost_rho", sa.Float(), nullable=True))
        batch.create_check_constraint(
            "ck_releases_rho", "(rho IS NULL OR rho > 0) AND (cost_rho IS NULL OR cost_rho > 0)"
        )


def downgrade() -> None:
    # A zCDP survey becomes a pure one and keeps its releases: each one's ``cost`` is the
    # person-level ε it guarantees alone, so the pure ledger charges their sum, more than
    # the ρ ledger did (no budget comes back).
    with op.batch_alter_table("releases") as batch:
        batch.drop_constraint("ck_releases_rho", type_="check")
        batch.drop_column("cost_rho")
        batch.drop_column("rho")
    with op.batch_alter_table("surveys") as batch:
        batch.drop_constraint("ck_surveys_accounting", type_="check")
        batch.drop_column("delta")
        batch.drop_column("accounting")
