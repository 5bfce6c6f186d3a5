"""``Idempotency-Key``: a retried request gets its first answer and stores nothing new.

A request that stores answers may carry a key. Its first answer (a :class:`Receipt`) is
kept with the key, in the same transaction as the answers, together with a
fingerprint of the request's *shape*: a retry with the same key and shape gets the
receipt again (``replayed``); the same key with another shape is a conflict. The
fingerprint never covers answers, nor anything correlated with them (the order of a
batch's comparisons, which item came first, which items a partial ranking lists): a
hash cannot hide a one-bit answer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from .db.models import IdempotencyRecord
from .errors import Conflict

__all__ = ["Receipt", "Stored", "fingerprint", "lookup", "record", "remember", "replay", "replayed"]


@dataclass(frozen=True)
class Receipt:
    """What a respondent's request bought: the answers accepted and the budget after it."""

    accepted: int
    #: ε this request spent, and the respondent's total after it (local model; else None).
    epsilon_spent: float | None
    epsilon_total: float | None
    #: What remains of the respondent's budget (None: no budget set, or central model).
    budget_remaining: float | None
    #: Central model: answers the respondent may still give (at most L in all).
    comparisons_remaining: int | None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Stored:
    """The outcome of a storing request: its receipt, and whether it was a retry's replay."""

    receipt: Receipt
    replayed: bool = False


def fingerprint(**shape: object) -> str:
    """SHA-256 of a request's shape (JSON with sorted keys): never pass answers."""
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


def replay(session: Session, respondent_id: str, key: str | None, shape: str) -> Stored | None:
    """The first answer to an earlier request with this key (None: there was none); 409 if
    that request had another shape."""
    if key is None:
        return None
    record = session.execute(lookup(respondent_id, key)).one_or_none()
    return None if record is None else replayed(record.fingerprint, record.response, shape)


def lookup(respondent_id: str, key: str | None) -> Select:
    """The key's record as (fingerprint, response): two columns by a Core select, no ORM
    object for the (usual) miss or the hit."""
    table = IdempotencyRecord.__table__.c
    return select(table.fingerprint, table.response).where(
        table.respondent_id == respondent_id, table.key == key
    )


def replayed(fingerprint: str, response: dict, shape: str) -> Stored:
    """The replay of a key's record (:func:`lookup`) for a request of ``shape``; 409 if the
    record's request had another shape."""
    if fingerprint != shape:
        raise Conflict("this Idempotency-Key was already used for a different request")
    return Stored(Receipt(**response), replayed=True)


def record(respondent_id: str, key: str, shape: str, receipt: Receipt) -> dict:
    """The row :func:`remember` adds (for callers that insert it themselves, in bulk)."""
    return {
        "respondent_id": respondent_id,
        "key": key,
        "fingerprint": shape,
        "status_code": 201,  # kept for the records written before receipts were typed
        "response": receipt.as_dict(),
    }


def remember(session: Session, respondent_id: str, key: str | None, shape: str, receipt: Receipt) -> None:
    """Keep the receipt of a request sent with a key, in its transaction."""
    if key is not None:
        session.add(IdempotencyRecord(**record(respondent_id, key, shape, receipt)))
