"""Loading a survey by its id, with or without its row lock: what every domain and the
request dependencies need before anything else."""

from __future__ import annotations

import re

from sqlalchemy.orm import Session

from .db.models import Survey
from .errors import NotFound

__all__ = ["get_survey"]

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
