"""Tables. One schema for SQLite and PostgreSQL; Alembic (``migrations/``) creates it.

Write path and read path are separated so that concurrent writers never queue on a
shared row: ``comparisons`` is append-only (the privatized answers, the releasable
data); each accepted request also appends one ``pending_batches`` row holding its
comparisons in packed form; a ranking query folds the pending batches into ``pair_stats``
(one row per observed pair) under a per-survey lock held only by readers
(``survey_stats``), deleting exactly the batch rows it folded. So a ranking reads
O(pairs) rows, never the answers, and a writer touches only its own rows and its own
respondent's budget row.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    UniqueConstraint,
)
from sqlalchemy import false as sa_false
from sqlalchemy import true as sa_true
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from ...stats import entropy

__all__ = [
    "ApiKey",
    "Base",
    "Comparison",
    "FederatedRound",
    "HeldContribution",
    "IdempotencyRecord",
    "Item",
    "ItemFlag",
    "Job",
    "PairStat",
    "ParticipationSlot",
    "PendingBatch",
    "Ranking",
    "RankingStatsRow",
    "Release",
    "Respondent",
    "RoundSite",
    "ServiceSecret",
    "Suggestion",
    "Survey",
    "SurveyStats",
    "UndecidedCount",
    "new_id",
    "to_hour",
    "utcnow",
]

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


class Base(DeclarativeBase):
    pass


class Survey(Base):
    __tablename__ = "surveys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    title: Mapped[str] = mapped_column(String(500))
    kind: Mapped[str] = mapped_column(String(16), default="pairwise")
    status: Mapped[str] = mapped_column(String(16), default="open")
    privacy_model: Mapped[str] = mapped_column(String(16), default="local")
    #: Local model: the bounds of respondents' ε. NULL for central surveys.
    epsilon_default: Mapped[float | None] = mapped_column(Float, nullable=True)
    epsilon_min: Mapped[float | None] = mapped_column(Float, nullable=True)
    epsilon_max: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Local model: the cap on each respondent's total ε (basic composition); NULL: none.
    respondent_budget: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Local model: the admin opted out of the cap (``"respondent_budget": "unlimited"``).
    #: A local survey with neither a cap nor this has no cap either ("unset" in the API).
    respondent_budget_unlimited: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    #: Central model: the total ε all releases may spend, and the most comparisons
    #: one respondent may contribute (L of individual DP). NULL for local surveys.
    total_budget: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_comparisons: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: Central model: how releases are charged, "pure" (sum of person-level ε) or "zcdp"
    #: (sum of person-level ρ, shown as (ε, δ) at ``delta``); docs/mechanisms.md §2.6.
    #: Fixed once the survey has a release.
    accounting: Mapped[str] = mapped_column(String(8), default="pure", server_default="pure")
    delta: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: How ``GET …/pairs`` picks pairs: "balanced" (least-answered first) or "adaptive"
    #: (pairs touching the items still in doubt; needs a goal). See app.goals.service.
    assignment: Mapped[str] = mapped_column(String(16), default="balanced", server_default="balanced")
    #: A local survey's goal: {"top_k": K or null (the whole ranking), "level": 0.95,
    #: "close_when_met": bool}; NULL without one.
    goal: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    #: The key of the tickets that vouch for served pairs (goal surveys; never returned).
    ticket_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: Participants' suggestions (app.participation.suggestions): {"enabled", "per_respondent",
    #: "moderation": "before" | "after", "flag_threshold"}; NULL: none.
    suggestions: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    #: The public results page /r/{id} (and GET …/results) is on.
    public_results: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    #: The respondent page ends with the current results (needs ``public_results``).
    results_on_finish: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    #: Positions of the items not served (hidden, back in review, or archived); NULL or [] : none.
    #: Kept on the survey row, which every pair request reads anyway.
    withheld: Mapped[list | None] = mapped_column(JSON, nullable=True)
    #: Positions of the archived items (also in ``withheld``): left out of the item limits
    #: and of the rankings; NULL or []: none.
    archived: Mapped[list | None] = mapped_column(JSON, nullable=True)
    #: The respondents' default language (a catalog code: "en", "es", "de", "fr");
    #: ``?lang=`` and ``Accept-Language`` choose first.
    language: Mapped[str] = mapped_column(String(16), default="en", server_default="en")
    #: Origins allowed to frame the respondent page (``frame-ancestors``); NULL or []: none.
    embed_origins: Mapped[list | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        CheckConstraint("kind IN ('pairwise', 'ranking')", name="ck_surveys_kind"),
        CheckConstraint("status IN ('open', 'closed')", name="ck_surveys_status"),
        CheckConstraint("privacy_model IN ('local', 'central')", name="ck_surveys_privacy_model"),
        CheckConstraint("assignment IN ('balanced', 'adaptive')", name="ck_surveys_assignment"),
        CheckConstraint(
            "(privacy_model = 'local' AND epsilon_min >= 0.001 AND epsilon_min <= epsilon_default "
            "AND epsilon_default <= epsilon_max) OR "
            "(privacy_model = 'central' AND total_budget > 0 AND max_comparisons >= 1)",
            name="ck_surveys_privacy",
        ),
        CheckConstraint(
            "(accounting = 'pure' AND delta IS NULL) OR "
            "(accounting = 'zcdp' AND privacy_model = 'central' AND delta > 0 AND delta < 1)",
            name="ck_surveys_accounting",
        ),
    )


class Item(Base):
    __tablename__ = "items"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), index=True)
    #: 0-based index of the item in its survey: the library's item index.
    position: Mapped[int] = mapped_column(Integer)
    label: Mapped[str] = mapped_column(String(500))
    #: "seed" (given at creation), "added" (by an admin later) or "suggested" (a participant's).
    source: Mapped[str] = mapped_column(String(16), default="seed", server_default="seed")
    #: "live" (served), "hidden" (by a moderator), "review" (flagged past the threshold) or
    #: "archived" (retired: not served, not counted toward the item limits, left out of
    #: the rankings; its answers stay stored).
    status: Mapped[str] = mapped_column(String(16), default="live", server_default="live")
    #: Distinct respondents who flagged it since it was last reviewed.
    flags: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: When a moderator (or moderation "after", at once) approved a suggested item.
    approved_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: The label in other languages: {language code: label}; NULL: none.
    translations: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        UniqueConstraint("survey_id", "position", name="uq_items_survey_position"),
        UniqueConstraint("survey_id", "label", name="uq_items_survey_label"),
        CheckConstraint("source IN ('seed', 'added', 'suggested')", name="ck_items_source"),
        CheckConstraint("status IN ('live', 'hidden', 'review', 'archived')", name="ck_items_status"),
    )


class Respondent(Base):
    __tablename__ = "respondents"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), index=True)
    #: SHA-256 of the token's secret part; NULL for respondents created by an import.
    token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: The respondent's ε (local model); NULL in central surveys.
    epsilon: Mapped[float | None] = mapped_column(Float, nullable=True)
    epsilon_spent: Mapped[float] = mapped_column(Float, default=0.0)
    n_comparisons: Mapped[int] = mapped_column(Integer, default=0)
    #: The pseudonym a bulk import gave this respondent (unique per survey).
    external_ref: Mapped[str | None] = mapped_column(String(200), nullable=True)
    #: Registered by an integration with an ``external_id``: HMAC-SHA256 of (survey, id)
    #: under the ``external_ids`` service secret (hex); the raw id is never stored.
    external_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        UniqueConstraint("survey_id", "external_ref", name="uq_respondents_survey_external_ref"),
        UniqueConstraint("survey_id", "external_key", name="uq_respondents_survey_external_key"),
        CheckConstraint("epsilon IS NULL OR epsilon >= 0.001", name="ck_respondents_epsilon"),
    )


class Comparison(Base):
    """One answer, canonically oriented: item i < item j (positions).

    ``y_tilde`` = 1 when item i was the reported winner. Local model: the
    randomized answer (the true one is never stored), with its ε. Central model
    (``source = 'central'``, ``epsilon`` NULL): the true answer, which no endpoint
    returns; only differentially private releases leave the service.
    """

    __tablename__ = "comparisons"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"))
    respondent_id: Mapped[str] = mapped_column(ForeignKey("respondents.id", ondelete="CASCADE"))
    i: Mapped[int] = mapped_column(Integer)
    j: Mapped[int] = mapped_column(Integer)
    y_tilde: Mapped[int] = mapped_column(SmallInteger)
    epsilon: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: "server" (flipped on arrival), "client" (flipped on the device), "import", or
    #: "central" (a true answer of a central-model survey).
    source: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        # One answer per respondent and pair (repeats would average the noise away).
        UniqueConstraint("respondent_id", "i", "j", name="uq_comparisons_respondent_pair"),
        CheckConstraint("i < j", name="ck_comparisons_orientation"),
        CheckConstraint("y_tilde IN (0, 1)", name="ck_comparisons_y_tilde"),
        Index("ix_comparisons_survey_id_id", "survey_id", "id"),
    )


class Ranking(Base):
    """One respondent's synthetic ranking (ranking surveys; append-only).

    ``ordering`` lists item positions best → worst: the output of the Mallows
    mechanism with the respondent's ε (on the server at arrival, or on the
    client). The ranking the respondent gave is never stored.
    """

    __tablename__ = "rankings"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"))
    respondent_id: Mapped[str] = mapped_column(ForeignKey("respondents.id", ondelete="CASCADE"))
    ordering: Mapped[list] = mapped_column(JSON)
    epsilon: Mapped[float] = mapped_column(Float)
    #: "server" (privatized on arrival) or "client" (privatized on the device).
    source: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (
        # One ranking per respondent (a second synthetic copy would compose: docs/mechanisms.md §3.3).
        UniqueConstraint("respondent_id", name="uq_rankings_respondent"),
        CheckConstraint("epsilon >= 0.001", name="ck_rankings_epsilon"),
        Index("ix_rankings_survey_id_id", "survey_id", "id"),
    )


class RankingStatsRow(Base):
    """Folded sufficient statistics of a ranking survey (:class:`app.stats.rankings.RankingStats`),
    packed; updated under the ``survey_stats`` lock like ``pair_stats``."""

    __tablename__ = "ranking_stats"

    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True)
    n_items: Mapped[int] = mapped_column(Integer)
    n: Mapped[int] = mapped_column(BigInteger)
    payload: Mapped[bytes] = mapped_column(LargeBinary)


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


class PendingBatch(Base):
    """The answers of one accepted request, waiting to be folded into the survey's statistics.

    ``payload`` packs the batch's (i, j, ỹ, ε) arrays, or for a ranking survey its
    synthetic orderings and ε (privatized data only; see
    :mod:`app.analysis.aggregation`), so a request adds one row here whatever its size.
    """

    __tablename__ = "pending_batches"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), index=True)
    n: Mapped[int] = mapped_column(Integer)
    payload: Mapped[bytes] = mapped_column(LargeBinary)


class PairStat(Base):
    """Sufficient statistics of one observed pair (see :class:`app.stats.PairStats`)."""

    __tablename__ = "pair_stats"

    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True)
    i: Mapped[int] = mapped_column(Integer, primary_key=True)
    j: Mapped[int] = mapped_column(Integer, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)
    sum_y: Mapped[float] = mapped_column(Float)
    sum_z: Mapped[float] = mapped_column(Float)
    sum_z2: Mapped[float] = mapped_column(Float)
    sum_v: Mapped[float] = mapped_column(Float)


class AnswerLog(Base):
    """The answers of one fold (:func:`app.analysis.aggregation.fold_pending`), with who
    gave each: the folded batches as one payload (format PRB3 of
    :func:`~app.analysis.aggregation.encode_batch`), at the version the fold gave the
    survey. The analysis keeps the cluster-robust sums (:mod:`app.stats.clusters`) up to
    date by reading the folds after the last one it has seen, in version order.
    Privatized answers only (local model), as in ``comparisons``.
    """

    __tablename__ = "answer_log"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(BigInteger)
    n: Mapped[int] = mapped_column(Integer)
    payload: Mapped[bytes] = mapped_column(LargeBinary)

    __table_args__ = (UniqueConstraint("survey_id", "version", name="uq_answer_log_survey_version"),)


class SurveyStats(Base):
    """Aggregation state of a survey; its row is the lock that serializes folding."""

    __tablename__ = "survey_stats"

    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True)
    #: Incremented whenever new answers are folded in: the cache key of fits.
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    n_comparisons: Mapped[int] = mapped_column(BigInteger, default=0)
    epsilon_min: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: A goal survey's certification state (app.goals.service.GoalState or PairGoalState, packed): the
    #: confidence sequences' sums and the intersected bounds. NULL before the first fold.
    goal_state: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    #: Comparisons per item position (little-endian int64), folded with the pairs: how far a
    #: new item is from the survey's typical count (catch-up). NULL before the first fold.
    item_counts: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    #: Whether every folded answer of the survey is in ``answer_log`` (false for a survey
    #: whose answers were folded before the log existed, until its next ranking starts the
    #: log: :func:`app.analysis.answer_log.start_log`).
    answer_log: Mapped[bool] = mapped_column(Boolean, default=True, server_default=sa_true())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


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


class UndecidedCount(Base):
    """How many times respondents answered "can't decide" in a survey: a count and
    nothing else — not the pair, not the respondent, not the time (a per-pair record
    would itself say something about the respondent). Spread over a few shards, so
    that concurrent respondents do not queue on one row; the count is their sum."""

    __tablename__ = "undecided_counts"

    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, default=0)


class Suggestion(Base):
    """A participant's proposed item and its moderation. Nothing here names or points to
    the respondent who sent it: no respondent id, no token, no address, and the time only
    to the hour (``received_at``), so that it cannot be matched to the respondent's other
    rows by timestamp. The respondent's allowance is a :class:`ParticipationSlot`."""

    __tablename__ = "suggestions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(500))
    status: Mapped[str] = mapped_column(String(16), default="pending")
    #: Why it was rejected (shown to moderators).
    reason: Mapped[str | None] = mapped_column(String(500), nullable=True)
    #: The item it became (approved) or was merged into (merged).
    item_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    #: When it arrived, rounded down to the hour.
    received_at: Mapped[datetime] = mapped_column(UTCDateTime())
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    #: The moderator's key id ("admin" for the configured admin key; "auto" for moderation after).
    decided_by: Mapped[str | None] = mapped_column(String(40), nullable=True)

    __table_args__ = (
        CheckConstraint(
            "status IN ('pending', 'approved', 'rejected', 'merged')", name="ck_suggestions_status"
        ),
        Index("ix_suggestions_survey_status", "survey_id", "status"),
    )


class ParticipationSlot(Base):
    """One used unit of a respondent's allowance (its k-th suggestion, its k-th flag), as
    HMAC-SHA256 keyed with the respondent's bearer token — which the database does not
    hold — over the survey, the kind and k. The limit is enforced by inserting the first
    free slot in the same transaction as the suggestion or flag; nothing here, and no
    write to the respondent's row, says whose slot it is."""

    __tablename__ = "participation_slots"

    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)


class ItemFlag(Base):
    """One respondent's flag on one item, as HMAC-SHA256(token, item id): the key is the
    respondent's bearer token, of which the database holds only a hash, so a repeat by
    the same respondent is recognized while no stored value says who flagged what."""

    __tablename__ = "item_flags"

    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)


class HeldContribution(Base):
    """A suggestion or a flag waiting for its batch (:mod:`app.participation.suggestions`):
    published, in random order and with one time to the hour, once respondents of
    ``batch`` different tokens have one waiting; then deleted. ``author`` is HMAC-SHA256
    keyed with the respondent's bearer token (which the database does not hold), only to
    count distinct respondents; no time is stored."""

    __tablename__ = "held_contributions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"))
    #: "suggestion" or "flag".
    kind: Mapped[str] = mapped_column(String(16))
    author: Mapped[str] = mapped_column(String(64))
    #: A suggestion's text.
    label: Mapped[str | None] = mapped_column(String(500), nullable=True)
    #: A flag's item and its :class:`ItemFlag` digest.
    item_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: What the respondent was told when it sent it: the batch it waits for (a smaller one
    #: set later does not publish it) and the moderation ("before": a moderator reviews it).
    batch: Mapped[int] = mapped_column(Integer)
    moderation: Mapped[str] = mapped_column(String(16))

    __table_args__ = (
        CheckConstraint("kind IN ('suggestion', 'flag')", name="ck_held_contributions_kind"),
        CheckConstraint("moderation IN ('before', 'after')", name="ck_held_contributions_moderation"),
        Index("ix_held_contributions_survey_kind", "survey_id", "kind"),
    )
