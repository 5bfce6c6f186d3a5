"""Tables. One schema for SQLite and PostgreSQL; Alembic (``migrations/``) creates it.

One module per area — ``surveys`` (surveys, items, respondents), ``answers`` (the
answers and the statistics folded from them), ``participation``, ``releases``,
``federation``, ``operations`` (keys, idempotency, jobs, secrets) — on ``base`` (the
declarative base, UTC times, ids). Every table is imported here, so that
``Base.metadata`` (Alembic's env and autogenerate) holds them all.
"""

from __future__ import annotations

from .answers import (
    AnswerLog,
    Comparison,
    PairStat,
    PendingBatch,
    Ranking,
    RankingStatsRow,
    SurveyStats,
    UndecidedCount,
)
from .base import Base, BigId, UTCDateTime, is_id, new_id, to_hour, utcnow
from .federation import FederatedRound, RoundSite
from .operations import ApiKey, IdempotencyRecord, Job, ServiceSecret
from .participation import HeldContribution, ItemFlag, ParticipationSlot, Suggestion
from .releases import Release
from .surveys import Item, Respondent, Survey

__all__ = [
    "AnswerLog",
    "ApiKey",
    "Base",
    "BigId",
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
    "UTCDateTime",
    "UndecidedCount",
    "is_id",
    "new_id",
    "to_hour",
    "utcnow",
]
