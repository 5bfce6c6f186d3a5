"""Can't decide: a respondent passes on a pair it was served, and only the survey's count
remembers (docs/how-to/privacy.md, "Can't decide").

Nothing is stored about the pair, the respondent or the moment: a per-pair skip record
would itself reveal something about the respondent (which pairs they found hard), and
with the respondent it would be an answer of sorts. So a "can't decide" adds one to a
survey-level count and spends no privacy budget. The count is bounded by the pairs
served: every served pair carries an undecided ticket (:meth:`UndecidedTickets.issue`),
spent once per respondent and pair (:func:`record_undecided`).
"""

from __future__ import annotations

import base64
import hmac

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from ..core.db.models import Survey, UndecidedCount
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid
from ..core.secrets import ServiceHmac
from ..participation.suggestions import take_slot
from ..stats import entropy
from ..surveys.service import require_pairwise

__all__ = ["SHARDS", "UndecidedTickets", "record_undecided", "undecided_count"]

#: Rows a survey's count is spread over.
SHARDS = 8
#: Longest ticket accepted (two 22-character MACs and a dot).
TICKET_MAX = 64


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


class UndecidedTickets(ServiceHmac):
    """Issues and checks undecided tickets under the ``undecided`` service secret."""

    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        super().__init__(session_factory, "undecided")

    def _mac(self, message: str) -> str:
        return _b64(self.hmac(message))

    def issue(self, survey_id: str, respondent_id: str, a: str, b: str) -> str:
        """The ticket of the pair {a, b} served to a respondent (either orientation).

        ``x.mac``: ``x`` is HMAC-SHA256 under the ``undecided`` service secret of
        (survey, respondent, pair) — the same for every serving of that pair to that
        respondent — and ``mac`` is HMAC-SHA256 of (survey, respondent, ``x``) under the
        same secret, so the server checks a ticket (one it did not issue to this
        respondent is refused, 422) without learning the pair again."""
        lo, hi = sorted((a, b))
        x = self._mac(f"privrank undecided pair v1\0{survey_id}\0{respondent_id}\0{lo}\0{hi}")
        return f"{x}.{self._ticket_mac(survey_id, respondent_id, x)}"

    def _ticket_mac(self, survey_id: str, respondent_id: str, x: str) -> str:
        return self._mac(f"privrank undecided ticket v1\0{survey_id}\0{respondent_id}\0{x}")

    def pair_digest(self, survey_id: str, respondent_id: str, ticket: str) -> str:
        """The ticket's ``x`` when this server issued it to this respondent; else 422."""
        x, dot, mac = ticket.partition(".")
        if not dot or len(ticket) > TICKET_MAX or not x:
            raise Invalid("send the undecided_ticket of a pair GET …/pairs served to you")
        if not hmac.compare_digest(mac.encode(), self._ticket_mac(survey_id, respondent_id, x).encode()):
            raise Invalid("this undecided_ticket was not issued for a pair served to you")
        return x


def record_undecided(session: Session, survey: Survey, token: str, x: str) -> bool:
    """Add one "can't decide" to an open pairwise survey's count for the served pair
    ``x`` (:meth:`UndecidedTickets.pair_digest`), once per respondent token and pair:
    True when counted, False when this pair was already passed (nothing written).

    The ticket is spent by inserting a :class:`~app.core.db.models.ParticipationSlot` whose
    digest is HMAC-SHA256 keyed with the respondent's bearer token (which the database
    does not hold) over (survey, ``x``); the slot's insert and the count's increment are
    one transaction, and a ticket already spent is an idempotent no-op (204, the count
    unchanged), like a retried answer. So a respondent adds at most one to the count per
    distinct pair it was served, and a survey's count is at most the sum over
    respondents of the distinct pairs served to each. The slot names neither the
    respondent nor the pair for anyone without the token, and slots of suggestions,
    flags and passes look alike. The count lives in a few shards (one picked at random
    per increment), so that concurrent respondents do not all update one row."""
    require_pairwise(survey)
    if survey.status != "open":
        raise Conflict("this survey is closed")
    begin_write(session)
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    try:
        if take_slot(session, survey.id, token, f"undecided:{x}", 1) is None:
            session.rollback()
            return False
        row = {"survey_id": survey.id, "shard": entropy.randbelow(SHARDS), "n": 1}
        statement = insert(UndecidedCount).values(**row)
        statement = statement.on_conflict_do_update(
            index_elements=["survey_id", "shard"], set_={"n": UndecidedCount.n + 1}
        )
        session.execute(statement)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return True


def undecided_count(session: Session, survey_id: str) -> int:
    total = session.scalar(select(func.sum(UndecidedCount.n)).where(UndecidedCount.survey_id == survey_id))
    return int(total or 0)
