"""Settings, read once from the environment (pydantic-settings)."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .limits import MAX_BATCH, MAX_BATCH_CEILING

__all__ = ["Settings", "get_settings", "normalize_database_url", "setting_from_environment"]


def normalize_database_url(url: str) -> str:
    """Accept ``postgres://`` / ``postgresql://`` URLs and use the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Settings(BaseSettings):
    """Service configuration. Every field maps to an environment variable."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore", populate_by_name=True)

    database_url: str = Field(
        default="sqlite:///./privrank.db",
        validation_alias="DATABASE_URL",
        description="SQLAlchemy URL; SQLite file in the working directory by default.",
    )
    admin_key: str | None = Field(
        default=None,
        validation_alias="PRIVRANK_ADMIN_KEY",
        description="Admin bearer key. When unset, `privrank serve` generates one on first start.",
    )
    cors_origins: str = Field(
        default="",
        validation_alias="PRIVRANK_CORS_ORIGINS",
        description="Comma-separated origins allowed to call the API from a browser ('*' for any).",
    )
    max_batch: int = Field(
        default=MAX_BATCH,
        validation_alias="PRIVRANK_MAX_BATCH",
        ge=1,
        le=MAX_BATCH_CEILING,
        description="Most comparisons per POST …/responses (the request schema accepts up to the ceiling).",
    )
    redis_url: str | None = Field(
        default=None,
        validation_alias="REDIS_URL",
        description="Redis URL (redis://host:6379/0). When set, rate limits are shared by every "
        "worker and instance through it; without it (the default) each worker keeps its own. "
        "While Redis is unreachable the limits fall back to per-worker ones, with a warning.",
    )
    job_queue: Literal["local", "rq"] = Field(
        default="local",
        validation_alias="PRIVRANK_JOB_QUEUE",
        description="Where jobs (POST /v1/surveys/{sid}/jobs) run: 'local' (default), a bounded pool of "
        "threads in each API process; 'rq', an RQ queue in REDIS_URL's Redis, run by `privrank worker`.",
    )
    inline_seconds: float = Field(
        default=10.0,
        validation_alias="PRIVRANK_INLINE_SECONDS",
        ge=0,
        le=86_400,
        description="GET …/ranking?uncertainty=bootstrap and GET …/plan predicted to take longer than "
        "this run as jobs: 202 with the job and its Location instead of the result (0: always).",
    )
    job_seconds: float = Field(
        default=3600.0,
        validation_alias="PRIVRANK_JOB_SECONDS",
        gt=0,
        le=7 * 86_400,
        description="Time budget of one job (it fails beyond it).",
    )
    job_threads: int = Field(
        default=1,
        validation_alias="PRIVRANK_JOB_THREADS",
        ge=1,
        le=64,
        description="Jobs running at once per API process with PRIVRANK_JOB_QUEUE=local.",
    )
    job_backlog: int = Field(
        default=100,
        validation_alias="PRIVRANK_JOB_BACKLOG",
        ge=1,
        le=100_000,
        description="Jobs queued or running in the whole service (and waiting in one API process with "
        "PRIVRANK_JOB_QUEUE=local); one more gets 503 and stores nothing.",
    )
    job_stale_seconds: float = Field(
        default=30.0,
        validation_alias="PRIVRANK_JOB_STALE_SECONDS",
        ge=6,
        le=86_400,
        description="A running job whose runner has not written its heartbeat (every 2 s) for this long "
        "is lost: queued again once, then failed. Read from the environment when a process starts; give "
        "every API process and worker of the service the same value. On SQLite keep the default: a "
        "heartbeat may wait up to 30 s for the write lock.",
    )
    log_level: str = Field(
        default="info",
        validation_alias="PRIVRANK_LOG_LEVEL",
        description="Log level of the service's and uvicorn's loggers: critical, error, warning, info "
        "or debug.",
    )
    access_log: bool = Field(
        default=False,
        validation_alias="PRIVRANK_ACCESS_LOG",
        description="Log one line per request (client address, method, path, status). Off by default: "
        "a respondent's address next to their survey is personal data the service does not need.",
    )
    db_pool_size: int = Field(
        default=10,
        validation_alias="PRIVRANK_DB_POOL_SIZE",
        ge=1,
        le=1000,
        description="Pooled database connections per worker (as many again may overflow); "
        "min(2 × this − 1, 32) API requests run at once per worker, the rest queue.",
    )
    max_queue: int = Field(
        default=1000,
        validation_alias="PRIVRANK_MAX_QUEUE",
        ge=0,
        le=1_000_000,
        description="API requests that may wait for their turn per worker; one more gets 503 "
        "with Retry-After at once.",
    )
    forwarded_allow_ips: str = Field(
        default="",
        validation_alias="PRIVRANK_FORWARDED_ALLOW_IPS",
        description="Comma-separated proxy addresses (or '*') whose X-Forwarded-For and "
        "X-Forwarded-Proto are trusted for the client's address (rate limits). Empty: none, "
        "the connection's peer is the client.",
    )
    max_body_bytes: int = Field(
        default=8 * 2**20,
        validation_alias="PRIVRANK_MAX_BODY_BYTES",
        ge=1024,
        description="Largest request body accepted (413 above), except for CSV imports.",
    )
    register_per_minute: int = Field(
        default=60,
        validation_alias="PRIVRANK_REGISTER_PER_MINUTE",
        ge=0,
        description="Respondent registrations per client address and minute (per worker, or for all "
        "instances together with REDIS_URL; 0: no limit).",
    )
    integration_per_minute: int = Field(
        default=6000,
        validation_alias="PRIVRANK_INTEGRATION_PER_MINUTE",
        ge=0,
        description="Respondent registrations per integration key and minute (such registrations are "
        "exempt from PRIVRANK_REGISTER_PER_MINUTE; per worker, or for all instances together with "
        "REDIS_URL; 0: no limit).",
    )
    auth_failures_per_minute: int = Field(
        default=30,
        validation_alias="PRIVRANK_AUTH_FAILURES_PER_MINUTE",
        ge=0,
        description="Failed authentications per client address and minute before 429s "
        "(per worker, or for all instances together with REDIS_URL; 0: no limit).",
    )
    suggest_per_hour: int = Field(
        default=10,
        validation_alias="PRIVRANK_SUGGEST_PER_HOUR",
        ge=0,
        description="Suggestions per client address and hour, whatever the survey or the respondent "
        "token (429 with Retry-After beyond; a burst of this many, then one every hour / this). Per "
        "worker, or for all instances together with REDIS_URL; 0: no limit. On top of each survey's "
        "own suggestion limits.",
    )
    max_import_bytes: int = Field(
        default=256 * 2**20,
        validation_alias="PRIVRANK_MAX_IMPORT_BYTES",
        ge=1024,
        description="Largest CSV import body accepted.",
    )
    analysis_seconds: float = Field(
        default=60.0,
        validation_alias="PRIVRANK_ANALYSIS_SECONDS",
        gt=0,
        le=86_400,
        description="Time budget of one ranking or pairwise analysis (intervals, bootstrap): beyond "
        "it, or when the client disconnects, the work stops with 503 and Retry-After. A bootstrap "
        "predicted to need more than twice the budget is refused at once (422).",
    )
    analysis_concurrency: int = Field(
        default=2,
        validation_alias="PRIVRANK_ANALYSIS_CONCURRENCY",
        ge=1,
        le=64,
        description="Long computations (fits, intervals, rank summaries, bootstraps) running at once "
        "per worker; others wait for a turn within their time budget. Each holds O(m²) memory "
        "(~180 MiB at 2,000 items) and a core.",
    )
    analysis_cache_mb: int = Field(
        default=512,
        validation_alias="PRIVRANK_ANALYSIS_CACHE_MB",
        ge=1,
        le=1_000_000,
        description="Memory for cached fits, intervals and rank summaries per worker (MiB; least "
        "recently used evicted first). One set of intervals at 2,000 items takes ~35 MiB; a survey's "
        "cluster-robust sums about 17 bytes per answer and 64 per respondent (docs/capacity.md).",
    )
    max_downloads: int = Field(
        default=4,
        validation_alias="PRIVRANK_MAX_DOWNLOADS",
        ge=1,
        le=1000,
        description="CSV exports being prepared or sent at once per worker; one more gets 503 with "
        "Retry-After at once. An export is written to a temporary file at database speed, then sent "
        "without holding a database connection or an API slot.",
    )
    send_timeout: float = Field(
        default=60.0,
        validation_alias="PRIVRANK_SEND_TIMEOUT",
        gt=0,
        le=86_400,
        description="Seconds a download may wait for its client to read before the connection is dropped.",
    )
    sqlite_max_import_rows: int = Field(
        default=200_000,
        validation_alias="PRIVRANK_SQLITE_MAX_IMPORT_ROWS",
        ge=1,
        le=1_000_000,
        description="Most rows of one CSV import on SQLite (422 above; split the file). The import's "
        "write holds SQLite's only write lock, which every answer waits for: 200,000 rows take it "
        "for ~1 s, or ~3.5 s when every row names a new respondent. PostgreSQL: 1,000,000 rows.",
    )

    @model_validator(mode="after")
    def _queue_needs_redis(self) -> Settings:
        if self.job_queue == "rq" and not self.redis_url:
            raise ValueError("PRIVRANK_JOB_QUEUE=rq needs REDIS_URL")
        return self

    @field_validator("database_url")
    @classmethod
    def _driver(cls, value: str) -> str:
        return normalize_database_url(value)

    @property
    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]


@lru_cache
def get_settings() -> Settings:
    return Settings()


def setting_from_environment(name: str) -> Any:
    """One setting (a field of :class:`Settings`) read from the environment and validated
    as :class:`Settings` validates it, without reading the others: for a module constant
    that every process of the service reads when it imports the module."""
    field = Settings.model_fields[name]
    alias = field.validation_alias
    raw = os.environ.get(alias) if isinstance(alias, str) else None
    if raw is None:
        return field.get_default(call_default_factory=True)
    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[(field.annotation, *field.metadata)])  # type: ignore[arg-type]
    try:
        return adapter.validate_strings(raw)
    except ValidationError as exc:
        raise ValueError(f"{alias}={raw!r}: {exc.errors()[0]['msg']}") from None
