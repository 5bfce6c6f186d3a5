"""Admin keys kept in the database: rotating them, and retiring the one generated on first start.

On a first start without ``PRIVRANK_ADMIN_KEY`` the service mints an admin key and prints
it once (:func:`app.core.auth.ensure_admin_key`, label ``"generated on first start"``).
Once ``PRIVRANK_ADMIN_KEY`` is configured, :func:`revoke_generated_admin_keys` revokes
that key at start-up (``privrank serve`` / ``privrank migrate``). :func:`rotate_admin_key`
backs ``privrank admin-key rotate``: a new admin key in the database, every other
database-issued admin key revoked, in one transaction. Neither touches keys of other
roles (analyst, moderator, …), nor ``PRIVRANK_ADMIN_KEY`` itself (it lives in the
environment, not the database).
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from ..core.auth import ADMIN, mint_key
from ..core.db.models import ApiKey, utcnow
from ..core.db.session import begin_write

__all__ = ["GENERATED_LABEL", "ROTATED_LABEL", "revoke_generated_admin_keys", "rotate_admin_key"]

#: The label :func:`app.core.auth.ensure_admin_key` gives the key it generates.
GENERATED_LABEL = "generated on first start"
#: The label of keys minted by ``privrank admin-key rotate``.
ROTATED_LABEL = "minted by privrank admin-key rotate"


def _lock(session: Session) -> None:
    """Serialize with other processes minting admin keys (PostgreSQL; SQLite's
    ``BEGIN IMMEDIATE`` already does). Same lock as ``ensure_admin_key``."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": 0x6B6579})


def revoke_generated_admin_keys(session: Session, env_admin_key: str | None) -> list[str]:
    """With ``PRIVRANK_ADMIN_KEY`` configured, revoke the active admin keys generated on
    first start; returns their ids (empty when there were none or the variable is unset)."""
    if not env_admin_key:
        return []
    begin_write(session)
    try:
        _lock(session)
        rows = list(
            session.scalars(
                select(ApiKey)
                .where(ApiKey.role == ADMIN, ApiKey.label == GENERATED_LABEL, ApiKey.revoked_at.is_(None))
                .order_by(ApiKey.id)
            )
        )
        now = utcnow()
        for row in rows:
            row.revoked_at = now
        ids = [row.id for row in rows]
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return ids


def rotate_admin_key(session: Session, label: str = ROTATED_LABEL) -> tuple[str, str, list[str]]:
    """Mint a new admin key and revoke every other active database-issued admin key, in one
    transaction. Returns the new key's id, its plaintext (the only copy: only its hash is
    stored) and the ids of the keys revoked."""
    begin_write(session)
    try:
        _lock(session)
        others = list(
            session.scalars(
                select(ApiKey).where(ApiKey.role == ADMIN, ApiKey.revoked_at.is_(None)).order_by(ApiKey.id)
            )
        )
        row, plaintext = mint_key(session, ADMIN, label=label)
        now = utcnow()
        for other in others:
            other.revoked_at = now
        revoked = [other.id for other in others]
        new_id = row.id
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return new_id, plaintext, revoked
