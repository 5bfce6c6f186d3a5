"""Simulated surveys: designs, heterogeneous ε, and the binomial shortcut."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit

from app.stats import debias, rr_probability, z_variance
from app.stats.simulation import (
    all_pairs,
    complete_design,
    evenly_spaced_theta,
    random_pairs_design,
    simulate_pair_stats,
    simulate_survey,
    sparse_design,
    uniform_theta,
)
from tests.helpers.stats import assert_close_mc


def test_theta_generators():
    rng = np.random.default_rng(0)
    t = uniform_theta(1000, rng)
    assert abs(t.sum()) < 1e-9 and t.min() > -4 and t.max() < 4
    e = evenly_spaced_theta(5, 0.2)
    np.testing.assert_allclose(e, [0.4, 0.2, 0.0, -0.2, -0.4], atol=1e-15)


def test_complete_design_has_every_pair_once_per_respondent():
    d = complete_design(5, 3)
    assert d.i.size == 3 * 10
    for r in range(3):
        sel = d.respondent == r
        assert sorted(zip(d.i[sel], d.j[sel], strict=True)) == list(zip(*all_pairs(5), strict=True))


@pytest.mark.parametrize(("m", "k"), [(12, 5), (6, 14)])  # rejection path and permutation path
def test_random_pairs_design_distinct_pairs_per_respondent(m, k):
    rng = np.random.default_rng(1)
    d = random_pairs_design(m, 2_000, k, rng)
    lo, hi = np.minimum(d.i, d.j), np.maximum(d.i, d.j)
    key = d.respondent * m * m + lo * m + hi
    assert np.unique(key).size == key.size  # no respondent repeats a pair
    assert np.all(np.bincount(d.respondent) == k)
    assert 0.45 < np.mean(d.i < d.j) < 0.55  # both orientations shown
    # Pairs are uniform: each of the P pairs is chosen by a respondent with prob k/P.
    P = m * (m - 1) // 2
    per_pair = np.bincount(np.unique(lo * m + hi, return_inverse=True)[1])
    assert per_pair.size == P
    p = k / P
    se = math.sqrt(2_000 * p * (1 - p))
    assert np.all(np.abs(per_pair - 2_000 * p) < 4.5 * se + 1)
    with pytest.raises(ValueError):
        random_pairs_design(m, 10, P + 1, rng)


def test_sparse_design_never_pairs_an_item_with_itself():
    d = sparse_design(50, 100_000, np.random.default_rng(2), comparisons_per_respondent=10)
    assert np.all(d.i != d.j) and d.n_respondents == 10_000
    counts = np.bincount(d.i, minlength=50) + np.bincount(d.j, minlength=50)
    assert counts.min() > 0.9 * counts.mean()


def test_heterogeneous_epsilon_is_per_respondent():
    rng = np.random.default_rng(3)
    d = random_pairs_design(8, 50, 6, rng)
    eps = rng.uniform(0.5, 3.0, size=50)
    s = simulate_survey(np.zeros(8), d, eps, rng)
    np.testing.assert_array_equal(s.epsilon, eps[d.respondent])
    with pytest.raises(ValueError, match="one epsilon per respondent"):
        simulate_survey(np.zeros(8), d, eps[:10], rng)


def test_binomial_shortcut_matches_per_answer_simulation_in_distribution():
    """Σz per pair: same mean σ(d)·n and variance n·Var(z) (Lemma 2) either way."""
    rng = np.random.default_rng(4)
    theta = np.array([0.8, 0.0, -0.5])
    n, eps, reps = 40, 0.7, 3_000
    pi, pj = all_pairs(3)
    short = np.array([simulate_pair_stats(theta, n, eps, rng).sum_z for _ in range(reps)])
    d = complete_design(3, n)
    full = np.array([simulate_survey(theta, d, eps, rng).stats().sum_z for _ in range(reps)])
    mu = expit(theta[pi] - theta[pj])
    var1 = z_variance(theta[pi], theta[pj], eps)
    # Fourth central moment of one z from its two-point law, then of the sum of n.
    q = rr_probability(theta[pi], theta[pj], eps)
    z1, z0 = float(debias(1, eps)), float(debias(0, eps))
    mu4_1 = q * (z1 - mu) ** 4 + (1 - q) * (z0 - mu) ** 4
    var, mu4 = n * var1, n * mu4_1 + 3 * n * (n - 1) * var1**2
    for sample in (short, full):
        for p in range(3):
            assert_close_mc(sample[:, p].mean(), n * mu[p], math.sqrt(var[p] / reps), what="mean Σz")
            # standard error of a sample variance: √((μ4 − σ⁴)/R)
            assert_close_mc(
                sample[:, p].var(ddof=1), var[p], math.sqrt((mu4[p] - var[p] ** 2) / reps), what="var Σz"
            )


def test_binomial_shortcut_custom_pairs_and_counts():
    rng = np.random.default_rng(5)
    stats = simulate_pair_stats(np.zeros(4), [3, 0, 5], np.inf, rng, pairs=([2, 0, 3], [0, 1, 1]))
    assert stats.i.tolist() == [0, 1] and stats.j.tolist() == [2, 3]  # the n = 0 pair is dropped
    assert stats.n.tolist() == [3, 5]
    np.testing.assert_allclose(stats.sum_z, stats.sum_y)  # ε = ∞: z = y
    with pytest.raises(ValueError, match="distinct"):
        simulate_pair_stats(np.zeros(4), 1, 1.0, rng, pairs=([0, 1], [1, 0]))
