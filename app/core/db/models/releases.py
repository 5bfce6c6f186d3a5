"""Central-model releases (docs/mechanisms.md §2): immutable, each charged to the budget."""

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Float,
    ForeignKey,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, utcnow

__all__ = ["Release"]


class Release(Base):
    """A differentially private release of a central-model survey (immutable)."""

    __tablename__ = "releases"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), index=True)
    method: Mapped[str] = mapped_column(String(32))
    unit: Mapped[str] = mapped_column(String(16))
    epsilon: Mapped[float] = mapped_column(Float)
    #: The person-level ε the release guarantees on its own (at the survey's δ for a zCDP
    #: release); what a pure survey's budget is charged.
    cost: Mapped[float] = mapped_column(Float)
    #: zCDP releases (discrete Gaussian noisy counts): their ρ in ``unit``; NULL otherwise.
    rho: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: zCDP surveys: the person-level ρ the release was charged; NULL in pure surveys.
    cost_rho: Mapped[float | None] = mapped_column(Float, nullable=True)
    k: Mapped[int | None] = mapped_column(Integer, nullable=True)
    data_version: Mapped[int] = mapped_column(BigInteger)
    parameters: Mapped[dict] = mapped_column(JSON)
    result: Mapped[dict] = mapped_column(JSON)
    #: The result's first items, for the ledger (which never loads ``result``).
    top: Mapped[list] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(40))
    #: A retried request with the same key returns this release and spends nothing.
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        UniqueConstraint("survey_id", "idempotency_key", name="uq_releases_survey_idempotency_key"),
        CheckConstraint("method IN ('perturbed_mle', 'noisy_counts')", name="ck_releases_method"),
        CheckConstraint("unit IN ('edge', 'individual')", name="ck_releases_unit"),
        CheckConstraint("epsilon > 0 AND cost > 0", name="ck_releases_epsilon"),
        CheckConstraint(
            "(rho IS NULL OR rho > 0) AND (cost_rho IS NULL OR cost_rho > 0)", name="ck_releases_rho"
        ),
    )
