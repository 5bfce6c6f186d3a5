"""Random secrets of the service, shared by every instance through the database."""

from __future__ import annotations

import secrets

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from ..db.models import ServiceSecret, utcnow
from ..db.session import begin_write

__all__ = ["service_secret"]


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
