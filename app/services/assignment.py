"""Which pairs to ask a respondent next.

Pairs the respondent has not answered, least-answered first, ties broken at
random, each shown in a random orientation. Serving the least-covered pairs
balances n_ij across pairs (the debiased MLE's variance is governed by the
smallest counts) and connects the comparison graph as early as possible: with
m items, the first ⌈m/2⌉ answered pairs already cover every item.

Counts come from the folded statistics after an opportunistic, non-blocking fold
of pending answers, so they may lag a concurrent fold by a moment; that only
affects balance, never correctness. Above 2,000,000 possible pairs (m > 2,000)
a dense count vector is too costly per request: pairs are then drawn uniformly
among those not yet answered, which balances coverage in expectation.

Central-model surveys hold true answers, and which pairs were answered is
itself protected there (edge and individual DP cover it): serving least-answered
pairs first would let anyone who registers read the per-pair counts. Their pairs
are drawn uniformly among those the respondent has not answered, from nothing
but the respondent's own history.
"""

from __future__ import annotations

import secrets

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import Comparison, Item, PairStat, Respondent, Survey
from .aggregation import fold_pending
from .surveys import survey_items

__all__ = ["DENSE_PAIR_LIMIT", "next_pairs"]

DENSE_PAIR_LIMIT = 2_000_000


def _rng() -> np.random.Generator:
    # Tie-breaking is not a privacy mechanism, but a per-request fresh seed from
    # the OS keeps the served order unpredictable to respondents.
    return np.random.default_rng(secrets.randbits(128))


def next_pairs(
    session: Session, survey: Survey, respondent: Respondent, count: int
) -> list[tuple[Item, Item]]:
    """Up to ``count`` pairs for ``respondent`` (fewer when the budget or the pairs run out)."""
    fold_pending(session, survey.id, wait=False)
    items = survey_items(session, survey.id)
    m = len(items)
    n_pairs = m * (m - 1) // 2
    if survey.respondent_budget is not None:
        # Affordability at the registered ε (a client-privatized batch may declare another).
        affordable = int((survey.respondent_budget - respondent.epsilon_spent + 1e-9) // respondent.epsilon)
        count = min(count, max(0, affordable))
    if survey.max_comparisons is not None:  # central model: at most L answers each
        count = min(count, max(0, survey.max_comparisons - respondent.n_comparisons))
    if survey.status != "open" or survey.kind != "pairwise" or count <= 0 or m < 2:
        return []
    answered = np.array(
        session.execute(
            select(Comparison.i, Comparison.j).where(Comparison.respondent_id == respondent.id)
        ).all(),
        dtype=np.int64,
    ).reshape(-1, 2)
    rng = _rng()
    if n_pairs <= DENSE_PAIR_LIMIT:
        pi, pj = np.triu_indices(m, k=1)
        row_start = np.arange(m) * m - np.arange(m) * (np.arange(m) + 1) // 2
        counts = np.zeros(n_pairs)
        central = survey.privacy_model == "central"
        stats = (
            []
            if central
            else session.execute(
                select(PairStat.i, PairStat.j, PairStat.n).where(PairStat.survey_id == survey.id)
            ).all()
        )
        if stats:
            s = np.array(stats, dtype=np.int64)
            s = s[s[:, 1] < m]  # items added after we read the list are not served yet
            counts[row_start[s[:, 0]] + s[:, 1] - s[:, 0] - 1] = s[:, 2]
        answered = answered[answered[:, 1] < m]
        if answered.size:
            counts[row_start[answered[:, 0]] + answered[:, 1] - answered[:, 0] - 1] = np.inf
        # Random tie-break: a uniform fraction < 1 added to integer counts.
        keys = counts + rng.random(n_pairs)
        take = min(count, int(np.isfinite(keys).sum()))
        if take == 0:
            return []
        chosen = np.argpartition(keys, take - 1)[:take]
        chosen = chosen[np.argsort(keys[chosen])]
        a, b = pi[chosen], pj[chosen]
    else:
        done = set(map(tuple, answered.tolist()))
        picked: list[tuple[int, int]] = []
        seen: set[tuple[int, int]] = set()
        while len(picked) < count and len(done) + len(seen) < n_pairs:
            x, y = rng.choice(m, size=2, replace=False)
            pair = (int(min(x, y)), int(max(x, y)))
            if pair not in done and pair not in seen:
                seen.add(pair)
                picked.append(pair)
        if not picked:
            return []
        a, b = (np.array(v) for v in zip(*picked, strict=True))
    flip = rng.random(a.size) < 0.5
    first, second = np.where(flip, b, a), np.where(flip, a, b)
    return [(items[x], items[y]) for x, y in zip(first, second, strict=True)]
