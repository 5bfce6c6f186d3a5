"""Ranking metrics H_K and K with the tie convention of docs/estimator.md §6."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from app.stats import (
    competition_ranks,
    kendall_tau_error,
    l2_error,
    linf_error,
    tie_groups,
    top_k_error,
    top_k_membership,
)


def literal_ranks(theta, tiebreak):
    """σ(θ_i): rank 1 = largest; ties broken by the order of ``tiebreak``."""
    order = sorted(range(len(theta)), key=lambda a: (-theta[a], tiebreak[a]))
    ranks = np.empty(len(theta), dtype=int)
    ranks[order] = np.arange(1, len(theta) + 1)
    return ranks


def literal_K(s_hat, s_true):
    m = len(s_hat)
    bad = sum((s_hat[i] - s_hat[j]) * (s_true[i] - s_true[j]) < 0 for i in range(m) for j in range(i + 1, m))
    return 2 * bad / (m * (m - 1))


def literal_H(s_hat, s_true, k):
    miss = np.sum((s_hat > k) & (s_true <= k)) + np.sum((s_hat <= k) & (s_true > k))
    return miss / (2 * k)


def _tiebreak_ranks(theta):
    """Every rank vector a tie-break of ``theta`` gives, with the number of the m! tie-breaks
    (orders of the items) that give it."""
    counts = Counter(tuple(literal_ranks(theta, p)) for p in itertools.permutations(range(len(theta))))
    return [(np.array(r), n) for r, n in counts.items()]


def expectation_over_tiebreaks(metric, a, b):
    """The paper's formula averaged over every tie-break of both vectors (exact): the m!²
    pairs of tie-breaks, grouped by the rank vectors they give."""
    ra, rb = _tiebreak_ranks(a), _tiebreak_ranks(b)
    total = sum(na * nb * metric(sa, sb) for sa, na in ra for sb, nb in rb)
    return total / (sum(n for _, n in ra) * sum(n for _, n in rb))


def test_tie_free_values_follow_the_paper():
    truth = np.array([3.0, 2.0, 1.0, 0.0, -1.0])
    assert kendall_tau_error(truth, truth) == 0.0
    assert kendall_tau_error(-truth, truth) == 1.0
    swapped = np.array([2.0, 3.0, 1.0, 0.0, -1.0])  # one adjacent swap: 1 of 10 pairs
    assert kendall_tau_error(swapped, truth) == pytest.approx(0.1)
    assert top_k_error(swapped, truth, 2) == 0.0  # same top-2 set
    est = np.array([3.0, 0.5, 1.0, 2.0, -1.0])  # top-2 {0, 3} vs truth {0, 1}: one missed
    assert top_k_error(est, truth, 2) == pytest.approx(1 / 2)
    assert top_k_error(-truth, truth, 2) == pytest.approx(1.0)  # min(K, m−K)/K


@pytest.mark.parametrize("seed", range(6))
def test_tie_free_metrics_equal_literal_formulas(seed):
    rng = np.random.default_rng(seed)
    m = 25
    a, b = rng.normal(size=m), rng.normal(size=m)
    sa, sb = literal_ranks(a, range(m)), literal_ranks(b, range(m))
    assert kendall_tau_error(a, b) == pytest.approx(literal_K(sa, sb), abs=1e-15)
    for k in (1, 5, 12, 24):
        assert top_k_error(a, b, k) == pytest.approx(literal_H(sa, sb, k), abs=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_ties_count_as_the_expectation_over_random_tie_breaks(seed):
    rng = np.random.default_rng(100 + seed)
    m = 5
    a = rng.integers(0, 3, m).astype(float)  # heavy ties
    b = rng.integers(0, 4, m).astype(float)
    b[0] += 0.5 if seed % 2 else 0.0
    assert kendall_tau_error(a, b) == pytest.approx(expectation_over_tiebreaks(literal_K, a, b), abs=1e-12)
    for k in (1, 2, 3):
        expected = expectation_over_tiebreaks(lambda x, y, k=k: literal_H(x, y, k), a, b)
        assert top_k_error(a, b, k) == pytest.approx(expected, abs=1e-12)


def test_kendall_matches_brute_force_with_ties_for_larger_m():
    rng = np.random.default_rng(9)
    m = 300
    a = np.round(rng.normal(size=m), 1)
    b = np.round(rng.normal(size=m), 1)
    bad = tied = 0
    for i in range(m):
        da, db = a[i] - a[i + 1 :], b[i] - b[i + 1 :]
        tied += np.sum((da == 0) | (db == 0))
        bad += np.sum((da * db) < 0)
    assert kendall_tau_error(a, b) == pytest.approx((bad + tied / 2) / (m * (m - 1) / 2), abs=1e-14)


def test_solver_noise_is_a_tie():
    # Exact Borda ties come out of a solver as ~1e-10 differences (docs/estimator.md §5, §6).
    noisy = np.array([1.0, 1.0 + 3e-11, 0.0])
    assert tie_groups(noisy).tolist() == [0, 0, 1]
    assert competition_ranks(noisy).tolist() == [1, 1, 3]
    np.testing.assert_allclose(top_k_membership(noisy, 1), [0.5, 0.5, 0.0])
    assert kendall_tau_error(noisy, np.array([2.0, 1.0, 0.0])) == pytest.approx(0.5 / 3)


def test_top_k_membership_sums_to_k():
    theta = np.array([5, 4, 4, 4, 1, 1, 0.0])
    for k in range(1, 8):
        p = top_k_membership(theta, k)
        assert p.sum() == pytest.approx(k)
        assert np.all((p >= 0) & (p <= 1))
    np.testing.assert_allclose(top_k_membership(theta, 2), [1, 1 / 3, 1 / 3, 1 / 3, 0, 0, 0])


def test_estimation_errors_center_theta_star():
    truth = np.array([1.0, 2.0, 3.0, 4.0])
    est = truth - truth.mean()
    assert l2_error(est, truth) == pytest.approx(0.0, abs=1e-15)
    assert linf_error(est, truth + 17.0) == pytest.approx(0.0, abs=1e-14)
    est2 = est + np.array([0.1, -0.1, 0.2, -0.2])
    assert l2_error(est2, truth) == pytest.approx(np.sqrt(0.1 / 4))
    assert linf_error(est2, truth) == pytest.approx(0.2)


def test_invalid_inputs():
    with pytest.raises(ValueError, match="k must be"):
        top_k_error([1.0, 2.0], [1.0, 2.0], 3)
    with pytest.raises(ValueError, match="k must be"):
        top_k_error([3.0, 2.0, 1.0], [3.0, 1.0, 2.0], 2.5)
    with pytest.raises(ValueError, match="equal length"):
        kendall_tau_error([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite"):
        l2_error([1.0, np.nan], [1.0, 2.0])
