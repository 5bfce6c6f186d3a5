"""What a survey's privacy settings and a respondent's stored answers guarantee, in numbers
(docs/privacy.md §1, §3–4).

The survey's privacy summary (shown in words on the dashboard and the respondent page)
and the respondent's privacy receipt (``GET …/respondents/me``). The one conversion into
everyday terms is the guess bound e^ε/(1+e^ε), with ε summed over a respondent's answers
(basic composition); rankings use the Mallows mechanism's εm/2 between any two
rankings; central surveys the releases' budget, pure ε or zCDP shown as (ε, δ) with the
bound (e^ε + δ)/(1 + e^ε) — docs/privacy.md §1 derives each; the pages pick their
sentence by ``accounting``. Participatory surveys also state their batch (:mod:`.suggestions`).
"""

from __future__ import annotations

import math

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..core.db.models import Comparison, Ranking, Respondent, Survey
from ..releases.service import budget as release_budget
from ..respondents.service import budget_remaining, comparisons_remaining
from ..stats.accounting import DEFAULT_DELTA
from ..surveys.items import current_item_index
from ..surveys.policy import budget_policy
from .results import PrivacySummary, Receipt, ReceiptAnswer

__all__ = ["MAX_RECEIPT_ANSWERS", "guess_bound", "privacy_summary", "receipt"]

#: Most answers one receipt lists (a page; ``offset`` reaches the rest).
MAX_RECEIPT_ANSWERS = 1000


def guess_bound(epsilon: float, delta: float = 0.0) -> float:
    """e^ε/(1+e^ε), computed without overflow: the highest share of right guesses of one
    yes-or-no fact an ε-DP report allows, starting from a coin toss (0.5 at ε = 0); for
    (ε, δ)-DP, (e^ε + δ)/(1 + e^ε) (Kairouz, Oh & Viswanath 2015, Theorem 2.1)."""
    g = 1.0 / (1.0 + math.exp(-epsilon))
    return min(1.0, g + delta * (1.0 - g))


def _swap(epsilon: float, m: int) -> float:
    """Mallows: the chance that two adjacent items appear swapped, 1/(1+e^{ε/(m−1)})."""
    return 1.0 / (1.0 + math.exp(epsilon / max(1, m - 1)))


def _batch(survey: Survey) -> int | None:
    s = survey.suggestions
    return int(s["batch"]) if s and s.get("enabled") and "batch" in s else None


def privacy_summary(survey: Survey, n_items: int) -> PrivacySummary:
    """The numbers of ``survey``'s privacy settings (it has ``n_items`` items)."""
    kind = "ranking" if survey.kind == "ranking" else "pairwise"
    batch = _batch(survey)
    if survey.privacy_model == "central":
        total = float(survey.total_budget or 0.0)
        if survey.accounting == "zcdp":
            delta = float(survey.delta if survey.delta is not None else DEFAULT_DELTA)
            return PrivacySummary(
                model="central",
                kind=kind,
                items=n_items,
                accounting="zcdp",
                total_budget=total,
                delta=delta,
                guess_bound_total=guess_bound(total, delta),
                max_comparisons_per_respondent=survey.max_comparisons,
                suggestion_batch=batch,
            )
        return PrivacySummary(
            model="central",
            kind=kind,
            items=n_items,
            accounting="pure",
            total_budget=total,
            guess_bound_total=guess_bound(total),
            max_comparisons_per_respondent=survey.max_comparisons,
            suggestion_batch=batch,
        )
    eps, lo, hi = (
        float(survey.epsilon_default or 0),
        float(survey.epsilon_min or 0),
        float(survey.epsilon_max or 0),
    )
    cap = survey.respondent_budget
    out = PrivacySummary(
        model="local",
        kind=kind,
        items=n_items,
        epsilon_default=eps,
        epsilon_min=lo,
        epsilon_max=hi,
        guess_bound_default=guess_bound(eps),
        guess_bound_max=guess_bound(hi),
        suggestion_batch=batch,
        **_cap(survey),
    )
    if kind == "pairwise":
        pairs = n_items * (n_items - 1) // 2
        out.pairs = pairs
        out.answers_at_default = pairs if cap is None else min(pairs, int((cap + 1e-9) // eps))
    else:
        whole = eps * n_items / 2
        out.swap_probability_default = _swap(eps, n_items)
        out.epsilon_whole_ranking_default = whole
        out.guess_bound_whole_ranking_default = guess_bound(whole)
    return out


def receipt(
    session: Session,
    survey: Survey,
    respondent: Respondent,
    limit: int = MAX_RECEIPT_ANSWERS,
    offset: int = 0,
) -> Receipt:
    """``respondent``'s privacy receipt: its stored answers (at most ``limit`` from
    ``offset``, in the order given) with their mechanism and ε, and the totals over all of
    them. Reads only this respondent's rows (two indexed queries, one per page)."""
    limit = max(0, min(limit, MAX_RECEIPT_ANSWERS))
    if survey.kind == "ranking":
        return _ranking_receipt(session, survey, respondent)
    where = Comparison.respondent_id == respondent.id
    count, total = session.execute(
        select(func.count(), func.coalesce(func.sum(Comparison.epsilon), 0.0)).where(where)
    ).one()
    rows = session.execute(
        select(Comparison.i, Comparison.j, Comparison.epsilon, Comparison.source)
        .where(where)
        .order_by(Comparison.id)
        .limit(limit)
        .offset(offset)
    ).all()
    top = max((row.j for row in rows), default=-1)
    index = current_item_index(session, survey.id) if rows else None
    if index is not None and len(index) <= top:  # pragma: no cover - positions are 0..m−1
        raise RuntimeError(f"survey {survey.id}: an answer names an item beyond the survey's")
    answers = []
    for row in rows:
        # Central: a true answer (no ε), protected by the releases.
        e = None if row.epsilon is None else float(row.epsilon)
        answers.append(
            ReceiptAnswer(
                kind="pair",
                items=[index.ids[row.i], index.ids[row.j]] if index else [],
                labels=[index.labels[row.i], index.labels[row.j]] if index else [],
                n_items=2,
                mechanism="none" if e is None else "randomized_response",
                randomized_on="none" if e is None else _where(row.source),
                epsilon=e,
                guess_bound=None if e is None else guess_bound(e),
                flip_probability=None if e is None else 1.0 - guess_bound(e),
            )
        )
    if survey.privacy_model == "central":
        ledger = release_budget(session, survey)
        return Receipt(
            model="central",
            answers=answers,
            answers_total=int(count),
            offset=offset,
            epsilon_total=None,
            guess_bound_total=guess_bound(ledger.spent, ledger.delta or 0.0),
            respondent_budget=None,
            budget_remaining=None,
            guess_bound_budget=None,
            comparisons_remaining=comparisons_remaining(survey, respondent),
            release_budget=ledger.total,
            release_epsilon_spent=ledger.spent,
        )
    return _local(survey, respondent, answers, int(count), offset, float(total or 0.0))


def _ranking_receipt(session: Session, survey: Survey, respondent: Respondent) -> Receipt:
    row = session.execute(
        select(Ranking.epsilon, Ranking.source, Ranking.ordering).where(
            Ranking.respondent_id == respondent.id
        )
    ).one_or_none()
    answers = []
    if row is not None:  # the ordering (at most 256 positions) is only counted, never returned
        e, m = float(row[0]), len(row[2])
        answers.append(
            ReceiptAnswer(
                kind="ranking",
                items=[],
                labels=[],
                n_items=m,
                mechanism="mallows",
                randomized_on=_where(row[1]),
                epsilon=e,
                guess_bound=guess_bound(e),
                swap_probability=_swap(e, m),
                epsilon_whole_ranking=e * m / 2,
                guess_bound_whole_ranking=guess_bound(e * m / 2),
            )
        )
    total = sum(a.epsilon or 0.0 for a in answers)
    return _local(survey, respondent, answers, len(answers), 0, total)


def _local(
    survey: Survey,
    respondent: Respondent,
    answers: list[ReceiptAnswer],
    count: int,
    offset: int,
    total: float,
) -> Receipt:
    return Receipt(
        model="local",
        answers=answers,
        answers_total=count,
        offset=offset,
        epsilon_total=total,
        guess_bound_total=guess_bound(total),
        budget_remaining=budget_remaining(survey, respondent),
        **_cap(survey),
    )


def _cap(survey: Survey) -> dict:
    """A local survey's cap as the summary and the receipt state it: the policy, the cap,
    and the guess bound once it is all spent."""
    cap = survey.respondent_budget
    return {
        "budget_policy": budget_policy(survey),
        "respondent_budget": cap,
        "guess_bound_budget": None if cap is None else guess_bound(cap),
    }


def _where(source: str) -> str:
    return {"client": "device", "server": "server"}.get(source, "import")
