"""Adaptive pair selection and the anytime-valid stop (app.stats.adaptive).

Monte Carlo tolerances: a rate estimated from R independent runs has standard error
sqrt(p(1 − p)/R); bounds below allow three of them above the rate the theory allows.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chi2

from app.stats.adaptive import (
    RHO_ANSWERS,
    BordaSequences,
    GoalStatus,
    draw_respondent_pairs,
    goal_status,
    mixture_radius,
    simulate_goal,
)
from tests.helpers.stats import Z, size


def _mc_bound(rate: float, runs: int) -> float:
    return rate + 3.0 * math.sqrt(rate * (1.0 - rate) / runs)


def test_mixture_radius_is_the_closed_form():
    v, alpha, rho = np.array([0.0, 3.0, 1e4]), 0.01, 2.5
    want = np.sqrt((v + rho) * np.log((v + rho) / (rho * alpha**2)))
    np.testing.assert_allclose(mixture_radius(v, alpha, rho), want, rtol=1e-14)
    for bad in ((0.0, 1.0), (1.0, 1.0), (0.05, 0.0)):
        with pytest.raises(ValueError):
            mixture_radius([1.0], *bad)


def _debiased_answers(rng, p, eps, shape):
    y = rng.random(shape) < p
    flip = rng.random(shape) < 1.0 / (1.0 + math.exp(eps))
    y_tilde = np.where(flip, ~y, y).astype(float)
    return ((math.exp(eps) + 1.0) * y_tilde - 1.0) / (math.exp(eps) - 1.0)


def test_the_sequence_holds_at_every_sample_size_while_a_fixed_n_interval_checked_often_does_not():
    """One item, answers checked after each of 2,000 answers: the confidence sequence
    excludes the true Borda score in at most α of the runs; the 95% normal interval,
    valid at any one fixed n, excludes it at some n in far more (optional stopping)."""
    rng = np.random.default_rng(11)
    runs, steps, eps, p, level = 1000, 2000, 1.0, 0.7, 0.95
    z = _debiased_answers(rng, p, eps, (runs, steps))
    n = np.arange(1, steps + 1)
    mean = np.cumsum(z, axis=1) / n
    width = 1.0 / math.tanh(eps / 2.0)
    # The bounds BordaSequences gives one item of m = 2 at level 0.95 (α/m = 0.025 per
    # item), computed in closed form for all n at once.
    lam = 1.0 / width**2
    seq = BordaSequences(2)
    alpha = (1.0 - level) / 2
    half = mixture_radius(n * lam / 4.0, alpha, 64.0 / 4.0) / (n * lam)
    ever_out_cs = np.any(np.abs(mean - p) > half, axis=1).mean()
    sd = math.sqrt(p * (1 - p) + math.exp(eps) / (math.exp(eps) - 1) ** 2)
    ever_out_fixed = np.any(np.abs(mean - p)[:, 9::10] > 1.96 * sd / np.sqrt(n[9::10]), axis=1).mean()
    assert ever_out_cs <= _mc_bound(alpha, runs)
    assert ever_out_fixed > 0.2  # peeking every 10 answers: about 0.4 in theory
    # The class computes the same bounds.
    seq.add(np.zeros(steps, dtype=int), np.ones(steps, dtype=int), z[0], eps, True, False)
    est, lo, hi = seq.intervals(level)
    assert est[0] == pytest.approx(mean[0, -1])
    assert hi[0] - est[0] == pytest.approx(min(half[-1], 1.0 - est[0]))
    assert (lo[1], hi[1]) == (0.0, 1.0)  # nothing counted for item 1


def test_a_respondents_pairs_are_uniform_over_the_pairs_that_touch_its_pool():
    """One pair from a pool of items 0 and 2 of 6: uniform over the 9 pairs touching
    them, counting for exactly the pool items in it. Power: were the pair of the two pool
    items not kept only half the time (drawn from either end, P = 1/5 against 1/10 for
    the others), the χ² statistic's noncentrality at 2,000 draws would be 160, and the
    test at 0.1% would miss it with probability 9e-16."""
    rng = np.random.default_rng(5)
    pool = np.array([True, False, True, False, False, False])
    drawn = [draw_respondent_pairs(pool, 1, rng) for _ in range(2_000)]
    i, j, ci, cj = (np.concatenate([d[k] for d in drawn]) for k in range(4))
    assert np.all(i != j) and np.all(pool[i] | pool[j])
    np.testing.assert_array_equal(ci, pool[i])
    np.testing.assert_array_equal(cj, pool[j])
    pairs = Counter(zip(np.minimum(i, j).tolist(), np.maximum(i, j).tolist(), strict=True))
    eligible = [(a, b) for a in range(6) for b in range(a + 1, 6) if pool[a] or pool[b]]
    assert set(pairs) == set(eligible)
    counts = np.array([pairs[p] for p in eligible], dtype=float)
    expected = counts.sum() / len(eligible)
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert stat < chi2.ppf(0.999, len(eligible) - 1)


def test_later_pairs_of_a_respondent_still_give_uniform_opponents():
    """Four pairs each from a pool of all 8 items: no item counts twice, no pair repeats,
    and the opponent of an item counted in the k-th pair is uniform over the other 7,
    whatever came before (chi-square per position k). Power: item 0 counts in the k-th
    pair of about 465 to 750 of the 3,000 respondents; were one of its 7 opponents never
    drawn at some position (an off-by-one in the draw), the test at 0.1% would miss it
    with probability < 5e-6."""
    rng = np.random.default_rng(11)
    m, runs = 8, 3_000
    opponents = np.zeros((4, m), dtype=np.int64)  # opponents of item 0 when it counts in pair k
    for _ in range(runs):
        i, j, ci, cj = draw_respondent_pairs(np.ones(m, dtype=bool), 4, rng)
        counted = np.concatenate((i[ci], j[cj]))
        assert np.unique(counted).size == counted.size
        assert len({frozenset(p) for p in zip(i.tolist(), j.tolist(), strict=True)}) == i.size
        for k in range(i.size):
            if i[k] == 0 and ci[k]:
                opponents[k, j[k]] += 1
            elif j[k] == 0 and cj[k]:
                opponents[k, i[k]] += 1
    for k in range(4):
        c = opponents[k, 1:].astype(float)
        assert float(((c - c.mean()) ** 2 / c.mean()).sum()) < chi2.ppf(0.999, m - 2), k
    with pytest.raises(ValueError):
        draw_respondent_pairs([True], 1, rng)
    i, j, ci, cj = draw_respondent_pairs(np.zeros(4, dtype=bool), 3, rng)
    assert i.size == 0  # an empty pool: nothing to count


def test_answers_count_only_where_asked():
    s = BordaSequences(3)
    s.add([0, 0], [1, 2], [1.0, 0.0], float("inf"), [True, False], [False, True])
    assert s.answers.tolist() == [1, 0, 1]
    assert s.weighted.tolist() == [1.0, 0.0, 1.0]  # item 2 won its counted answer (1 − 0)


@pytest.mark.validation
@pytest.mark.parametrize("tau", [0.0, 1.0])
def test_false_certification_stays_within_one_minus_level_under_continuous_monitoring(tau):
    """Crowded scores (top-3 of 8 items 0.4 apart), the goal checked after every 24
    answers until met: a wrong certified set in at most 1 − level of the surveys, with
    respondent effects (τ = 1: each respondent's own scores, 10 answers each) too.
    30 surveys in the ordinary run, 100 at full size; the bound adds three binomial
    standard errors at the size run."""
    theta = np.linspace(1.4, -1.4, 8)
    level, runs = 0.8, size(30, 100)
    wrong = 0
    for r in range(runs):
        order = simulate_goal(
            theta,
            2.0,
            level,
            "adaptive",
            np.random.default_rng([r, int(10 * tau)]),
            top_k=3,
            batch=24,
            tau=tau,
        ).certified
        assert order is not None
        wrong += set(order.tolist()) != {0, 1, 2}
    assert wrong / runs <= _mc_bound(1.0 - level, runs)


def test_a_certified_full_ranking_is_the_true_order():
    theta = np.array([1.5, 0.5, -0.5, -1.5])
    for r in range(20):
        run = simulate_goal(theta, 2.0, 0.9, "adaptive", np.random.default_rng(r))
        assert run.status.met and run.certified.tolist() == [0, 1, 2, 3]


@pytest.mark.validation
def test_adaptive_saves_answers_when_the_top_k_stands_apart_and_costs_nothing_when_all_are_in_doubt():
    """m = 100, top-3 separated (the study's setting, ε = 2): the target of 2× fewer
    answers (``python -m tests.benchmarks.bench_adaptive --sizes 100 --ks 3 --epsilons 2
    --profiles separated`` prints the saving, which varies from run to run). With most
    items in doubt until near the end (m = 6, evenly spaced, full ranking) the strategies
    draw the same pairs most of the time: adaptive costs no more than balanced, up to Z
    standard errors of the difference of the two means (the runs vary a lot: an sd of
    15–30 % of the mean).
    2 and 6 runs per strategy in the ordinary run, 6 and 24 at full size."""
    theta = np.concatenate([np.linspace(2.0, 1.5, 3), np.linspace(0.5, -1.5, 97)])

    def used(strategy, th, k, runs):
        return np.array(
            [
                simulate_goal(th, 2.0, 0.95, strategy, np.random.default_rng(r), top_k=k).answers
                for r in range(runs)
            ],
            dtype=float,
        )

    runs = size(2, 6)
    assert used("balanced", theta, 3, runs).mean() >= 2.0 * used("adaptive", theta, 3, runs).mean()
    even = np.linspace(0.6, -0.6, 6)
    runs = size(6, 24)
    adaptive, balanced = used("adaptive", even, None, runs), used("balanced", even, None, runs)
    se = math.hypot(adaptive.std(ddof=1), balanced.std(ddof=1)) / math.sqrt(runs)
    assert adaptive.mean() - balanced.mean() <= Z * se, (adaptive.mean(), balanced.mean(), se)


@pytest.mark.slow
def test_intersected_bounds_never_widen_and_a_met_goal_stays_met():
    rng = np.random.default_rng(3)
    theta = np.array([1.0, 0.2, -0.2, -1.0])
    seqs, status = BordaSequences(4), None
    met_at = None
    for step in range(4000):
        i, j, ci, cj = draw_respondent_pairs(np.ones(4, dtype=bool), 2, rng)
        y = rng.random(i.size) < 1.0 / (1.0 + np.exp(theta[j] - theta[i]))
        seqs.add(i, j, y.astype(float), float("inf"), ci, cj)
        new = goal_status(seqs, 0.9, top_k=1, previous=status)
        if status is not None:
            assert np.all(new.lower >= status.lower) and np.all(new.upper <= status.upper)
            assert not (status.met and not new.met)
            assert set(status.certified.tolist()) <= set(new.certified.tolist())
        if new.met and met_at is None:
            met_at = step
        status = new
    assert met_at is not None and status.certified.tolist() == [0]


def _two_items(est0: float, est1: float) -> BordaSequences:
    """m = 2, 4,000 counted answers per item at ε = ∞ with the given estimates."""
    s = BordaSequences(2)
    n = 4000
    s.add([0] * n, [1] * n, (np.arange(n) < est0 * n).astype(float), float("inf"), True, False)
    s.add([0] * n, [1] * n, (np.arange(n) >= est1 * n).astype(float), float("inf"), False, True)
    return s


def _previous(lower, upper, level=0.95, top_k=None) -> GoalStatus:
    lo, hi = np.array(lower), np.array(upper)
    none = np.zeros(0, dtype=np.int64)
    return GoalStatus(
        False, none, np.ones(2, bool), lo, lo, hi, np.arange(2), level, RHO_ANSWERS, top_k, none
    )


def test_a_certified_order_follows_the_bounds_not_the_estimates():
    """Intersected bounds can certify item 1 above item 0 while the raw estimates
    (0.75, 0.70) still put 0 first: the certified order is the bounds' order."""
    seqs = _two_items(0.75, 0.70)
    est, lo, hi = seqs.intervals(0.95)
    assert est.tolist() == [0.75, 0.70] and lo[0] < 0.725 < 0.7255 < hi[1]
    status = goal_status(seqs, 0.95, previous=_previous([0.0, 0.7255], [0.725, 1.0]))
    assert status.met and status.certified.tolist() == [1, 0] and status.order.tolist() == [1, 0]


def test_empty_bounds_are_flagged_and_never_certified():
    seqs = _two_items(0.75, 0.70)
    status = goal_status(seqs, 0.95, top_k=1, previous=_previous([0.0, 0.0], [0.70, 1.0], top_k=1))
    assert status.contradicted.tolist() == [0] and not status.met
    assert status.active.tolist() == [True, True] and status.certified.size == 0
    with pytest.raises(ValueError):  # another level, goal or size than the previous status
        goal_status(seqs, 0.9, top_k=1, previous=_previous([0.0, 0.0], [1.0, 1.0], top_k=1))
    with pytest.raises(ValueError):
        goal_status(seqs, 0.95, top_k=None, previous=_previous([0.0, 0.0], [1.0, 1.0], top_k=1))


def test_inputs_are_checked():
    s = BordaSequences(3)
    with pytest.raises(ValueError):  # not a debiased answer at ε = 1 (range [−0.58, 1.58])
        s.add([0], [1], [1.7], 1.0)
    with pytest.raises(ValueError):
        s.add([0], [1], [1.0], -1.0)
    i, j, ci, cj = draw_respondent_pairs([True, False], 0, np.random.default_rng(0))
    assert i.size == j.size == ci.size == cj.size == 0


def test_goal_status_refuses_impossible_goals():
    with pytest.raises(ValueError):
        goal_status(BordaSequences(4), 0.95, top_k=4)
    with pytest.raises(ValueError):
        BordaSequences(1)
