"""What every table shares: the declarative base, UTC times, random ids (docs/service.md).

The tables are in this package's other modules, one per area; ``app.core.db.models``
re-exports them all.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Integer
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

from ....stats import entropy

__all__ = ["Base", "BigId", "UTCDateTime", "is_id", "new_id", "to_hour", "utcnow"]

# SQLite only auto-increments an INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer, "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_hour(t: datetime) -> datetime:
    """``t`` rounded down to the hour: the time kept or exported where an exact one could
    link rows (suggestions and their items, answers in exports)."""
    return t.replace(minute=0, second=0, microsecond=0)


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on every database (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC)
            if dialect.name == "sqlite":
                value = value.replace(tzinfo=None)
        return value

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


def new_id(prefix: str) -> str:
    """Opaque random id such as ``srv_k3j9x2mqa7b4c5d6`` (80 random bits)."""
    return f"{prefix}_{base64.b32encode(entropy.random_bytes(10)).decode().lower()}"


#: The random part of :func:`new_id`: 16 characters of lowercase base32.
_RANDOM_PART = re.compile(r"[a-z2-7]{16}")


def is_id(value: str, prefix: str) -> bool:
    """Whether ``value`` has the shape of an id :func:`new_id` makes with ``prefix``: any
    other string names nothing, and is answered without asking the database."""
    head, sep, tail = value.partition("_")
    return head == prefix and bool(sep) and _RANDOM_PART.fullmatch(tail) is not None


#: The path the tables are imported by (this package), which each table's class reports.
_PACKAGE = __name__.rpartition(".")[0]


class Base(DeclarativeBase):
    def __init_subclass__(cls, **kw: Any) -> None:
        # Each table's class is named by the package (app.core.db.models.Survey), whichever
        # of its modules defines it: the unit of work orders one flush's writes to tables
        # with no relationship() between them by that dotted name, so they go in the order
        # of the classes' names (a survey's row before its survey_stats row); reprs and
        # pickles name the path the code imports. It is set before the class is mapped, so
        # the tables' modules evaluate their annotations at once (no ``from __future__
        # import annotations``, which would have them looked up in the package).
        cls.__module__ = _PACKAGE
        super().__init_subclass__(**kw)
