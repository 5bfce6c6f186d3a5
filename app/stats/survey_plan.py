"""Planning from where a survey stands: how many more respondents certify the top-K?

:mod:`.planner` predicts a design before any answer exists; this module plans from a
running survey. It keeps the survey's own design, adds respondents as the service would
serve them (:mod:`.serving`), simulates respondent random effects τ (estimated by
:func:`~app.stats.random_effects.estimate_tau`) and certifies with the survey's own
cluster-robust rank intervals (docs/uncertainty.md §3 and §6). :func:`plan_survey`
estimates P(certified) for a number of added respondents (its Notes give the simulation);
:func:`respondents_to_certify` searches for the fewest that reach a target, with common
random numbers so that Monte Carlo noise does not make the curve non-monotone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TypedDict, Unpack

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from .inference import Clusters, IntervalsUnavailable, confidence
from .inference.critical import pair_difference_se, simultaneous_critical_value
from .mechanisms import debias, flip_probability, privacy_noise_variance, validate_epsilon
from .metrics import competition_ranks
from .mle import fit_debiased_mle_stats
from .pairs import pair_stats, validate_comparisons
from .random_effects import MAX_TAU, attenuation
from .serving import _serve

__all__ = [
    "MAX_SURVEY_PLAN_ITEMS",
    "MAX_SURVEY_PLAN_WORK",
    "PlanOptions",
    "SurveyDesign",
    "SurveyPlan",
    "plan_survey",
    "respondents_to_certify",
]

#: Every replicate computes an m×m covariance and its simultaneous intervals.
MAX_SURVEY_PLAN_ITEMS = 100
#: The bound on one call's work, in simulated comparisons summed over replicates
#: and candidate sizes, each replicate also counting m³/50 for its covariance and
#: intervals (as long as that many comparisons take): about 100 s on one core at
#: :data:`app.jobs.cost.PLAN_UNITS_PER_SECOND`, the rate the service assumes.
MAX_SURVEY_PLAN_WORK = 15_000_000


def _work(n_items: int, comparisons: float, replications: int) -> float:
    return (comparisons + n_items**3 / 50) * replications


#: Up to this many item pairs (m ≤ 32) every replicate computes its own
#: simultaneous critical value, exactly as GET …/ranking does; beyond, one per size.
FRESH_CRITICAL_PAIRS = 500


@dataclass(frozen=True, eq=False)
class SurveyDesign:
    """Who answered which pair at which ε: a survey's design, without its answers.

    ``respondent`` holds codes 0 … n_respondents − 1 (one per comparison).
    """

    n_items: int
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    epsilon: NDArray[np.float64]
    respondent: NDArray[np.int64]
    n_respondents: int

    @classmethod
    def from_comparisons(cls, n_items: int, i: ArrayLike, j: ArrayLike, epsilon: ArrayLike, respondent):
        ia, ja = validate_comparisons(n_items, i, j)
        eps = np.broadcast_to(validate_epsilon(epsilon), ia.shape).astype(np.float64)
        labels = np.asarray(respondent).reshape(-1)
        if labels.shape != ia.shape:
            raise ValueError("respondent needs one value per comparison")
        _, codes = np.unique(labels, return_inverse=True)
        codes = codes.astype(np.int64).reshape(-1)
        return cls(int(n_items), ia, ja, eps, codes, int(codes.max(initial=-1)) + 1)

    @property
    def sizes(self) -> NDArray[np.int64]:
        """Comparisons per respondent."""
        return np.bincount(self.respondent, minlength=self.n_respondents)

    def profiles(self) -> list[NDArray[np.float64]]:
        """Each respondent's ε values, one per comparison (the profile a new respondent copies)."""
        order = np.argsort(self.respondent, kind="stable")
        bounds = np.cumsum(self.sizes)[:-1]
        return np.split(self.epsilon[order], bounds)


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo estimate: mean and its standard error."""

    mean: float
    se: float


@dataclass(frozen=True)
class SurveyPlan:
    """The prediction for the survey with ``added_respondents`` more respondents."""

    n_items: int
    k: int
    level: float
    current_respondents: int
    current_comparisons: int
    added_respondents: int
    added_comparisons: int
    replications: int
    tau: float
    p_certified: Estimate  # the survey's own intervals certify the top-K
    p_certified_correct: Estimate  # ... and the certified set is the true top-K
    p_exact_top_k: Estimate  # the estimated top-K set is the true one (certified or not)
    certified_items: Estimate  # items of the top-K certified (top_k_certain), 0 … K
    p_refused: Estimate  # intervals refused (IntervalsUnavailable)
    assumption: str

    def as_dict(self) -> dict:
        return asdict(self)


def _answer(theta, i, j, eps, resp, tau, rng):
    """Privatized answers ỹ (1 = i won) of respondents with random effects τ·u_r.

    Draws come from three child streams (random effects, answers, flips), each
    consumed in comparison order, so that a longer survey extends a shorter one.
    """
    g_u, g_y, g_flip = (np.random.default_rng(x) for x in rng.bit_generator.seed_seq.spawn(3))
    d = theta[i] - theta[j]
    if tau > 0:
        m = theta.size
        keys = np.concatenate((resp * m + i, resp * m + j))
        uniq, inv = np.unique(keys, return_inverse=True)
        u = tau * g_u.standard_normal(uniq.size)
        d = d + u[inv[: i.size]] - u[inv[i.size :]]
    y = g_y.random(i.size) < expit(d)
    flip = g_flip.random(i.size) < flip_probability(eps)
    return (y ^ flip).astype(np.float64)


def _certify(theta_true, i, j, y, eps, resp, k, level, rng, crit_cache):
    """(certified, certified and correct, exact top-K, certified items, refused) for one survey."""
    m = theta_true.size
    stats = pair_stats(m, i, j, y, eps)
    fit = fit_debiased_mle_stats(stats)
    truth_top = np.zeros(m, dtype=bool)
    truth_top[np.argsort(-theta_true, kind="stable")[:k]] = True
    est_top = np.zeros(m, dtype=bool)
    est_top[np.lexsort((np.arange(m), competition_ranks(fit.theta)))[:k]] = True
    exact = bool(np.array_equal(est_top, truth_top))
    clusters = Clusters(
        m, i, j, debias(y, eps), privacy_noise_variance(eps), resp, int(resp.max(initial=-1)) + 1
    )
    try:
        conf = confidence(fit, level, clusters=clusters)
    except IntervalsUnavailable:
        return 0.0, 0.0, float(exact), 0.0, 1.0
    # rank_confidence's rule (GET …/ranking's top_k_certain), without the marginal
    # rank intervals and top-K probabilities it also computes: an item is certainly
    # in the top K when its simultaneous rank interval — m minus the items
    # significantly below it, widened to its reported rank — ends by K.
    if m * (m - 1) // 2 <= FRESH_CRITICAL_PAIRS or "crit" not in crit_cache:
        crit, se = simultaneous_critical_value(conf.cov, level, conf.component, 4000, rng, conf.df)
        crit_cache["crit"] = crit
    else:
        crit = crit_cache["crit"]
        se = pair_difference_se(conf.cov, conf.component)
    above = conf.estimate[:, None] - conf.estimate[None, :] > crit * se
    sim_hi = np.maximum(m - above.sum(axis=1), competition_ranks(conf.theta))
    certain = sim_hi <= k
    n_certain = int(certain.sum())
    certified = n_certain == k
    correct = certified and bool(np.array_equal(certain, truth_top))
    return float(certified), float(correct), float(exact), float(n_certain), 0.0


def _check_common(design: SurveyDesign, theta, k: int, level: float, replications: int):
    m = design.n_items
    if not 2 <= m <= MAX_SURVEY_PLAN_ITEMS:
        raise ValueError(f"planning from a survey needs 2 to {MAX_SURVEY_PLAN_ITEMS} items")
    th = np.asarray(theta, dtype=np.float64).reshape(-1)
    if th.shape != (m,) or not np.all(np.isfinite(th)):
        raise ValueError("scores must be finite, one per item")
    if isinstance(k, bool) or not 1 <= int(k) < m:
        raise ValueError("k must be between 1 and the number of items − 1")
    if not (math.isfinite(level) and 0.5 <= level < 1):
        raise ValueError("confidence must be in [0.5, 1)")
    if not 10 <= replications <= 2000:
        raise ValueError("replications must be between 10 and 2000")
    return th - th.mean()


def _new_profiles(design: SurveyDesign, added: int, new_profile, rng) -> list[NDArray[np.float64]]:
    if added == 0:
        return []
    if new_profile is not None:
        return [new_profile] * added
    profiles = design.profiles()
    if not profiles:
        raise ValueError("the survey has no respondents to copy: give the new respondents' design")
    pick = rng.integers(0, len(profiles), added)
    return [profiles[x] for x in pick]


def _profile(pairs_per_respondent: int | None, epsilon: float | None, m: int):
    if pairs_per_respondent is None and epsilon is None:
        return None
    if pairs_per_respondent is None or epsilon is None:
        raise ValueError("give both pairs_per_respondent and epsilon for the new respondents, or neither")
    if not 1 <= pairs_per_respondent <= m * (m - 1) // 2:
        raise ValueError(f"pairs_per_respondent must be between 1 and {m * (m - 1) // 2}")
    eps = float(validate_epsilon(epsilon))
    if not math.isfinite(eps):
        raise ValueError("epsilon must be finite")
    return np.full(int(pairs_per_respondent), eps)


def _expected_new(design: SurveyDesign, new_profile) -> float:
    if new_profile is not None:
        return float(new_profile.size)
    return float(design.sizes.mean()) if design.n_respondents else 0.0


def assumption_text(
    source: str, tau: float, design: SurveyDesign, new_profile, level: float, k: int, tau_interval=None
) -> str:
    """The plan's assumptions in one paragraph (shown with every prediction)."""
    if new_profile is not None:
        new = (
            f"each new respondent answers {new_profile.size} pairs at ε = {new_profile[0]:g}, "
            "served least-answered first"
        )
    else:
        new = (
            "new respondents answer like the current ones (each copies a random current respondent's "
            f"number of answers, {design.sizes.mean():.1f} on average, and ε), served least-answered first"
        )
    if tau_interval is None:
        origin = "as given"
    elif tau_interval[1] < 0.005:
        origin = "estimated from the answers so far, which show no sign of it"
    else:
        origin = (
            f"estimated from the answers so far; {100 * level:g}% interval "
            f"{tau_interval[0]:.2f} to {tau_interval[1]:.2f}"
        )
    hetero = (
        f"respondents differ from one another (random effects of scale τ = {tau:.2f} on the score scale, "
        f"{origin})"
        if tau > 0
        else f"respondents do not differ systematically (τ = 0, {origin})"
    )
    return (
        f"Assumes the true scores are {source}; the current {design.n_respondents} respondents keep their "
        f"{design.i.size} answered pairs; {new}; {hetero}. 'Certified' means the survey's own "
        f"{100 * level:g}% simultaneous intervals put the top {k} apart from the rest, as GET …/ranking "
        "reports in top_k_certain."
    )


def plan_survey(
    design: SurveyDesign,
    theta: ArrayLike,
    k: int,
    added_respondents: int = 0,
    *,
    tau: float = 0.0,
    level: float = 0.95,
    replications: int = 100,
    seed: int | None = 0,
    pairs_per_respondent: int | None = None,
    epsilon: float | None = None,
    source: str = "the given scores",
    tau_interval: list[float] | None = None,
    check: Callable[[], None] | None = None,
) -> SurveyPlan:
    """P(the top-K is certified) once ``added_respondents`` more have answered.

    Parameters
    ----------
    design : SurveyDesign
        The survey's actual comparisons: which respondent answered which pair at which ε.
    theta : array_like (m,)
        The scores taken as the population's true scores (the survey's fit, or pilot
        scores).
    k : int
        The goal: the top ``k`` items certified.
    added_respondents : int, default 0
        New respondents added to the current ones.
    tau : float, default 0.0
        Respondent random-effect scale (:func:`~app.stats.random_effects.estimate_tau`), at most
        :data:`~app.stats.random_effects.MAX_TAU`.
    level : float, default 0.95
        Confidence level of the survey's own intervals.
    replications : int, default 100
        Simulated surveys.
    seed : int or None, default 0
        Seed of the simulation (``None``: fresh entropy).
    pairs_per_respondent : int or None
        Answers of each new respondent; by default new respondents copy current
        respondents' profiles.
    epsilon : float or None
        ε of each new respondent; by default copied with the profile.
    source : str, default "the given scores"
        Where ``theta`` came from; only words :attr:`SurveyPlan.assumption`.
    tau_interval : list of float or None
        Where τ came from (its interval); only words :attr:`SurveyPlan.assumption`.
    check : callable or None
        Called before each replicate; may raise to stop the work.

    Returns
    -------
    SurveyPlan
        P(certified), P(certified and correct), P(exact top-K), certified items and
        P(refused), each with its Monte Carlo standard error.

    Raises
    ------
    ValueError
        On invalid arguments, nothing to plan, no respondent profile to copy, or more
        work than :data:`MAX_SURVEY_PLAN_WORK`.

    Notes
    -----
    :mod:`.planner` predicts a design before any answer exists; this plans from a
    running survey:

    - **Scores**: ``theta`` is taken as the population's true scores θ*. That is an
      assumption, stated in every plan (:attr:`SurveyPlan.assumption`): if the current
      fit is noisy, so is the plan.
    - **Design**: the survey's actual comparisons are kept as they are (unbalanced
      counts, missing pairs), and new respondents are added the way the service would
      serve them: each is a copy of a current respondent's profile (number of answers
      and ε, drawn at random from the current respondents, or given explicitly) and is
      served the pairs answered least so far, ties at random (the service's assignment;
      :mod:`app.respondents.assignment`).
    - **Clustering**: one respondent's answers are correlated. Each simulated
      respondent r answers with scores θ* + τ·u_r, u_r ~ N(0, I) (respondent random
      effects), τ estimated from the survey's own answers by the method of moments
      (:func:`~app.stats.random_effects.estimate_tau`).
    - **Certification** is the survey's own: the top-K is certified when the
      cluster-robust intervals the service reports (``GET …/ranking``:
      :func:`~app.stats.inference.confidence` with respondents as clusters, then the
      simultaneous rank intervals of :func:`~app.stats.inference.rank_confidence`) put
      every one of the K best items in the top K — ``top_k_certain`` lists K items. A
      refusal (``IntervalsUnavailable``) counts as not certified.

    Each replicate simulates the whole survey — current respondents re-answering their
    own pairs, plus the new ones — privatizes every answer by randomized response at
    its ε, fits the debiased MLE with the service's default λ and applies the
    certification rule. Up to 32 items every replicate runs exactly the service's
    procedure. Beyond, the simultaneous critical value (the level-quantile of the
    largest |t| over all item pairs, 4,000 normal draws over up to 4,950 pairs) is
    computed once per candidate size, on its first replicate that yields intervals, and
    reused for that size's other replicates: it depends only on the correlation
    structure of the estimates, which the design fixes, but its own Monte Carlo error is
    then shared by all replicates of that size. The test suite checks the prediction
    against a direct, answer-by-answer simulation of the same survey that recomputes
    everything in every replicate. The simulated randomness is a model of respondents,
    not a privacy mechanism, so it comes from a seeded NumPy generator (predictions are
    reproducible).

    References
    ----------
    The random-effects (Thurstone–Mosteller) view of heterogeneous paired comparisons,
    e.g. Böckenholt (2001), Psychological Methods 6(1); the cluster-robust sandwich of
    Liang & Zeger (1986), Biometrika 73(1).
    """
    th = _check_common(design, theta, k, level, replications)
    if not (math.isfinite(tau) and 0 <= tau <= MAX_TAU):
        raise ValueError(f"tau must be between 0 and {MAX_TAU:g}")
    if added_respondents < 0:
        raise ValueError("added_respondents must be ≥ 0")
    new_profile = _profile(pairs_per_respondent, epsilon, design.n_items)
    if design.n_respondents == 0 and added_respondents == 0:
        raise ValueError("nothing to plan: the survey has no answers and no respondents are added")
    if design.n_respondents == 0 and new_profile is None:
        raise ValueError(
            "the survey has no respondents to copy: give the new respondents' design "
            "(pairs_per_respondent and epsilon)"
        )
    per = design.i.size + added_respondents * _expected_new(design, new_profile)
    if _work(design.n_items, per, replications) > MAX_SURVEY_PLAN_WORK:
        raise ValueError(
            f"too much work: {replications} replicates of ~{per:,.0f} comparisons over {design.n_items} "
            f"items exceed the bound of {MAX_SURVEY_PLAN_WORK:,} units; ask for fewer respondents or "
            "replications"
        )
    text = assumption_text(source, tau, design, new_profile, level, int(k), tau_interval)
    return _plan(
        design, th, int(k), int(added_respondents), tau, level, replications, seed, new_profile, text, check
    )


def _plan(design, th, k, added, tau, level, replications, seed, new_profile, text, check) -> SurveyPlan:
    m = design.n_items
    pi, pj = np.triu_indices(m, k=1)
    lo, hi = np.minimum(design.i, design.j), np.maximum(design.i, design.j)
    row_start = np.arange(m) * m - np.arange(m) * (np.arange(m) + 1) // 2
    counts0 = np.bincount(row_start[lo] + hi - lo - 1, minlength=pi.size).astype(np.int64)
    # Common random numbers across candidate sizes: each replicate has its own
    # streams for profiles, pair order, random effects, answers and flips, so that
    # the current respondents' answers, and the first new respondents', are the
    # same draws whatever the number added.
    streams = np.random.SeedSequence(seed).spawn(replications)
    crit_cache: dict = {}
    # Respondents answer with c·θ + τ u_r, whose population scores are θ again.
    scale = attenuation(tau)
    out = np.empty((replications, 5))
    added_comparisons = 0
    for r in range(replications):
        if check is not None:
            check()
        g_profile, g_serve, g_answer, g_certify = (np.random.default_rng(x) for x in streams[r].spawn(4))
        profiles = _new_profiles(design, added, new_profile, g_profile)
        ni, nj, neps, who = _serve(counts0, pi, pj, profiles, g_serve)
        i = np.concatenate((design.i, ni))
        j = np.concatenate((design.j, nj))
        eps = np.concatenate((design.epsilon, neps))
        resp = np.concatenate((design.respondent, design.n_respondents + who))
        added_comparisons += ni.size
        y = _answer(scale * th, i, j, eps, resp, tau, g_answer)
        out[r] = _certify(th, i, j, y, eps, resp, k, level, g_certify, crit_cache)
    mean = out.mean(axis=0)
    se = out.std(axis=0, ddof=1) / math.sqrt(replications)
    est = [Estimate(float(a), float(b)) for a, b in zip(mean, se, strict=True)]
    return SurveyPlan(
        n_items=m,
        k=k,
        level=level,
        current_respondents=design.n_respondents,
        current_comparisons=int(design.i.size),
        added_respondents=added,
        added_comparisons=round(added_comparisons / replications),
        replications=replications,
        tau=float(tau),
        p_certified=est[0],
        p_certified_correct=est[1],
        p_exact_top_k=est[2],
        certified_items=est[3],
        p_refused=est[4],
        assumption=text,
    )


class PlanOptions(TypedDict, total=False):
    """The keyword options of :func:`plan_survey`, which :func:`respondents_to_certify` passes on."""

    tau: float
    level: float
    replications: int
    seed: int | None
    pairs_per_respondent: int | None
    epsilon: float | None
    source: str
    tau_interval: list[float] | None
    check: Callable[[], None] | None


def respondents_to_certify(
    design: SurveyDesign,
    theta: ArrayLike,
    k: int,
    target: float = 0.8,
    *,
    max_added: int = 100_000,
    **options: Unpack[PlanOptions],
) -> tuple[int | None, SurveyPlan, str | None]:
    """The fewest added respondents whose predicted P(certified) reaches ``target``.

    Parameters
    ----------
    design : SurveyDesign
        The survey's actual comparisons.
    theta : array_like (m,)
        The scores taken as true.
    k : int
        The goal: the top ``k`` items certified.
    target : float, default 0.8
        Probability, in (0, 1).
    max_added : int, default 100000
        The most respondents added.
    **options
        The keyword arguments of :func:`plan_survey` (:class:`PlanOptions`).

    Returns
    -------
    tuple of (int or None, SurveyPlan, str or None)
        (respondents, its plan, None), or (None, the plan at the largest size tried, why
        the search stopped: ``"max_respondents"`` or ``"work"``, the bound
        :data:`MAX_SURVEY_PLAN_WORK` on one call).

    Raises
    ------
    ValueError
        If ``target`` is outside (0, 1) or ``max_added`` is negative, and as
        :func:`plan_survey`.

    Notes
    -----
    Tries 0, then doubles from 10 until the target is met, then bisects to within 5%.
    Every candidate uses the same seed (common random numbers).
    """
    if not 0 < target < 1:
        raise ValueError("target must be in (0, 1)")
    if max_added < 0:
        raise ValueError("max_added must be ≥ 0")
    replications = int(options.get("replications", 100))
    new_profile = _profile(options.get("pairs_per_respondent"), options.get("epsilon"), design.n_items)
    per_new = _expected_new(design, new_profile)
    budget: list[float] = [MAX_SURVEY_PLAN_WORK]

    def attempt(added: int) -> SurveyPlan | None:
        cost = _work(design.n_items, design.i.size + added * per_new, replications)
        if cost > budget[0]:
            return None
        budget[0] -= cost
        return plan_survey(design, theta, k, added, **options)

    ok = lambda p: p.p_certified.mean >= target  # noqa: E731
    best = attempt(0) if design.n_respondents else None
    if best is not None and ok(best):
        return 0, best, None
    lo, hi = 0, 10
    while True:
        hi = min(hi, max_added)
        candidate = attempt(hi)
        if candidate is None:
            if best is None:
                raise ValueError(
                    f"too much work: even {hi} more respondents exceed the bound of "
                    f"{MAX_SURVEY_PLAN_WORK:,} units; ask for fewer replications"
                )
            return None, best, "work"
        best = candidate
        if ok(candidate):
            break
        if hi >= max_added:
            return None, candidate, "max_respondents"
        lo, hi = hi, 2 * hi
    while hi - lo > max(1, hi // 20):
        mid = (lo + hi) // 2
        candidate = attempt(mid)
        if candidate is None:
            break
        if ok(candidate):
            hi, best = mid, candidate
        else:
            lo = mid
    return hi, best, None
