"""The service's own records: API keys, idempotency records, long jobs, shared secrets.

Keys and idempotency: docs/reference/api.md; jobs: docs/how-to/jobs.md.
"""

from datetime import datetime

from sqlalchemy import JSON, CheckConstraint, Float, ForeignKey, Index, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, utcnow

__all__ = ["ApiKey", "IdempotencyRecord", "Job", "ServiceSecret"]


class ApiKey(Base):
    """Admin, analyst, moderator and integration keys: ``key_<id>.<secret>``; only
    SHA-256(secret) is stored."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    secret_hash: Mapped[str] = mapped_column(String(64))
    label: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    __table_args__ = (
        CheckConstraint("role IN ('admin', 'analyst', 'moderator', 'integration')", name="ck_api_keys_role"),
    )


class IdempotencyRecord(Base):
    """The first answer to a request sent with an ``Idempotency-Key``."""

    __tablename__ = "idempotency_keys"

    respondent_id: Mapped[str] = mapped_column(
        ForeignKey("respondents.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    #: SHA-256 of the request's non-sensitive shape (pairs, mode, ε) — never of answers.
    fingerprint: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int] = mapped_column(Integer)
    response: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Job(Base):
    """A long analysis run outside the request (app.jobs.service): its parameters,
    where it stands, and its result. The row is the job's one source of truth: any
    instance reads it, any runner claims it (``queued`` → ``running``, one UPDATE),
    and a runner that stops heartbeating loses it (retried, or failed)."""

    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    #: The survey analysed; NULL for a design plan (GET /v1/plan: no survey yet).
    survey_id: Mapped[str | None] = mapped_column(
        ForeignKey("surveys.id", ondelete="CASCADE"), index=True, nullable=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    parameters: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    #: Why it failed: a plain message of the service's own (never data).
    error: Mapped[str | None] = mapped_column(String(500), nullable=True)
    #: How many times a runner claimed it (a lost runner's job is retried once).
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    #: The runner holding it (host, process, thread), and when it last said so.
    runner: Mapped[str | None] = mapped_column(String(120), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_by: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    __table_args__ = (
        CheckConstraint("kind IN ('ranking', 'bootstrap', 'plan', 'design')", name="ck_jobs_kind"),
        CheckConstraint(
            "status IN ('queued', 'running', 'done', 'failed', 'cancelled')", name="ck_jobs_status"
        ),
        CheckConstraint("progress >= 0 AND progress <= 1", name="ck_jobs_progress"),
        Index("ix_jobs_status_heartbeat", "status", "heartbeat_at"),
    )


class ServiceSecret(Base):
    """A random secret of the service, shared by every instance through the database
    (e.g. the salt of the rate limits' keys in Redis: kept out of Redis on purpose)."""

    __tablename__ = "service_secrets"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    value: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
