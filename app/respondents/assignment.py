"""Which pairs to ask a respondent next (:func:`next_pairs`, whose docstring gives the work per request).

Local surveys: pairs the respondent has not answered, least-answered first, ties at
random, each in a random orientation — balancing n_ij (the debiased MLE's variance is
governed by the smallest counts) and connecting the comparison graph early (the first
⌈m/2⌉ answered pairs cover every item). Goal surveys (:mod:`app.goals.service`) serve
pairs from the respondent's pool, each with its ticket; once the goal is met, as above.
Central surveys hold true answers, and which pairs were answered is protected there
(edge and individual DP cover it): their pairs are drawn uniformly among those the
respondent has not answered, from its own history only, so no one can read the counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..analysis.aggregation import fold_pending, fold_soon, item_counts
from ..core.db.models import Comparison, Respondent, Survey, SurveyStats
from ..goals.service import COUNT_I, COUNT_J, COUNT_PAIR, GoalSpec, current_state, goal_met, make_ticket
from ..stats import entropy
from ..stats.adaptive import draw_respondent_pairs
from ..stats.pairwise_goal import PairwiseGoalStatus, draw_pairwise_respondent
from ..surveys.items import current_item_index, item_count_of
from .balanced import LOOKUP_ROUNDS, balanced_pairs
from .pair_numbers import _draw, _ints, _keys, _member, _pairs, _row_starts
from .service import registered_epsilon

__all__ = ["CATCH_UP_SHARE", "Served", "next_pairs"]


def _rng() -> np.random.Generator:
    # Tie-breaking is not a privacy mechanism, but a per-request fresh seed from
    # the OS keeps the served order unpredictable to respondents.
    return entropy.generator()


_NOT_NEEDED = (
    "Thank you: the survey has every answer it can use from you for now (it asks each person about "
    "each item once, and only about the items still in doubt)."
)
_GOAL_MET = "The survey has its answer (its goal is met) and needs no more: thank you for coming."


@dataclass(frozen=True)
class Served:
    """The pairs served, ``((id, label), (id, label))`` each, and why there are fewer
    than asked for (None: as many as asked)."""

    pairs: list[tuple[tuple[str, str], tuple[str, str]]]
    #: closed, budget_spent, answer_limit, all_answered or not_needed (goal surveys).
    reason: str | None = None
    message: str | None = None
    #: Goal surveys: each pair's ticket (None: the answer will not count for the goal).
    tickets: list[str | None] | None = None


def next_pairs(session: Session, survey: Survey, respondent: Respondent, count: int, cache=None) -> Served:
    """Up to ``count`` pairs for ``respondent`` (fewer when the budget or the pairs run
    out, with the reason). ``cache``: the process's
    :class:`~app.analysis.fits.FitCache`, which keeps dense surveys' per-pair
    counts between requests (None: read them each time).

    Counts come from the folded statistics after an opportunistic, non-blocking fold of
    pending answers, so they may lag a concurrent fold by a moment; that only affects
    balance, never correctness. A goal survey's pairs are read from the goal's state as
    last folded (a fold is started in the background, never waited for).

    **Work per request.** With m items, M = m(m−1)/2 possible pairs, s pairs answered
    at least once in the survey, a answered by the respondent and ``count`` ≤ 100
    asked for, a request costs O(m + a + count·log M) — never O(M):

    * pairs are numbered 0 … M−1 (row-major upper triangle) and never materialized;
      a uniform draw among the pairs outside a sorted exclusion list maps a rank to a
      pair by binary search (:func:`~.pair_numbers._skip`), and ``Generator.choice``
      without replacement draws ``count`` distinct ranks in O(count) (Floyd's algorithm);
    * central model: uniform outside the respondent's own a pairs;
    * local model, while at most half the pairs have been answered (s + a ≤ M/2,
      judged from the survey's folded comparison count, an upper bound on s): every
      never-answered pair has the least count, 0; candidates drawn uniformly outside
      the respondent's pairs are looked up in ``pair_stats`` by primary key and kept
      when absent (each is kept with probability ≥ ½, so a few lookups of ~2·count
      keys suffice);
    * otherwise M < 2(s + a), so O(s) is O(answers): the survey's per-pair counts are
      read (streamed) into plain sorted arrays — the answered pairs by key and by
      (count, key) — kept in the process's analysis cache (its byte budget,
      ``PRIVRANK_ANALYSIS_CACHE_MB``) and shared by every request; one request per
      process reads while the others wait, or serve from the previous counts. While
      answers keep arriving, counts that took t seconds to read are reused for 10·t
      seconds (:data:`~.balanced.REFRESH_SHARE`): balance may lag by that much, never
      correctness (the respondent's own pairs are always read fresh). A request then walks
      the count levels upward from 0, drawing uniformly inside each level outside the
      respondent's pairs.

    Items come from the per-process :class:`~app.surveys.items.ItemIndex` cache
    (plain values), checked against the survey's item count by one ``COUNT``.
    """
    if survey.status != "open" or survey.kind != "pairwise":
        if survey.goal and goal_met(session, survey):
            return Served([], "closed", _GOAL_MET)
        return Served([], "closed", "The survey is closed: it takes no more answers.")
    cut: tuple[str, str] | None = None  # why ``count`` was lowered: (reason, message)
    if survey.respondent_budget is not None:
        # Affordability at the registered ε (a client-privatized batch may declare another).
        eps = registered_epsilon(respondent)  # a budget is a local survey's: its respondents have an ε
        affordable = int((survey.respondent_budget - respondent.epsilon_spent + 1e-9) // eps)
        if affordable < count:
            count = max(0, affordable)
            cut = (
                "budget_spent",
                f"Your privacy budget (a total ε of {survey.respondent_budget:g}) allows no more answers "
                f"at ε = {eps:g} each.",
            )
    if survey.max_comparisons is not None:  # central model: at most L answers each
        left = max(0, survey.max_comparisons - respondent.n_comparisons)
        if left < count:
            count = left
            cut = (
                "answer_limit",
                f"You have given the most answers one respondent may give here ({survey.max_comparisons}).",
            )
    if count <= 0:
        return Served([], *(cut or (None, None)))
    central = survey.privacy_model == "central"
    goal = GoalSpec.of(survey) if not central else None
    version = n_items = None
    if goal is not None:
        fold_soon(session, survey.id)  # the goal's state as last folded; never waits
        version, n_items = session.execute(  # one round trip for both
            select(SurveyStats.version, item_count_of(survey.id)).where(SurveyStats.survey_id == survey.id)
        ).one()
    elif not central:
        fold_pending(session, survey.id, wait=False)
    items = current_item_index(session, survey.id, n_items)
    m = len(items)
    everything = ("all_answered", "You have compared every pair of items in this survey.")
    if m < 2:
        return Served([], *everything)
    n_pairs = m * (m - 1) // 2
    starts = _row_starts(m)
    done = _ints(
        session.execute(
            select(Comparison.i, Comparison.j).where(
                Comparison.respondent_id == respondent.id, Comparison.j < m
            )
        ).all(),
        2,
    )
    mine = np.unique(_keys(done[:, 0], done[:, 1], starts))
    rng = _rng()
    toward = None
    if goal is not None:
        toward = _toward_goal(session, survey, respondent, goal, m, done, count, rng, cache, version)
    tickets: list[str | None] | None = None
    if toward is None:
        withheld = np.array([k for k in survey.withheld or () if k < m], dtype=np.int64)
        live = np.ones(m, dtype=bool)
        live[withheld] = False
        excluded = _exclude_withheld(mine, withheld, starts)
        caught = np.empty(0, dtype=np.int64)
        state = None  # the survey's data version and size, read once for every draw below
        if not central:
            state = session.execute(
                select(SurveyStats.version, SurveyStats.n_comparisons).where(
                    SurveyStats.survey_id == survey.id
                )
            ).one()
            if items.late:
                caught = _catch_up(
                    session, survey.id, state.version, items.late, live, excluded, starts, count, rng, cache
                )
                excluded = np.union1d(excluded, caught)

        def draw(exclude: NDArray[np.int64], want: int) -> NDArray[np.int64]:
            return balanced_pairs(session, survey.id, state, n_pairs, starts, exclude, want, rng, cache)

        rest = _avoiding(draw, excluded, live, starts, count - caught.size, rng)
        chosen = np.concatenate([caught, rest])
        a, b = _pairs(chosen, starts)
    else:
        a, b, tickets = toward
        if a.size < count:
            cut = ("not_needed", _NOT_NEEDED)
    flip = rng.random(a.size) < 0.5
    first, second = np.where(flip, b, a), np.where(flip, a, b)
    ids, labels = items.ids, items.labels
    served = [
        ((ids[x], labels[x]), (ids[y], labels[y]))
        for x, y in zip(first.tolist(), second.tolist(), strict=True)
    ]
    if len(served) < count and toward is None:  # the respondent's unanswered pairs ran out first
        cut = everything
    reason, message = cut or (None, None)  # cut: fewer than asked, and why
    return Served(served, reason, message, tickets)


#: Share of the pairs served while some item added during the survey is below the
#: survey's median comparison count: each served pair is a catch-up pair with this
#: probability (see :func:`_catch_up`); the others follow the assignment strategy.
CATCH_UP_SHARE = 0.5

#: Withheld items' pairs are excluded by pair number up to this many keys; beyond it,
#: pairs drawn that touch a withheld item are dropped and drawn again.
_EXCLUDE_KEYS = 200_000


def _exclude_withheld(
    mine: NDArray[np.int64], withheld: NDArray[np.int64], starts: NDArray[np.int64]
) -> NDArray[np.int64]:
    """``mine`` plus the pairs that touch a withheld item, when they are few enough to list."""
    m = starts.size
    if withheld.size == 0 or withheld.size * (m - 1) > _EXCLUDE_KEYS:
        return mine
    others = np.arange(m, dtype=np.int64)
    keys = []
    for w in withheld.tolist():
        o = others[others != w]
        keys.append(_keys(np.minimum(o, w), np.maximum(o, w), starts))
    return np.union1d(mine, np.concatenate(keys))


def _avoiding(draw, excluded, live, starts, want: int, rng) -> NDArray[np.int64]:
    """``draw(excluded, n)`` until ``want`` pairs of live items are found: pairs touching a
    withheld item are dropped and excluded from the next draws, for a few rounds; if that
    still leaves the request short (most items withheld), the rest is drawn uniformly
    among the live items' pairs outside ``excluded``, numbered over the live items only —
    so a respondent is never told it has answered everything while live pairs remain."""
    if want <= 0:
        return np.empty(0, dtype=np.int64)
    if live.all():
        return draw(excluded, want)
    got: list[NDArray[np.int64]] = []
    n = 0
    tried = excluded
    for _ in range(LOOKUP_ROUNDS):
        chosen = draw(tried, 2 * (want - n) + 8)
        if chosen.size == 0:
            break
        a, b = _pairs(chosen, starts)
        keep = chosen[live[a] & live[b]][: want - n]
        got.append(keep)
        n += keep.size
        tried = np.union1d(tried, chosen)
        if n >= want:
            return np.concatenate(got)
    taken = np.union1d(excluded, np.concatenate(got)) if got else excluded
    got.append(_uniform_live(taken, live, starts, want - n, rng))
    return np.concatenate(got)


def _uniform_live(excluded, live, starts, want: int, rng) -> NDArray[np.int64]:
    """Up to ``want`` pairs of live items outside ``excluded`` (sorted pair numbers),
    uniformly: the live items are renumbered 0 … l−1, so the draw is O(l + |excluded|)."""
    ids = np.flatnonzero(live)
    size = ids.size
    if size < 2 or want <= 0:
        return np.empty(0, dtype=np.int64)
    index = np.full(starts.size, -1, dtype=np.int64)
    index[ids] = np.arange(size)
    a, b = _pairs(excluded, starts)
    both = (index[a] >= 0) & (index[b] >= 0)
    local_starts = _row_starts(size)
    mine = np.unique(_keys(index[a[both]], index[b[both]], local_starts))
    ranks = _draw(size * (size - 1) // 2, mine, want, rng)
    la, lb = _pairs(ranks, local_starts)
    return _keys(ids[la], ids[lb], starts)


def _survey_item_counts(session: Session, survey_id: str, version: int, m: int, cache) -> NDArray[np.int64]:
    """Comparisons per item (folded), from the cache at the survey's data ``version``."""
    key = ("item-counts", survey_id, m)
    found = cache.lru.get(key) if cache is not None else None
    if found is not None and found[0] == version:
        return found[1]
    payload = session.scalar(select(SurveyStats.item_counts).where(SurveyStats.survey_id == survey_id))
    counts = item_counts(payload, m)
    if cache is not None:
        cache.lru.put(key, (version, counts), int(counts.nbytes) + 100)
    return counts


def _catch_up(
    session: Session,
    survey_id: str,
    version: int,
    late: tuple[int, ...],
    live: NDArray[np.bool_],
    excluded: NDArray[np.int64],
    starts: NDArray[np.int64],
    count: int,
    rng: np.random.Generator,
    cache,
) -> NDArray[np.int64]:
    """Catch-up pairs for items added during the survey (docs/how-to/moderate.md, "New items catch up").

    While a live item that joined late has fewer comparisons than the median live item,
    each of the ``count`` pairs is, with probability :data:`CATCH_UP_SHARE`, a pair of
    such an item (drawn with weight its shortfall) and a live partner drawn uniformly
    among those the respondent has not compared it with. So a new item gains about
    ``CATCH_UP_SHARE`` comparison per pair served until it reaches the median, instead of
    2/m; the rest of the pairs follow the strategy in force (which, balanced, prefers the
    new item's unanswered pairs too). Local surveys without a goal only: a central
    survey's assignment stays data-independent, and a goal survey draws from its own pool."""
    m = starts.size
    cand = np.array([k for k in late if k < m and live[k]], dtype=np.int64)
    if cand.size == 0:
        return np.empty(0, dtype=np.int64)
    counts = _survey_item_counts(session, survey_id, version, m, cache)
    median = float(np.median(counts[live]))
    short = median - counts[cand]
    young, short = cand[short > 0], short[short > 0]
    slots = int(rng.binomial(count, CATCH_UP_SHARE))
    if young.size == 0 or slots == 0:
        return np.empty(0, dtype=np.int64)
    partners = np.flatnonzero(live)
    picked: list[int] = []
    taken = set()
    for y in rng.choice(young, size=slots, p=short / short.sum()).tolist():
        for _ in range(8):  # a free partner is found within a few draws unless y's pairs run out
            z = int(partners[rng.integers(partners.size)])
            if z == y:
                continue
            key = int(_keys(np.array([min(y, z)]), np.array([max(y, z)]), starts)[0])
            if key in taken or _member(excluded, np.array([key]))[0]:
                continue
            picked.append(key)
            taken.add(key)
            break
    return np.array(picked, dtype=np.int64)


def _toward_goal(
    session: Session,
    survey: Survey,
    respondent: Respondent,
    goal: GoalSpec,
    m: int,
    done: NDArray[np.int64],
    count: int,
    rng: np.random.Generator,
    cache,
    version: int | None,
) -> tuple[NDArray[np.int64], NDArray[np.int64], list[str | None]] | None:
    """A goal survey's pairs (i < j) and their tickets (:mod:`app.goals.service`), drawn
    from the respondent's pool (pairwise certificate: by
    :func:`~app.stats.pairwise_goal.draw_pairwise_respondent` from the cached status,
    disjoint and on items the respondent has not answered about); None once the goal is
    met (then pairs are served as without a goal)."""
    state = current_state(session, survey.id, goal, m, cache, version)
    status = state.status
    if status.met:
        return None
    touched = np.zeros(m, dtype=bool)
    touched[done.ravel()] = True
    key = survey.ticket_key or ""
    if isinstance(status, PairwiseGoalStatus):
        # Pairwise certificate: disjoint pairs on untouched items across the estimated
        # boundary, least-counted first (a copy: the cached state is shared).
        x, y = draw_pairwise_respondent(status, touched, count, rng, state.seqs.answers.astype(np.float64))
        a, b = np.minimum(x, y), np.maximum(x, y)
        vouched: list[str | None] = [
            make_ticket(key, survey.id, respondent.id, i, j, m, COUNT_PAIR)
            for i, j in zip(a.tolist(), b.tolist(), strict=True)
        ]
        return a, b, vouched
    pool = ~touched & (status.active if survey.assignment == "adaptive" else True)
    x, y, cx, cy = draw_respondent_pairs(pool, count, rng)
    a, b = np.minimum(x, y), np.maximum(x, y)
    flags = np.where(x < y, cx * COUNT_I + cy * COUNT_J, cx * COUNT_J + cy * COUNT_I).tolist()
    tickets: list[str | None] = [
        make_ticket(key, survey.id, respondent.id, i, j, m, f)
        for i, j, f in zip(a.tolist(), b.tolist(), flags, strict=True)
    ]
    return a, b, tickets
