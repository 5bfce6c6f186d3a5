"""Coverage when respondents, not answers, are the sampling unit.

Surveys are drawn from a finite population — real Debian ballots split into the
pairs they imply, the CEMS students' paired comparisons as given, or a simulated
population with respondent random effects — and
every interval is checked against the population's own unpenalized BTL fit (the
estimand the API states). Coverage is judged against the 93–97 % target band (the
sandwich's finite-sample accuracy the service aims for), widened by Z = 4.5 Monte
Carlo standard errors computed from the surveys' own coverage shares (the intervals of
one survey are correlated; the surveys are independent); the seeds are fixed.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.stats.resampling import coverage, heterogeneous_population
from app.stats.simulation import uniform_theta
from tests.helpers.real_data import cems_population, debian_population
from tests.helpers.stats import Z, full_validation, size

REPS = 400


@pytest.mark.validation
@pytest.mark.parametrize(
    ("name", "eps", "pairs", "model_undercovers"),
    [
        ("00002-00000006.soi", 2.0, None, True),
        ("00002-00000008.soi", 2.0, None, True),
        ("00002-00000001.soi", 2.0, None, True),
        ("00002-00000006.soi", 1.0, 3, False),
        ("00002-00000001.soi", 0.5, None, False),
    ],
    ids=["2010-leader-eps2", "logo-eps2", "2002-leader-eps2", "2010-leader-3pairs-eps1", "2002-eps0.5"],
)
def test_resampled_ballots_are_covered_with_respondents_as_clusters(name, eps, pairs, model_undercovers):
    """100 surveys per case in the ordinary run, 400 at full size (PRIVRANK_VALIDATION=full).

    The cluster-robust intervals cover within the target band, up to Z standard errors;
    the naive intervals (no privacy noise, no clustering) cover below it by more than Z
    standard errors. Where a ballot decides many of one voter's pairs at ε = 2, the
    model-based intervals (answers independent) undercover: they cover less than the
    cluster-robust ones on the same surveys, by more than Z standard errors of the paired
    difference. That check runs at full size only: the shortfall is 2–11 points, under
    Z standard errors for some cases at 100 surveys."""
    pop = debian_population(name)
    rng = np.random.default_rng([pop.n_respondents, int(eps * 10), pairs or 0])
    c = coverage(pop, pop.n_respondents, eps, size(100, REPS), rng, pairs)
    assert c.refused <= 0.01 and c.method == "cluster"
    se = c.mc_se("cluster")
    assert 0.93 - Z * se <= c.cluster <= 0.97 + Z * se, (c, se)
    # A ballot decides all of one voter's pairs at once: treating them as
    # independent answers undercovers, most where the privacy noise is small.
    if model_undercovers and full_validation():
        assert c.cluster - c.model > Z * c.mc_se("cluster", "model"), c
    assert c.naive < 0.93 - Z * c.mc_se("naive"), c  # ignoring the privacy noise is badly wrong


@pytest.mark.validation
@pytest.mark.parametrize(
    ("eps", "pairs"), [(1.0, None), (2.0, None), (1.0, 5)], ids=["eps1", "eps2", "5pairs-eps1"]
)
def test_resampled_cems_students_are_covered_with_respondents_as_clusters(eps, pairs):
    """Real paired comparisons with respondent identifiers (303 students, 6 schools, up to
    15 answers each, some intransitive): the cluster-robust intervals cover within the
    target band, up to Z Monte Carlo standard errors (100 surveys; 400 at full size)."""
    pop = cems_population()
    rng = np.random.default_rng([303, int(eps * 10), pairs or 0])
    c = coverage(pop, pop.n_respondents, eps, size(100, REPS), rng, pairs)
    assert c.refused <= 0.01 and c.method == "cluster"
    se = c.mc_se("cluster")
    assert 0.93 - Z * se <= c.cluster <= 0.97 + Z * se, (c, se)


@pytest.mark.parametrize("tau", [0.0, 1.0])
def test_simulated_population_with_respondent_effects(tau):
    """200 surveys of 200 respondents from a population of 20,000 with 15 answers each."""
    theta = uniform_theta(10, np.random.default_rng(0), -1.0, 1.0)
    pop = heterogeneous_population(theta, 20_000, 15, tau, np.random.default_rng(1))
    c = coverage(pop, 200, 2.0, 200, np.random.default_rng([int(tau * 10), 20]))
    se = c.mc_se("cluster")
    assert 0.93 - Z * se <= c.cluster <= 0.97 + Z * se, (c, se)
    if tau == 0:
        # Independent answers: both covariances estimate the same thing.
        assert abs(c.cluster - c.model) < 0.02, c
    else:
        # One respondent's 15 answers share its random effect: the model-based intervals
        # cover less than the cluster-robust ones on the same surveys (paired, Z se).
        assert c.cluster - c.model > Z * c.mc_se("cluster", "model"), c


@pytest.mark.parametrize("n_respondents", [2, 5, 10, 20])
def test_small_surveys_get_honest_intervals_or_none(n_respondents):
    """Below max(30, 2m) respondents the intervals come from CR2 with Bell–McCaffrey
    degrees of freedom or the worst-case-correlation bound, whichever is narrower under
    the working model; they cover at least the nominal 95% (up to Z Monte Carlo se).
    With 2 respondents most surveys are refused outright."""
    theta = uniform_theta(5, np.random.default_rng(5), -1.0, 1.0)
    pop = heterogeneous_population(theta, 5_000, 6, 0.5, np.random.default_rng(3))
    c = coverage(pop, n_respondents, 1.0, 200, np.random.default_rng([5, n_respondents]))
    assert set(c.method.split("/")) <= {"cluster_bound", "cluster_cr2", "none"}, c
    if c.intervals:
        assert c.cluster >= 0.95 - Z * c.mc_se("cluster"), c
    if n_respondents >= 10:
        assert c.refused <= 0.05, c
    if n_respondents == 2:
        assert c.refused >= 0.1, c


def test_the_estimand_is_the_population_fit():
    theta = np.array([1.0, 0.5, 0.0, -0.5, -1.0])
    pop = heterogeneous_population(theta, 40_000, 4, 0.0, np.random.default_rng(9))
    # 160,000 independent BTL answers: the population fit is θ up to ~0.02.
    np.testing.assert_allclose(pop.estimand(), theta - theta.mean(), atol=0.05)
    # With random effects the population's BTL scores are attenuated towards 0.
    noisy = heterogeneous_population(theta, 40_000, 4, 2.0, np.random.default_rng(9))
    assert np.ptp(noisy.estimand()) < 0.8 * np.ptp(theta)


def test_ballots_become_one_respondent_each_and_samples_keep_them_apart():
    pop = debian_population("00002-00000006.soi")
    assert pop.n_respondents == 436 and pop.n_items == 5
    assert pop.sizes.max() == 10  # a complete ballot over 5 items implies 10 pairs
    rng = np.random.default_rng(0)
    s = pop.sample(50, 1.0, rng, pairs_per_respondent=3)
    per = np.bincount(s.respondent)
    assert per.size == 50 and per.max() <= 3
    for r in range(50):
        pairs = set(zip(s.i[s.respondent == r], s.j[s.respondent == r], strict=True))
        assert len(pairs) == per[r]  # no pair twice within one respondent
    assert set(np.unique(s.y_tilde)) <= {0, 1} and np.all(s.epsilon == 1.0)
    with pytest.raises(ValueError):
        pop.sample(0, 1.0, rng)
