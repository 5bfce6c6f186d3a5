"""Federated rounds and their sites (docs/federated.md): masked messages only."""

from datetime import datetime

from sqlalchemy import (
    JSON,
    CheckConstraint,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, utcnow

__all__ = ["FederatedRound", "RoundSite"]


class FederatedRound(Base):
    """A federated aggregation round of a ranking survey (Borda FRA or Lehmer FRA).

    Sites contribute masked messages; the server only ever holds masked vectors
    and, once every site is in, their sum (``result``).
    """

    __tablename__ = "federated_rounds"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), index=True)
    method: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="open")
    n_sites: Mapped[int] = mapped_column(Integer)
    #: The public parameters every site needs (items, φ, I, message layout).
    parameters: Mapped[dict] = mapped_column(JSON)
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    created_by: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    __table_args__ = (
        CheckConstraint("method IN ('borda', 'lehmer')", name="ck_federated_rounds_method"),
        CheckConstraint("status IN ('open', 'complete', 'cancelled')", name="ck_federated_rounds_status"),
        CheckConstraint("n_sites >= 2", name="ck_federated_rounds_sites"),
    )


class RoundSite(Base):
    """A participating site of a round: its credential, public key and masked message."""

    __tablename__ = "round_sites"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    round_id: Mapped[str] = mapped_column(ForeignKey("federated_rounds.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    #: 0-based index of the site in the round: fixes the sign of its pairwise masks.
    position: Mapped[int] = mapped_column(Integer)
    token_hash: Mapped[str] = mapped_column(String(64))
    #: X25519 public key (base64url), registered once.
    public_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    joined_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: The masked message (little-endian uint64 per entry) until the round ends.
    masked: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    #: SHA-256 of the masked message, kept after the round ends to recognize a retry.
    masked_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    contributed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: What the site declared with its message: "mallows" (local rankings privatized at
    #: ``epsilon``, ε-ranking DP) or "none"; NULL for contributions made before 0009.
    privatization: Mapped[str | None] = mapped_column(String(16), nullable=True)
    epsilon: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (
        UniqueConstraint("round_id", "name", name="uq_round_sites_round_name"),
        UniqueConstraint("round_id", "position", name="uq_round_sites_round_position"),
    )
