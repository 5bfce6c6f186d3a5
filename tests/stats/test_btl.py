"""The debiased regularized MLE: exactness, certificates, designs, and the paper's claims."""

from __future__ import annotations

import os
import subprocess
import sys

import choix
import numpy as np
import pytest
from scipy.special import expit

from app.stats import (
    FitOptions,
    G,
    PairStats,
    competition_ranks,
    default_lambda,
    fit_btl,
    fit_debiased_mle,
    fit_debiased_mle_stats,
    fit_naive_mle,
    fit_naive_mle_stats,
    objective,
    pair_stats,
)
from app.stats.simulation import (
    complete_design,
    random_pairs_design,
    simulate_pair_stats,
    simulate_survey,
    uniform_theta,
)


def reference_gradient(theta, stats: PairStats, lam):
    """∇J by a plain loop over pairs, independent of the solver's vectorized code."""
    g = 2 * lam * np.asarray(theta, dtype=float).copy()
    for a, b, n, s in zip(stats.i, stats.j, stats.n, stats.sum_z, strict=True):
        r = n * expit(theta[a] - theta[b]) - s
        g[a] += r
        g[b] -= r
    return g


def assert_is_the_minimizer(fit, stats, lam):
    """J is 2λ-strongly convex, so ‖θ̂ − θ_opt‖₂ ≤ ‖∇J(θ̂)‖₂ / (2λ): a certificate."""
    g = reference_gradient(fit.theta, stats, lam)
    assert np.linalg.norm(g) / (2 * lam) < 1e-8
    assert fit.converged
    for c in range(fit.n_components):  # Lemma 3, per component
        assert abs(fit.theta[fit.component == c].sum()) < 1e-10


def choix_data(i, j, y):
    return [(a, b) if w == 1 else (b, a) for a, b, w in zip(i, j, y, strict=True)]


@pytest.mark.parametrize(
    ("m", "design", "lam"), [(6, "complete", 0.3), (15, "incomplete", 1.0), (15, "incomplete", 0.02)]
)
def test_equals_choix_opt_pairwise_on_non_private_data(m, design, lam):
    rng = np.random.default_rng(m)
    theta = uniform_theta(m, rng)
    d = complete_design(m, 40) if design == "complete" else random_pairs_design(m, 200, 8, rng)
    survey = simulate_survey(theta, d, 50.0, rng)  # ε → large: P(flip) = 2e-22
    assert np.array_equal(survey.y, survey.y_tilde)
    fit = fit_debiased_mle(m, d.i, d.j, survey.y_tilde, 50.0, lam=lam)
    # choix's penalty is alpha·Σθ², ours λ‖θ‖². Its default Newton-CG stops on the
    # step size (at ‖∇‖ ≈ 3e-6 in the λ = 0.02 case), so compare with its BFGS run
    # to a gradient tolerance of 1e-12, and check ours is at least as stationary.
    ref = choix.opt_pairwise(m, choix_data(d.i, d.j, survey.y), alpha=lam, method="BFGS", tol=1e-12)
    np.testing.assert_allclose(fit.theta, ref, atol=1e-8, rtol=0)
    stats = pair_stats(m, d.i, d.j, survey.y, np.inf)
    ours = np.abs(reference_gradient(fit.theta, stats, lam)).max()
    assert ours <= max(np.abs(reference_gradient(ref, stats, lam)).max(), 1e-8)
    assert fit.lam == lam


def test_lambda_zero_equals_choix_ilsr_mle():
    rng = np.random.default_rng(21)
    m = 10
    theta = uniform_theta(m, rng)
    d = complete_design(m, 30)
    survey = simulate_survey(theta, d, np.inf, rng)
    ref = choix.ilsr_pairwise(m, choix_data(d.i, d.j, survey.y), alpha=0.0, tol=1e-13, max_iter=1000)
    for solver in ("dense", "cg"):
        fit = fit_debiased_mle(m, d.i, d.j, survey.y, np.inf, lam=0.0, options=FitOptions(solver=solver))
        assert fit.converged
        np.testing.assert_allclose(fit.theta, ref - ref.mean(), atol=1e-8)


@pytest.mark.parametrize("eps", [0.2, 1.0, 4.0])
def test_private_fit_is_certified_minimizer_incomplete_heterogeneous(eps):
    rng = np.random.default_rng(int(eps * 10))
    m, L = 30, 150
    theta = uniform_theta(m, rng)
    d = random_pairs_design(m, L, 12, rng)
    eps_resp = rng.choice([eps, 2 * eps, 5 * eps], size=L)
    survey = simulate_survey(theta, d, eps_resp, rng)
    stats = survey.stats()
    fit = fit_debiased_mle_stats(stats)
    assert fit.lam == pytest.approx(G(survey.epsilon))  # default λ = G(ε)
    assert_is_the_minimizer(fit, stats, fit.lam)
    assert fit.objective == pytest.approx(
        objective(fit.theta, stats.i, stats.j, stats.n, stats.sum_z, fit.lam)
    )
    # The objective at θ̂ is below nearby points (a check independent of gradients).
    for _ in range(5):
        probe = fit.theta + 1e-3 * rng.normal(size=m)
        assert objective(probe, stats.i, stats.j, stats.n, stats.sum_z, fit.lam) > fit.objective


def test_z_bar_outside_unit_interval_T4():
    rng = np.random.default_rng(8)
    m = 8
    theta = uniform_theta(m, rng)
    stats = simulate_pair_stats(theta, 3, 0.15, rng)  # z ∈ {−6.2, 7.2}
    zbar = stats.sum_z / stats.n
    assert np.mean((zbar < 0) | (zbar > 1)) > 0.5
    for lam in (default_lambda(stats), 1e-2):
        fit = fit_debiased_mle_stats(stats, lam)
        assert_is_the_minimizer(fit, stats, lam)
        assert fit.iterations <= 30


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_solver_derivatives_match_finite_differences_and_hessian_ignores_z(sign):
    """The solver's own gradient and Laplacian weights (not the public objective)
    against central differences of J, with z̄ far outside [0, 1]."""
    from app.stats.newton import _DenseSolver, _Problem

    rng = np.random.default_rng(31)
    m = 7
    stats = simulate_pair_stats(uniform_theta(m, rng), 3, 0.2, rng)
    s_vals = sign * stats.sum_z
    prob = _Problem(m, stats.i, stats.j, stats.n.astype(float), s_vals, 0.4)
    theta = rng.normal(size=m)
    cache = prob.new_cache()
    prob.value(theta, cache)
    g, w = prob.derivatives(theta, cache)
    w = w.copy()
    h = 1e-6

    def grad_at(t):
        c = prob.new_cache()
        prob.value(t, c)
        return prob.derivatives(t, c)[0].copy()

    for k in range(m):
        e = np.zeros(m)
        e[k] = h
        fd = (prob.value(theta + e, prob.new_cache()) - prob.value(theta - e, prob.new_cache())) / (2 * h)
        assert fd == pytest.approx(g[k], abs=1e-6)
    # Hessian = Laplacian(w) + 2λI, column by column from differences of the gradient.
    hess = np.zeros((m, m))
    hess[stats.i, stats.j] = hess[stats.j, stats.i] = -w
    hess[np.diag_indices(m)] = np.bincount(stats.i, w, m) + np.bincount(stats.j, w, m) + 0.8
    for k in range(m):
        e = np.zeros(m)
        e[k] = h
        np.testing.assert_allclose((grad_at(theta + e) - grad_at(theta - e)) / (2 * h), hess[:, k], atol=1e-6)
    # The weights do not involve S: the same θ with other sums gives the same Hessian.
    other = _Problem(m, stats.i, stats.j, stats.n.astype(float), -s_vals + 5.0, 0.4)
    c2 = other.new_cache()
    other.value(theta, c2)
    np.testing.assert_array_equal(other.derivatives(theta, c2)[1], w)
    assert _DenseSolver  # the dense solver consumes exactly these weights


def test_dense_and_cg_solvers_agree():
    rng = np.random.default_rng(3)
    m = 120
    theta = uniform_theta(m, rng)
    d = random_pairs_design(m, 400, 20, rng)
    stats = simulate_survey(theta, d, 1.0, rng).stats()
    dense = fit_debiased_mle_stats(stats, options=FitOptions(solver="dense"))
    cg = fit_debiased_mle_stats(stats, options=FitOptions(solver="cg"))
    assert dense.solver == "dense" and cg.solver == "cg"
    np.testing.assert_allclose(dense.theta, cg.theta, atol=1e-9)
    assert_is_the_minimizer(cg, stats, cg.lam)


def test_disconnected_graph_each_component_separately():
    rng = np.random.default_rng(5)
    theta = uniform_theta(9, rng)
    # items 0-3 compared among themselves, 4-7 among themselves, 8 never
    i = np.concatenate([rng.integers(0, 4, 400), 4 + rng.integers(0, 4, 400)])
    j = np.concatenate([rng.integers(0, 4, 400), 4 + rng.integers(0, 4, 400)])
    keep = i != j
    i, j = i[keep], j[keep]
    y = (rng.random(i.size) < expit(theta[i] - theta[j])).astype(int)
    for solver in ("dense", "cg"):
        fit = fit_debiased_mle(9, i, j, y, 1.5, lam=0.7, options=FitOptions(solver=solver))
        assert not fit.connected and fit.n_components == 3
        assert fit.theta[8] == 0.0
        assert abs(fit.theta[:4].sum()) < 1e-12 and abs(fit.theta[4:8].sum()) < 1e-12
        # Each block's scores equal the fit of that block alone.
        for block in (np.arange(4), np.arange(4, 8)):
            sel = np.isin(i, block)
            alone = fit_debiased_mle(4, i[sel] - block[0], j[sel] - block[0], y[sel], 1.5, lam=0.7)
            np.testing.assert_allclose(fit.theta[block], alone.theta, atol=1e-10)
    assert fit_debiased_mle(3, [0], [1], [1], 1.0).n_components == 2


def test_borda_order_equals_mle_order_in_complete_designs_T5():
    rng = np.random.default_rng(13)
    m, L = 10, 30
    theta = uniform_theta(m, rng)
    for _ in range(20):
        stats = simulate_pair_stats(theta, L, 1.0, rng)
        fit = fit_debiased_mle_stats(stats)
        dense = stats.to_dense()
        borda = dense["sum_z"].sum(axis=1)  # b_i·L = Σ_j S_ij
        for a in range(m):
            for b in range(a + 1, m):
                if abs(borda[a] - borda[b]) < 1e-9:
                    assert abs(fit.theta[a] - fit.theta[b]) < 1e-8
                else:
                    assert np.sign(fit.theta[a] - fit.theta[b]) == np.sign(borda[a] - borda[b])


def test_classic_and_debiased_rank_identically_homogeneous_complete_T6():
    rng = np.random.default_rng(17)
    m = 12
    for _ in range(20):
        theta = uniform_theta(m, rng)
        stats = simulate_pair_stats(theta, 50, 2.0, rng)
        deb = fit_debiased_mle_stats(stats)
        naive = fit_naive_mle_stats(stats)
        np.testing.assert_array_equal(
            competition_ranks(deb.theta, 1e-7), competition_ranks(naive.theta, 1e-7)
        )
        # ... while the naive scores are shrunk towards 0 (docs/estimator.md §8.1; paper Lemma 1)
        assert np.abs(naive.theta).max() < np.abs(deb.theta).max()


def test_warm_start():
    rng = np.random.default_rng(23)
    m = 40
    theta = uniform_theta(m, rng)
    first = simulate_pair_stats(theta, 20, 1.0, rng)
    cold = fit_debiased_mle_stats(first)
    again = fit_debiased_mle_stats(first, theta0=cold.theta)
    assert again.iterations == 0 and again.converged
    more = first + simulate_pair_stats(theta, 2, 1.0, rng)
    warm = fit_debiased_mle_stats(more, theta0=cold.theta)
    fresh = fit_debiased_mle_stats(more)
    assert warm.iterations < fresh.iterations
    np.testing.assert_allclose(warm.theta, fresh.theta, atol=1e-9)


@pytest.mark.parametrize("lam", [1e-13, 1e-16, 1e-30])
@pytest.mark.parametrize("solver", ["dense", "cg"])
def test_tiny_positive_lambda(lam, solver):
    rng = np.random.default_rng(0)
    stats = simulate_pair_stats(uniform_theta(10, rng), 50, np.inf, rng)
    fit = fit_debiased_mle_stats(stats, lam, options=FitOptions(solver=solver))
    ref = fit_debiased_mle_stats(stats, 0.0, options=FitOptions(solver=solver))  # the MLE exists here
    assert fit.converged
    np.testing.assert_allclose(fit.theta, ref.theta, atol=1e-8)


def test_lambda_zero_requires_an_existing_minimizer():
    with pytest.raises(ValueError, match="does not exist"):
        fit_btl(2, [0], [1], [10], [10.0], 0.0)  # item 0 won all 10
    i, j = np.triu_indices(4, 1)
    with pytest.raises(ValueError, match="does not exist"):  # item 0 beats everyone
        fit_btl(4, i, j, np.full(6, 5.0), np.where(i == 0, 5.0, 2.5), 0.0)
    with pytest.raises(ValueError, match="debiased data"):  # z̄ > 1: J unbounded below
        fit_btl(4, i, j, np.full(6, 5.0), np.where(i == 0, 7.0, 2.5), 0.0)
    rng = np.random.default_rng(0)
    stats = simulate_pair_stats(uniform_theta(10, rng), 5, 1.0, rng)
    with pytest.raises(ValueError, match="debiased data"):
        fit_debiased_mle_stats(stats, 0.0)
    # A cycle 0 > 1 > 2 > 0 satisfies Ford's condition: the MLE exists (all equal).
    fit = fit_btl(3, [0, 1, 0], [1, 2, 2], [1, 1, 1], [1.0, 1.0, 0.0], 0.0)
    assert fit.converged and np.allclose(fit.theta, 0.0, atol=1e-9)


def test_lambda_zero_disconnected_and_far_warm_start():
    rng = np.random.default_rng(2)
    stats = simulate_pair_stats(uniform_theta(10, rng), 50, np.inf, rng)
    ref = fit_btl(10, stats.i, stats.j, stats.n, stats.sum_y, 0.0)
    far = np.linspace(-50, 50, 10)[::-1].copy()
    far[::2] *= -1
    for solver in ("dense", "cg"):
        fit = fit_btl(
            10, stats.i, stats.j, stats.n, stats.sum_y, 0.0, theta0=far, options=FitOptions(solver=solver)
        )
        assert fit.converged
        np.testing.assert_allclose(fit.theta, ref.theta, atol=1e-8)
    # Two blocks, λ = 0: each block is the MLE of that block, centered.
    keep = (stats.i < 5) & (stats.j < 5) | (stats.i >= 5) & (stats.j >= 5)
    both = fit_btl(10, stats.i[keep], stats.j[keep], stats.n[keep], stats.sum_y[keep], 0.0)
    first = fit_btl(
        5,
        stats.i[keep & (stats.i < 5)],
        stats.j[keep & (stats.i < 5)],
        stats.n[keep & (stats.i < 5)],
        stats.sum_y[keep & (stats.i < 5)],
        0.0,
    )
    assert both.n_components == 2
    np.testing.assert_allclose(both.theta[:5], first.theta, atol=1e-9)


def test_cg_converges_on_extreme_debiased_data():
    # Very low ε and a tiny ridge make θ̂ extreme; inexact Newton must not stall.
    rng = np.random.default_rng(1)
    stats = simulate_pair_stats(uniform_theta(400, rng), 20, 1e-2, rng)
    cg = fit_debiased_mle_stats(stats, 1e-3, options=FitOptions(solver="cg"))
    dense = fit_debiased_mle_stats(stats, 1e-3, options=FitOptions(solver="dense"))
    assert cg.converged and dense.converged
    np.testing.assert_allclose(cg.theta, dense.theta, atol=1e-6 * np.abs(dense.theta).max())


_EXTREME_FIT = """
import numpy as np
from app.stats.btl import FitOptions
from app.stats.mle import fit_debiased_mle_stats
from app.stats.simulation import simulate_pair_stats, uniform_theta
rng = np.random.default_rng(1)
stats = simulate_pair_stats(uniform_theta(400, rng), 20, 1e-2, rng)
cg = fit_debiased_mle_stats(stats, 1e-3, options=FitOptions(solver="cg"))
dense = fit_debiased_mle_stats(stats, 1e-3, options=FitOptions(solver="dense"))
gap = np.abs(cg.theta - dense.theta).max() / np.abs(dense.theta).max()
print(int(cg.converged), int(dense.converged), gap)
"""


@pytest.mark.parametrize("kernel", ["Prescott", "Haswell"])
def test_cg_converges_whatever_the_blas_kernel(kernel):
    # The test above is machine-dependent: its inexact Newton path depends on
    # BLAS round-off, and OpenBLAS's oldest x86-64 kernels (the ones it picks on
    # CPUs it does not recognise) are where CG can stall while the dense solver
    # converges. OPENBLAS_CORETYPE picks that kernel on any x86-64 machine
    # (elsewhere it is ignored and this is the test above again).
    env = dict(os.environ, OPENBLAS_CORETYPE=kernel)
    out = subprocess.run(
        [sys.executable, "-c", _EXTREME_FIT], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[:2] == ["1", "1"]
    assert float(out[2]) <= 1e-6


def test_laplace_baseline_uses_g_of_epsilon_by_default():
    from app.stats import fit_laplace_mle, laplace_privatize

    rng = np.random.default_rng(3)
    d = complete_design(5, 20)
    y = rng.integers(0, 2, d.i.size)
    eps = np.where(d.respondent % 2 == 0, 0.5, 2.0)
    fit = fit_laplace_mle(5, d.i, d.j, laplace_privatize(y, eps, rng=rng), eps)
    assert fit.lam == pytest.approx(G(eps))


def test_fit_btl_merges_repeated_and_reversed_pairs():
    # (0,1) twice and (1,0) once are one edge with n = 3; S read in each row's orientation.
    a = fit_btl(3, [0, 0, 1, 1], [1, 1, 0, 2], [1, 1, 1, 2], [1.0, 0.0, 1.0, 1.5], 0.5)
    b = fit_btl(3, [0, 1], [1, 2], [3, 2], [1.0, 1.5], 0.5)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-12)
    assert a.n_pairs == 2 and a.n_comparisons == 5


def test_invalid_arguments():
    with pytest.raises(ValueError, match="lambda"):
        fit_btl(3, [0], [1], [1], [1.0], -1.0)
    with pytest.raises(ValueError, match="positive"):
        fit_btl(3, [0], [1], [0], [1.0], 1.0)
    with pytest.raises(ValueError, match="solver"):
        fit_btl(3, [0], [1], [1], [1.0], 1.0, options=FitOptions(solver="magic"))
    with pytest.raises(ValueError, match="theta0"):
        fit_btl(3, [0], [1], [1], [1.0], 1.0, theta0=[0.0, 1.0])
    with pytest.raises(ValueError, match="epsilon"):
        fit_debiased_mle(3, [0], [1], [1], 0.0)


@pytest.mark.parametrize(
    "bad",
    [
        {"tol": 0.0},
        {"tol": -1e-10},
        {"tol": float("nan")},
        {"atol": 0.0},
        {"atol": float("inf")},
        {"max_iter": 0},
        {"max_iter": 2.5},
    ],
)
def test_fit_options_are_checked_when_made(bad):
    with pytest.raises(ValueError, match=f"^{next(iter(bad))} must be"):
        FitOptions(**bad)


def test_no_comparisons_gives_zero_scores():
    fit = fit_debiased_mle(4, [], [], [], 1.0)
    np.testing.assert_array_equal(fit.theta, np.zeros(4))
    assert fit.lam == 1.0 and fit.n_components == 4 and fit.converged


def test_naive_fit_from_comparisons_uses_raw_answers():
    rng = np.random.default_rng(2)
    m = 6
    d = complete_design(m, 30)
    s = simulate_survey(uniform_theta(m, rng), d, 1.0, rng)
    naive = fit_naive_mle(m, d.i, d.j, s.y_tilde, 1.0, lam=0.4)
    ref = choix.opt_pairwise(m, choix_data(d.i, d.j, s.y_tilde), alpha=0.4, method="BFGS", tol=1e-12)
    np.testing.assert_allclose(naive.theta, ref, atol=1e-8)
