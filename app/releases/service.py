"""Differentially private releases of central-model surveys, against a budget (docs/mechanisms.md §2.4, §2.6).

A release runs one mechanism of :mod:`app.stats.central` on the survey's folded
statistics and stores its output, which can be read again any number of times at no
cost. The ledger is the table of releases, serialized per survey by a lock on the survey
row, so two concurrent requests cannot both fit into one remaining budget. The budget is
in person-level ε: an edge-DP release of ε costs L·ε (group privacy), an individual one
ε; every tuning value (λ, γ, σ) depends on public configuration only (ε or ρ, L), so the
argument holds for a person who changes how many answers they gave, and the published
``parameters`` reveal nothing. A zCDP survey sums person-level ρ (ρ, or L²ρ at edge level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sqlalchemy import and_, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..analysis.aggregation import fold_pending, read_snapshot
from ..core.db.models import Release, Survey, is_id, new_id
from ..core.db.session import begin_write
from ..core.deadline import Deadline, WorkSlots
from ..core.errors import Conflict, Invalid, NotFound
from ..stats.accounting import pure_rho, zcdp_epsilon, zcdp_rho_for
from ..stats.central import gaussian_noisy_counts, noisy_counts, perturbed_mle, win_counts
from ..surveys.items import survey_items
from ..surveys.policy import central_limits
from ..surveys.service import get_survey
from .results import Budget, ReleaseList, ReleaseOut, ReleaseResult, ReleaseSummary

__all__ = [
    "MAX_RELEASE_EPSILON",
    "MAX_RELEASE_RHO",
    "MIN_RELEASE_EPSILON",
    "MIN_RELEASE_RHO",
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
#: The ρ a zCDP release may ask for: from ε²/8 at the smallest ε (the ρ of discrete Gaussian
#: noise as large as that release's Laplace noise) to ε²/2 at the largest.
MIN_RELEASE_RHO = 1e-7
MAX_RELEASE_RHO = 200.0
#: Relative slack when comparing a sum of ρ with the survey's ρ budget (a ρ budget can be
#: tiny, so an absolute slack would not do).
RHO_SLACK = 1e-9


def _require_central(survey: Survey) -> None:
    if survey.privacy_model != "central":
        raise Conflict(
            "releases are for central-model surveys; a local-model survey's data are already randomized "
            "(use GET …/ranking and …/comparisons.csv)"
        )


def _zcdp(survey: Survey) -> bool:
    return survey.accounting == "zcdp"


def _charge(survey: Survey):
    """The column a survey's ledger sums: person-level ε (pure) or person-level ρ (zcdp)."""
    return Release.cost_rho if _zcdp(survey) else Release.cost


def _delta(survey: Survey) -> float:
    if survey.delta is None:  # pragma: no cover - ck_surveys_accounting
        raise RuntimeError(f"survey {survey.id} accounts in zCDP without a delta")
    return float(survey.delta)


def _ledger(survey: Survey, spent: float) -> Budget:
    """The budget after ``spent`` (ε, or ρ in a zCDP survey) was charged."""
    total, _ = central_limits(survey)
    if not _zcdp(survey):
        return Budget(total=total, spent=spent, remaining=max(0.0, total - spent))
    delta = _delta(survey)
    rho_total = zcdp_rho_for(total, delta)
    eps_spent = zcdp_epsilon(spent, delta)
    return Budget(
        total=total,
        spent=eps_spent,
        remaining=max(0.0, total - eps_spent),
        accounting="zcdp",
        delta=delta,
        rho_total=rho_total,
        rho_spent=spent,
        rho_remaining=max(0.0, rho_total - spent),
    )


def _remaining_after(survey: Survey, spent: float) -> float:
    """``budget_after``: the ε left once ``spent`` (ε, or ρ) is charged."""
    total, _ = central_limits(survey)
    if not _zcdp(survey):
        return max(0.0, total - spent)
    return max(0.0, total - zcdp_epsilon(spent, _delta(survey)))


def _fits(survey: Survey, ledger: Budget, cost: float) -> bool:
    if not _zcdp(survey):
        return ledger.spent + cost <= ledger.total + SLACK
    assert ledger.rho_spent is not None
    assert ledger.rho_total is not None
    return ledger.rho_spent + cost <= ledger.rho_total * (1.0 + RHO_SLACK)


def _spent(survey: Survey, ledger: Budget) -> float:
    """What the ledger has summed: ε (pure) or ρ (zcdp)."""
    if not _zcdp(survey):
        return ledger.spent
    assert ledger.rho_spent is not None
    return ledger.rho_spent


def budget(session: Session, survey: Survey) -> Budget:
    spent = float(
        session.scalar(
            select(func.coalesce(func.sum(_charge(survey)), 0.0)).where(Release.survey_id == survey.id)
        )
        or 0.0
    )
    return _ledger(survey, spent)


def _row_explanation(row, survey: Survey) -> str:
    return cost_explanation(
        row.method,
        row.unit,
        row.epsilon,
        row.cost,
        rho=row.rho,
        cost_rho=row.cost_rho,
        delta=survey.delta if row.cost_rho is not None else None,
    )


def cost_explanation(
    method: str,
    unit: str,
    epsilon: float,
    cost: float,
    *,
    rho: float | None = None,
    cost_rho: float | None = None,
    delta: float | None = None,
) -> str:
    """Why a release costs what it does of the survey's person-level budget, in a sentence
    (``cost_rho`` and ``delta``: releases of zCDP surveys; ``rho``: their ρ releases)."""
    if cost_rho is not None and delta is not None:
        return _zcdp_explanation(unit, epsilon, cost, rho, cost_rho, delta)
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


def _zcdp_explanation(
    unit: str, epsilon: float, cost: float, rho: float | None, cost_rho: float, delta: float
) -> str:
    at = f"δ = {delta:g}"
    if rho is not None:
        per = round(math.sqrt(cost_rho / rho)) if unit == "edge" else 1
        what = (
            f"unit=individual: discrete Gaussian noise at ρ = {rho:g} protects everything one respondent "
            f"answered, so the release costs ρ = {cost_rho:g}"
            if unit == "individual"
            else f"unit=edge: discrete Gaussian noise at ρ = {rho:g} protects one comparison; a "
            f"respondent's up to {per} answers move the counts {per} times as far, so they are "
            f"protected at ρ = {per}² × {rho:g} = {cost_rho:g}"
        )
        return (
            f"{what} of the survey's zCDP budget (ρ adds up over releases; alone it is (ε, δ) = "
            f"({cost:.4g}, {delta:g})-DP for a person)."
        )
    return (
        f"A pure ε-DP release of person-level ε = {cost:g} (ε = {epsilon:g} in unit={unit}) is ρ = ε²/2 = "
        f"{cost_rho:g}-zCDP, which the survey's zCDP budget is charged (shown as (ε, δ) at {at})."
    )


def _spent_through(session: Session, survey: Survey, row_created, row_id: str) -> float:
    """The survey's spending (ε, or ρ) up to and including one release (ledger order)."""
    older = or_(
        Release.created_at < row_created, and_(Release.created_at == row_created, Release.id <= row_id)
    )
    return float(
        session.scalar(
            select(func.coalesce(func.sum(_charge(survey)), 0.0)).where(Release.survey_id == survey.id, older)
        )
        or 0.0
    )


def release_out(
    row: Release, survey: Survey, ledger: Budget | None = None, session: Session | None = None
) -> ReleaseOut:
    """A stored release as its answer (its result is stored as the JSON it is answered with).
    ``budget_after`` is read from the ledger when a ``session`` is given, else taken from
    ``ledger`` (the budget right after a release just made)."""
    if session is not None:
        after = _remaining_after(survey, _spent_through(session, survey, row.created_at, row.id))
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
        rho=row.rho,
        cost_rho=row.cost_rho,
        delta=survey.delta if row.cost_rho is not None else None,
        k=row.k,
        created_at=row.created_at,
        parameters=row.parameters,
        cost_explanation=_row_explanation(row, survey),
        budget_after=after,
        result=ReleaseResult.model_validate(row.result),
        budget=ledger,
    )


_Request = tuple[str, str, float | None, float | None, int | None]


def _existing(session: Session, survey_id: str, key: str | None, request: _Request) -> Release | None:
    """The release made earlier with this Idempotency-Key; 409 if it was a different request
    (``request``: method, unit, the ε asked (None for a ρ request), the ρ asked, k)."""
    if key is None:
        return None
    row = session.scalar(
        select(Release).where(Release.survey_id == survey_id, Release.idempotency_key == key)
    )
    if row is not None:
        asked = (row.method, row.unit, None if row.rho is not None else row.epsilon, row.rho, row.k)
        if asked != request:
            raise Conflict("this Idempotency-Key was already used for a different release")
    return row


@dataclass(frozen=True)
class _Charge:
    """What a release is stored with and charged: its ε in its unit, the person-level ε it
    guarantees alone, and in a zCDP survey its ρ (ρ requests) and the person-level ρ."""

    epsilon: float
    cost: float
    rho: float | None
    cost_rho: float | None


def _charge_of(survey: Survey, unit: str, L: int, epsilon: float | None, rho: float | None) -> _Charge:
    if not _zcdp(survey):
        if epsilon is None:
            raise Conflict(
                "this survey accounts in pure ε: ask for a release with epsilon (rho needs a survey with "
                "zcdp accounting, chosen before its first release)",
                code="pure_accounting",
            )
        return _Charge(epsilon, epsilon if unit == "individual" else L * epsilon, None, None)
    delta = _delta(survey)
    if rho is not None:
        # Person-level ℓ₂ sensitivity is L times the edge one: ρ grows by L² (also group
        # privacy for zCDP, Bun & Steinke 2016, Prop. 1.9).
        cost_rho = rho if unit == "individual" else L * L * rho
        return _Charge(zcdp_epsilon(rho, delta), zcdp_epsilon(cost_rho, delta), rho, cost_rho)
    assert epsilon is not None
    cost = epsilon if unit == "individual" else L * epsilon
    return _Charge(epsilon, cost, None, pure_rho(cost))


#: Items of a release's result shown in the ledger (the whole result: ``GET …/releases/{id}``).
LEDGER_TOP = 10


def _check_request(method: str, unit: str, epsilon: float | None, rho: float | None) -> None:
    if method not in ("perturbed_mle", "noisy_counts"):
        raise Invalid("method must be 'perturbed_mle' or 'noisy_counts'")
    if unit not in ("edge", "individual"):
        raise Invalid("unit must be 'edge' or 'individual'")
    if (epsilon is None) == (rho is None):
        raise Invalid("give either epsilon (a pure ε-DP release) or rho (a zCDP release), not both")
    if epsilon is not None and not (
        math.isfinite(epsilon) and MIN_RELEASE_EPSILON <= epsilon <= MAX_RELEASE_EPSILON
    ):
        raise Invalid(f"epsilon must be in [{MIN_RELEASE_EPSILON:g}, {MAX_RELEASE_EPSILON:g}]")
    if rho is not None:
        if not (math.isfinite(rho) and MIN_RELEASE_RHO <= rho <= MAX_RELEASE_RHO):
            raise Invalid(f"rho must be in [{MIN_RELEASE_RHO:g}, {MAX_RELEASE_RHO:g}]")
        if method != "noisy_counts":
            raise Invalid(
                "rho (discrete Gaussian noise) is for noisy_counts; perturbed_mle is pure ε-DP: ask for it "
                "with epsilon (a zCDP survey charges it ε²/2)"
            )


def create_release(
    session: Session,
    survey_id: str,
    method: str,
    unit: str,
    epsilon: float | None,
    k: int | None,
    created_by: str,
    idempotency_key: str | None = None,
    work: WorkSlots | None = None,
    deadline: Deadline | None = None,
    rho: float | None = None,
) -> tuple[ReleaseOut, bool]:
    """Run and store a release; returns (the release, whether it was a replay).

    ``epsilon``: a pure ε-DP release (Laplace noise); ``rho``, in a survey with zCDP
    accounting only: noisy counts with discrete Gaussian noise, ρ-zCDP in ``unit``. The
    mechanism runs in one of ``work``'s turns (the worker's long computations), waiting
    at most until ``deadline``."""
    deadline = deadline or Deadline.none()
    work = work or WorkSlots(1)
    _check_request(method, unit, epsilon, rho)
    request: _Request = (method, unit, None if epsilon is None else float(epsilon), rho, k)
    survey = get_survey(session, survey_id)
    _require_central(survey)
    replay = _existing(session, survey.id, idempotency_key, request)
    if replay is not None:
        return release_out(replay, survey, budget(session, survey), session), True
    _, cap = central_limits(survey)
    L = int(cap)
    accounting = (survey.accounting, survey.delta)
    charge = _charge_of(survey, unit, L, epsilon, rho)
    cost = charge.cost_rho if charge.cost_rho is not None else charge.cost
    ledger = budget(session, survey)
    if not _fits(survey, ledger, cost):
        # The same request may have been stored meanwhile (a retry racing its original,
        # which spent the budget after the first look-up): replay it, not 409.
        replay = _existing(session, survey.id, idempotency_key, request)
        if replay is not None:
            return release_out(replay, survey, budget(session, survey), session), True
        raise _over_budget(survey, ledger, charge, unit, L)
    # The mechanism runs before the write transaction, so that on SQLite the database's
    # one write lock (which every answer waits for) is held only to check the budget and
    # store, not for a whole perturbed MLE (seconds at 10,000 items). An output computed
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
            if rho is not None:
                out = gaussian_noisy_counts(wins, rho, unit, L)
            else:
                assert epsilon is not None
                out = noisy_counts(wins, epsilon, unit, L)
            value_key = "noisy_wins"
        else:
            assert epsilon is not None
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
    parameters = dict(out.parameters)  # public values only (ε or ρ, L, κ): see the module doc
    sid = survey.id
    session.rollback()  # end the read transaction before taking the write lock
    try:
        begin_write(session)
        # The survey row lock serializes releases (and so the budget check) per survey.
        survey = get_survey(session, sid, lock=True)
        replay = _existing(session, survey.id, idempotency_key, request)
        if replay is not None:
            again = release_out(replay, survey, budget(session, survey), session)
            session.rollback()
            return again, True
        if (survey.accounting, survey.delta) != accounting:
            # A PATCH before the first release changed how releases are charged while this
            # one was computed: its output never leaves, so nothing is spent.
            raise Conflict(
                "the survey's privacy accounting changed while the release was computed; nothing was "
                "spent: retry",
                code="accounting_changed",
            )
        ledger = budget(session, survey)
        if not _fits(survey, ledger, cost):
            raise _over_budget(survey, ledger, charge, unit, L)
        row = Release(
            id=new_id("rel"),
            survey_id=survey.id,
            method=method,
            unit=unit,
            epsilon=float(charge.epsilon),
            cost=float(charge.cost),
            rho=charge.rho,
            cost_rho=charge.cost_rho,
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
        ledger = _ledger(survey, _spent(survey, ledger) + cost)
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


def _over_budget(survey: Survey, ledger: Budget, charge: _Charge, unit: str, L: int) -> Conflict:
    if charge.cost_rho is None:
        return Conflict(
            f"this release would cost epsilon {charge.cost:g} (person-level"
            f"{'' if unit == 'individual' else f', {L} comparisons × {charge.epsilon:g}'}) but only "
            f"{ledger.remaining:g} of the survey's budget {survey.total_budget:g} remains; "
            "nothing was spent"
        )
    how = f"{L}² × {charge.rho:g}" if unit == "edge" and charge.rho is not None else ""
    if charge.rho is None:
        how = f"ε²/2 at person-level ε = {charge.cost:g}"
    return Conflict(
        f"this release would cost rho {charge.cost_rho:g} (person-level{', ' + how if how else ''}) but only "
        f"rho {ledger.rho_remaining:g} of the survey's {ledger.rho_total:g} remains (the budget is epsilon "
        f"{ledger.total:g} at delta {ledger.delta:g}; {ledger.spent:.4g} spent); nothing was spent",
        code="over_budget",
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
            select(Release.cost, Release.cost_rho)
            .where(Release.survey_id == survey.id)
            .order_by(Release.created_at.desc(), Release.id.desc())
            .limit(offset)
            .subquery()
        )
        column = skipped.c.cost_rho if _zcdp(survey) else skipped.c.cost
        newer = float(session.scalar(select(func.coalesce(func.sum(column), 0.0))) or 0.0)
    spent = _spent(survey, ledger)
    after: list[float] = []
    for r in rows:
        after.append(_remaining_after(survey, spent - newer))
        newer += r["cost_rho"] if _zcdp(survey) else r["cost"]
    releases = [
        ReleaseSummary(
            id=r["id"],
            survey_id=r["survey_id"],
            method=r["method"],
            unit=r["unit"],
            epsilon=r["epsilon"],
            cost=r["cost"],
            rho=r["rho"],
            cost_rho=r["cost_rho"],
            delta=survey.delta if r["cost_rho"] is not None else None,
            k=r["k"],
            created_at=r["created_at"],
            parameters=r["parameters"],
            cost_explanation=cost_explanation(
                r["method"],
                r["unit"],
                r["epsilon"],
                r["cost"],
                rho=r["rho"],
                cost_rho=r["cost_rho"],
                delta=survey.delta if r["cost_rho"] is not None else None,
            ),
            budget_after=remaining,
            top=r["top"],
        )
        for r, remaining in zip(rows, after, strict=True)
    ]
    return ReleaseList(releases=releases, total=int(total or 0), budget=ledger)


def get_release(session: Session, survey_id: str, release_id: str) -> ReleaseOut:
    survey = get_survey(session, survey_id)
    _require_central(survey)
    row = session.get(Release, release_id) if is_id(release_id, "rel") else None
    if row is None or row.survey_id != survey.id:
        raise NotFound(f"no release {release_id!r} in this survey")
    return release_out(row, survey, budget(session, survey), session)
