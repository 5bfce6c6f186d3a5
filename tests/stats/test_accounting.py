"""zCDP accounting and the discrete Gaussian noisy counts (docs/mechanisms.md §2.6).

The (ε, δ) conversion is checked against OpenDP's ``make_zCDP_to_approxDP``; the ℓ₂
sensitivity of the win counts by enumerating every replacement of a person's answers on
a small survey; the discrete Gaussian samplers by their variance (seeded for the NumPy
path; OpenDP's CSPRNG at z = 5.5, ``os_random``); and the year of weekly releases of
the docs' table against basic composition.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from app.stats.accounting import (
    DEFAULT_DELTA,
    gaussian_rho,
    pure_rho,
    zcdp_epsilon,
    zcdp_epsilon_classical,
    zcdp_rho_for,
)
from app.stats.central import gaussian_noisy_counts, gaussian_noisy_counts_sigma, win_counts
from app.stats.noise import add_discrete_gaussian, discrete_gaussian, discrete_gaussian_variance
from tests.benchmarks.bench_accounting import EPSILONS, WEEKS, table_rows, year_of_weekly_releases
from tests.helpers.stats import Z_OS, assert_close_mc

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mechanisms.md"


def _opendp():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


# -- the (ε, δ) conversion ------------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.3, 1.0, 3.0, 10.0, 100.0, 3000.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-8, DEFAULT_DELTA, 1e-15])
def test_conversion_matches_opendp_and_is_never_below_it(sigma, delta):
    """OpenDP's profile of a Gaussian measurement (ρ = 1/(2σ²) at d_in = 1) gives the ε
    at δ; ours is the same infimum, found by another search: equal to 1e-9, and never
    below OpenDP's by more than rounding (a smaller ε would overstate the guarantee)."""
    dp = _opendp()
    meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=sigma)
    rho = meas.map(1.0)
    theirs = dp.c.make_zCDP_to_approxDP(meas).map(1.0).epsilon(delta)
    ours = zcdp_epsilon(rho, delta)
    assert ours == pytest.approx(theirs, rel=1e-9)
    assert ours >= theirs * (1 - 1e-12)
    assert ours < zcdp_epsilon_classical(rho, delta)  # tighter than ρ + 2√(ρ log(1/δ))
    # make_fix_delta states the same (ε, δ).
    fixed = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), delta).map(1.0)
    assert fixed[1] == delta
    assert fixed[0] == pytest.approx(ours, rel=1e-9)


def test_conversion_edge_values_and_monotonicity():
    assert zcdp_epsilon(0.0, 1e-10) == 0.0
    rhos = np.geomspace(1e-8, 300, 60)
    eps = [zcdp_epsilon(r, 1e-10) for r in rhos]
    assert all(b > a for a, b in itertools.pairwise(eps))
    assert zcdp_epsilon(0.5, 1e-6) > zcdp_epsilon(0.5, 1e-5)  # smaller δ, larger ε
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="rho"):
            zcdp_epsilon(bad, 1e-10)
    for bad in (0.0, 1.0, -1e-10, math.nan):
        with pytest.raises(ValueError, match="delta"):
            zcdp_epsilon(0.1, bad)


@pytest.mark.parametrize("epsilon", [0.001, 0.1, 1.0, 5.0, 30.0, 100.0])
@pytest.mark.parametrize("delta", [1e-6, DEFAULT_DELTA, 1e-20])
def test_rho_for_a_budget_is_the_largest_rho_that_fits(epsilon, delta):
    """zcdp_rho_for inverts the conversion: its ρ converts to ε (up to rounding), and a ρ
    0.01 % larger converts to more than ε (it is the largest that fits)."""
    rho = zcdp_rho_for(epsilon, delta)
    assert zcdp_epsilon(rho, delta) <= epsilon * (1 + 1e-10)
    assert zcdp_epsilon(rho * 1.0001, delta) > epsilon
    # Against OpenDP: a Gaussian measurement of that ρ has ε ≤ the budget at δ.
    dp = _opendp()
    meas = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0 / math.sqrt(2 * rho)
    )
    assert dp.c.make_zCDP_to_approxDP(meas).map(1.0).epsilon(delta) <= epsilon * (1 + 1e-9)


def test_rho_of_gaussian_and_pure_mechanisms_agree_with_opendp():
    """ρ = Δ₂²/(2σ²) [Bun & Steinke Prop. 1.6] against OpenDP's integer Gaussian map, and
    ε²/2 [Prop. 1.4] against ``make_pureDP_to_zCDP`` of a Laplace measurement."""
    dp = _opendp()
    for sigma in (0.7, 2.0, 13.0):
        meas = dp.m.make_gaussian(
            dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=sigma
        )
        for d_in in (1, 2, 5):
            assert gaussian_rho(d_in, sigma) == pytest.approx(meas.map(d_in), rel=1e-12)
    for scale in (0.5, 4.0):
        lap = dp.m.make_laplace(
            dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale
        )
        eps = lap.map(1.0)
        assert pure_rho(eps) == pytest.approx(dp.c.make_pureDP_to_zCDP(lap).map(1.0), rel=1e-12)


# -- the mechanism: ℓ₂ sensitivity and σ ---------------------------------------------------


def _max_l2_change(n_items: int, L: int) -> float:
    """The largest ‖N(D) − N(D')‖₂ over every person whose ≤ L answers (any pairs, repeats
    allowed, any winners) are replaced by any other ≤ L answers (the rest of the data
    cancels in the difference)."""
    answers = [(a, b, w) for a, b in itertools.combinations(range(n_items), 2) for w in (0, 1)]
    contributions = [
        c for size in range(L + 1) for c in itertools.combinations_with_replacement(answers, size)
    ]

    def counts(c):
        if not c:
            return np.zeros(n_items, dtype=np.int64)
        i, j, w = (np.array(x) for x in zip(*c, strict=True))
        return win_counts(n_items, i, j, np.ones(len(c)), w)

    vectors = np.array([counts(c) for c in contributions])
    best = 0.0
    for v in vectors:
        best = max(best, float(np.sqrt(((vectors - v) ** 2).sum(axis=1)).max()))
    return best


@pytest.mark.parametrize(("n_items", "L"), [(3, 1), (4, 1), (3, 2), (4, 2), (4, 3)])
def test_l2_sensitivity_of_the_win_counts_is_sqrt2_L(n_items, L):
    """Exhaustive: replacing one person's ≤ L comparisons moves the win counts by at most
    √2·L in ℓ₂ (docs/mechanisms.md §2.6), and some replacement attains it."""
    assert _max_l2_change(n_items, L) == pytest.approx(math.sqrt(2) * L)


@pytest.mark.parametrize(("unit", "L"), [("edge", None), ("individual", 1), ("individual", 7)])
@pytest.mark.parametrize("rho", [1e-4, 0.125, 3.0])
def test_sigma_gives_exactly_the_asked_rho(unit, L, rho):
    sigma = gaussian_noisy_counts_sigma(rho, unit, L)
    L_ = 1 if L is None else L
    assert sigma == pytest.approx(L_ / math.sqrt(rho), rel=1e-15)
    # Rounded up: the ρ delivered is at most the ρ asked (and the ρ charged).
    assert gaussian_rho(math.sqrt(2) * L_, sigma) <= rho
    assert gaussian_rho(math.sqrt(2) * L_, sigma) == pytest.approx(rho, rel=1e-14)


def test_gaussian_noisy_counts_release_shape_and_refusals():
    rng = np.random.default_rng(7)
    r = gaussian_noisy_counts([50, 20, 5, 0], 2.0, unit="individual", L=4, rng=rng)
    assert r.method == "noisy_counts" and r.rho == 2.0 and r.epsilon is None
    assert r.parameters == {
        "sigma": pytest.approx(4 / math.sqrt(2)),
        "sensitivity_l2": 4 * math.sqrt(2),
        "noise": "discrete Gaussian",
    }
    assert np.all(r.values == np.round(r.values))  # integers
    assert sorted(r.order.tolist()) == [0, 1, 2, 3]
    assert np.all(np.diff(r.values[r.order]) <= 0)  # ordered by noisy count
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="rho"):
            gaussian_noisy_counts([1, 2], bad, unit="edge")
    with pytest.raises(ValueError, match="individual DP needs"):
        gaussian_noisy_counts([1, 2], 0.5, unit="individual")
    with pytest.raises(ValueError, match="sigma"):
        add_discrete_gaussian([1], 2.0**51)


# -- the samplers ----------------------------------------------------------------------


def _exact_law(sigma: float) -> tuple[float, float, float]:
    """(variance, fourth moment, P(0)) of N_ℤ(0, σ²), summed over |k| ≤ 40σ + 40."""
    k = np.arange(-math.ceil(40 * sigma) - 40, math.ceil(40 * sigma) + 41, dtype=np.float64)
    p = np.exp(-(k * k) / (2 * sigma * sigma))
    p /= p.sum()
    return float((k**2 * p).sum()), float((k**4 * p).sum()), float(p[k == 0][0])


def _check_draws(x: np.ndarray, sigma: float, z: float) -> None:
    """Mean, variance and P(0) of the draws against the exact law, each within z Monte
    Carlo standard errors (the variance's: √((μ₄ − v²)/n))."""
    n = x.size
    v, m4, p0 = _exact_law(sigma)
    assert v == pytest.approx(discrete_gaussian_variance(sigma), rel=1e-12)
    assert x.dtype == np.int64
    assert_close_mc(x.mean(), 0.0, math.sqrt(v / n), z=z, what="mean")
    assert_close_mc(x.var(), v, math.sqrt((m4 - v * v) / n), z=z, what="variance")
    assert_close_mc(np.mean(x == 0), p0, math.sqrt(p0 * (1 - p0) / n), z=z, what="P(0)")


def test_discrete_gaussian_variance_formula():
    """The exact variance: at most σ² (up to rounding), and σ² to within 1e-6·σ² for σ ≥ 1;
    2e^{−1/(2σ²)} to first order for a small σ."""
    assert discrete_gaussian_variance(0.5) < 0.25
    for sigma in (1.0, 2.5, 10.0, 300.0):
        v = discrete_gaussian_variance(sigma)
        assert v <= sigma**2 * (1 + 1e-12)
        assert v == pytest.approx(sigma**2, rel=1e-6)
    assert discrete_gaussian_variance(0.2) == pytest.approx(2 * math.exp(-1 / (2 * 0.04)), rel=1e-3)


@pytest.mark.parametrize("sigma", [0.6, 4.0, 25.0])
def test_seeded_discrete_gaussian_has_the_exact_law(sigma):
    """The NumPy path (CKS Algorithm 3), seeded: 100,000 draws within z = 4.5 Monte Carlo
    errors of the exact mean, variance and P(0)."""
    _check_draws(discrete_gaussian(sigma, 100_000, np.random.default_rng(20261127)), sigma, z=4.5)


@pytest.mark.os_random
@pytest.mark.parametrize("sigma", [1.5, 12.0])
def test_opendp_discrete_gaussian_has_the_stated_variance(sigma):
    """OpenDP's sampler (CSPRNG, unseedable), drawn inside the measurement: 50,000 draws
    check the variance to ±3.5 % (z = 5.5; se ≈ v·√(2/n) for σ ≥ 1, kurtosis 3), so a σ
    off by 2 % or more fails; three checks fail by chance with probability ≈ 1e-7."""
    n = 50_000
    _check_draws(add_discrete_gaussian(np.full(n, 1000, dtype=np.int64), sigma) - 1000, sigma, z=Z_OS)


# -- a year of weekly releases -----------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_a_year_of_weekly_releases_costs_markedly_less_under_zcdp(epsilon):
    """52 releases with discrete Gaussian noise of exactly the variance of the ε release's
    discrete Laplace noise cost, at δ = 10⁻¹⁰, at most 0.75 × 52·ε (and under 0.6 × for
    ε ≤ 1), where basic composition charges 52·ε; the classical conversion is looser."""
    y = year_of_weekly_releases(epsilon)
    assert discrete_gaussian_variance(y.sigma) == pytest.approx(
        2 * math.exp(-epsilon / 2) / (1 - math.exp(-epsilon / 2)) ** 2
    )
    assert y.pure_total == pytest.approx(WEEKS * epsilon)
    assert y.rho == pytest.approx(epsilon**2 / 8, rel=0.1)  # the continuous-law match
    assert y.zcdp_total < (0.6 if epsilon <= 1 else 0.75) * y.pure_total
    assert y.zcdp_total < y.zcdp_classical
    assert y.zcdp_total == pytest.approx(zcdp_epsilon(WEEKS * y.rho, DEFAULT_DELTA))


def test_the_docs_table_shows_the_computed_figures():
    text = DOCS.read_text(encoding="utf-8")
    rows = [line.strip() for line in text.splitlines() if re.match(r"\| (0\.1|0\.25|0\.5|1|2) \| \d", line)]
    assert rows == table_rows()
