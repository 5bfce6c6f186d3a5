"""Privacy planner: what a survey design will deliver, before it runs.

Given m items, L respondents who each answer k pairs, their ε (one value or a
distribution) and the size K of the top set of interest, :func:`plan` predicts the
expected ℓ∞ error of θ̂, the Kendall error and the probability of recovering the exact
top-K set, by simulation with Monte Carlo standard errors (its Notes say how).
:func:`respondents_needed` and :func:`epsilon_needed` solve the inverse problems,
searching over L or ε with common random numbers (the same seed at every candidate) so
that Monte Carlo noise does not make the prediction non-monotone. Once a survey has
answers, :mod:`.survey_plan` plans from its own design and fit instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit

from .mechanisms import debias, flip_probability, privacy_noise_variance, validate_epsilon
from .metrics import kendall_tau_error, linf_error, top_k_membership
from .mle import fit_debiased_mle_stats
from .pairs import PairStats
from .simulation import all_pairs, evenly_spaced_theta, uniform_theta
from .theory import H, dividing_line_epsilon

__all__ = [
    "MAX_PLAN_EPSILON_LEVELS",
    "MAX_PLAN_ITEMS",
    "MAX_PLAN_RESPONDENTS",
    "MAX_PLAN_SCORE",
    "Estimate",
    "Plan",
    "epsilon_distribution",
    "epsilon_needed",
    "pilot_scores",
    "plan",
    "plan_seconds",
    "respondents_needed",
]

MAX_PLAN_ITEMS = 500
#: The most respondents a plan simulates (and a search for them tries).
MAX_PLAN_RESPONDENTS = 10_000_000
#: The most distinct ε values of a distribution (equal values are merged first): each
#: is one binomial draw per pair and replicate. Bin a finer distribution.
MAX_PLAN_EPSILON_LEVELS = 32
#: Pilot scores are log-odds; beyond ±50 of their mean every comparison is certain.
MAX_PLAN_SCORE = 50.0
#: Predicted cost of one replicate with one BLAS thread: a fixed part (metrics, λ,
#: set-up), the count array over every pair, and per pair with answers one binomial
#: draw per ε level plus the debiased fit's share. ``python -m
#: tests.benchmarks.bench_coverage`` prints the prediction against the run time
#: (m = 10 … 500, 1 … 32 ε levels; its "planner run time" table).
PLAN_SECONDS_FIXED = 1e-3
PLAN_SECONDS_PER_PAIR = 2e-8
PLAN_SECONDS_PER_ANSWERED_PAIR = 2.5e-7
PLAN_SECONDS_PER_DRAW = 1.5e-7


def _no_check() -> None:
    return None


def plan_seconds(n_items: int, comparisons: int, levels: int, replications: int) -> float:
    """Predicted seconds of :func:`plan` for ``comparisons`` = L·k answers in all.

    Parameters
    ----------
    n_items : int
        m.
    comparisons : int
        L·k.
    levels : int
        Distinct ε values.
    replications : int
        Simulated surveys.

    Returns
    -------
    float
        The prediction from :data:`PLAN_SECONDS_FIXED` and the per-pair, per-answered-pair
        and per-draw costs.
    """
    n_pairs = n_items * (n_items - 1) // 2
    answered = min(n_pairs, comparisons)
    per = (
        PLAN_SECONDS_FIXED
        + n_pairs * PLAN_SECONDS_PER_PAIR
        + answered * (PLAN_SECONDS_PER_ANSWERED_PAIR + levels * PLAN_SECONDS_PER_DRAW)
    )
    return replications * per


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo estimate: mean and its standard error."""

    mean: float
    se: float


@dataclass(frozen=True)
class Plan:
    n_items: int
    n_respondents: int
    pairs_per_respondent: int
    k: int
    epsilon: list[float]
    epsilon_weights: list[float]
    replications: int
    linf_error: Estimate
    l2_error: Estimate
    kendall_error: Estimate
    p_exact_top_k: Estimate
    comparisons_per_pair: float
    respondent_epsilon_total: list[float]
    G: float
    H: float
    dividing_line_epsilon: float
    scores: str
    assumption: str
    #: The true-score model in words for code: "pilot", "even" (``gap`` apart) or "uniform"
    #: (drawn between −``spread`` and ``spread``); ``assumption`` words it with the design.
    score_model: str = "uniform"
    spread: float | None = None
    gap: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def epsilon_distribution(epsilon: ArrayLike, weights: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ε values (sorted) and their weights, summing to 1.

    Parameters
    ----------
    epsilon : float or array_like
        One or more finite ε values (equal values are merged).
    weights : array_like or None
        One non-negative weight per value (None: equal).

    Returns
    -------
    tuple of numpy.ndarray
        (values, weights).

    Raises
    ------
    ValueError
        On no or non-finite ε values, invalid weights, or more than
        :data:`MAX_PLAN_EPSILON_LEVELS` distinct values.

    Examples
    --------
    >>> from app.stats.planner import epsilon_distribution
    >>> values, weights = epsilon_distribution([2.0, 1.0, 2.0], None)
    >>> values.tolist(), [round(w, 4) for w in weights.tolist()]
    ([1.0, 2.0], [0.3333, 0.6667])
    """
    eps = np.atleast_1d(validate_epsilon(epsilon)).astype(float).reshape(-1)
    if eps.size == 0 or not np.all(np.isfinite(eps)):
        raise ValueError("give one or more finite epsilon values")
    if weights is None:
        w = np.ones(eps.size)
    else:
        w = np.asarray(weights, dtype=float).reshape(-1)
        if w.shape != eps.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.max() > 0:
            raise ValueError("epsilon_weights must be finite and non-negative, one per epsilon, not all 0")
    values, where = np.unique(eps, return_inverse=True)
    if values.size > MAX_PLAN_EPSILON_LEVELS:
        raise ValueError(
            f"at most {MAX_PLAN_EPSILON_LEVELS} distinct epsilon values ({values.size} given); "
            "group a finer distribution into bins"
        )
    w = np.asarray(
        np.bincount(where.reshape(-1), weights=w / w.max(), minlength=values.size), dtype=np.float64
    )
    return values, w / w.sum()


def _validate(m: int, L: int, k_pairs: int, k: int) -> None:
    if not 2 <= m <= MAX_PLAN_ITEMS:
        raise ValueError(f"n_items must be between 2 and {MAX_PLAN_ITEMS}")
    if not 1 <= L <= MAX_PLAN_RESPONDENTS:
        raise ValueError(f"n_respondents must be between 1 and {MAX_PLAN_RESPONDENTS:,}")
    if not 1 <= k_pairs <= m * (m - 1) // 2:
        raise ValueError(f"pairs_per_respondent must be between 1 and {m * (m - 1) // 2}")
    if not 1 <= k < m:
        raise ValueError("k must be between 1 and n_items − 1")


def _truth(
    m: int, rng: np.random.Generator, spread: float, gap: float | None, scores: np.ndarray | None = None
) -> np.ndarray:
    if scores is not None:
        return scores
    return evenly_spaced_theta(m, gap) if gap is not None else uniform_theta(m, rng, -spread, spread)


def pilot_scores(scores: ArrayLike) -> np.ndarray:
    """Pilot scores taken as the true ones, centred on their mean.

    The one rule for every planner's pilot scores.

    Parameters
    ----------
    scores : array_like
        One score per item.

    Returns
    -------
    numpy.ndarray
        The scores minus their mean.

    Raises
    ------
    ValueError
        With a sentence for the person who gave them, unless every one is finite and
        within :data:`MAX_PLAN_SCORE` of their mean.

    Examples
    --------
    >>> pilot_scores([3.0, 1.0, 2.0]).tolist()
    [1.0, -1.0, 0.0]
    """
    th = np.asarray(scores, dtype=float).reshape(-1)
    if th.size == 0:
        raise ValueError("scores must not be empty")
    if not np.all(np.isfinite(th)):
        raise ValueError("scores must be finite numbers (not NaN or infinite)")
    # Shift by the first score before centring (no overflow for any finite spread that
    # can pass: scores far from 0 but close together are fine), then bound the spread.
    with np.errstate(over="ignore", invalid="ignore"):
        th = th - th[0]
        th = th - th.mean()
    if not np.all(np.abs(th) <= MAX_PLAN_SCORE):  # also false for the inf of an overflow
        raise ValueError(
            f"scores must lie within ±{MAX_PLAN_SCORE:g} of their mean (they are log-odds: beyond that, "
            "every comparison's outcome is certain)"
        )
    return th


def _scores(scores: ArrayLike | None, m: int) -> np.ndarray | None:
    if scores is None:
        return None
    if np.asarray(scores, dtype=float).reshape(-1).shape != (m,):
        raise ValueError("scores must be finite, one per item")
    return pilot_scores(scores)


def _replicate(theta, counts, pi, pj, eps, w, rng) -> PairStats:
    m = theta.size
    d = theta[pi] - theta[pj]
    keep = counts > 0
    n_total = counts[keep]
    by_level = rng.multinomial(n_total, w) if eps.size > 1 else n_total[:, None]
    sums = np.zeros((5, n_total.size))
    for level, e in enumerate(eps):
        n_l = by_level[:, level]
        p = float(flip_probability(e))
        wins = rng.binomial(n_l, p + (1 - 2 * p) * expit(d[keep]))
        losses = n_l - wins
        z1, z0 = float(debias(1, e)), float(debias(0, e))
        sums += [
            n_l,
            wins,
            wins * z1 + losses * z0,
            wins * z1**2 + losses * z0**2,
            n_l * float(privacy_noise_variance(e)),
        ]
    return PairStats(
        m,
        pi[keep],
        pj[keep],
        sums[0].astype(np.int64),
        sums[1],
        sums[2],
        sums[3],
        sums[4],
        epsilon_min=float(eps[w > 0].min()),
    )


def plan(
    n_items: int,
    n_respondents: int,
    pairs_per_respondent: int,
    epsilon: ArrayLike,
    k: int,
    epsilon_weights: ArrayLike | None = None,
    spread: float = 2.0,
    gap: float | None = None,
    replications: int = 200,
    seed: int | None = 0,
    scores: ArrayLike | None = None,
    check: Callable[[], None] = _no_check,
) -> Plan:
    """Predict a design's accuracy by simulation, before it runs.

    Parameters
    ----------
    n_items : int
        Items m.
    n_respondents : int
        Respondents L.
    pairs_per_respondent : int
        Pairs k each respondent answers.
    epsilon : float or array_like
        The respondents' ε: one value, or the values of a distribution.
    k : int
        Size K of the top set of interest.
    epsilon_weights : array_like or None
        Weights of ``epsilon``'s values (None: equal).
    spread : float, default 2.0
        True scores drawn Uniform(−spread, spread).
    gap : float or None
        True scores evenly spaced ``gap`` apart instead.
    replications : int, default 200
        Simulated surveys, at least 10.
    seed : int or None, default 0
        Seed of the simulation (``None``: fresh entropy).
    scores : array_like or None
        Pilot scores taken as the true ones (one per item; e.g. from an earlier
        survey) instead of drawing them; ``spread`` and ``gap`` are then unused.
    check : callable
        Called before each replicate; may raise to stop the work.

    Returns
    -------
    Plan
        The expected ℓ∞, ℓ2 and Kendall errors of θ̂ and the probability of recovering
        the exact top-K set, each with its Monte Carlo standard error, and the design's
        G, H and dividing-line ε.

    Raises
    ------
    ValueError
        On an invalid design, ε distribution, ``spread``, ``gap``, ``scores`` or fewer
        than 10 replications.

    Notes
    -----
    The simulation never draws individual answers: the service serves least-answered
    pairs first, so the L·k comparisons spread over the P = m(m−1)/2 pairs as evenly as
    possible (each pair gets ⌊Lk/P⌋ or one more), the ε of a comparison is its
    respondent's (distributed as the ε distribution), and given a pair's count at one ε
    the number of reported wins is binomial (Lemma 1). So each replicate is one
    multinomial and a few binomial draws per pair, then a fit of the debiased MLE with
    its default λ.

    True scores are a modelling choice the planner cannot know: by default they are
    drawn Uniform(−spread, spread) as in the paper's simulations (spread 2: the best
    item beats the worst about 98% of the time); ``gap`` fixes the separation at the
    top-K boundary; ``scores`` takes pilot scores as the truth. Once a survey has
    answers, :func:`~app.stats.survey_plan.plan_survey` plans from its own design and
    fit instead.
    """
    m, L, kp = int(n_items), int(n_respondents), int(pairs_per_respondent)
    _validate(m, L, kp, int(k))
    eps, w = epsilon_distribution(epsilon, epsilon_weights)
    if replications < 10:
        raise ValueError("replications must be at least 10")
    if gap is not None and not gap > 0:
        raise ValueError("gap must be positive")
    if not spread > 0:
        raise ValueError("spread must be positive")
    pilot = _scores(scores, m)
    rng = np.random.default_rng(seed)
    pi, pj = all_pairs(m)
    n_pairs = pi.size
    total = L * kp
    base, extra = divmod(total, n_pairs)
    out = np.empty((replications, 4))
    for r in range(replications):
        check()
        theta = _truth(m, rng, spread, gap, pilot)
        counts = np.full(n_pairs, base, dtype=np.int64)
        counts[rng.choice(n_pairs, size=extra, replace=False)] += 1
        fit = fit_debiased_mle_stats(_replicate(theta, counts, pi, pj, eps, w, rng))
        exact = np.all(top_k_membership(fit.theta, k) == top_k_membership(theta, k))
        out[r] = (
            linf_error(fit.theta, theta),
            float(np.linalg.norm(fit.theta - (theta - theta.mean())) / math.sqrt(m)),
            kendall_tau_error(fit.theta, theta),
            float(exact),
        )
    mean = [float(x) for x in out.mean(axis=0)]
    se = [float(x) for x in out.std(axis=0, ddof=1) / math.sqrt(replications)]
    g = float(np.dot(w, 1 / np.tanh(eps / 2) ** 2))
    if pilot is not None:
        truth = "equal to the pilot scores given"
    elif gap is not None:
        truth = f"evenly spaced, {gap:g} apart (neighbours differ by {100 * (expit(gap) - 0.5):.0f} points)"
    else:
        truth = (
            f"drawn at random between −{spread:g} and {spread:g} for each simulated survey (the best item "
            f"beats the worst about {100 * expit(2 * spread):.0f}% of the time)"
        )
    levels = " or ".join(f"{e:g}" for e in eps)
    assumption = (
        f"Assumes the items' true scores are {truth}; {L} respondents each answer {kp} different pairs at "
        f"ε = {levels}, served least-answered first so that every pair is asked about equally often; "
        "respondents answer independently of one another (no one's taste differs from the population's). "
        f"'Found' means the estimated top {int(k)} is exactly the true one, whether or not intervals "
        "could certify it. Once answers arrive, plan from the survey itself (GET /v1/surveys/{id}/plan)."
    )
    return Plan(
        n_items=m,
        n_respondents=L,
        pairs_per_respondent=kp,
        k=int(k),
        epsilon=eps.tolist(),
        epsilon_weights=w.tolist(),
        replications=replications,
        linf_error=Estimate(mean[0], se[0]),
        l2_error=Estimate(mean[1], se[1]),
        kendall_error=Estimate(mean[2], se[2]),
        p_exact_top_k=Estimate(mean[3], se[3]),
        comparisons_per_pair=total / n_pairs,
        respondent_epsilon_total=(kp * eps).tolist(),
        G=g,
        H=H(eps[w > 0]),
        dividing_line_epsilon=dividing_line_epsilon(m, total / n_pairs),
        scores=(
            "pilot scores " + ", ".join(f"{x:.3g}" for x in pilot)
            if pilot is not None
            else f"evenly spaced, gap {gap:g}"
            if gap is not None
            else f"uniform on (−{spread:g}, {spread:g})"
        ),
        assumption=assumption,
        score_model="pilot" if pilot is not None else "even" if gap is not None else "uniform",
        spread=None if pilot is not None or gap is not None else float(spread),
        gap=None if pilot is not None or gap is None else float(gap),
    )


def respondents_needed(
    target: float,
    n_items: int,
    pairs_per_respondent: int,
    epsilon: ArrayLike,
    k: int,
    max_respondents: int = 1_000_000,
    **options,
) -> tuple[int | None, Plan]:
    """The fewest respondents L whose predicted P(exact top-K) reaches ``target``.

    Parameters
    ----------
    target : float
        Probability of recovering the exact top-K, in (0, 1).
    n_items : int
        m.
    pairs_per_respondent : int
        k.
    epsilon : float or array_like
        The respondents' ε (one value or a distribution).
    k : int
        K.
    max_respondents : int, default 1000000
        The largest L tried.
    **options
        Further arguments of :func:`plan`.

    Returns
    -------
    tuple of (int or None, Plan)
        (L, its plan), or (None, the plan at ``max_respondents``) when out of reach.

    Raises
    ------
    ValueError
        If ``target`` is outside (0, 1), and as :func:`plan`.

    Notes
    -----
    Doubles L from 10 until the target is met, then bisects (to within 2%), with common
    random numbers (the same seed at every candidate).
    """
    if not 0 < target < 1:
        raise ValueError("target must be in (0, 1)")
    ok = lambda p: p.p_exact_top_k.mean >= target  # noqa: E731
    lo, hi = 0, 10
    best = plan(n_items, hi, pairs_per_respondent, epsilon, k, **options)
    while not ok(best):
        if hi >= max_respondents:
            return None, best
        lo, hi = hi, min(2 * hi, max_respondents)
        best = plan(n_items, hi, pairs_per_respondent, epsilon, k, **options)
    while hi - lo > max(1, hi // 50):
        mid = (lo + hi) // 2
        candidate = plan(n_items, mid, pairs_per_respondent, epsilon, k, **options)
        if ok(candidate):
            hi, best = mid, candidate
        else:
            lo = mid
    return hi, best


def epsilon_needed(
    target: float,
    n_items: int,
    n_respondents: int,
    pairs_per_respondent: int,
    k: int,
    eps_min: float = 0.01,
    eps_max: float = 10.0,
    **options,
) -> tuple[float | None, Plan]:
    """The smallest ε (every respondent's) whose predicted P(exact top-K) reaches ``target``.

    Parameters
    ----------
    target : float
        Probability of recovering the exact top-K, in (0, 1).
    n_items : int
        m.
    n_respondents : int
        L, the respondents available.
    pairs_per_respondent : int
        k.
    k : int
        K.
    eps_min, eps_max : float, default 0.01 and 10.0
        The range searched.
    **options
        Further arguments of :func:`plan`.

    Returns
    -------
    tuple of (float or None, Plan)
        (ε, its plan), or (None, the plan at ``eps_max``) when even that is not enough.

    Raises
    ------
    ValueError
        If ``target`` is outside (0, 1), and as :func:`plan`.

    Notes
    -----
    Bisection on log ε to 2%, with common random numbers.
    """
    if not 0 < target < 1:
        raise ValueError("target must be in (0, 1)")
    options.pop("epsilon_weights", None)
    top = plan(n_items, n_respondents, pairs_per_respondent, eps_max, k, **options)
    if top.p_exact_top_k.mean < target:
        return None, top
    lo, hi, best = eps_min, eps_max, top
    while hi / lo > 1.02:
        mid = math.sqrt(lo * hi)
        candidate = plan(n_items, n_respondents, pairs_per_respondent, mid, k, **options)
        if candidate.p_exact_top_k.mean >= target:
            hi, best = mid, candidate
        else:
            lo = mid
    return hi, best
