"""Random secrets of the service, shared by every instance through the database."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from .db.models import ServiceSecret, utcnow
from .db.session import begin_write

__all__ = ["ServiceHmac", "service_secret"]


def service_secret(session_factory: sessionmaker[Session], name: str, size: int = 32) -> bytes:
    """The secret called ``name``: created (``size`` random bytes from the OS CSPRNG) by
    the first instance that asks, read by every other; concurrent first calls agree
    (one insert wins, the others read it)."""
    with session_factory() as session:
        found = session.scalar(select(ServiceSecret.value).where(ServiceSecret.name == name))
        if found is not None:
            return bytes(found)
        try:
            begin_write(session)
            session.add(ServiceSecret(name=name, value=secrets.token_bytes(size), created_at=utcnow()))
            session.commit()
        except IntegrityError:
            session.rollback()  # another instance created it first
        value = session.scalar(select(ServiceSecret.value).where(ServiceSecret.name == name))
        assert value is not None
        return bytes(value)


class ServiceHmac:
    """HMAC-SHA256 under the service secret called ``name``, read once, when first needed
    (every instance reads the same; concurrent first calls agree, :func:`service_secret`)."""

    def __init__(self, session_factory: sessionmaker[Session], name: str) -> None:
        self._session_factory = session_factory
        self._name = name
        self._secret: bytes | None = None

    def hmac(self, message: str) -> bytes:
        """The digest of ``message`` (UTF-8)."""
        if self._secret is None:
            self._secret = service_secret(self._session_factory, self._name)
        return hmac.new(self._secret, message.encode(), hashlib.sha256).digest()
