"""Adaptive pair selection with a certified stop (docs/uncertainty.md §9).

A survey with a goal — the top-K set, or the whole ranking — stops asking once the goal
is certain and spends its answers where the goal is still in doubt. Each item's Borda
score gets a confidence sequence (Robbins' normal mixture, :func:`mixture_radius`) fed by
answers whose opponent is uniform (:func:`draw_respondent_pairs`), valid however often
it is checked; items are resolved one by one and the top-K certified when its bounds
separate from the rest. docs/uncertainty.md §9 derives the samples, the sequences, the
stop and the assumptions; :mod:`app.stats.pairwise_goal` certifies the majority
estimand instead. References: docs/uncertainty.md §10.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from .mechanisms import debias, privatize, validate_epsilon
from .simulation import Population

__all__ = [
    "RHO_ANSWERS",
    "BordaSequences",
    "GoalRun",
    "GoalStatus",
    "draw_for_respondents",
    "draw_respondent_pairs",
    "goal_status",
    "mixture_radius",
    "preferences",
    "simulate_goal",
    "simulated_answers",
]

#: The mixture's ρ in effective answers (answers at ε = ∞ count 1, at ε = 1 about
#: 0.21): the radius is tightest around this many counted answers per item.
RHO_ANSWERS = 64.0


def mixture_radius(v: ArrayLike, alpha: float, rho: float) -> NDArray[np.float64]:
    """Robbins' two-sided normal-mixture boundary sqrt((v+ρ)·log((v+ρ)/(ρα²))).

    Parameters
    ----------
    v : array_like
        The variance process V_n (Σ λ_t/4 for a Borda sequence).
    alpha : float
        Error probability, in (0, 1).
    rho : float
        The mixture's ρ > 0, where the radius is tightest.

    Returns
    -------
    numpy.ndarray of float64
        The radius: a martingale with sub-Gaussian increments and variance process v stays
        inside ±radius at all times with probability ≥ 1 − α.

    Raises
    ------
    ValueError
        If α is outside (0, 1) or ρ is not positive.

    Notes
    -----
    For an item's sum S_n = Σ λ_t (z_t − b_i) with weights λ_t = 1/w_t² and v = Σ λ_t/4,
    the interval on its Borda score is b̂_i ± radius / Σλ_t, b̂_i = Σ λ_t z_t / Σ λ_t
    (docs/uncertainty.md §9).

    References
    ----------
    Howard, Ramdas, McAuliffe & Sekhon (2021), *Time-uniform, nonparametric,
    nonasymptotic confidence sequences*, §3.

    Examples
    --------
    >>> r = mixture_radius([0.0, 16.0, 1600.0], alpha=0.05, rho=16.0)
    >>> [round(float(x), 2) for x in r]
    [9.79, 14.63, 130.92]
    """
    if not 0.0 < alpha < 1.0 or not rho > 0.0:
        raise ValueError("alpha must be in (0, 1) and rho positive")
    s = np.asarray(v, dtype=np.float64) + rho
    return np.sqrt(s * np.log(s / (rho * alpha * alpha)))


@dataclass
class BordaSequences:
    """Running sums of the counted answers, one Borda confidence sequence per item."""

    n_items: int
    weighted: NDArray[np.float64] = field(init=False)  # Σ λ_t z_t
    weight: NDArray[np.float64] = field(init=False)  # Σ λ_t
    answers: NDArray[np.int64] = field(init=False)  # counted answers

    def __post_init__(self) -> None:
        if self.n_items < 2:
            raise ValueError("at least two items")
        self.weighted = np.zeros(self.n_items)
        self.weight = np.zeros(self.n_items)
        self.answers = np.zeros(self.n_items, dtype=np.int64)

    def add(
        self,
        i: ArrayLike,
        j: ArrayLike,
        z: ArrayLike,
        epsilon: ArrayLike,
        count_i: ArrayLike = True,
        count_j: ArrayLike = True,
    ) -> None:
        """Add debiased answers z (1: i won, as in docs/estimator.md §3) on pairs (i, j),
        for i where ``count_i`` and for j (as 1 − z) where ``count_j``."""
        i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
        z = np.asarray(z, dtype=np.float64)
        eps = np.broadcast_to(validate_epsilon(epsilon), z.shape)
        low, high = debias(np.zeros(eps.shape, np.int8), eps), debias(np.ones(eps.shape, np.int8), eps)
        if np.any((z < low - 1e-9) | (z > high + 1e-9)):
            raise ValueError("z must be debiased answers: within [−1/(e^ε−1), e^ε/(e^ε−1)]")
        lam = 1.0 / (high - low) ** 2  # the range's width is coth(ε/2)
        ci = np.broadcast_to(np.asarray(count_i, dtype=bool), z.shape)
        cj = np.broadcast_to(np.asarray(count_j, dtype=bool), z.shape)
        m = self.n_items
        for items, values, keep in ((i, z, ci), (j, 1.0 - z, cj)):
            self.weighted += np.bincount(items[keep], (lam * values)[keep], m)
            self.weight += np.bincount(items[keep], lam[keep], m)
            self.answers += np.bincount(items[keep], minlength=m)

    def intervals(
        self, level: float, rho: float = RHO_ANSWERS
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Estimates b̂ and bounds (lower, upper), holding for all items and at all times
        together with probability ≥ ``level`` (α/m per item). Items without counted
        answers get [0, 1]."""
        alpha = (1.0 - level) / self.n_items
        v = self.weight / 4.0  # Σ λ_t² w_t²/4 with λ_t = 1/w_t²
        radius = mixture_radius(v, alpha, rho / 4.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            est = np.where(self.weight > 0, self.weighted / self.weight, 0.5)
            half = np.where(self.weight > 0, radius / self.weight, np.inf)
        return est, np.clip(est - half, 0.0, 1.0), np.clip(est + half, 0.0, 1.0)


@dataclass(frozen=True)
class GoalStatus:
    """Where a goal stands: which items are resolved, whether it is met."""

    met: bool
    #: Items certainly in the top-K (top-K goals), or whose place is certain (full
    #: ranking), best first.
    certified: NDArray[np.int64]
    #: Items still in doubt: the ones adaptive assignment asks about.
    active: NDArray[np.bool_]
    #: b̂ of the counted answers; the bounds below may exclude it once intersected.
    estimate: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    #: All items, best first by the midpoints of their bounds: when the goal is met,
    #: the certified set leads (top-K) or this is the certified order (full ranking).
    order: NDArray[np.int64]
    #: What the bounds were computed with (a ``previous`` status must match).
    level: float
    rho: float
    top_k: int | None
    #: Items whose intersected bounds are empty: the all-times event failed for them
    #: (probability ≤ 1 − level); they are kept in doubt, never certified.
    contradicted: NDArray[np.int64]


def goal_status(
    seqs: BordaSequences,
    level: float,
    top_k: int | None = None,
    rho: float = RHO_ANSWERS,
    previous: GoalStatus | None = None,
) -> GoalStatus:
    """The goal (``top_k``; None: the whole ranking) checked against the sequences.

    Parameters
    ----------
    seqs : BordaSequences
        The items' running sums.
    level : float
        Confidence level of the certificate.
    top_k : int, optional
        K, between 1 and m − 1; None: the whole ranking.
    rho : float, default RHO_ANSWERS
        The mixture's ρ in effective answers.
    previous : GoalStatus, optional
        The last status at the same level: the bounds are intersected with the earlier
        ones. When every interval ever computed holds, so do their intersections, so this
        keeps the guarantee and makes resolution monotone (an item once resolved stays
        resolved, a goal once met stays met).

    Returns
    -------
    GoalStatus
        Which items are resolved, the certified items, and whether the goal is met.

    Raises
    ------
    ValueError
        If ``top_k`` is out of range, or ``previous`` was computed for another goal,
        level, ρ or number of items.

    Examples
    --------
    >>> s = BordaSequences(3)
    >>> s.add([0] * 4000, [1] * 4000, [1.0] * 4000, float("inf"))  # item 0 always beats 1
    >>> s.add([0] * 4000, [2] * 4000, [1.0] * 4000, float("inf"))  # … and 2
    >>> s.add([1] * 4000, [2] * 4000, [0.5] * 4000, float("inf"))  # 1 and 2 are even
    >>> g = goal_status(s, 0.95, top_k=1)
    >>> bool(g.met), g.certified.tolist(), g.active.tolist()
    (True, [0], [False, False, False])
    >>> bool(goal_status(s, 0.95).met)  # the order of 1 and 2 is not certain
    False
    """
    m = seqs.n_items
    if top_k is not None and not 1 <= top_k < m:
        raise ValueError("top_k must be between 1 and the number of items − 1")
    est, lo, hi = seqs.intervals(level, rho)
    if previous is not None:
        if (previous.level, previous.rho, previous.top_k, previous.lower.size) != (level, rho, top_k, m):
            raise ValueError("previous was computed for another goal, level, rho or number of items")
        lo, hi = np.maximum(lo, previous.lower), np.minimum(hi, previous.upper)
    empty = lo > hi
    # below[i]: items certainly below i; above[i]: items certainly above i (strict, so
    # ties count for neither; an item with empty bounds would count itself: removed).
    # O(m log m).
    below = np.searchsorted(np.sort(hi), lo, side="left") - empty
    above = m - np.searchsorted(np.sort(lo), hi, side="right") - empty
    order = np.argsort(-(lo + hi), kind="stable")
    if top_k is None:
        resolved = (below + above == m - 1) & ~empty
        met = bool(resolved.all())
        certified = order[resolved[order]]
        active = ~resolved
    else:
        inside = (below >= m - top_k) & ~empty
        outside = (above >= top_k) & ~empty
        met = int(inside.sum()) == top_k and int(outside.sum()) == m - top_k
        certified = order[inside[order]]
        active = ~(inside | outside)
    return GoalStatus(met, certified, active, est, lo, hi, order, level, rho, top_k, np.flatnonzero(empty))


def draw_respondent_pairs(
    pool: ArrayLike, count: int, rng: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]:
    """Up to ``count`` pairs (i, j) for one respondent, and whether each counts for i and for j.

    Parameters
    ----------
    pool : array_like of bool (m,)
        The items the answer may count for.
    count : int
        The most pairs drawn.
    rng : numpy.random.Generator
        The draws' generator.

    Returns
    -------
    tuple of numpy.ndarray
        (i, j, counts for i, counts for j).

    Notes
    -----
    Drawn one at a time uniformly among the pairs with at least one item in the pool, each
    drawn pool item then leaving the pool; stops early when the pool is empty. O(m + count).
    Given that a pair holds a pool item, its other item is uniform over the m − 1 others
    whatever was drawn before, so the answer is a sample of the pool item's Borda score
    (docs/uncertainty.md §9); no pair repeats and no item counts twice. The service passes
    the items still in doubt that the respondent has not answered about (adaptive), or all
    those it has not answered about (balanced with a goal).

    Examples
    --------
    >>> i, j, ci, cj = draw_respondent_pairs([True, False, False, False], 3, np.random.default_rng(1))
    >>> i.tolist(), ci.tolist(), cj.tolist()  # one pool item: one pair, counting for it only
    ([0], [True], [False])
    """
    i, j, ci, cj, _ = draw_for_respondents(pool, 1, count, rng)
    return i, j, ci, cj


def draw_for_respondents(
    pool: ArrayLike, respondents: int, count: int, rng: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], NDArray[np.int64]]:
    """:func:`draw_respondent_pairs` for several new respondents with the same pool at once.

    Parameters
    ----------
    pool : array_like of bool (m,)
        The items the answers may count for.
    respondents : int
        New respondents.
    count : int
        The most pairs per respondent.
    rng : numpy.random.Generator
        The draws' generator.

    Returns
    -------
    tuple of numpy.ndarray
        (i, j, counts for i, counts for j, respondent): the pairs of respondent 0 first,
        each in the order drawn, and whose each pair is.

    Raises
    ------
    ValueError
        With fewer than two items.

    Notes
    -----
    Vectorized over respondents. Each respondent's draws follow the rule exactly: a pool
    item is drawn uniformly among those the respondent has not drawn yet (a draw that hits
    one is drawn again), its opponent uniformly among the other m − 1 items, and a pair of
    two such pool items is kept half the time.
    """
    pool = np.asarray(pool, dtype=bool)
    m = pool.size
    if m < 2:
        raise ValueError("at least two items")
    members = np.flatnonzero(pool)
    p = members.size
    gone = np.zeros((respondents, m), dtype=bool)
    left = np.full(respondents, p, dtype=np.int64)  # pool items each respondent has not drawn
    parts: list[tuple[NDArray, NDArray, NDArray, NDArray]] = []
    for _ in range(count):
        need = np.flatnonzero(left > 0)
        if need.size == 0:
            break
        x = np.empty(need.size, dtype=np.int64)
        y = np.empty(need.size, dtype=np.int64)
        both = np.empty(need.size, dtype=bool)
        todo = np.arange(need.size)
        while todo.size:
            rows = need[todo]
            u = rng.random((3, todo.size))
            xs = members[np.minimum((u[0] * p).astype(np.int64), p - 1)]
            # Where most of the pool is drawn already, a draw from the whole pool would mostly
            # be redrawn: pick uniformly among the items left instead (O(p) per respondent).
            sparse = 2 * left[rows] < p
            if sparse.any():
                scores = rng.random((int(sparse.sum()), p))
                scores[gone[rows[sparse]][:, members]] = -1.0
                xs[sparse] = members[scores.argmax(axis=1)]
            ys = np.minimum((u[1] * (m - 1)).astype(np.int64), m - 2)
            ys += ys >= xs  # uniform over the other m − 1 items
            b = pool[ys] & ~gone[rows, ys]
            # A pair of two pool items is reached from either end: keep it half the time,
            # so that every pair with a pool item is equally likely.
            ok = ~gone[rows, xs] & ~(b & (u[2] >= 0.5))
            done = todo[ok]
            x[done], y[done], both[done] = xs[ok], ys[ok], b[ok]
            todo = todo[~ok]
        gone[need, x] = True
        gone[need[both], y[both]] = True
        left[need] -= 1 + both
        parts.append((x, y, both, need))
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return e, e.copy(), np.zeros(0, dtype=bool), np.zeros(0, dtype=bool), e.copy()
    x, y, both, who = (np.concatenate([q[k] for q in parts]) for k in range(4))
    order = np.argsort(who, kind="stable")  # respondent by respondent, in the order drawn
    return x[order], y[order], np.ones(x.size, dtype=bool), both[order], who[order]


def preferences(theta: ArrayLike | Population) -> tuple[NDArray[np.float64] | Population, int]:
    """What a simulation answers from — BTL scores as an array, or a population — and its number of items.

    Parameters
    ----------
    theta : array_like or Population
        BTL scores, or a :class:`~app.stats.simulation.Population`.

    Returns
    -------
    tuple
        (scores as a float array, or the population; m).
    """
    if isinstance(theta, Population):
        return theta, theta.n_items
    scores = np.asarray(theta, dtype=np.float64)
    return scores, int(scores.size)


def simulated_answers(
    theta: NDArray[np.float64] | Population,
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    who: NDArray[np.int64],
    respondents: int,
    epsilon: float,
    tau: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Debiased randomized answers (1: i won) of simulated respondents on the pairs (i, j).

    Parameters
    ----------
    theta : numpy.ndarray or Population
        True BTL scores, or a :class:`~app.stats.simulation.Population` (each respondent
        from one of its groups).
    i, j : numpy.ndarray of int64
        The pairs.
    who : numpy.ndarray of int64
        The respondent (0 to ``respondents`` − 1) of each pair.
    respondents : int
        Simulated respondents.
    epsilon : float
        ε of the randomization.
    tau : float
        Respondent effects: with τ > 0 each respondent has its own scores
        θ + τ·N(0, 1), so one respondent's answers go together.
    rng : numpy.random.Generator
        The simulation's generator.

    Returns
    -------
    numpy.ndarray of float64
        The debiased answers z.
    """
    if isinstance(theta, Population):
        return debias(privatize(theta.answers(i, j, who, respondents, tau, rng), epsilon, rng), epsilon)
    d = theta[i] - theta[j]
    if tau > 0:
        own = rng.normal(0.0, tau, size=(respondents, theta.size))  # each respondent's own scores
        d = d + own[who, i] - own[who, j]
    y = (rng.random(i.size) < expit(d)).astype(np.int8)  # no overflow for a large score spread
    return debias(privatize(y, epsilon, rng), epsilon)


def simulate_goal(
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
) -> GoalRun:
    """One survey run as the service runs it, until its goal is met (or ``max_answers``).

    Parameters
    ----------
    theta : array_like or Population
        True BTL scores, or a :class:`~app.stats.simulation.Population`.
    epsilon : float
        ε of every answer.
    level : float
        Confidence level of the certificate.
    strategy : {"adaptive", "balanced"}
        The pool: the items in doubt (``adaptive``) or all items (``balanced``).
    rng : numpy.random.Generator
        The simulation's generator.
    top_k : int, optional
        K; None: the whole ranking.
    batch : int, optional
        Answers between checks (default: m, at least 50).
    max_answers : int, default 10000000
        The cap.
    tau : float, default 0.0
        Respondent effects: with τ > 0 each respondent has its own scores
        θ + τ·N(0, 1) (one respondent's answers go together).
    pairs_per_respondent : int, default 10
        The most pairs served to one respondent.
    check : callable, optional
        Called before each batch; may raise to stop the work.

    Returns
    -------
    GoalRun
        The answers and respondents used, the certified set (top-K, best first) or order
        (full ranking), None when not met, and the final status.

    Notes
    -----
    Respondents arrive one after another; each is served up to ``pairs_per_respondent``
    pairs by :func:`draw_respondent_pairs` from its pool and answers them all (so a
    respondent answers fewer pairs when its pool runs out: the service serves only pairs
    that count while the goal is unmet). Answers are true BTL answers randomized at
    ``epsilon`` (or, for a population, answers from a respondent's group). The goal is
    checked after every ``batch`` answers, or every 2% of the answers so far when that is
    more (so a run that meets its goal overshoots by at most that much).
    """
    theta, m = preferences(theta)
    batch = batch or max(m, 50)
    seqs = BordaSequences(m)
    used = 0
    status = goal_status(seqs, level, top_k)
    everything = np.ones(m, dtype=bool)
    respondents = 0
    while not status.met and used < max_answers:
        if check is not None:
            check()
        pool = status.active if strategy == "adaptive" else everything
        # Enough new respondents for a batch of answers (fewer pairs each once pools are small).
        step = max(batch, used // 50)  # checks at least every 2% of the answers
        # A respondent answers at most min(pairs, pool size) pairs, and at least half the pool's
        # size when that is less: enough respondents for the step (vectorized over them).
        per = max(1, min(pairs_per_respondent, int(pool.sum()) // 2))
        want = -(-min(step, max_answers - used) // per)
        i, j, ci, cj, who = draw_for_respondents(pool, want, pairs_per_respondent, rng)
        keep = min(i.size, max_answers - used)
        i, j, ci, cj, who = i[:keep], j[:keep], ci[:keep], cj[:keep], who[:keep]
        got = i.size
        respondents += int(np.unique(who).size)
        z = simulated_answers(theta, i, j, who, want, epsilon, tau, rng)
        seqs.add(i, j, z, epsilon, ci, cj)
        used += got
        status = goal_status(seqs, level, top_k, previous=status)
    if not status.met:
        return GoalRun(used, respondents, None, status)
    certified = status.order if top_k is None else status.certified
    return GoalRun(used, respondents, certified, status)


class GoalRun(NamedTuple):
    """One simulated survey (:func:`simulate_goal`)."""

    answers: int
    respondents: int
    #: The certified top-K (best first) or order; None when the goal was not met.
    certified: NDArray[np.int64] | None
    status: GoalStatus
