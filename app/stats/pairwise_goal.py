"""A pairwise certificate for a goal: one confidence sequence per pair (docs/uncertainty.md §9).

:mod:`app.stats.adaptive` certifies a goal from one confidence sequence per item on
its Borda score; this module certifies the *majority* top-K (or ranking) from one
confidence sequence per pair on P(i beats j), so that an answer on any pair counts,
whichever pair the data suggested asking. The service uses it for goals created with
``"certificate": "pairwise"`` (:mod:`app.goals.service`). docs/uncertainty.md §9,
"A pairwise certificate", derives the sequences (:mod:`app.stats.pair_sequences`), the
certified relation (direct, or closed under ``transitive=True``), where to ask, the
assumptions and how the two estimands differ; its references are in §10.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from .adaptive import RHO_ANSWERS, GoalRun, GoalStatus, preferences, simulated_answers
from .pair_sequences import PairSequences, _triu, pair_index
from .simulation import Population

__all__ = [
    "PairwiseGoalStatus",
    "draw_pairwise_respondent",
    "pairwise_goal_status",
    "restored_status",
    "simulate_pairwise_goal",
]

#: Zermelo/MM iterations of the BTL fit that picks the estimated top-K (not part of
#: the certificate: any choice from past answers keeps it valid): from scratch, and
#: from the last check's fit.
_FIT_ITERATIONS = 30
_WARM_ITERATIONS = 5


@dataclass(frozen=True)
class PairwiseGoalStatus(GoalStatus):
    """:class:`~app.stats.adaptive.GoalStatus` for the pairwise certificate. Its per-item
    fields mean: ``estimate`` — the fitted BTL scores (log-strengths, mean 0; not
    certified); ``lower`` — the number of items the item certainly beats; ``upper`` —
    m − 1 minus the number that certainly beat it (with ``transitive``, under WST, so
    ``lower ≤ m − 1 − rank ≤ upper`` for its true 0-based rank); ``contradicted`` — items
    on a pair whose intersected bounds are empty (with ``transitive``, also those on a
    certified cycle), kept in doubt. Without ``transitive`` the K items of ``certified``
    before the goal is met are those that certainly beat at least m − K others: members
    of the majority top-K if there is one."""

    #: Per pair a < b (``np.triu_indices`` order): the estimate of P(a beats b) and its
    #: intersected bounds.
    pair_estimate: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    pair_lower: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    pair_upper: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    #: beats[a, b]: a certainly beats b — directly, or closed transitively when ``transitive``.
    beats: NDArray[np.bool_] = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    transitive: bool = False
    #: Without ``transitive``: the certified majorities show the goal has no answer —
    #: more than m − K items each certainly beaten by K others, or more than K each
    #: certainly beating m − K others (no majority top-K), or a certified cycle (no
    #: majority ranking). The goal can never be met and nothing is asked.
    unreachable: bool = False


def _fit_btl(
    m: int, est: NDArray[np.float64], answers: NDArray[np.int64], start: NDArray[np.float64] | None = None
) -> NDArray[np.float64]:
    """BTL log-strengths from the pairs' debiased win rates (Zermelo/MM with a weak prior
    of ½ win per pair, which keeps the fit finite): :data:`_FIT_ITERATIONS` iterations
    from equal strengths, or :data:`_WARM_ITERATIONS` from ``start`` (the last check's
    fit; the iterations accumulate over checks)."""
    a, b = _triu(m)
    wins = np.zeros((m, m))
    rate = np.clip(est, 0.0, 1.0)
    wins[a, b] = rate * answers
    wins[b, a] = (1.0 - rate) * answers
    wins += 0.5 / m
    np.fill_diagonal(wins, 0.0)
    games = wins + wins.T
    total = wins.sum(axis=1)
    if start is not None and start.size == m and np.all(np.isfinite(start)):
        p, iterations = np.exp(start - start.max()), _WARM_ITERATIONS
        p /= p.sum()
    else:
        p, iterations = np.full(m, 1.0 / m), _FIT_ITERATIONS
    for _ in range(iterations):
        denom = games / (p[:, None] + p[None, :])
        p = total / denom.sum(axis=1)
        p /= p.sum()
    score = np.log(p)
    return score - score.mean()


def _close(beats: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """The transitive closure of a relation (Floyd–Warshall on booleans, O(m³))."""
    out = beats.copy()
    for k in range(out.shape[0]):
        out |= out[:, k, None] & out[None, k, :]
    return out


def _on_cycle(beats: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """The items on a cycle of a relation: those in a strongly connected component of
    more than one item (Tarjan's algorithm through SciPy, O(m²) on a dense relation)."""
    _n, label = connected_components(csr_matrix(beats), directed=True, connection="strong")
    return np.bincount(label)[label] > 1


def _direct(
    m: int, lo: NDArray[np.float64], hi: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """The directly certified relation (a certainly beats b: the lower bound on P(a beats
    b) exceeds ½) from the pairs' intersected bounds, and which pairs' bounds are empty."""
    a, b = _triu(m)
    empty = lo > hi
    direct = np.zeros((m, m), dtype=bool)
    win, lose = (lo > 0.5) & ~empty, (hi < 0.5) & ~empty
    direct[a[win], b[win]] = True
    direct[b[lose], a[lose]] = True
    return direct, empty


def pairwise_goal_status(
    seqs: PairSequences,
    level: float,
    top_k: int | None = None,
    rho: float = RHO_ANSWERS,
    previous: PairwiseGoalStatus | None = None,
    transitive: bool = False,
) -> PairwiseGoalStatus:
    """The goal checked against the pair sequences, certified from direct pairwise statements.

    Parameters
    ----------
    seqs : PairSequences
        The pairs' running sums.
    level : float
        Confidence level of the certificate.
    top_k : int, optional
        The majority top-K; None: the majority ranking.
    rho : float, default RHO_ANSWERS
        The mixture's ρ in effective answers.
    previous : PairwiseGoalStatus, optional
        The last status (same level, goal and ``transitive``): each pair's bounds are
        intersected with its earlier ones, so the guarantee stays and the goal once met
        stays met; its fit, when it has one, starts this one's.
    transitive : bool, default False
        Close the relation transitively instead, which is valid only under weak
        stochastic transitivity (docs/uncertainty.md §9).

    Returns
    -------
    PairwiseGoalStatus
        The certified relation, resolved items, the drawer's order and whether the goal
        is met (or ``unreachable``). Without closure it is valid for any population.

    Raises
    ------
    ValueError
        If ``top_k`` is out of range, or ``previous`` was computed for another goal,
        level, ρ or number of items.

    Examples
    --------
    >>> s = PairSequences(3)
    >>> s.add([0] * 400, [1] * 400, [1.0] * 400, float("inf"))  # item 0 always beats 1
    >>> s.add([1] * 400, [2] * 400, [1.0] * 400, float("inf"))  # … and 1 always beats 2
    >>> bool(pairwise_goal_status(s, 0.95, top_k=1).met)  # 0 v 2 never asked: no majority top 1 yet
    False
    >>> g = pairwise_goal_status(s, 0.95, top_k=1, transitive=True)  # assuming WST
    >>> bool(g.met), g.certified.tolist(), bool(g.beats[0, 2])  # 0 beats 2 by transitivity
    (True, [0], True)
    >>> s.add([0] * 400, [2] * 400, [1.0] * 400, float("inf"))  # … and 0 always beats 2
    >>> bool(pairwise_goal_status(s, 0.95).met), pairwise_goal_status(s, 0.95).order.tolist()
    (True, [0, 1, 2])
    """
    m = seqs.n_items
    if top_k is not None and not 1 <= top_k < m:
        raise ValueError("top_k must be between 1 and the number of items − 1")
    est, lo, hi = seqs.intervals(level, rho)
    start = None
    if previous is not None:
        same = (previous.level, previous.rho, previous.top_k, previous.pair_lower.size, previous.transitive)
        if same != (level, rho, top_k, seqs.n_pairs, transitive):
            raise ValueError("previous was computed for another goal, level, rho or number of items")
        lo, hi = np.maximum(lo, previous.pair_lower), np.minimum(hi, previous.pair_upper)
        start = previous.estimate
    direct, _empty = _direct(m, lo, hi)
    score = _fit_btl(m, est, seqs.answers, start)
    if transitive:
        closed = _close(direct)
        return _assemble(seqs, est, lo, hi, closed, np.diagonal(closed), score, level, rho, top_k, True)
    cycle = _on_cycle(direct) if top_k is None else np.zeros(m, dtype=bool)
    return _assemble(seqs, est, lo, hi, direct, cycle, score, level, rho, top_k, False)


def restored_status(
    seqs: PairSequences,
    level: float,
    top_k: int | None,
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    score: NDArray[np.float64],
    rho: float = RHO_ANSWERS,
) -> PairwiseGoalStatus:
    """The status :func:`pairwise_goal_status` (without closure) returned with these bounds and fit.

    Parameters
    ----------
    seqs : PairSequences
        The pairs' running sums.
    level : float
        Confidence level.
    top_k : int or None
        The goal.
    lower, upper : numpy.ndarray of float64
        The stored intersected bounds per pair.
    score : numpy.ndarray of float64
        The stored BTL fit.
    rho : float, default RHO_ANSWERS
        The mixture's ρ.

    Returns
    -------
    PairwiseGoalStatus
        Rebuilt without fitting again (O(m²)), for a service reading a stored state per
        request.

    Raises
    ------
    ValueError
        If the stored arrays do not fit the number of items.
    """
    m = seqs.n_items
    if lower.shape != (seqs.n_pairs,) or upper.shape != lower.shape or score.shape != (m,):
        raise ValueError("the stored arrays do not fit the number of items")
    est, _lo, _hi = seqs.intervals(level, rho)
    direct, _empty = _direct(m, lower, upper)
    cycle = _on_cycle(direct) if top_k is None else np.zeros(m, dtype=bool)
    return _assemble(seqs, est, lower, upper, direct, cycle, score, level, rho, top_k, False)


def _assemble(
    seqs: PairSequences,
    est: NDArray[np.float64],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    beats: NDArray[np.bool_],
    cycle: NDArray[np.bool_],
    score: NDArray[np.float64],
    level: float,
    rho: float,
    top_k: int | None,
    transitive: bool,
) -> PairwiseGoalStatus:
    """The status from the certified relation ``beats`` (``cycle``: items on a certified cycle)."""
    m = seqs.n_items
    a, b = _triu(m)
    empty = lo > hi
    bad = np.zeros(m, dtype=bool)
    bad[a[empty]] = bad[b[empty]] = True
    if transitive:
        bad |= cycle  # under WST a cycle means the all-times event failed
    below = beats.sum(axis=1) - np.diagonal(beats)
    above = beats.sum(axis=0) - np.diagonal(beats)
    # Estimated majority wins (pairs estimated above ½): the estimated order of the
    # majority estimands, before the BTL fit breaks its ties (it orders the drawer's
    # guess, never the certificate).
    wins = np.zeros((m, m), dtype=bool)
    wins[a, b], wins[b, a] = est > 0.5, est < 0.5
    majority = wins.sum(axis=1)
    if top_k is None:
        # Every pair decided and no cycle (without WST a cycle of majorities may be true:
        # then there is no order to certify).
        resolved = (below + above == m - 1) & ~bad & ~cycle
        met = bool(resolved.all())
        unreachable = not transitive and bool(cycle.any())
        active = ~resolved
        order = np.lexsort((-score, -majority, -(below - above)))
        certified = order[resolved[order]]
    else:
        inside = (below >= m - top_k) & ~bad
        outside = (above >= top_k) & ~bad
        met = int(inside.sum()) == top_k and int(outside.sum()) == m - top_k
        if not transitive:
            # Without closure, each member must beat each non-member directly.
            met = met and bool(beats[np.ix_(inside, ~inside)].all())
        # An item certainly beaten by K others is in no majority top-K, and one that
        # certainly beats m − K others is in every one: with more than m − K of the
        # first or more than K of the second there is none.
        unreachable = not transitive and (int(outside.sum()) > m - top_k or int(inside.sum()) > top_k)
        active = ~(inside | outside)
        rank = np.where(inside, 2, np.where(outside, 0, 1))
        order = np.lexsort((-score, -majority, -rank))
        certified = order[inside[order]]
    return PairwiseGoalStatus(
        met,
        certified,
        active,
        score,
        below.astype(np.float64),
        (m - 1 - above).astype(np.float64),
        order,
        level,
        rho,
        top_k,
        np.flatnonzero(bad),
        est,
        lo,
        hi,
        beats,
        transitive,
        unreachable,
    )


def draw_pairwise_respondent(
    status: PairwiseGoalStatus,
    answered: ArrayLike,
    count: int,
    rng: np.random.Generator,
    answers: ArrayLike | None = None,
    explore: float = 0.05,
    rule: Literal["least", "width"] = "least",
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Up to ``count`` pairs (i, j) for one respondent, every one counting, chosen from ``status`` alone.

    Parameters
    ----------
    status : PairwiseGoalStatus
        The goal's status (answers given before).
    answered : array_like of bool (m,)
        The items the respondent has answered about; pairs are on other items, disjoint
        from each other.
    count : int
        The most pairs, ≥ 0.
    rng : numpy.random.Generator
        The draws' generator.
    answers : array_like of int, optional
        The pairs' counts, which the call increments for the pairs it returns, so that
        callers serving several respondents spread them.
    explore : float, default 0.05
        The probability, in [0, 1], that a pair is uniform over the pairs of items still
        free for the respondent (exploration: no item starves).
    rule : {"least", "width"}, default "least"
        ``least`` answered first (ties at random), or ``width``: drawn with probability
        proportional to the pair's width (upper − lower bound).

    Returns
    -------
    tuple of numpy.ndarray of int64
        (i, j): fewer pairs when no candidate is free, none once the goal is met.

    Raises
    ------
    ValueError
        If ``answered`` has not one flag per item, ``explore`` is outside [0, 1],
        ``count`` is negative, or ``rule`` is unknown.

    Notes
    -----
    Otherwise than exploring, a pair is the first free pair of the candidates — the
    uncertified pairs across the estimated top-K's boundary (the first K of
    ``status.order``; whole ranking: between neighbours in it), or when there are none,
    any uncertified pair (none when the goal is ``unreachable``); with a ``transitive``
    status only pairs with an item in doubt, which closure cannot settle otherwise
    (without closure each member must beat each non-member directly: every uncertified
    pair across the boundary is needed) — ordered by ``rule``.

    Examples
    --------
    >>> s = PairSequences(4)
    >>> g = pairwise_goal_status(s, 0.9, top_k=1)
    >>> i, j = draw_pairwise_respondent(g, [False] * 4, 5, np.random.default_rng(0), explore=0.0)
    >>> len(i)  # every pair across the boundary holds the estimated best item: one pair
    1
    >>> i, j = draw_pairwise_respondent(g, [False] * 4, 5, np.random.default_rng(0), explore=1.0)
    >>> len(i), len(set(i.tolist()) | set(j.tolist()))  # uniform pairs, disjoint: four items
    (2, 4)
    """
    m = status.beats.shape[0]
    free = ~np.asarray(answered, dtype=bool).copy()
    if free.size != m or not 0.0 <= explore <= 1.0 or count < 0:
        raise ValueError("answered must have one flag per item, explore be in [0, 1], count ≥ 0")
    empty = np.zeros(0, dtype=np.int64)
    if status.met or status.unreachable:
        return empty, empty.copy()
    n = np.zeros(status.pair_lower.size) if answers is None else np.asarray(answers)
    a, b = _triu(m)
    decided = status.beats[a, b] | status.beats[b, a]
    open_ = ~decided & (status.active[a] | status.active[b]) if status.transitive else ~decided
    if status.top_k is None:
        rank = np.empty(m, dtype=np.int64)
        rank[status.order] = np.arange(m)
        boundary = np.abs(rank[a] - rank[b]) == 1
    else:
        guess = np.zeros(m, dtype=bool)
        guess[status.order[: status.top_k]] = True
        boundary = guess[a] != guess[b]
    if rule == "least":
        tie = rng.random(a.size)
        key = n + tie  # counts are integers: least-answered first, ties at random
    elif rule == "width":
        width = np.maximum(status.pair_upper - status.pair_lower, 1e-12)
        key = rng.exponential(size=a.size) / width  # an exponential race: P ∝ width
    else:
        raise ValueError("rule must be 'least' or 'width'")
    queue = np.flatnonzero(open_ & boundary)
    if queue.size == 0:
        queue = np.flatnonzero(open_)
    queue = queue[np.argsort(key[queue])]
    xs: list[int] = []
    ys: list[int] = []
    pos = 0
    while len(xs) < count and free.sum() >= 2:
        if rng.random() < explore:
            x, y = rng.choice(np.flatnonzero(free), size=2, replace=False)
        else:
            while pos < queue.size and not (free[a[queue[pos]]] and free[b[queue[pos]]]):
                pos += 1
            if pos == queue.size:
                break
            x, y = a[queue[pos]], b[queue[pos]]
            pos += 1
        free[x] = free[y] = False
        xs.append(int(x))
        ys.append(int(y))
    i, j = np.array(xs, dtype=np.int64), np.array(ys, dtype=np.int64)
    if answers is not None and i.size:
        n[pair_index(i, j, m)[0]] += 1  # disjoint pairs: no index twice
    return i, j


def simulate_pairwise_goal(
    theta: ArrayLike | Population,
    epsilon: float,
    level: float,
    strategy: Literal["adaptive", "balanced"],
    rng: np.random.Generator,
    top_k: int | None = None,
    batch: int | None = None,
    max_answers: int = 10_000_000,
    tau: float = 0.0,
    pairs_per_respondent: int = 10,
    check: Callable[[], None] | None = None,
    explore: float = 0.05,
    rule: Literal["least", "width"] = "least",
    transitive: bool = False,
) -> GoalRun:
    """:func:`~app.stats.adaptive.simulate_goal` with the pairwise certificate.

    Parameters
    ----------
    theta : array_like or Population
        True BTL scores, or a :class:`~app.stats.simulation.Population`.
    epsilon : float
        ε of every answer.
    level : float
        Confidence level of the certificate.
    strategy : {"adaptive", "balanced"}
        ``adaptive``: pairs by :func:`draw_pairwise_respondent`; ``balanced``: uniform
        disjoint pairs (``explore`` = 1).
    rng : numpy.random.Generator
        The simulation's generator.
    top_k : int, optional
        K; None: the whole ranking.
    batch : int, optional
        Answers between checks (default max(m, 50)).
    max_answers : int, default 10000000
        The cap.
    tau : float, default 0.0
        Respondent effects: with τ > 0 each respondent has its own scores θ + τ·N(0, 1).
    pairs_per_respondent : int, default 10
        The most disjoint pairs served to one respondent.
    check : callable, optional
        Called before each batch; may raise to stop the work.
    explore : float, default 0.05
        As in :func:`draw_pairwise_respondent`.
    rule : {"least", "width"}, default "least"
        As in :func:`draw_pairwise_respondent`.
    transitive : bool, default False
        Certify under closure (valid only under WST).

    Returns
    -------
    GoalRun
        As :func:`~app.stats.adaptive.simulate_goal`.

    Notes
    -----
    New respondents, true BTL answers randomized at ``epsilon`` or answers from a
    population, the goal checked after every ``batch`` answers or every 2% of the answers
    so far when that is more. All respondents of one batch are served from the status
    before it.
    """
    theta, m = preferences(theta)
    batch = batch or max(m, 50)
    seqs = PairSequences(m)
    status = pairwise_goal_status(seqs, level, top_k, transitive=transitive)
    used = respondents = 0
    share = 1.0 if strategy == "balanced" else explore
    while not status.met and used < max_answers:
        if check is not None:
            check()
        step = min(max(batch, used // 50), max_answers - used)
        pending = seqs.answers.astype(np.float64)
        parts_i: list[NDArray[np.int64]] = []
        parts_j: list[NDArray[np.int64]] = []
        parts_who: list[NDArray[np.int64]] = []
        got = 0
        while got < step:
            i, j = draw_pairwise_respondent(
                status, np.zeros(m, dtype=bool), pairs_per_respondent, rng, pending, share, rule
            )
            if i.size == 0:
                break
            i, j = i[: step - got], j[: step - got]
            parts_i.append(i)
            parts_j.append(j)
            parts_who.append(np.full(i.size, len(parts_who), dtype=np.int64))
            got += i.size
        if got == 0:
            break  # nothing left to ask: the goal cannot be reached (contradicted bounds)
        i, j, who = np.concatenate(parts_i), np.concatenate(parts_j), np.concatenate(parts_who)
        z = simulated_answers(theta, i, j, who, len(parts_who), epsilon, tau, rng)
        seqs.add(i, j, z, epsilon)
        used += got
        respondents += len(parts_who)
        status = pairwise_goal_status(seqs, level, top_k, previous=status, transitive=transitive)
    if not status.met:
        return GoalRun(used, respondents, None, status)
    return GoalRun(used, respondents, status.order if top_k is None else status.certified, status)
