"""Differentially private releases of central-model surveys, against a budget.

A release runs one mechanism of :mod:`app.stats.central` on the survey's folded
statistics and stores its output; the stored output can be read again any number
of times at no cost (post-processing). The ledger is the table of releases: the
survey's ``total_budget`` caps the sum of their costs (basic composition of pure
ε-DP releases). Releases are serialized per survey by a lock on the survey row, so
two concurrent requests cannot both fit into the same remaining budget.

The budget is in **person-level** ε. An individual-DP release of ε costs ε. An
edge-DP release of ε protects each single comparison at ε, but a person's L
comparisons only at L·ε (group privacy), so it costs L·ε. Every tuning value a
mechanism uses (λ, γ) is a function of public configuration only (ε, L), so the
group-privacy argument holds for a person who changes how many answers they
gave, and the published ``parameters`` reveal nothing about the data.
"""

from __future__ import annotations

import math

import numpy as np
from sqlalchemy import and_, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..db.models import Release, Survey, new_id
from ..db.session import begin_write
from ..stats.central import noisy_counts, perturbed_mle, win_counts
from .aggregation import fold_pending, read_snapshot
from .deadline import Deadline, WorkSlots
from .errors import Conflict, Invalid, NotFound
from .results.releases import Budget, ReleaseList, ReleaseOut, ReleaseResult, ReleaseSummary
from .surveys import central_limits, get_survey, survey_items

__all__ = [
    "MAX_RELEASE_EPSILON",
    "MIN_RELEASE_EPSILON",
    "budget",
    "create_release",
    "get_release",
    "list_releases",
    "release_out",
]

MAX_RELEASE_EPSILON = 20.0
#: Below this a release carries no information worth its noise (scales of 2L/ε reach 1e11).
MIN_RELEASE_EPSILON = 0.001
#: Floating-point slack when comparing a sum of costs with the budget.
SLACK = 1e-9


def _require_central(survey: Survey) -> None:
    if survey.privacy_model != "central":
        raise Conflict(
            "releases are for central-model surveys; a local-model survey's data are already randomized "
            "(use GET …/ranking and …/comparisons.csv)"
        )


def budget(session: Session, survey: Survey) -> Budget:
    spent = float(
        session.scalar(
            select(func.coalesce(func.sum(Release.cost), 0.0)).where(Release.survey_id == survey.id)
        )
        or 0.0
    )
    total, _ = central_limits(survey)
    return Budget(total=total, spent=spent, remaining=max(0.0, total - spent))


def cost_explanation(method: str, unit: str, epsilon: float, cost: float) -> str:
    """Why a release costs ``cost`` of the survey's person-level budget, in a sentence."""
    if unit == "individual":
        return (
            f"unit=individual: ε = {epsilon:g} protects everything one respondent answered, so the release "
            f"costs {cost:g} of the survey's person-level budget."
        )
    per = round(cost / epsilon) if epsilon > 0 else 0
    words = (
        f"unit=edge: ε = {epsilon:g} protects one comparison; a respondent's up to {per} answers are then "
        f"protected at {per} × {epsilon:g} = {cost:g} (group privacy), which is what the person-level budget "
        "is charged."
    )
    if method == "noisy_counts":
        words += f" Its noise is the same as that of an individual release at ε = {cost:g}."
    return words


def _spent_through(session: Session, survey_id: str, row_created, row_id: str) -> float:
    """The survey's spending up to and including one release (ledger order)."""
    older = or_(
        Release.created_at < row_created, and_(Release.created_at == row_created, Release.id <= row_id)
    )
    return float(
        session.scalar(
            select(func.coalesce(func.sum(Release.cost), 0.0)).where(Release.survey_id == survey_id, older)
        )
        or 0.0
    )


def release_out(
    row: Release, survey: Survey, ledger: Budget | None = None, session: Session | None = None
) -> ReleaseOut:
    """A stored release as its answer (its result is stored as the JSON it is answered with).
    ``budget_after`` is read from the ledger when a ``session`` is given, else taken from
    ``ledger`` (the budget right after a release just made)."""
    total, _ = central_limits(survey)
    if session is not None:
        after = max(0.0, total - _spent_through(session, survey.id, row.created_at, row.id))
    elif ledger is not None:
        after = ledger.remaining
    else:
        raise ValueError("release_out needs the session or the budget after the release")
    return ReleaseOut(
        id=row.id,
        survey_id=row.survey_id,
        method=row.method,
        unit=row.unit,
        epsilon=row.epsilon,
        cost=row.cost,
        k=row.k,
        created_at=row.created_at,
        parameters=row.parameters,
        cost_explanation=cost_explanation(row.method, row.unit, row.epsilon, row.cost),
        budget_after=after,
        result=ReleaseResult.model_validate(row.result),
        budget=ledger,
    )


def _existing(
    session: Session, survey_id: str, key: str | None, request: tuple[str, str, float, int | None]
) -> Release | None:
    """The release made earlier with this Idempotency-Key; 409 if it was a different request."""
    if key is None:
        return None
    row = session.scalar(
        select(Release).where(Release.survey_id == survey_id, Release.idempotency_key == key)
    )
    if row is not None and (row.method, row.unit, row.epsilon, row.k) != request:
        raise Conflict("this Idempotency-Key was already used for a different release")
    return row


#: Items of a release's result shown in the ledger (the whole result: ``GET …/releases/{id}``).
LEDGER_TOP = 10


def create_release(
    session: Session,
    survey_id: str,
    method: str,
    unit: str,
    epsilon: float,
    k: int | None,
    created_by: str,
    idempotency_key: str | None = None,
    work: WorkSlots | None = None,
    deadline: Deadline | None = None,
) -> tuple[ReleaseOut, bool]:
    """Run and store a release; returns (the release, whether it was a replay).

    The mechanism runs in one of ``work``'s turns (the worker's long computations),
    waiting at most until ``deadline``."""
    deadline = deadline or Deadline.none()
    work = work or WorkSlots(1)
    if method not in ("perturbed_mle", "noisy_counts"):
        raise Invalid("method must be 'perturbed_mle' or 'noisy_counts'")
    if unit not in ("edge", "individual"):
        raise Invalid("unit must be 'edge' or 'individual'")
    if not (math.isfinite(epsilon) and MIN_RELEASE_EPSILON <= epsilon <= MAX_RELEASE_EPSILON):
        raise Invalid(f"epsilon must be in [{MIN_RELEASE_EPSILON:g}, {MAX_RELEASE_EPSILON:g}]")
    request = (method, unit, float(epsilon), k)
    survey = get_survey(session, survey_id)
    _require_central(survey)
    replay = _existing(session, survey.id, idempotency_key, request)
    if replay is not None:
        return release_out(replay, survey, budget(session, survey), session), True
    total, cap = central_limits(survey)
    L = int(cap)
    cost = epsilon if unit == "individual" else L * epsilon
    ledger = budget(session, survey)
    if ledger.spent + cost > total + SLACK:
        # The same request may have been stored meanwhile (a retry racing its original,
        # which spent the budget after the first look-up): replay it, not 409.
        replay = _existing(session, survey.id, idempotency_key, request)
        if replay is not None:
            return release_out(replay, survey, budget(session, survey), session), True
        raise _over_budget(survey, ledger, cost, unit, L, epsilon)
    # The mechanism runs before the write transaction, so that on SQLite the database's
    # one write lock (which every answer waits for) is held only to check the budget and
    # store: a perturbed MLE on 10,000 items took it for up to 4 s. An output computed
    # here and then refused (the budget was spent meanwhile) never leaves the server,
    # so it costs no privacy. Items are only ever appended: the release describes the
    # items and the data version it was computed on (``data_version``).
    items = survey_items(session, survey.id)
    if k is not None and not 1 <= k <= len(items):
        raise Invalid(f"k must be between 1 and the number of items ({len(items)})")
    fold_pending(session, survey.id, wait=True)
    for _ in range(10):
        m = len(items)
        snap = read_snapshot(session, survey.id, m)
        stats = snap.loaded_stats
        if not (stats.n_pairs and int(stats.j.max()) >= m):
            break
        items = survey_items(session, survey.id)  # items were added and answered meanwhile
    else:
        raise Conflict("the survey's items changed while reading; retry")
    with work.hold(deadline):
        if method == "noisy_counts":
            wins = win_counts(m, stats.i, stats.j, stats.n, stats.sum_y)
            out = noisy_counts(wins, epsilon, unit, L)
            value_key = "noisy_wins"
        else:
            out = perturbed_mle(m, stats.i, stats.j, stats.n, stats.sum_y, epsilon, unit, L=L)
            value_key = "score"
    ranks = out.ranks()
    result_items = [
        {
            "item_id": items[x].id,
            "label": items[x].label,
            "rank": int(ranks[x]),
            value_key: float(out.values[x]) if value_key == "score" else int(out.values[x]),
        }
        for x in out.order
    ]
    result = {"items": result_items, "top_k": None if k is None else [items[x].id for x in out.top_k(k)]}
    parameters = dict(out.parameters)  # public values only (ε, L, κ): see the module doc
    sid = survey.id
    session.rollback()  # end the read transaction before taking the write lock
    try:
        begin_write(session)
        # The survey row lock serializes releases (and so the budget check) per survey.
        survey = get_survey(session, sid, lock=True)
        total, _ = central_limits(survey)
        replay = _existing(session, survey.id, idempotency_key, request)
        if replay is not None:
            again = release_out(replay, survey, budget(session, survey), session)
            session.rollback()
            return again, True
        ledger = budget(session, survey)
        if ledger.spent + cost > total + SLACK:
            raise _over_budget(survey, ledger, cost, unit, L, epsilon)
        row = Release(
            id=new_id("rel"),
            survey_id=survey.id,
            method=method,
            unit=unit,
            epsilon=float(epsilon),
            cost=float(cost),
            k=k,
            data_version=int(snap.version),
            parameters=_jsonable(parameters),
            result=result,
            top=result_items[:LEDGER_TOP],
            created_by=created_by,
            idempotency_key=idempotency_key,
        )
        session.add(row)
        session.flush()
        ledger = Budget(
            total=total, spent=ledger.spent + cost, remaining=max(0.0, total - ledger.spent - cost)
        )
        session.commit()
    except IntegrityError:
        session.rollback()
        replay = _existing(session, survey.id, idempotency_key, request)
        if replay is None:
            raise
        return release_out(replay, survey, budget(session, survey), session), True
    except BaseException:
        session.rollback()
        raise
    return release_out(row, survey, ledger), False


def _over_budget(survey: Survey, ledger: Budget, cost: float, unit: str, L: int, epsilon: float) -> Conflict:
    return Conflict(
        f"this release would cost epsilon {cost:g} (person-level"
        f"{'' if unit == 'individual' else f', {L} comparisons × {epsilon:g}'}) but only "
        f"{ledger.remaining:g} of the survey's budget {survey.total_budget:g} remains; "
        "nothing was spent"
    )


def _jsonable(params: dict) -> dict:
    return {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in params.items()}


def list_releases(session: Session, survey_id: str, limit: int = 100, offset: int = 0) -> ReleaseList:
    """A page of the ledger, newest first: each release with its first
    :data:`LEDGER_TOP` items (its ``top`` column: the results are not read, so a page
    costs O(limit) whatever the number of items), what remained of the budget after
    each, the number of releases and the budget."""
    survey = get_survey(session, survey_id)
    _require_central(survey)
    total = session.scalar(select(func.count()).select_from(Release).where(Release.survey_id == survey.id))
    columns = [c for c in Release.__table__.c if c.name not in ("result", "created_by", "idempotency_key")]
    rows = (
        session.execute(
            select(*columns)
            .where(Release.survey_id == survey.id)
            .order_by(Release.created_at.desc(), Release.id.desc())
            .limit(limit)
            .offset(offset)
        )
        .mappings()
        .all()
    )
    ledger = budget(session, survey)
    newer = 0.0  # spent by the releases newer than the current row
    if rows and offset:
        skipped = (
            select(Release.cost)
            .where(Release.survey_id == survey.id)
            .order_by(Release.created_at.desc(), Release.id.desc())
            .limit(offset)
            .subquery()
        )
        newer = float(session.scalar(select(func.coalesce(func.sum(skipped.c.cost), 0.0))) or 0.0)
    after: list[float] = []
    for r in rows:
        after.append(max(0.0, ledger.total - (ledger.spent - newer)))
        newer += r["cost"]
    releases = [
        ReleaseSummary(
            id=r["id"],
            survey_id=r["survey_id"],
            method=r["method"],
            unit=r["unit"],
            epsilon=r["epsilon"],
            cost=r["cost"],
            k=r["k"],
            created_at=r["created_at"],
            parameters=r["parameters"],
            cost_explanation=cost_explanation(r["method"], r["unit"], r["epsilon"], r["cost"]),
            budget_after=remaining,
            top=r["top"],
        )
        for r, remaining in zip(rows, after, strict=True)
    ]
    return ReleaseList(releases=releases, total=int(total or 0), budget=ledger)


def get_release(session: Session, survey_id: str, release_id: str) -> ReleaseOut:
    survey = get_survey(session, survey_id)
    _require_central(survey)
    row = session.get(Release, release_id) if release_id.startswith("rel_") else None
    if row is None or row.survey_id != survey.id:
        raise NotFound(f"no release {release_id!r} in this survey")
    return release_out(row, survey, budget(session, survey), session)
