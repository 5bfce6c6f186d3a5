"""The paper's simulation claims (Scenarios I–V), as seeded statistical tests.

Each comparison between two cells is one-sided at z = 3 on the difference of
their means (Monte Carlo standard errors from the replicates): for a correct
implementation the chance that one such check fails is 0.13%, and every check
below passes with a margin well above that on its fixed seed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from app.stats import SCHEMES, fit_btl, fit_debiased_mle_stats, fit_naive_mle_stats, l2_error, scheme_epsilon
from app.stats.mechanisms import rr_probability
from app.stats.scenarios import SCENARIOS, run_scenario
from app.stats.simulation import all_pairs, simulate_pair_stats, uniform_theta
from tests.helpers.stats import full_validation, size

Z = 3.0


def assert_smaller(result, metric, small: dict, large: dict, what=""):
    """The metric in cell ``small`` is below that in cell ``large`` by > Z standard errors."""
    a, sa = result.value(metric, **small)
    b, sb = result.value(metric, **large)
    margin = (b - a) / math.hypot(sa, sb)
    assert margin > Z, f"{what}: {metric} {a:.4f} (cell {small}) vs {b:.4f} (cell {large}): {margin:.1f} se"


@pytest.fixture(scope="module")
def scenario_one():
    """Scenario I, the whole grid at 50 replicates (a few seconds: its tests are slow)."""
    return run_scenario("I", replications=50, seed=1)


def assert_no_significant_rise(result, metric, cells: list[dict], what=""):
    """Along ``cells`` the metric never rises by more than Z standard errors."""
    for before, after in itertools.pairwise(cells):
        a, sa = result.value(metric, **before)
        b, sb = result.value(metric, **after)
        assert (b - a) / math.hypot(sa, sb) < Z, f"{what}: {metric} rises from {before} to {after}"


@pytest.mark.slow
def test_scenario_I_error_falls_with_L_at_each_epsilon_T7(scenario_one):
    # Power: from L = 100 to 800 the error drops by ~65%, ≥ 10 standard errors
    # here; between neighbouring L the drop is only ~3 se at 50 replicates, so
    # the steps are checked for the absence of a significant rise instead.
    for eps in (1.0, 2.0, 3.0):
        for m in (10, 20, 40):
            for metric in ("l2", "linf"):
                assert_smaller(
                    scenario_one,
                    metric,
                    dict(epsilon=eps, m=m, L=800),
                    dict(epsilon=eps, m=m, L=100),
                    f"ε={eps}, m={m}",
                )
                assert_no_significant_rise(
                    scenario_one,
                    metric,
                    [dict(epsilon=eps, m=m, L=L) for L in (100, 200, 400, 800)],
                    f"ε={eps}, m={m}",
                )


@pytest.mark.slow
def test_scenario_I_error_falls_with_m_and_with_epsilon_T7_T8(scenario_one):
    for eps in (1.0, 2.0, 3.0):
        for L in (100, 800):
            assert_smaller(scenario_one, "l2", dict(epsilon=eps, m=40, L=L), dict(epsilon=eps, m=10, L=L))
    for m in (10, 40):
        for L in (100, 800):
            assert_smaller(scenario_one, "l2", dict(epsilon=3.0, m=m, L=L), dict(epsilon=1.0, m=m, L=L))


@pytest.mark.slow
def test_scenario_I_rate_is_one_over_root_L(scenario_one):
    # Thm 2: error ≍ √(G/(mL)). Between L = 100 and 800 the mean error must shrink
    # by about √8 ≈ 2.83; anything from 2 to 4 (ridge bias is O(1/L)) is consistent,
    # while an estimator stuck at a bias floor or converging at 1/L is not.
    for eps in (1.0, 3.0):
        for m in (10, 40):
            a, _ = scenario_one.value("l2", epsilon=eps, m=m, L=100)
            b, _ = scenario_one.value("l2", epsilon=eps, m=m, L=800)
            assert 2.0 < a / b < 4.0, (eps, m, a / b)


def test_scheme_epsilons_follow_the_formulas():
    # Values of docs/estimator.md §7 (adaptive schemes), keyed by formula; the paper's numbers 1-3.
    assert SCHEMES == {"log_over_sqrt": 1, "inv_sqrt": 2, "inv_sqrt_log": 3}
    Ls = [50, 100, 200, 400, 800, 1600]
    table = {
        (10, 1): [1.2723, 1, 0.7781, 0.6003, 0.4600, 0.3503],
        (10, 2): [1.4142, 1, 0.7071, 0.5000, 0.3536, 0.2500],
        (10, 3): [1.5719, 1, 0.6426, 0.4164, 0.2717, 0.1784],
        (30, 1): [1.2918, 1, 0.7683, 0.5866, 0.4454, 0.3366],
        (30, 3): [1.5483, 1, 0.6508, 0.4262, 0.2807, 0.1857],
    }
    for (m, scheme), values in table.items():
        np.testing.assert_allclose(scheme_epsilon(scheme, m, np.array(Ls)), values, atol=6e-5)
    assert scheme_epsilon("log_over_sqrt", 20, 400) == scheme_epsilon(1, 20, 400)
    # Per the formulas, scheme 1 is the largest ε and scheme 3 the smallest beyond L = 100.
    assert scheme_epsilon(1, 20, 800) > scheme_epsilon(2, 20, 800) > scheme_epsilon(3, 20, 800)
    with pytest.raises(ValueError, match="unknown privacy scheme"):
        scheme_epsilon(4, 10, 100)


@pytest.mark.validation
def test_scenario_II_dividing_line_by_formula_T10():
    """ε ∝ log(mL)/√(mL) converges, ε ∝ 1/(√(mL) log mL) diverges (Cor. 1-2).

    The paper's narrative says the opposite with the scheme numbers swapped
    (docs/estimator.md §7, "Printed scheme labels"); the formulas and the theory agree with this test.
    The ordinary run computes the 18 cells compared here at 50 replicates; at full size
    (PRIVRANK_VALIDATION=full) the whole grid at 100.
    """
    cells = None if full_validation() else [dict(L=100), dict(L=1600)]
    result = run_scenario("II", replications=size(50, 100), seed=2, cells=cells)
    for m in (10, 20, 30):
        assert_smaller(
            result,
            "l2",
            dict(m=m, scheme="log_over_sqrt", L=1600),
            dict(m=m, scheme="log_over_sqrt", L=100),
            f"m={m}: consistent scheme",
        )
        assert_smaller(
            result,
            "l2",
            dict(m=m, scheme="inv_sqrt_log", L=100),
            dict(m=m, scheme="inv_sqrt_log", L=1600),
            f"m={m}: inconsistent scheme",
        )
        # At the largest L the three schemes are ordered by ε.
        assert_smaller(
            result, "l2", dict(m=m, scheme="log_over_sqrt", L=1600), dict(m=m, scheme="inv_sqrt", L=1600)
        )
        assert_smaller(
            result, "l2", dict(m=m, scheme="inv_sqrt", L=1600), dict(m=m, scheme="inv_sqrt_log", L=1600)
        )


#: The Scenario III cells the test compares: (m, Δ, L).
_III_CELLS = [
    *((m, d, L) for m in (10, 20, 30) for d in (0.05, 0.2) for L in (50, 100, 400)),
    (10, 0.1, 200),
    (30, 0.1, 200),
]


@pytest.mark.validation
def test_scenario_III_ranking_errors_fall_with_L_m_delta_T11():
    """The ordinary run computes the 20 cells compared here at 40 replicates, the full
    size (PRIVRANK_VALIDATION=full) the whole grid at 60."""
    cells = None if full_validation() else [dict(m=m, delta=d, L=L) for m, d, L in _III_CELLS]
    result = run_scenario("III", replications=size(40, 60), seed=3, cells=cells)
    for m in (10, 20, 30):
        for delta in (0.05, 0.2):
            assert_smaller(result, "K", dict(m=m, delta=delta, L=400), dict(m=m, delta=delta, L=50))
        assert_smaller(result, "K", dict(m=m, delta=0.2, L=100), dict(m=m, delta=0.05, L=100))
        assert_smaller(result, "H_K", dict(m=m, delta=0.2, L=100), dict(m=m, delta=0.05, L=100))
    assert_smaller(result, "K", dict(m=30, delta=0.1, L=200), dict(m=10, delta=0.1, L=200))
    # "approaches almost zero" at (L, m, Δ) = (400, 30, 0.2) (paper §5.2, Scenario III;
    # docs/estimator.md §9); an independent reproduction gave K ≈ 0.002.
    k_end, _ = result.value("K", m=30, delta=0.2, L=400)
    assert k_end < 0.01


def test_scenario_V_classic_rr_stays_biased_while_debiased_converges_T9():
    rng = np.random.default_rng(4)
    m, eps, reps = 10, 2.0, 100
    theta = uniform_theta(m, rng)
    # Population limit of classic RR (docs/estimator.md §8.1): the BTL fit of the flipped
    # probabilities q_ij, here the exact minimizer with the data replaced by its mean.
    pi, pj = all_pairs(m)
    q = rr_probability(theta[pi], theta[pj], eps)
    limit = fit_btl(m, pi, pj, np.ones(pi.size), q, lam=1e-12).theta
    floor = l2_error(limit, theta)
    assert floor > 0.25  # attenuation by ≈ tanh(ε/2) = 0.76 is a real bias
    errors = {}
    means = {}
    for L in (50, 400):
        deb, nai, nai_theta = [], [], []
        for _ in range(reps):
            stats = simulate_pair_stats(theta, L, eps, rng)
            d = fit_debiased_mle_stats(stats)
            n = fit_naive_mle_stats(stats)
            deb.append(l2_error(d.theta, theta))
            nai.append(l2_error(n.theta, theta))
            nai_theta.append(n.theta)
        errors[L] = {
            k: (np.mean(v), np.std(v, ddof=1) / math.sqrt(reps)) for k, v in (("deb", deb), ("nai", nai))
        }
        means[L] = np.mean(nai_theta, axis=0)
    # Debiased RR converges: a clear drop from L = 50 to 400, far below the bias floor.
    (d50, s50), (d400, s400) = errors[50]["deb"], errors[400]["deb"]
    assert (d50 - d400) / math.hypot(s50, s400) > Z
    assert d400 < floor / 3
    # Classic RR does not: its error stays at the floor, and its average estimate
    # sits on the biased limit, not on θ*.
    n400, sn400 = errors[400]["nai"]
    assert n400 > floor - Z * sn400
    assert np.abs(means[400] - limit).max() < 0.1 * np.abs(limit - theta).max()


@pytest.mark.validation
def test_scenario_V_debiased_beats_laplace_and_ties_classic_on_ranking_T12():
    """The ordinary run computes the 4 cells compared here at 50 replicates, the full
    size (PRIVRANK_VALIDATION=full) the whole grid at 100."""
    cells = None if full_validation() else [dict(m=m, L=L) for m in (10, 20) for L in (100, 400)]
    result = run_scenario("V", replications=size(50, 100), seed=5, cells=cells)
    for m in (10, 20):
        for L in (100, 400):
            assert_smaller(
                result, "l2", dict(m=m, method="debiased_rr", L=L), dict(m=m, method="laplace", L=L)
            )
            # Same answers, homogeneous ε, complete design: identical rankings (§2.4).
            k_deb, _ = result.value("K", m=m, method="debiased_rr", L=L)
            k_cls, _ = result.value("K", m=m, method="classic_rr", L=L)
            assert k_deb == pytest.approx(k_cls, abs=1e-12)


def test_scenario_results_are_reproducible_and_tabulated():
    a = run_scenario("IV", replications=2, seed=9)
    b = run_scenario("IV", replications=2, seed=9)
    assert a.rows == b.rows
    assert len(a.rows) == 3 * 3 * 4
    table = a.format_table()
    assert "Figure 5" in table and "ε ∝ 1/√(m·n_pair)" in table
    # Part of the grid: the cells asked for, with the numbers the whole grid gives them.
    part = run_scenario("IV", replications=2, seed=9, cells=[dict(m=20), dict(scheme="inv_sqrt", L=400)])
    assert part.rows == [r for r in a.rows if r["m"] == 20 or (r["scheme"] == "inv_sqrt" and r["L"] == 400)]
    with pytest.raises(ValueError, match="no cell"):
        run_scenario("IV", replications=2, cells=[dict(m=11)])
    with pytest.raises(ValueError, match="at least 2"):
        run_scenario("I", replications=1)
    assert set(SCENARIOS) == {"I", "II", "III", "IV", "V"}
