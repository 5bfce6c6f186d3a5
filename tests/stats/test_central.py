"""Central-model DP releases (Cai, Chakraborty & Wang): sensitivity, noise, trends, real ballots.

Section A: exact checks of the sensitivities and noise calibration
(docs/mechanisms.md §2.2–2.3); the checks of the production samplers draw from
OpenDP's own CSPRNG, which no seed reaches, at z = 5.5 (``os_random``,
tests.helpers.stats.Z_OS); section B are
the paper's Experiments 1–7 at reduced size (seeded; each comparison of means is
one-sided at z = 3 on the Monte Carlo standard error of the difference).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from app.stats.central import (
    KAPPA1,
    KAPPA2,
    noisy_counts,
    noisy_counts_scale,
    perturbed_mle,
    perturbed_mle_parameters,
    win_counts,
)
from app.stats.noise import add_discrete_laplace, discrete_laplace, laplace
from app.stats.preflib import ballot_comparisons, read_preflib
from tests.helpers.stats import P_OS, Z_OS, assert_close_mc

DATA = Path(__file__).resolve().parents[1] / "data" / "preflib-debian"
Z = 3.0


def discrete_laplace_variance(s: float) -> float:
    q = math.exp(-1.0 / s)
    return 2 * q / (1 - q) ** 2


# -- A1: noise scale -------------------------------------------------------------


@pytest.mark.os_random
@pytest.mark.parametrize("scale", [2.0, 8.0, 40.0])
def test_discrete_laplace_from_opendp_has_the_stated_scale(scale):
    """50,000 draws check the variance to ±5.6 % (z = 5.5, kurtosis ≈ 6): a scale off by
    a factor outside [0.97, 1.03] fails."""
    n = 50_000
    x = discrete_laplace(scale, n)  # OpenDP, CSPRNG: unseeded by design
    var = discrete_laplace_variance(scale)
    assert x.dtype == np.int64
    assert_close_mc(x.mean(), 0.0, math.sqrt(var / n), z=Z_OS, what="mean")
    # Var of a sample variance: (μ4 − σ⁴)/n; the discrete Laplace's kurtosis is ≈ 6.
    assert_close_mc(x.var(), var, var * math.sqrt(5.2 / n), z=Z_OS, what="variance")
    assert abs(var - 2 * scale**2) < 0.2  # ≈ 2·scale² (exactly 2s² − 1/6 + O(1/s²))
    # Shape: P(|x| ≥ 3s) = 2 e^{-3}/(1 + e^{-1/s})·… — compare the tail with the exact law.
    q = math.exp(-1 / scale)
    k = math.ceil(3 * scale)
    tail = 2 * q**k / (1 + q)
    assert_close_mc(np.mean(np.abs(x) >= k), tail, math.sqrt(tail * (1 - tail) / n), z=Z_OS, what="tail")


@pytest.mark.os_random
def test_continuous_laplace_from_opendp_has_the_stated_scale():
    """At n = 20,000 the variance is checked to ±8.7 % (z = 5.5; Laplace kurtosis 6): a
    scale off by any factor outside [0.96, 1.04] fails."""
    n, b = 20_000, 3.0
    x = laplace(b, n)
    assert_close_mc(x.var(), 2 * b * b, 2 * b * b * math.sqrt(5 / n), z=Z_OS, what="variance")
    assert_close_mc(np.abs(x).mean(), b, b / math.sqrt(n), z=Z_OS, what="E|x|")
    assert len(np.unique(x)) > n * 0.99  # real-valued, not integer noise


@pytest.mark.os_random
@pytest.mark.parametrize(("unit", "L"), [("edge", None), ("individual", 5)])
def test_noisy_wins_minus_true_wins_has_variance_two_scale_squared(unit, L):
    """12,000 noisy counts check the variance to ±11 % (z = 5.5): the printed scale L/ε
    would give a quarter of it."""
    eps = 0.7
    wins = np.arange(40) * 3
    diffs = np.concatenate([noisy_counts(wins, eps, unit, L).values - wins for _ in range(300)])
    scale = noisy_counts_scale(eps, unit, L)
    assert scale == pytest.approx(2 * (L or 1) / eps)  # 2/ε edge, 2L/ε individual (not the printed L/ε)
    var = discrete_laplace_variance(scale)
    assert_close_mc(diffs.var(), var, var * math.sqrt(5.2 / diffs.size), z=Z_OS, what="noisy-wins variance")
    # The exact discrete-Laplace variance is 2·scale² − 1/6 up to O(scale⁻²).
    assert abs(var - (2 * scale**2 - 1 / 6)) < 0.05 / scale**2 + 1e-9


# -- A2, A3: sensitivity bounds on random adjacent datasets ---------------------------


def _edge_data(rng, n=12, p=0.6):
    iu, ju = np.triu_indices(n, 1)
    keep = rng.random(iu.size) < p
    return n, iu[keep], ju[keep], rng.integers(0, 2, int(keep.sum()))


def _edge_neighbour(rng, n, i, j, y):
    i2, j2, y2 = i.copy(), j.copy(), y.copy()
    e = rng.integers(i.size)
    if rng.random() < 0.5:  # scenario 1: flip one outcome
        y2[e] = 1 - y2[e]
    else:  # scenario 2: replace one compared pair (and its outcome) by an unobserved one
        present = set(zip(i.tolist(), j.tolist(), strict=True))
        while True:
            a, b = sorted(rng.choice(n, 2, replace=False).tolist())
            if (a, b) not in present:
                break
        i2[e], j2[e], y2[e] = a, b, rng.integers(0, 2)
    return i2, j2, y2


def _individual_data(rng, m_users=30, n=8, L=4):
    users, rows_i, rows_j, rows_y = [], [], [], []
    for u in range(m_users):
        for _ in range(rng.integers(1, L + 1)):  # at most L each
            a, b = sorted(rng.choice(n, 2, replace=False).tolist())
            users.append(u)
            rows_i.append(a)
            rows_j.append(b)
            rows_y.append(rng.integers(0, 2))
    return n, np.array(users), np.array(rows_i), np.array(rows_j), np.array(rows_y)


def _replace_user(rng, n, L, users, i, j, y):
    u = rng.choice(users)
    keep = users != u
    k = rng.integers(1, L + 1)
    new = [sorted(rng.choice(n, 2, replace=False).tolist()) for _ in range(k)]
    return (
        np.concatenate([i[keep], [a for a, _ in new]]),
        np.concatenate([j[keep], [b for _, b in new]]),
        np.concatenate([y[keep], rng.integers(0, 2, k)]),
    )


def _grad(theta, n, i, j, y, gamma):
    """∇ of 𝓛(θ; y) + (γ/2)‖θ‖² for single comparisons (the objective's definition)."""
    r = expit(theta[i] - theta[j]) - y  # (F − y)·F'/(F(1−F)) = F − y for the logistic link
    return np.bincount(i, r, n) - np.bincount(j, r, n) + gamma * theta


def _grad_diff_l1(theta, n, d1, d2, gamma):
    """‖∇R(θ; D) − ∇R(θ; D′)‖₁: the ℓ1 change of the noise w that maps to output θ."""
    return float(np.abs(_grad(theta, n, *d1, gamma) - _grad(theta, n, *d2, gamma)).sum())


def _logdet_hessian(theta, n, i, j, gamma):
    s = expit(theta[i] - theta[j])
    c = s * (1 - s)
    h = gamma * np.eye(n)
    np.add.at(h, (i, i), c)
    np.add.at(h, (j, j), c)
    np.add.at(h, (i, j), -c)
    np.add.at(h, (j, i), -c)
    return np.linalg.slogdet(h)[1]


def test_edge_sensitivity_bounds_A2_A3():
    rng = np.random.default_rng(1)
    gamma = 4 * KAPPA2 / 0.5
    for _ in range(300):
        n, i, j, y = _edge_data(rng)
        i2, j2, y2 = _edge_neighbour(rng, n, i, j, y)
        ones = np.ones(i.size, dtype=int)
        d = win_counts(n, i, j, ones, y) - win_counts(n, i2, j2, ones, y2)
        assert np.abs(d).sum() <= 2
        t = rng.normal(size=n) * 2
        assert _grad_diff_l1(t, n, (i, j, y), (i2, j2, y2), gamma) <= 4 * KAPPA1 + 1e-9
        ratio = _logdet_hessian(t, n, i, j, gamma) - _logdet_hessian(t, n, i2, j2, gamma)
        assert abs(ratio) <= math.log(1 + 2 * KAPPA2 / gamma) + 1e-9


def test_individual_sensitivity_bounds_A2_A3():
    rng = np.random.default_rng(2)
    L = 4
    gamma = 8 * L * KAPPA2 / 0.5
    worst = 0
    for _ in range(300):
        n, users, i, j, y = _individual_data(rng, L=L)
        i2, j2, y2 = _replace_user(rng, n, L, users, i, j, y)
        d = win_counts(n, i, j, np.ones(i.size, int), y) - win_counts(n, i2, j2, np.ones(i2.size, int), y2)
        worst = max(worst, int(np.abs(d).sum()))
        assert np.abs(d).sum() <= 2 * L
        t = rng.normal(size=n) * 2
        assert _grad_diff_l1(t, n, (i, j, y), (i2, j2, y2), gamma) <= 4 * L * KAPPA1 + 1e-9
        ratio = _logdet_hessian(t, n, i, j, gamma) - _logdet_hessian(t, n, i2, j2, gamma)
        assert abs(ratio) <= L * math.log(1 + 2 * KAPPA2 / gamma) + 1e-9
    # The worst case is exactly 2L: a user's L wins of item 0 over 1 become L wins of 1 over 0 —
    # which is why Algorithm 3's printed scale L/ε gives only 2ε (docs/mechanisms.md §2.2).
    i, j, y = np.zeros(L, int), np.ones(L, int), np.ones(L, int)
    d = win_counts(2, i, j, np.ones(L, int), y) - win_counts(2, i, j, np.ones(L, int), 1 - y)
    assert np.abs(d).sum() == 2 * L and worst <= 2 * L


@pytest.mark.os_random
@pytest.mark.parametrize("scale", [1.5, 6.0])
def test_released_noisy_counts_follow_the_exact_discrete_laplace_pmf(scale):
    """The production path (OpenDP, counts fed into the mechanism): noisy − true counts have
    the pmf (1−q)/(1+q)·q^|k|, q = e^{−1/scale}, by a χ² test — so the privacy loss between
    counts at ℓ1 distance Δ is exactly Δ/scale."""
    from scipy import stats as sps

    counts = np.arange(50) * 7
    diffs = np.concatenate([add_discrete_laplace(counts, scale) - counts for _ in range(400)])
    q = math.exp(-1 / scale)
    top = int(6 * scale)
    ks = np.arange(-top, top + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(ks)
    observed = np.array([np.sum(diffs == k) for k in ks] + [np.sum(np.abs(diffs) > top)])
    expected = np.append(pmf, 1 - pmf.sum()) * diffs.size
    assert sps.chisquare(observed, expected).pvalue > P_OS


@pytest.mark.os_random
def test_integer_noise_never_saturates_or_exposes_counts():
    """At the smallest ε the service allows and a large L, the noise scale is ~4e10: the
    released values are ordinary noise, never a count ± a type bound (i32 noise drawn on
    zeros and added outside the mechanism would be clamped at ±2^31 and subtract back out)."""
    counts = np.array([3, 2, 0, 7])
    scale = noisy_counts_scale(0.001, "individual", 20_000_000)
    assert scale == pytest.approx(4e10)
    out = np.concatenate([add_discrete_laplace(counts, scale) for _ in range(50)])
    for bound in (2**31, 2**31 - 1, 2**63 - 1):
        assert not np.any(np.isin(np.abs(out - np.tile(counts, 50)), [bound]))
    assert np.abs(out).max() < 2**62 and np.std(out) > 1e9
    with pytest.raises(ValueError, match="scale"):
        add_discrete_laplace(counts, 2.0**60)
    with pytest.raises(ValueError, match="epsilon"):
        noisy_counts(counts, 1e-9)


def test_parameter_floors_A5():
    rng = np.random.default_rng(3)
    for _ in range(200):
        eps = float(rng.uniform(0.05, 5))
        L = int(rng.integers(1, 30))
        n = int(rng.integers(2, 200))
        e = perturbed_mle_parameters(n, eps, "edge", n_comparisons=int(rng.integers(0, 10**5)))
        assert e["lambda"] >= 8 * KAPPA1 / eps - 1e-12 and e["gamma"] >= 4 * KAPPA2 / eps - 1e-12
        ind = perturbed_mle_parameters(n, eps, "individual", n_respondents=int(rng.integers(0, 10**4)), L=L)
        assert ind["lambda"] >= 8 * L * KAPPA1 / eps - 1e-12 and ind["gamma"] >= 8 * L * KAPPA2 / eps - 1e-12
    with pytest.raises(ValueError, match="contribution bound"):
        perturbed_mle_parameters(5, 1.0, "individual")
    with pytest.raises(ValueError, match="epsilon"):
        noisy_counts([1, 2], 0.0)


def _disconnected_data():
    """Items 0–4 compared among themselves, 5–7 among themselves, 8 and 9 never."""
    rng = np.random.default_rng(40)
    i, j = [], []
    for lo, hi in ((0, 5), (5, 8)):
        for a in range(lo, hi):
            for b in range(a + 1, hi):
                i += [a] * 3
                j += [b] * 3
    i, j = np.array(i), np.array(j)
    return 10, i, j, rng.integers(0, 2, i.size)


@pytest.mark.parametrize(("unit", "L"), [("edge", None), ("individual", 4)])
@pytest.mark.parametrize("design", ["connected", "disconnected"])
def test_perturbed_release_is_the_exact_minimizer_centred_over_all_items_A4(unit, L, design):
    """The release is argmin 𝓛 + (γ/2)‖θ‖² + wᵀθ (stationary at the published γ, with the w
    the mechanism drew), then centred over *all* items. Per-component centring would leak the
    comparison graph: an uncompared item would score exactly 0 and each component's scores
    would sum to 0."""
    if design == "connected":
        n, i, j, y = _edge_data(np.random.default_rng(4), n=15, p=0.8)
    else:
        n, i, j, y = _disconnected_data()
    seed = 41
    rel = perturbed_mle(n, i, j, np.ones(i.size), y, 0.7, unit, L=L, rng=np.random.default_rng(seed))
    gamma = rel.parameters["gamma"]
    w = np.random.default_rng(seed).laplace(0.0, rel.parameters["lambda"], n)  # the mechanism's first draw
    theta = rel.minimizer
    assert np.abs(_grad(theta, n, i, j, y, gamma) + w).max() < 1e-8
    assert theta.sum() == pytest.approx(-w.sum() / gamma, rel=1e-9)  # 1ᵀ∇𝓛 = 0
    assert np.array_equal(rel.values, np.round(theta - theta.mean(), 6) + 0.0)
    if design == "disconnected":
        assert rel.values[8] != 0.0 and rel.values[9] != 0.0
        assert abs(rel.values[:5].sum()) > 1e-3 and abs(rel.values[5:8].sum()) > 1e-3
        assert theta[8] == pytest.approx(-w[8] / gamma) and theta[9] == pytest.approx(-w[9] / gamma)


@pytest.mark.parametrize(("unit", "L"), [("edge", None), ("individual", 3)])
def test_end_to_end_gradient_sensitivity_of_the_released_minimizer_A2(unit, L):
    """Prop. 2.1 / 3.1 through the production solver: the w that maps a neighbouring dataset
    to the same released minimizer t differs from the drawn w by at most 4κ₁ (edge) or
    4Lκ₁ (individual) in ℓ1, on connected and disconnected designs."""
    rng = np.random.default_rng(42)
    worst = 0.0
    for r in range(60):
        if unit == "edge":
            n, i, j, y = _edge_data(rng, n=9, p=0.5) if r % 2 else _disconnected_data()
            i2, j2, y2 = _edge_neighbour(rng, n, i, j, y)
        else:
            n, users, i, j, y = _individual_data(rng, m_users=12, n=7, L=L)
            i2, j2, y2 = _replace_user(rng, n, L, users, i, j, y)
        rel = perturbed_mle(n, i, j, np.ones(i.size), y, 0.9, unit, L=L, rng=np.random.default_rng(r))
        gamma = rel.parameters["gamma"]
        t = rel.minimizer
        w = -_grad(t, n, i, j, y, gamma)
        w2 = -_grad(t, n, i2, j2, y2, gamma)
        worst = max(worst, float(np.abs(w - w2).sum()))
    bound = 4 * KAPPA1 * (L or 1)
    assert worst <= bound + 1e-8
    assert worst > 0.5 * bound  # the bound is nearly attained (the test is not vacuous)


@pytest.mark.os_random
@pytest.mark.parametrize(("unit", "L"), [("edge", None), ("individual", 6)])
def test_perturbed_mle_noise_has_the_stated_scale(unit, L):
    """The production sampler (OpenDP): w recovered from released minimizers has variance
    2λ², λ = 8κ₁/ε (edge) or 8Lκ₁/ε (individual); Var(w²) = 20λ⁴ gives the MC error."""
    n, i, j, y = _edge_data(np.random.default_rng(5), n=12, p=0.7)
    eps = 1.3
    ws = []
    for _ in range(300):
        rel = perturbed_mle(n, i, j, np.ones(i.size), y, eps, unit, L=L)
        ws.append(-_grad(rel.minimizer, n, i, j, y, rel.parameters["gamma"]))
    ws = np.concatenate(ws)
    lam = 8 * KAPPA1 * (L or 1) / eps
    assert rel.parameters["lambda"] == pytest.approx(lam)
    assert_close_mc(float(np.mean(ws**2)), 2 * lam**2, math.sqrt(20 / ws.size) * lam**2, z=Z_OS, what="Var w")


def test_published_parameters_depend_on_public_values_only():
    """γ and λ are functions of (ε, L): two datasets of different sizes publish identical
    parameters (the accuracy term that used the counts is off unless c₀ > 0 is asked for)."""
    rng = np.random.default_rng(6)
    a = _edge_data(rng, n=10, p=0.3)
    b = _edge_data(rng, n=10, p=1.0)
    for unit, L in (("edge", None), ("individual", 5)):
        pa = perturbed_mle(*a[:3], np.ones(a[1].size), a[3], 1.0, unit, L=L, rng=rng).parameters
        pb = perturbed_mle(*b[:3], np.ones(b[1].size), b[3], 1.0, unit, L=L, rng=rng).parameters
        assert pa == pb
        assert pa["gamma"] == pytest.approx(4 * KAPPA2 / 1.0 if unit == "edge" else 8 * 5 * KAPPA2)
    with_counts = perturbed_mle_parameters(10, 1.0, "edge", n_comparisons=10_000, c0=1.0)
    assert with_counts["gamma"] > with_counts["gamma_privacy_floor"]


# -- B: the paper's experiments at reduced size (seeded) ------------------------------


def _theta(n, rng):
    k = max(n // 4, 1)
    e = np.ones(n)
    # 0-based: the first k items are the top set (docs/mechanisms.md §2.5; paper §4.1.1)
    e[k:] = rng.uniform(0.2, 0.7, n - k)
    t = np.log(e)
    return t - t.mean(), k


def _edge_sample(theta, p, rng):
    n = theta.size
    iu, ju = np.triu_indices(n, 1)
    keep = rng.random(iu.size) < p
    i, j = iu[keep], ju[keep]
    y = (rng.random(i.size) < expit(theta[i] - theta[j])).astype(int)
    return i, j, np.ones(i.size, int), y


def _individual_sample(theta, m_users, L, rng):
    n = theta.size
    a = rng.integers(0, n, m_users * L)
    b = (a + rng.integers(1, n, m_users * L)) % n  # L random pairs per user, with replacement (§3.1)
    i, j = np.minimum(a, b), np.maximum(a, b)
    y = (rng.random(i.size) < expit(theta[i] - theta[j])).astype(int)
    return i, j, np.ones(i.size, int), y


def _errors(theta, k, i, j, n_, y, eps, unit, L, m_users, rng):
    m = theta.size
    mle = perturbed_mle(m, i, j, n_, y, eps, unit, L=L, n_respondents=m_users, rng=rng)
    cnt = noisy_counts(win_counts(m, i, j, n_, y), eps, unit, L, rng=rng)
    top = set(range(k))
    rel_inf = math.log(np.abs(mle.values - theta).max() / np.abs(theta).max())
    top_mle = 1 - len(top & set(mle.top_k(k).tolist())) / k
    top_cnt = 1 - len(top & set(cnt.top_k(k).tolist())) / k
    return np.array([rel_inf, top_mle, top_cnt])


def _mean(fn, reps, seed):
    rng = np.random.default_rng(seed)
    a = np.array([fn(rng) for _ in range(reps)])
    return a.mean(axis=0), a.std(axis=0, ddof=1) / math.sqrt(reps)


def _less(a, b, metric, what=""):
    (ma, sa), (mb, sb) = a, b
    margin = (mb[metric] - ma[metric]) / math.hypot(sa[metric], sb[metric])
    assert margin > Z, f"{what}: {ma[metric]:.4f} vs {mb[metric]:.4f} ({margin:.1f} se)"


def _edge_run(n, p, eps, reps=60, seed=0):
    def one(rng):
        theta, k = _theta(n, rng)
        return _errors(theta, k, *_edge_sample(theta, p, rng), eps, "edge", None, 0, rng)

    return _mean(one, reps, seed)


def _individual_run(n, m_users, eps, L=5, reps=60, seed=0):
    def one(rng):
        theta, k = _theta(n, rng)
        return _errors(
            theta, k, *_individual_sample(theta, m_users, L, rng), eps, "individual", L, m_users, rng
        )

    return _mean(one, reps, seed)


def test_B1_edge_errors_fall_with_n():
    small, big = _edge_run(24, 1.0, 1.0, seed=1), _edge_run(160, 1.0, 1.0, seed=2)
    _less(big, small, 0, "relative ℓ∞")
    _less(big, small, 2, "top-k (counts)")


def test_B2_B3_edge_errors_fall_with_p_and_epsilon():
    _less(_edge_run(80, 1.0, 1.0, seed=3), _edge_run(80, 0.2, 1.0, seed=4), 0, "in p")
    high, low = _edge_run(80, 0.5, 2.5, seed=5), _edge_run(80, 0.5, 0.25, seed=6)
    _less(high, low, 0, "in ε")
    _less(high, low, 2, "top-k in ε")


def test_B4_counts_recover_the_top_set_at_least_as_well_as_the_mle():
    for n, p, eps, seed in ((40, 1.0, 1.0, 7), (80, 0.5, 2.5, 8), (60, 0.5, 0.5, 9)):
        (mean, se) = _edge_run(n, p, eps, reps=80, seed=seed)
        # Paper's finding 1: Copeland (counts) ≤ MLE in top-k error; allow Monte Carlo noise.
        assert mean[2] <= mean[1] + Z * math.hypot(se[1], se[2]), (n, p, eps, mean)


def test_B6_individual_errors_grow_with_n_and_fall_with_m_and_epsilon():
    _less(_individual_run(8, 1000, 1.0, seed=10), _individual_run(48, 1000, 1.0, seed=11), 0, "grows with n")
    _less(_individual_run(16, 2000, 1.0, seed=12), _individual_run(16, 250, 1.0, seed=13), 0, "falls with m")
    _less(_individual_run(16, 1000, 2.5, seed=14), _individual_run(16, 1000, 0.5, seed=15), 0, "falls with ε")


def test_B7_epsilon_2_5_is_closer_to_non_private_than_epsilon_1():
    def run(eps, seed):
        return _edge_run(80, 1.0, eps, reps=60, seed=seed)

    at_1, at_25, at_inf = run(1.0, 16), run(2.5, 17), run(20.0, 18)
    _less(at_25, at_1, 0, "ε = 2.5 vs 1")  # at_inf ≤ at_25 < at_1: closer to the non-private error
    _less(at_inf, at_1, 0, "ε = 20 vs 1")


# -- B8: real ballots ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["00002-00000006.soi", "00002-00000008.soi"])
def test_B8_debian_ballots_individual_dp_ranks_approach_the_non_private_ranks(name):
    ballots = read_preflib(DATA / name)
    voters, i, j, y = ballot_comparisons(ballots)
    m, L = ballots.n_items, ballots.n_items * (ballots.n_items - 1) // 2
    assert np.bincount(voters).max() <= L  # each voter contributes at most L comparisons
    ones = np.ones(i.size, int)
    wins = win_counts(m, i, j, ones, y)
    exact = np.argsort(np.argsort(-wins, kind="stable"))  # non-private Copeland ranks
    rng = np.random.default_rng(17)
    mad = {}
    for eps in (0.1, 0.5, 2.0, 10.0, 100.0):
        d = [
            np.abs(noisy_counts(wins, eps, "individual", L, rng=rng).ranks() - 1 - exact).mean()
            for _ in range(200)
        ]
        mad[eps] = (float(np.mean(d)), float(np.std(d, ddof=1) / math.sqrt(200)))
    epss = sorted(mad)
    for a, b in itertools.pairwise(epss):  # non-increasing in ε (up to Monte Carlo error)
        assert mad[b][0] <= mad[a][0] + Z * math.hypot(mad[a][1], mad[b][1]), mad
    assert mad[100.0][0] < 0.1 < mad[0.1][0]  # and close to the non-private ranks at large ε


@pytest.mark.parametrize("name", ["00002-00000006.soi", "00002-00000008.soi"])
def test_B8_debian_ballots_individual_dp_perturbed_mle_approaches_the_non_private_fit(name):
    """The same for the individual-DP perturbed MLE: its ranks approach those of the
    non-private BTL fit of the ballots' comparisons as ε grows."""
    from app.stats import fit_btl

    ballots = read_preflib(DATA / name)
    _voters, i, j, y = ballot_comparisons(ballots)
    m, L = ballots.n_items, ballots.n_items * (ballots.n_items - 1) // 2
    ones = np.ones(i.size)
    exact_theta = fit_btl(m, i, j, ones, y, 1e-6).theta
    exact = np.argsort(np.argsort(-exact_theta))
    rng = np.random.default_rng(18)
    mad = {}
    for eps in (0.5, 5.0, 50.0, 500.0):
        d = [
            np.abs(
                perturbed_mle(m, i, j, ones, y, eps, "individual", L=L, rng=rng).ranks() - 1 - exact
            ).mean()
            for _ in range(100)
        ]
        mad[eps] = (float(np.mean(d)), float(np.std(d, ddof=1) / math.sqrt(100)))
    for a, b in itertools.pairwise(sorted(mad)):
        assert mad[b][0] <= mad[a][0] + Z * math.hypot(mad[a][1], mad[b][1]), mad
    assert mad[500.0][0] < 0.25 and mad[500.0][0] + Z * math.hypot(mad[500.0][1], mad[0.5][1]) < mad[0.5][0]


def test_extreme_public_settings_still_solve_exactly():
    """The smallest ε the service allows with the largest L (all pairs of 100 items): λ and γ
    are ~1e7 and the absolute-looking tolerance scales with λ, so the solve converges."""
    rng = np.random.default_rng(19)
    n, i, j, y = _edge_data(rng, n=100, p=0.2)
    L = 100 * 99 // 2
    for _ in range(3):
        rel = perturbed_mle(n, i, j, np.ones(i.size), y, 0.001, "individual", L=L)
        gamma = rel.parameters["gamma"]
        w_scale = rel.parameters["lambda"]
        resid = _grad(rel.minimizer, n, i, j, y, gamma)  # = −w at the exact minimizer
        assert np.all(np.isfinite(rel.values)) and np.abs(resid).max() < 50 * w_scale
