"""Loading a survey by its id, with or without its row lock, and counting its answers:
what every domain and the request dependencies need before anything else."""

from __future__ import annotations

import re

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .db.models import PendingBatch, Survey, SurveyStats
from .errors import NotFound

__all__ = ["answers_stored", "get_survey"]

#: Shape of the ids :func:`~app.core.db.models.new_id` makes; anything else is not found.
_ID = re.compile(r"[a-z]{3}_[a-z2-7]{16}")


def get_survey(session: Session, survey_id: str, lock: bool = False) -> Survey:
    """The survey, or NotFound; ``lock`` takes a row lock (PostgreSQL) for updates.

    The lock is ``FOR NO KEY UPDATE``: it waits for writers holding the survey
    ``FOR SHARE`` (answers in flight when a survey is closed) but not for the key
    locks every answer's foreign key takes.
    """
    if not _ID.fullmatch(survey_id):
        raise NotFound(f"no survey {survey_id!r}")
    survey = session.get(
        Survey, survey_id, with_for_update={"key_share": True} if lock else None, populate_existing=lock
    )
    if survey is None:
        raise NotFound(f"no survey {survey_id!r}")
    return survey


def answers_stored(session: Session, survey_id: str) -> int:
    """Every answer the survey holds: those folded into its statistics and those still
    waiting in pending batches (a fit folds them first, so work predicted from the
    folded count alone would miss a burst of new answers)."""
    stats = session.get(SurveyStats, survey_id)
    pending = session.execute(
        select(func.coalesce(func.sum(PendingBatch.n), 0)).where(PendingBatch.survey_id == survey_id)
    ).scalar_one()
    return (int(stats.n_comparisons) if stats is not None else 0) + int(pending)
