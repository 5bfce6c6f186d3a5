"""Keys, tokens and who is calling.

Secrets are ``<id>.<secret>``: the id selects the row, and only SHA-256 of the
secret is stored and compared with :func:`hmac.compare_digest` (constant time).
Admin, analyst, moderator and integration keys have ids ``key_…``; respondent tokens carry the
respondent id (``rsp_…``); federated sites' credentials the site id
(``sit_…``). The optional ``PRIVRANK_ADMIN_KEY`` is any string, compared the
same way.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from .db.models import ApiKey, Respondent, RoundSite, Survey, new_id, utcnow
from .db.session import begin_write
from .errors import Conflict, NotFound, Unauthorized

__all__ = [
    "ADMIN",
    "ANALYST",
    "INTEGRATION",
    "MODERATOR",
    "RESPONDENT",
    "SITE",
    "Principal",
    "authenticate",
    "create_key",
    "ensure_admin_key",
    "hash_secret",
    "list_keys",
    "mint_key",
    "new_secret",
    "respondent_of",
    "revoke_key",
    "site_of",
]

ADMIN, ANALYST, RESPONDENT, SITE = "admin", "analyst", "respondent", "site"
#: Curates a participatory survey's suggestions and items; reads surveys, nothing else.
MODERATOR = "moderator"
#: Another service registering respondents server-to-server (with an ``external_id``);
#: nothing else.
INTEGRATION = "integration"
#: Shape of the ids :func:`~app.core.db.models.new_id` makes.
_ID = re.compile(r"(key|rsp|sit)_[a-z2-7]{16}")


@dataclass(frozen=True)
class Principal:
    """The authenticated caller."""

    role: str
    key_id: str | None = None
    respondent_id: str | None = None
    survey_id: str | None = None
    site_id: str | None = None
    #: The respondent's row as authentication loaded it (:func:`respondent_of` takes it
    #: instead of reading it again: a session's identity map holds its rows weakly).
    respondent: Respondent | None = field(default=None, compare=False, repr=False)
    #: The respondent's survey, loaded with it (the same reason).
    survey: Survey | None = field(default=None, compare=False, repr=False)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def mint_key(session: Session, role: str, label: str | None = None) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the only copy of the plaintext key."""
    secret = new_secret()
    row = ApiKey(id=new_id("key"), role=role, secret_hash=hash_secret(secret), label=label)
    session.add(row)
    return row, f"{row.id}.{secret}"


def create_key(session: Session, label: str | None = None, role: str = ANALYST) -> tuple[ApiKey, str]:
    """Mint an analyst, moderator or integration key in a transaction of its own; returns
    the row and the only copy of the plaintext key."""
    if role not in (ANALYST, MODERATOR, INTEGRATION):
        raise ValueError(f"keys minted over the API are analyst, moderator or integration keys, not {role!r}")
    begin_write(session)
    try:
        row, plaintext = mint_key(session, role, label)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return row, plaintext


def list_keys(session: Session, limit: int = 100, offset: int = 0) -> tuple[list[ApiKey], int]:
    """A page of the keys, newest first, and how many there are."""
    total = session.scalar(select(func.count()).select_from(ApiKey))
    rows = session.scalars(
        select(ApiKey).order_by(ApiKey.created_at.desc(), ApiKey.id).limit(limit).offset(offset)
    )
    return list(rows), int(total or 0)


def revoke_key(session: Session, key_id: str, env_admin_key: str | None = None) -> ApiKey:
    """Revoke a key; the last active admin key cannot go (without
    ``PRIVRANK_ADMIN_KEY`` nobody could administer the service any more)."""
    if not _ID.fullmatch(key_id):
        raise NotFound(f"no key {key_id!r}")
    begin_write(session)
    row = session.get(ApiKey, key_id, with_for_update=True)
    if row is None:
        raise NotFound(f"no key {key_id!r}")
    if row.revoked_at is None:
        if row.role == ADMIN and not env_admin_key:
            others = session.scalar(
                select(func.count())
                .select_from(ApiKey)
                .where(ApiKey.role == ADMIN, ApiKey.revoked_at.is_(None), ApiKey.id != row.id)
            )
            if not others:
                raise Conflict(
                    "this is the last admin key: replace it with `privrank admin-key rotate` (which "
                    "revokes it), or set PRIVRANK_ADMIN_KEY first"
                )
        row.revoked_at = utcnow()
    session.commit()
    return row


def ensure_admin_key(session: Session, env_admin_key: str | None) -> str | None:
    """Generate an admin key on first start when ``PRIVRANK_ADMIN_KEY`` is unset.

    Returns the plaintext exactly once (to be printed); None when an admin key
    already exists or comes from the environment.
    """
    if env_admin_key:
        return None
    begin_write(session)
    if session.get_bind().dialect.name == "postgresql":
        # Two processes starting together must not both mint (and print) a key.
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": 0x6B6579})
    exists = session.scalar(
        select(ApiKey.id).where(ApiKey.role == ADMIN, ApiKey.revoked_at.is_(None)).limit(1)
    )
    if exists:
        session.rollback()
        return None
    _, plaintext = mint_key(session, ADMIN, label="generated on first start")
    session.commit()
    return plaintext


def _matches(stored_hash: str | None, secret: str) -> bool:
    if not stored_hash:
        return False
    return hmac.compare_digest(stored_hash, hash_secret(secret))


def authenticate(session: Session, token: str, env_admin_key: str | None) -> Principal | None:
    """The principal a bearer token stands for, or None."""
    if env_admin_key and hmac.compare_digest(hash_secret(token), hash_secret(env_admin_key)):
        return Principal(ADMIN)
    ident, sep, secret = token.partition(".")
    if not sep or not secret or not _ID.fullmatch(ident):
        return None
    if ident.startswith("key_"):
        key = session.get(ApiKey, ident)
        if key is not None and key.revoked_at is None and _matches(key.secret_hash, secret):
            return Principal(key.role, key_id=key.id)
        return None
    if ident.startswith("rsp_"):
        # With its survey, which every call a respondent may make reads next (one query).
        row = session.execute(
            select(Respondent, Survey)
            .join(Survey, Survey.id == Respondent.survey_id)
            .where(Respondent.id == ident)
        ).first()
        if row is not None and _matches(row[0].token_hash, secret):
            resp, survey = row
            return Principal(
                RESPONDENT, respondent_id=resp.id, survey_id=resp.survey_id, respondent=resp, survey=survey
            )
    if ident.startswith("sit_"):
        site = session.get(RoundSite, ident)
        if site is not None and _matches(site.token_hash, secret):
            return Principal(SITE, site_id=site.id)
    return None


def respondent_of(session: Session, who: Principal) -> Respondent:
    """The respondent a respondent token stands for (401 if it is gone meanwhile)."""
    if who.respondent is not None and who.respondent in session:
        return who.respondent
    row = session.get(Respondent, who.respondent_id) if who.respondent_id else None
    if row is None:
        raise Unauthorized("invalid or expired credentials")
    return row


def site_of(session: Session, who: Principal) -> RoundSite:
    """The federated site a site credential stands for (401 if it is gone meanwhile)."""
    row = session.get(RoundSite, who.site_id) if who.site_id else None
    if row is None:
        raise Unauthorized("invalid or expired credentials")
    return row
