"""Randomized response, debiasing and the Laplace baseline.

See docs/estimator.md §2–3, §8.2 and docs/mechanisms.md §1."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from scipy import stats as sps
from scipy.special import expit

from app.stats.mechanisms import (
    debias,
    flip_probability,
    laplace_privatize,
    privacy_noise_variance,
    privatize,
    rr_probability,
    system_uniform,
    z_variance,
)
from tests.helpers.stats import P_OS, Z_OS, assert_close_mc, binomial_se

EPSILONS = [0.1, 0.5, 1.0, 2.0, 3.0, 8.0]


def test_flip_probability_is_one_over_one_plus_e_to_epsilon():
    eps = np.array(EPSILONS)
    np.testing.assert_allclose(flip_probability(eps), 1 / (1 + np.exp(eps)), rtol=1e-14)
    assert flip_probability(math.log(2)) == pytest.approx(1 / 3, abs=1e-16)
    assert flip_probability(np.inf) == 0.0
    assert flip_probability(800.0) == 0.0  # no overflow warning (warnings are errors)


@pytest.mark.parametrize("eps", EPSILONS)
def test_rr_is_exactly_epsilon_ldp(eps):
    # Definition 1: the likelihood ratio of any output under y = 1 vs y = 0 is e^ε.
    p = flip_probability(eps)
    assert math.log((1 - p) / p) == pytest.approx(eps, rel=1e-12)


def test_example_1_probabilities_T2():
    # Paper Example 1: θ2−θ1 = θ3−θ2 = log 2, p_ε = 1/3 (ε = log 2).
    theta = np.array([0.0, math.log(2), 2 * math.log(2)])
    eps = math.log(2)
    p12 = rr_probability(theta[0], theta[1], eps)
    p23 = rr_probability(theta[1], theta[2], eps)
    p13 = rr_probability(theta[0], theta[2], eps)
    # In the stated orientation (θ1 < θ2 < θ3): 4/9, 4/9, 2/5 (docs/estimator.md §2; paper Example 1).
    assert (p12, p23, p13) == pytest.approx((4 / 9, 4 / 9, 2 / 5), abs=1e-15)
    # The paper's printed values are the preferred item's: 5/9, 5/9, 3/5.
    assert (1 - p12, 1 - p23, 1 - p13) == pytest.approx((5 / 9, 5 / 9, 3 / 5), abs=1e-15)
    # No BTL model fits them: the odds would have to multiply, A1² = A2.
    a1 = (1 - p12) / p12
    a2 = (1 - p13) / p13
    assert a1 == pytest.approx(5 / 4) and a2 == pytest.approx(3 / 2)
    assert a1**2 == pytest.approx(25 / 16)
    assert abs(a1**2 - a2) > 0.06


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("d", [-3.0, -0.4, 0.0, 1.1, 2.5])
def test_lemma_2_mean_and_variance_exact_T1(eps, d):
    # Two-point law of z: P(ỹ = 1) = q, z ∈ {z0, z1}.
    q = float(rr_probability(d, 0.0, eps))
    z1, z0 = float(debias(1, eps)), float(debias(0, eps))
    mean = q * z1 + (1 - q) * z0
    var = q * z1**2 + (1 - q) * z0**2 - mean**2
    assert mean == pytest.approx(expit(d), rel=1e-12)  # E z = σ(θ_i − θ_j)
    # Lemma 2 as printed, and its closed form σ'(d) + e^ε/(e^ε−1)² (docs/estimator.md §3).
    assert float(z_variance(d, 0.0, eps)) == pytest.approx(var, rel=1e-10)
    closed = expit(d) * (1 - expit(d)) + math.exp(eps) / math.expm1(eps) ** 2
    assert closed == pytest.approx(var, rel=1e-10)
    assert float(privacy_noise_variance(eps)) == pytest.approx(
        math.exp(eps) / math.expm1(eps) ** 2, rel=1e-12
    )


def test_privacy_noise_variance_matches_the_reference_values():
    # docs/estimator.md §3: 3.918 at 0.5, 0.921 at 1, 0.181 at 2, 0.0551 at 3.
    np.testing.assert_allclose(
        privacy_noise_variance([0.5, 1.0, 2.0, 3.0]), [3.918, 0.921, 0.181, 0.0551], rtol=2e-3
    )
    assert privacy_noise_variance(np.inf) == 0.0


def test_debias_values_and_limits():
    e = math.e
    assert float(debias(0, 1.0)) == pytest.approx(-1 / (e - 1), rel=1e-14)
    assert float(debias(1, 1.0)) == pytest.approx(e / (e - 1), rel=1e-14)
    # eq. (1) literally
    for eps in EPSILONS:
        for y in (0, 1):
            literal = ((math.exp(eps) + 1) * y - 1) / (math.exp(eps) - 1)
            assert float(debias(y, eps)) == pytest.approx(literal, rel=1e-12)
    np.testing.assert_array_equal(debias([0, 1, 1], np.inf), [0.0, 1.0, 1.0])
    # z is never in [0, 1] for finite ε.
    z = debias([0, 1] * 3, np.repeat(EPSILONS[:3], 2))
    assert np.all((z < 0) | (z > 1))


def test_debiased_z_is_unbiased_monte_carlo():
    rng = np.random.default_rng(11)
    n, d, eps = 400_000, 0.7, 0.5
    y = (rng.random(n) < expit(d)).astype(np.int8)
    z = debias(privatize(y, eps, rng=rng), eps)
    var = float(z_variance(d, 0.0, eps))
    assert_close_mc(z.mean(), expit(d), math.sqrt(var / n), what="mean of z")
    # Sample variance: its own standard error is sqrt((μ4 − σ⁴)/n) from the two-point law.
    q = float(rr_probability(d, 0.0, eps))
    z1, z0 = float(debias(1, eps)), float(debias(0, eps))
    mu4 = q * (z1 - expit(d)) ** 4 + (1 - q) * (z0 - expit(d)) ** 4
    assert_close_mc(z.var(), var, math.sqrt((mu4 - var**2) / n), what="variance of z")


@pytest.mark.parametrize("eps", [0.25, 1.0, 3.0])
def test_flip_rate_scalar_epsilon(eps):
    rng = np.random.default_rng(int(eps * 100))
    n = 300_000
    y = rng.integers(0, 2, n)
    flipped = privatize(y, eps, rng=rng) != y
    p = 1 / (1 + math.exp(eps))
    assert_close_mc(flipped.mean(), p, binomial_se(n, p), what=f"flip rate at ε={eps}")


def test_flip_rate_per_comparison_epsilon():
    rng = np.random.default_rng(5)
    levels = np.array([0.1, 0.7, 2.0, 5.0])
    eps = np.repeat(levels, 100_000)
    rng.shuffle(eps)
    y = rng.integers(0, 2, eps.size)
    flipped = privatize(y, eps, rng=rng) != y
    for level in levels:
        sel = eps == level
        p = 1 / (1 + math.exp(level))
        assert_close_mc(flipped[sel].mean(), p, binomial_se(int(sel.sum()), p), what=f"ε={level}")


@pytest.mark.os_random
def test_csprng_path_flip_rate_and_source(monkeypatch):
    """rng=None must draw from os.urandom and never from NumPy's seedable PRNGs.

    Unseeded by design: three checks at z = 5.5 fail with probability 1.1e-7 for a
    correct implementation.
    """
    calls = []
    real = os.urandom

    def spy(k):
        calls.append(k)
        return real(k)

    def forbidden(*a, **k):
        raise AssertionError("a seedable NumPy PRNG was used for privatization")

    monkeypatch.setattr(os, "urandom", spy)
    for name in ("default_rng", "random", "rand", "random_sample", "uniform", "binomial", "RandomState"):
        monkeypatch.setattr(np.random, name, forbidden)
    n, eps = 400_000, 1.3
    y = np.zeros(n, dtype=np.int8)
    y[::2] = 1
    out = privatize(y, eps)
    assert calls == [8 * n]
    p = 1 / (1 + math.exp(eps))
    assert_close_mc((out != y).mean(), p, binomial_se(n, p), z=Z_OS, what="CSPRNG flip rate")
    # Per-comparison ε on the CSPRNG path as well.
    eps_vec = np.where(np.arange(n) % 4 == 0, 0.2, 4.0)
    out = privatize(y, eps_vec)
    for level in (0.2, 4.0):
        sel = eps_vec == level
        p = 1 / (1 + math.exp(level))
        assert_close_mc(
            (out[sel] != y[sel]).mean(), p, binomial_se(int(sel.sum()), p), z=Z_OS, what=f"CSPRNG ε={level}"
        )


@pytest.mark.os_random
@pytest.mark.parametrize(("byte", "flipped"), [(b"\x00", True), (b"\xff", False)])
def test_privatize_output_is_a_function_of_the_os_urandom_bytes(monkeypatch, byte, flipped):
    """rng=None: the flips are exactly those the OS bytes dictate (all-zero bytes →
    u = 0 → every answer flips; all-one bytes → u ≈ 1 → none). An implementation
    that drew from any other generator could not pass both cases."""
    monkeypatch.setattr(os, "urandom", lambda k: byte * k)
    y = np.array([0, 1] * 500, dtype=np.int8)
    np.testing.assert_array_equal(privatize(y, 0.7), 1 - y if flipped else y)
    noise = laplace_privatize(np.zeros(10), 2.0) - 0
    # u = 0 → the most negative noise; u → 1 → the most positive; both finite.
    assert np.all(np.isfinite(noise)) and (np.all(noise < -10) if flipped else np.all(noise > 10))


def test_one_answer_is_never_randomized_twice():
    with pytest.raises(ValueError, match="one value per answer"):
        privatize(1, np.full(1000, 1.0))
    with pytest.raises(ValueError, match="one value per answer"):
        privatize(np.array([0, 1, 1]), np.ones((3, 1)))
    with pytest.raises(ValueError, match="one value per answer"):
        laplace_privatize(np.array([0.0, 1.0]), np.ones(5))
    assert privatize(np.array([0, 1, 1]), np.array([1.0, 2.0, 3.0]), rng=np.random.default_rng(0)).shape == (
        3,
    )


def test_extreme_epsilons():
    assert privacy_noise_variance(1e6) == 0.0  # no overflow warning (warnings are errors here)
    assert float(debias(1, 1e6)) == 1.0
    with pytest.raises(ValueError, match="at least 1e-6"):
        debias(1, 1e-9)
    assert np.isfinite(debias([0, 1], 1e-6)).all()


@pytest.mark.os_random
def test_system_uniform_is_uniform_and_fresh():
    u = system_uniform(1_000_000)
    assert u.min() >= 0.0 and u.max() < 1.0
    counts = np.histogram(u, bins=64, range=(0, 1))[0]
    # Chi-square goodness of fit; a correct source fails with probability P_OS.
    assert sps.chisquare(counts).pvalue > P_OS
    assert not np.array_equal(system_uniform(64), system_uniform(64))
    assert system_uniform((3, 4)).shape == (3, 4)


def test_privatize_preserves_shape_and_broadcasts_epsilon_to_it():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, (5, 7))
    out = privatize(y, np.inf, rng=rng)
    assert out.shape == (5, 7) and out.dtype == np.int8
    np.testing.assert_array_equal(out, y)  # ε = ∞: no flips
    assert privatize([1, 0], [np.inf, np.inf]).tolist() == [1, 0]
    # ε per column broadcast over rows: column 0 never flips, column 1 at p = 1/(1+e^0.1).
    y = np.zeros((20_000, 2), dtype=np.int8)
    out = privatize(y, np.array([np.inf, 0.1]), rng=rng)
    assert out[:, 0].sum() == 0
    p = 1 / (1 + np.exp(0.1))
    assert_close_mc(out[:, 1].mean(), p, binomial_se(20_000, p), what="column ε")


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), 1e-300])
def test_invalid_epsilon_rejected(bad):
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        privatize([1, 0], bad)
    with pytest.raises(ValueError):
        debias([1], bad)


def test_invalid_answer_rejected_without_echoing_it():
    with pytest.raises(ValueError) as info:
        privatize([0, 1, 7], 1.0)
    assert "7" not in str(info.value)


def test_laplace_baseline_noise_scale():
    rng = np.random.default_rng(3)
    n, eps = 400_000, 2.0
    y = rng.integers(0, 2, n).astype(float)
    noise = laplace_privatize(y, eps, rng=rng) - y
    b = 1 / eps
    # Laplace(0, b): mean 0, variance 2b², E|η| = b, Var|η| = b².
    assert_close_mc(noise.mean(), 0.0, math.sqrt(2 * b * b / n), what="Laplace mean")
    assert_close_mc(np.abs(noise).mean(), b, math.sqrt(b * b / n), what="Laplace E|η|")
    assert_close_mc(noise.var(), 2 * b * b, math.sqrt((24 - 4) * b**4 / n), what="Laplace variance")
    assert np.all(np.isfinite(laplace_privatize(np.zeros(10_000), 0.5)))  # CSPRNG path


def test_debiased_rr_has_smaller_variance_than_laplace_for_every_epsilon():
    # docs/estimator.md §8.2: e^ε/(e^ε−1)² < 2/ε² for all ε > 0; the ratio → 2 as ε → 0.
    eps = np.geomspace(1e-3, 20, 400)
    rr, lap = privacy_noise_variance(eps), 2 / eps**2
    assert np.all(rr < lap)
    assert lap[0] / rr[0] == pytest.approx(2.0, rel=1e-3)
