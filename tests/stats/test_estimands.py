"""What each goal certificate certifies when preferences are not BTL (docs/uncertainty.md §9).

The Borda certificate (app.stats.adaptive) certifies the Borda top-K; the pairwise one
(app.stats.pairwise_goal) the majority top-K, without assuming transitivity. The
populations: a Condorcet cycle at the top (no majority top-1 exists), a polarized
population (60% rank 0 > 1 > … > 5, 40% rank 1 > … > 5 > 0: Borda top-1 {1}, majority
top-1 {0}) and a mixture of two BTL groups with respondent effects.

Monte Carlo tolerances: a false-certification count F of R independent surveys is
judged by its one-sided 99% Clopper–Pearson lower bound, which must not exceed 1 −
level (a correct certificate fails this with probability ≤ 1%); a frequency by four
binomial standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta

from app.stats.adaptive import simulate_goal
from app.stats.pairwise_goal import simulate_pairwise_goal
from app.stats.simulation import Population, borda_top_k, majority_order, majority_top_k


def _cp_lower(failures: int, runs: int) -> float:
    """One-sided 99% Clopper–Pearson lower bound on a failure rate."""
    return 0.0 if failures == 0 else float(beta.ppf(0.01, failures, runs - failures + 1))


def _cycle() -> Population:
    """P(0 > 1) = .65, P(1 > 2) = .80, P(2 > 0) = .55; each of 0, 1, 2 beats each of 3, 4, 5
    with probability .8 (the others' pairs ½)."""
    p = np.full((6, 6), 0.5)
    p[:3, 3:], p[3:, :3] = 0.8, 0.2
    for a, b, q in ((0, 1, 0.65), (1, 2, 0.80), (2, 0, 0.55)):
        p[a, b], p[b, a] = q, 1 - q
    return Population.matrix(p)


POLARIZED = Population.rankings([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]], [0.6, 0.4])
#: Two BTL groups, 70% with θ = 3·(5, 4, 3, 2, 1, 0), 30% with 3·(0, 5, 4, 3, 2, 1).
MIXTURE = Population.btl([3.0 * np.array([5, 4, 3, 2, 1, 0]), 3.0 * np.array([0, 5, 4, 3, 2, 1])], [0.7, 0.3])


def test_the_estimands_of_the_study_populations():
    """The cycle has no majority top-1 or order while its Borda top-1 exists; the
    polarized population and the mixture (with respondent effects τ = 1) have different
    Borda and majority top-1s, and BTL has equal ones."""
    p = _cycle().pairwise()
    assert majority_top_k(p, 1) is None and majority_order(p) is None
    assert majority_top_k(p, 3) == {0, 1, 2} and borda_top_k(p, 1) == {1}
    assert borda_top_k(POLARIZED.pairwise(), 1) == {1} and majority_top_k(POLARIZED.pairwise(), 1) == {0}
    assert majority_order(POLARIZED.pairwise()) == [0, 1, 2, 3, 4, 5]  # WST holds, yet they differ
    q = MIXTURE.pairwise(1.0)
    assert borda_top_k(q, 1) == {1} and majority_top_k(q, 1) == {0}
    btl = Population.btl([[0.3, 1.0, -0.2, 0.0]]).pairwise(1.0)
    assert borda_top_k(btl, 2) == majority_top_k(btl, 2) == {0, 1}


def test_population_answers_have_the_population_probabilities():
    """20,000 respondents of the mixture with τ = 1, one answer each on (0, 1) and one on
    (1, 2): each share of "first item wins" is within four binomial standard errors of
    the quadrature's P(i beats j)."""
    rng = np.random.default_rng(21)
    n = 20_000
    who = np.arange(n)
    q = MIXTURE.pairwise(1.0)
    for a, b in ((0, 1), (1, 2)):
        y = MIXTURE.answers(np.full(n, a), np.full(n, b), who, n, 1.0, rng)
        assert abs(y.mean() - q[a, b]) <= 4 * math.sqrt(q[a, b] * (1 - q[a, b]) / n)


def test_a_cycle_at_the_top_is_never_certified_without_closure_and_is_with_it():
    """The cycle, top-1, level 0.99, ε = 3, 6 surveys of at most 3,000 answers. Without
    closure nothing is certified: a top 1 needs one of the pairs (0, 2), (1, 0), (2, 1)
    certified the wrong way, an event of probability ≤ 3·0.01/15 per survey (0.012 for
    all six). With closure (assuming WST) {0} is certified in every survey from 0 > 1 and
    1 > 2, as the default would be were it closed; the same surveys never certify
    0 > 2 (its true P is .45)."""
    runs, level, cap = 6, 0.99, 3000
    for r in range(runs):
        rng = np.random.default_rng([31, r])
        run = simulate_pairwise_goal(_cycle(), 3.0, level, "adaptive", rng, top_k=1, max_answers=cap)
        assert run.certified is None and not run.status.met
        assert not run.status.beats[0, 2]  # true P(0 beats 2) = .45
        closed = simulate_pairwise_goal(
            _cycle(),
            3.0,
            level,
            "adaptive",
            np.random.default_rng([31, r]),
            top_k=1,
            max_answers=cap,
            transitive=True,
        )
        assert closed.certified is not None and closed.certified.tolist() == [0]
        assert closed.status.beats[0, 1] and closed.status.beats[1, 2]


@pytest.mark.parametrize("certificate", ["pairwise", "borda"])
def test_each_certificate_certifies_its_own_estimand_on_a_polarized_population(certificate):
    """The polarized population, top-1, level 0.9, ε = 3, 8 surveys: the pairwise
    certificate certifies the majority top-1 {0}, the Borda one the Borda top-1 {1};
    each meets its goal in every survey, and the surveys certifying another set than its
    own estimand pass the Clopper–Pearson check against 0.1 (so a certificate
    certifying the other estimand, 8 of 8 wrong, fails)."""
    runs, level = 8, 0.9
    truth = (
        majority_top_k(POLARIZED.pairwise(), 1)
        if certificate == "pairwise"
        else borda_top_k(POLARIZED.pairwise(), 1)
    )
    wrong = 0
    for r in range(runs):
        rng = np.random.default_rng([41, r])
        simulate = simulate_pairwise_goal if certificate == "pairwise" else simulate_goal
        run = simulate(POLARIZED, 3.0, level, "adaptive", rng, top_k=1, max_answers=40_000)
        assert run.certified is not None
        wrong += set(run.certified.tolist()) != truth
    assert _cp_lower(wrong, runs) <= 1 - level


@pytest.mark.parametrize("certificate", ["pairwise", "borda"])
def test_respondent_effects_keep_both_certificates_valid(certificate):
    """The two-group BTL mixture with respondent effects τ = 1 (each respondent's own
    scores θ_g + τ·N(0, 1)), top-1, level 0.9, ε = 2, 8 surveys: each certificate meets
    its goal and certifies its own estimand of the population's P (Borda {1}, majority
    {0}), judged as above."""
    runs, level, tau = 8, 0.9, 1.0
    q = MIXTURE.pairwise(tau)
    truth = majority_top_k(q, 1) if certificate == "pairwise" else borda_top_k(q, 1)
    wrong = 0
    for r in range(runs):
        rng = np.random.default_rng([51, r])
        simulate = simulate_pairwise_goal if certificate == "pairwise" else simulate_goal
        run = simulate(MIXTURE, 2.0, level, "adaptive", rng, top_k=1, tau=tau, max_answers=40_000)
        assert run.certified is not None
        wrong += set(run.certified.tolist()) != truth
    assert _cp_lower(wrong, runs) <= 1 - level
