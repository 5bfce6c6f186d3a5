"""Respondents: registration with a personal ε (local model) and a bearer token."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from ..core.auth import hash_secret, new_secret
from ..core.db.models import Ranking, Respondent, Survey, new_id
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid, NotFound
from ..core.secrets import ServiceHmac
from ..surveys.policy import local_epsilons

__all__ = [
    "Account",
    "ExternalIds",
    "account",
    "budget_remaining",
    "check_epsilon",
    "comparisons_remaining",
    "register_respondent",
    "registered_epsilon",
    "reload_respondent",
    "respondent_totals",
]


def respondent_totals(session: Session, survey_id: str) -> tuple[int, int]:
    """How many respondents the survey has and how many comparisons they gave (one query
    over the respondents' own counters)."""
    row = session.execute(
        select(func.count(), func.coalesce(func.sum(Respondent.n_comparisons), 0)).where(
            Respondent.survey_id == survey_id
        )
    ).one()
    return int(row[0]), int(row[1])


def check_epsilon(survey: Survey, epsilon: float) -> float:
    """ε within the survey's bounds, or Invalid (422)."""
    if survey.privacy_model != "local":
        raise Invalid("central-model surveys take true answers: there is no respondent epsilon")
    lo, _, hi = local_epsilons(survey)
    if not (math.isfinite(epsilon) and lo <= epsilon <= hi):
        raise Invalid(f"epsilon must lie within the survey's bounds [{lo:g}, {hi:g}]")
    return float(epsilon)


def registered_epsilon(respondent: Respondent) -> float:
    """The ε a local-model survey's respondent registered with (NULL only in central surveys)."""
    if respondent.epsilon is None:
        raise RuntimeError(f"respondent {respondent.id} has no epsilon: not a local-model survey's")
    return respondent.epsilon


def reload_respondent(session: Session, respondent_id: str) -> Respondent:
    """The respondent's row read again, with the counters committed meanwhile."""
    row = session.get(Respondent, respondent_id, populate_existing=True)
    if row is None:  # no endpoint deletes respondents; only their survey's deletion would
        raise NotFound(f"no respondent {respondent_id!r}")
    return row


def answer_epsilon(survey: Survey, respondent: Respondent, privatized: bool, epsilon: float | None) -> float:
    """The ε of a local-model answer: the declared one when the client privatized it (within
    the survey's bounds), else the respondent's registered ε (a different declared one is
    refused rather than silently ignored)."""
    if privatized:
        if epsilon is None:
            raise Invalid("epsilon is required when privatized is true")
        return check_epsilon(survey, epsilon)
    registered = registered_epsilon(respondent)
    if epsilon is not None and not math.isclose(epsilon, registered, rel_tol=1e-12):
        raise Invalid(
            "with privatized=false the server uses the respondent's registered epsilon; omit epsilon"
        )
    return float(registered)


def budget_remaining(survey: Survey, respondent: Respondent) -> float | None:
    """Privacy budget left under basic composition (Σε ≤ budget), or None without a cap."""
    if survey.respondent_budget is None:
        return None
    return max(0.0, survey.respondent_budget - respondent.epsilon_spent)


def comparisons_remaining(survey: Survey, respondent: Respondent) -> int | None:
    """Central model: answers the respondent may still give (at most L in all)."""
    if survey.max_comparisons is None:
        return None
    return max(0, survey.max_comparisons - respondent.n_comparisons)


class ExternalIds(ServiceHmac):
    """Maps an integration's ``external_id`` to the digest stored in
    ``respondents.external_key``: HMAC-SHA256 of (survey id, external id) under the
    ``external_ids`` service secret. The survey id is in the message, so one person's
    digests in two surveys are unrelated; the raw id is never stored, and this class
    never logs it."""

    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        super().__init__(session_factory, "external_ids")

    def key(self, survey_id: str, external_id: str) -> str:
        return self.hmac(f"privrank external id v1\0{survey_id}\0{external_id}").hex()


def register_respondent(
    session: Session, survey: Survey, epsilon: float | None, external_key: str | None = None
) -> tuple[Respondent, str]:
    """Create a respondent of an open survey; returns it and its token (shown once).

    With ``external_key`` (an integration's registration, :class:`ExternalIds`), the
    survey's respondent of that key is returned if there is one, with a new token that
    replaces its old one (the old token stops working); an ``epsilon`` different from
    the one it registered with is refused (409). Concurrent registrations of one key
    make one respondent: the unique (survey, external_key) constraint lets one insert
    win, and the others rotate the winner's token."""
    if survey.status != "open":
        raise Conflict("the survey is closed")
    if survey.privacy_model == "central":
        if epsilon is not None:
            raise Invalid("central-model surveys take true answers: there is no respondent epsilon")
        eps = None
    else:
        eps = check_epsilon(survey, local_epsilons(survey)[1] if epsilon is None else epsilon)
        if survey.respondent_budget is not None and eps > survey.respondent_budget + 1e-9:
            raise Invalid(
                f"epsilon {eps:g} exceeds the survey's per-respondent budget {survey.respondent_budget:g}: "
                "not even one answer could be given"
            )
    secret = new_secret()
    begin_write(session)
    if external_key is not None:
        known = _reissue(session, survey, external_key, epsilon, secret)
        if known is not None:
            return known
    respondent = Respondent(
        id=new_id("rsp"),
        survey_id=survey.id,
        token_hash=hash_secret(secret),
        epsilon=eps,
        epsilon_spent=0.0,
        n_comparisons=0,
        external_key=external_key,
    )
    session.add(respondent)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        if external_key is None:
            raise
        # Another registration of the same external id inserted first: it is that one.
        begin_write(session)
        known = _reissue(session, survey, external_key, epsilon, secret)
        if known is None:
            raise
        return known
    return respondent, f"{respondent.id}.{secret}"


def _reissue(
    session: Session, survey: Survey, external_key: str, epsilon: float | None, secret: str
) -> tuple[Respondent, str] | None:
    """In a write transaction: the survey's respondent of ``external_key`` with a new
    token (committed), or None (nothing done) when there is none."""
    row = session.scalar(
        select(Respondent)
        .where(Respondent.survey_id == survey.id, Respondent.external_key == external_key)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is None:
        return None
    if epsilon is not None and (row.epsilon is None or not math.isclose(epsilon, row.epsilon, rel_tol=1e-12)):
        session.rollback()
        raise Conflict(
            "this external_id is already registered in this survey with another epsilon; "
            "omit epsilon or send the one it registered with"
        )
    row.token_hash = hash_secret(secret)
    session.commit()
    return row, f"{row.id}.{secret}"


@dataclass(frozen=True)
class Account:
    """A respondent's own privacy account (what ``GET …/respondents/me`` shows it)."""

    respondent_id: str
    survey_id: str
    epsilon: float | None
    comparisons: int
    epsilon_total: float | None
    budget_remaining: float | None
    comparisons_remaining: int | None
    #: Ranking surveys: whether its one ranking is in (None for pairwise surveys).
    ranked: bool | None


def account(session: Session, survey: Survey, respondent: Respondent) -> Account:
    ranked = None
    if survey.kind == "ranking":
        ranked = session.scalar(select(Ranking.id).where(Ranking.respondent_id == respondent.id)) is not None
    return Account(
        respondent_id=respondent.id,
        survey_id=survey.id,
        epsilon=respondent.epsilon,
        comparisons=respondent.n_comparisons,
        epsilon_total=None if respondent.epsilon is None else respondent.epsilon_spent,
        budget_remaining=budget_remaining(survey, respondent),
        comparisons_remaining=comparisons_remaining(survey, respondent),
        ranked=ranked,
    )
