"""The answers and the statistics folded from them: writers never queue on a shared row.

``comparisons`` is append-only (the privatized answers, the releasable data); each
accepted request also appends one ``pending_batches`` row holding its comparisons packed;
a ranking query folds the pending batches into ``pair_stats`` (one row per observed
pair) under a per-survey lock held only by readers (``survey_stats``), deleting exactly
the batch rows it folded. So a ranking reads O(pairs) rows, never the answers, and a
writer touches only its own rows and its own respondent's budget row (docs/service.md).
"""

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    UniqueConstraint,
)
from sqlalchemy import true as sa_true
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, BigId, UTCDateTime, utcnow

__all__ = [
    "AnswerLog",
    "Comparison",
    "PairStat",
    "PendingBatch",
    "Ranking",
    "RankingStatsRow",
    "SurveyStats",
    "UndecidedCount",
]


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


class UndecidedCount(Base):
    """How many times respondents answered "can't decide" in a survey: a count and
    nothing else — not the pair, not the respondent, not the time (a per-pair record
    would itself say something about the respondent). Spread over a few shards, so
    that concurrent respondents do not queue on one row; the count is their sum."""

    __tablename__ = "undecided_counts"

    survey_id: Mapped[str] = mapped_column(ForeignKey("surveys.id", ondelete="CASCADE"), primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, default=0)
