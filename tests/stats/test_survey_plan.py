"""Planning from a survey's own design: τ's estimate, and the planner against a direct simulation.

The planner (:mod:`app.stats.survey_plan`) takes shortcuts: new respondents'
pairs are handed out level by level instead of one respondent at a time, random
effects are drawn only for the items a respondent saw, and the simultaneous
critical value is reused within a candidate size. The direct simulation here
takes none of them: respondents arrive one by one and are served exactly as
``app.respondents.assignment.next_pairs`` serves them (fewest answers first, random
tie-break, never a pair twice), each has a full random-effect vector, every
answer goes through :func:`app.stats.privatize`, and every simulated survey gets
the full ``confidence`` + ``rank_confidence`` of ``GET …/ranking``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit

from app.stats import fit_debiased_mle_stats, pair_stats, privatize, survey_plan
from app.stats.inference import Clusters
from app.stats.random_effects import attenuation, estimate_tau
from app.stats.survey_plan import MAX_SURVEY_PLAN_WORK, plan_survey, respondents_to_certify
from tests.helpers.stats import Z, binomial_se, size
from tests.helpers.survey_plan import direct_simulation, unbalanced_design


def _survey(m, theta, n_resp, pairs_each, eps, tau, rng, pairs_pool=None):
    """Answers of respondents with random effects: (i, j, ỹ, ε, respondent)."""
    a, b = np.triu_indices(m, 1)
    pool = np.arange(a.size) if pairs_pool is None else np.asarray(pairs_pool)
    rows = []
    for r in range(n_resp):
        pick = rng.choice(pool, pairs_each, replace=False)
        rows += [(a[x], b[x], r) for x in pick]
    i, j, resp = (np.array(v) for v in zip(*rows, strict=True))
    u = tau * rng.standard_normal((n_resp, m))
    scale = attenuation(tau)
    y = rng.random(i.size) < expit(scale * (theta[i] - theta[j]) + u[resp, i] - u[resp, j])
    eps_arr = np.broadcast_to(np.asarray(eps, dtype=float), i.shape).copy()
    y_t = y.astype(float) if np.isinf(eps_arr).all() else privatize(y.astype(int), eps_arr, rng).astype(float)
    return i, j, y_t, eps_arr, resp


@pytest.mark.parametrize(("tau", "eps"), [(0.0, np.inf), (0.5, np.inf), (1.0, np.inf), (1.0, 2.0)])
def test_tau_estimate_recovers_the_random_effect_scale(tau, eps):
    """20 populations of 400 (non-private) or 1,000 (ε = 2) respondents. The mean
    estimate is within 10 % of τ (the accuracy required of the method of moments with
    its logistic–normal approximation, Monahan & Stefanski 1992, good to a few percent
    of τ at τ ≤ 1) plus Z Monte Carlo standard errors of the mean (from the 20 estimates'
    spread); at τ = 0 the estimate is truncated at 0, so only the Monte Carlo term
    remains. The nominal 95% intervals cover τ in at least 0.95 − Z·√(0.95·0.05/20) of
    the populations (binomial)."""
    estimates, covered = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        m = 8 if np.isinf(eps) else 20
        theta = rng.uniform(-2, 2, m)
        n_resp, k = (400, 10) if np.isinf(eps) else (1000, 15)
        i, j, y, e, resp = _survey(m, theta, n_resp, k, eps, tau, rng)
        fit = fit_debiased_mle_stats(pair_stats(m, i, j, y, e))
        est, (lo, hi) = estimate_tau(fit.theta, Clusters.from_answers(m, i, j, y, e, resp))
        estimates.append(est)
        covered.append(lo <= tau <= hi)
    se = float(np.std(estimates, ddof=1)) / math.sqrt(len(estimates))
    assert abs(np.mean(estimates) - tau) <= 0.1 * tau + Z * se, (np.mean(estimates), se)
    assert np.mean(covered) >= 0.95 - Z * binomial_se(len(covered), 0.95), np.mean(covered)


def test_tau_is_zero_without_repeated_answers():
    rng = np.random.default_rng(0)
    i, j, y, e, resp = _survey(5, np.zeros(5), 50, 1, 1.0, 1.0, rng)
    fit = fit_debiased_mle_stats(pair_stats(5, i, j, y, e))
    assert estimate_tau(fit.theta, Clusters.from_answers(5, i, j, y, e, resp))[0] == 0.0


@pytest.mark.validation
@pytest.mark.parametrize(("added", "tau"), [(500, 0.0), (500, 0.8), (800, 1.5)])
def test_planner_agrees_with_a_direct_simulation_of_the_survey(added, tau):
    """The planner's P(certified) and E(certified items) against the direct simulation
    (tests.helpers.survey_plan), 100 simulated surveys each in the ordinary run, 300 at
    full size."""
    design = unbalanced_design(np.random.default_rng(7))
    theta = np.array([1.2, 0.6, 0.1, -0.2, -0.6, -1.1])
    reps = size(100, 300)
    plan = plan_survey(design, theta, 2, added, tau=tau, replications=reps, seed=1)
    certified, items = direct_simulation(design, theta, 2, added, tau, reps, seed=2)
    for predicted, direct in ((plan.p_certified, certified), (plan.certified_items, items)):
        se = math.sqrt(predicted.se**2 + direct.var(ddof=1) / reps)
        # Two independent Monte Carlo estimates of one quantity: |difference| within
        # 3.5 combined standard errors (a false alarm about 1 in 2,000 per check).
        assert abs(predicted.mean - direct.mean()) <= 3.5 * se, (predicted, direct.mean(), se)
    # The case is informative: neither certain nor hopeless.
    assert 0.1 < plan.p_certified.mean < 0.95


@pytest.mark.validation
def test_more_heterogeneity_needs_more_respondents():
    """New respondents answer all 15 pairs, so one person's taste moves many answers:
    with τ = 1.5 the top 2 are certified less often than with τ = 0, by more than 3
    standard errors of the difference (150 replicates in the ordinary run, 300 at full
    size; the two plans share their random numbers, which the se ignores: it is
    conservative)."""
    design = unbalanced_design(np.random.default_rng(7))
    theta = np.array([1.2, 0.6, 0.1, -0.2, -0.6, -1.1])
    options = {"replications": size(150, 300), "seed": 3, "pairs_per_respondent": 15, "epsilon": 2.0}
    calm = plan_survey(design, theta, 2, 150, tau=0.0, **options)
    mixed = plan_survey(design, theta, 2, 150, tau=1.5, **options)
    # Common random numbers: the same new respondents and draws, only τ differs.
    se = math.hypot(calm.p_certified.se, mixed.p_certified.se)
    assert calm.p_certified.mean - mixed.p_certified.mean > 3 * se, (calm.p_certified, mixed.p_certified)


@pytest.mark.slow
def test_search_finds_the_smallest_size_that_reaches_the_target(monkeypatch):
    """The search's logic on a few replicates (the predictions' accuracy is
    test_planner_agrees_with_a_direct_simulation_of_the_survey's)."""
    design = unbalanced_design(np.random.default_rng(7))
    theta = np.array([1.2, 0.6, 0.1, -0.2, -0.6, -1.1])
    n, plan, limit = respondents_to_certify(design, theta, 2, 0.7, tau=0.3, replications=10, seed=4)
    assert limit is None
    assert n is not None and plan.added_respondents == n and plan.p_certified.mean >= 0.7
    # Half as many fall clearly short (the search bisects to 5%; nearer than that the
    # prediction's own Monte Carlo error, se ≈ 0.15 at 10 replicates, decides). Every
    # candidate has the same seed: common random numbers.
    half = plan_survey(design, theta, 2, n // 2, tau=0.3, replications=10, seed=4)
    assert half.p_certified.mean < 0.7
    # Out of reach within the limit: no solution, the prediction at the limit.
    none, last, limit = respondents_to_certify(design, theta, 2, 0.99, tau=0.3, replications=20, max_added=40)
    assert none is None and limit == "max_respondents"
    assert last.added_respondents == 40 and last.p_certified.mean < 0.99
    # Out of reach within the work bound (lowered here, so that it runs out after a few
    # candidates): the search says so.
    monkeypatch.setattr(survey_plan, "MAX_SURVEY_PLAN_WORK", 100_000)
    none, last, limit = respondents_to_certify(design, np.zeros(6), 2, 0.9, replications=10)
    assert none is None and limit == "work" and last.p_certified.mean < 0.9


def test_work_is_bounded_and_input_checked():
    design = unbalanced_design(np.random.default_rng(7))
    theta = np.zeros(6)
    with pytest.raises(ValueError, match="too much work"):
        plan_survey(design, theta, 2, MAX_SURVEY_PLAN_WORK // 4, replications=10)
    for bad in (
        {"k": 6},
        {"k": 0},
        {"tau": -1.0},
        {"tau": float("nan")},
        {"replications": 5},
        {"pairs_per_respondent": 3},
        {"pairs_per_respondent": 16, "epsilon": 1.0},
    ):
        args = {"k": 2, **bad}
        k = args.pop("k")
        with pytest.raises(ValueError):
            plan_survey(design, theta, k, 10, **args)
    with pytest.raises(ValueError):
        plan_survey(design, np.zeros(5), 2, 10)


def _served_one_by_one(counts, sizes, rng):
    """GET …/pairs, respondent after respondent: the k least-answered pairs, random tie-break."""
    c = counts.astype(float).copy()
    for k in sizes:
        c[np.argsort(c + rng.random(c.size))[:k]] += 1
    return c


@pytest.mark.parametrize(
    ("m", "counts", "sizes"),
    [
        (8, "balanced", [5] * 300),
        (8, "two pairs far behind (an item added late)", [5] * 100),
        (100, "one pair 10,000 behind", [10] * 2000),
        (8, "random", [3, 5, 7] * 100),
    ],
)
def test_new_respondents_are_served_like_the_service_serves_them(m, counts, sizes):
    from app.stats.serving import _serve

    a, b = np.triu_indices(m, 1)
    rng = np.random.default_rng(0)
    c = {
        "balanced": np.zeros(a.size, dtype=np.int64),
        "two pairs far behind (an item added late)": np.r_[0, 0, np.full(a.size - 2, 50)],
        "one pair 10,000 behind": np.r_[0, np.full(a.size - 1, 10_000)],
        "random": rng.integers(0, 4, a.size),
    }[counts]
    i, j, _, who = _serve(c, a, b, [np.ones(k) for k in sizes], rng)
    index = np.full(m * m, -1)
    index[a * m + b] = np.arange(a.size)
    pair = index[np.minimum(i, j) * m + np.maximum(i, j)]
    # Nobody is served a pair twice, everyone gets as many as asked.
    assert np.array_equal(np.bincount(who), sizes)
    assert all(np.unique(pair[who == r]).size == k for r, k in enumerate(sizes))
    # The pair counts end where serving respondents one by one ends (up to which
    # pairs the random tie-breaks favour): the same multiset of counts.
    final = c + np.bincount(pair, minlength=a.size)
    assert np.array_equal(np.sort(final), np.sort(_served_one_by_one(c, sizes, rng)))
