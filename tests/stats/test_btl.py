"""The debiased regularized MLE: exactness, certificates, designs, and the paper's claims."""

from __future__ import annotations

import choix
import numpy as np
import pytest
from scipy.special import expit

from app.stats import (
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
        fit = fit_debiased_mle(m, d.i, d.j, survey.y, np.inf, lam=0.0, solver=solver)
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
    # The same counts with other sums leave the Hessian unchanged: J(θ; S) − J(θ; S')
    # is linear in θ, so its second differences vanish.
    other = PairStats(m, stats.i, stats.j, stats.n, stats.sum_y, -stats.sum_z, stats.sum_z2, stats.sum_v)
    t0, h = rng.normal(size=m), rng.normal(size=m) * 0.1

    def diff(t):
        return objective(t, stats.i, stats.j, stats.n, stats.sum_z, 1.0) - objective(
            t, other.i, other.j, other.n, other.sum_z, 1.0
        )

    assert diff(t0 + h) - 2 * diff(t0) + diff(t0 - h) == pytest.approx(0.0, abs=1e-9)


def test_dense_and_cg_solvers_agree():
    rng = np.random.default_rng(3)
    m = 120
    theta = uniform_theta(m, rng)
    d = random_pairs_design(m, 400, 20, rng)
    stats = simulate_survey(theta, d, 1.0, rng).stats()
    dense = fit_debiased_mle_stats(stats, solver="dense")
    cg = fit_debiased_mle_stats(stats, solver="cg")
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
        fit = fit_debiased_mle(9, i, j, y, 1.5, lam=0.7, solver=solver)
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
        # ... while the naive scores are shrunk towards 0 (note §5.1)
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
        fit_btl(3, [0], [1], [1], [1.0], 1.0, solver="magic")
    with pytest.raises(ValueError, match="theta0"):
        fit_btl(3, [0], [1], [1], [1.0], 1.0, theta0=[0.0, 1.0])
    with pytest.raises(ValueError, match="epsilon"):
        fit_debiased_mle(3, [0], [1], [1], 0.0)


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
