"""Can't decide: a respondent passes on a pair, and only the survey's count remembers.

Nothing is stored about the pair, the respondent or the moment: a per-pair skip
record would itself reveal something about the respondent (which pairs they found
hard), and with the respondent it would be an answer of sorts. So a "can't decide"
adds one to a survey-level count and spends no privacy budget. The count lives in a
few shards (one picked at random per increment), so that concurrent respondents do
not all update one row.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from ..db.models import Survey, UndecidedCount
from ..db.session import begin_write
from ..stats import entropy
from .errors import Conflict
from .surveys import require_pairwise

__all__ = ["SHARDS", "record_undecided", "undecided_count"]

#: Rows a survey's count is spread over.
SHARDS = 8


def record_undecided(session: Session, survey: Survey) -> None:
    """Add one "can't decide" to an open pairwise survey's count (one statement)."""
    require_pairwise(survey)
    if survey.status != "open":
        raise Conflict("this survey is closed")
    begin_write(session)
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    row = {"survey_id": survey.id, "shard": entropy.randbelow(SHARDS), "n": 1}
    statement = insert(UndecidedCount).values(**row)
    statement = statement.on_conflict_do_update(
        index_elements=["survey_id", "shard"], set_={"n": UndecidedCount.n + 1}
    )
    session.execute(statement)
    session.commit()


def undecided_count(session: Session, survey_id: str) -> int:
    total = session.scalar(select(func.sum(UndecidedCount.n)).where(UndecidedCount.survey_id == survey_id))
    return int(total or 0)
