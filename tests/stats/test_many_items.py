"""Intervals computed once per fit and rescaled per level, and items the data do not
identify set aside one by one (docs/uncertainty.md §5–6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtri, stdtrit

from app.stats import fit_debiased_mle
from app.stats.inference import (
    MIN_CLUSTERS,
    Clusters,
    confidence,
    laplacian,
    rank_at,
    rank_confidence,
    rank_draws,
    rank_summaries,
    uncertainty,
    with_k,
)
from app.stats.inference.intervals import _ridge_removed
from app.stats.inference.sandwich import _cluster_variance
from app.stats.mechanisms import privatize
from app.stats.metrics import competition_ranks
from tests.helpers.stats import Z

LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)


def _survey(rng, m, respondents, per, eps, theta=None):
    theta = rng.uniform(-1.0, 1.0, m) if theta is None else theta
    i = rng.integers(0, m, respondents * per)
    j = (i + rng.integers(1, m, i.size)) % m
    resp = np.repeat(np.arange(respondents), per)
    y = (rng.random(i.size) < 1 / (1 + np.exp(theta[j] - theta[i]))).astype(np.int8)
    return theta, i, j, privatize(y, eps, rng=rng), resp


@pytest.mark.parametrize("respondents", [12, 400])
def test_a_level_rescales_what_is_computed_once(respondents):
    """The intervals at each level from one level-free computation equal a computation
    from scratch at that level (to 1e-9): the covariance chosen by _cluster_variance's
    "auto" rule at that level (CR2 or the bound with 12 respondents, which one depends on
    the level; CR1 with 400), its critical value, and the intervals."""
    rng = np.random.default_rng(respondents)
    m = 8
    _, i, j, y, resp = _survey(rng, m, respondents, 6, 1.0)
    fit = fit_debiased_mle(m, i, j, y, 1.0)
    clusters = Clusters.from_answers(m, i, j, y, 1.0, resp)
    base = uncertainty(fit, clusters=clusters)
    centre, _, lw_pinv, (_, _, _, v_model) = _ridge_removed(fit, lambda: None)
    identified = np.ones(m, dtype=bool)
    model_meat = laplacian(m, fit.data.i, fit.data.j, v_model)
    methods = set()
    for level in LEVELS:
        got = base.at(level)
        method, meat, df = _cluster_variance(
            centre, clusters, lw_pinv, model_meat, identified, MIN_CLUSTERS, "auto", level
        )
        methods.add(method)
        assert got.method == method
        assert (got.df is None and df is None) or got.df == pytest.approx(df, rel=1e-9)
        np.testing.assert_allclose(got.cov, lw_pinv @ meat @ lw_pinv, rtol=0, atol=1e-9)
        crit = float(ndtri(0.5 + level / 2) if df is None else stdtrit(df, 0.5 + level / 2))
        assert got.critical_value == pytest.approx(crit, abs=1e-12)
        fresh = confidence(fit, level, clusters=clusters)
        for name in ("estimate", "se", "lower", "upper"):
            np.testing.assert_allclose(getattr(got, name), getattr(fresh, name), rtol=0, atol=1e-9)
    if respondents == 12:
        assert methods == {"cluster_cr2", "cluster_bound"}, methods  # the choice moves with the level


def test_rank_summaries_at_another_level_and_k_equal_a_fresh_draw():
    """Rank intervals and P(top-K) at any (level, k) from one set of kept draws equal
    rank_confidence from scratch with the same seed (the same draws)."""
    rng = np.random.default_rng(4)
    m = 30
    theta = np.sort(rng.normal(0, 0.4, m))[::-1]
    a = rng.normal(size=(m, m)) / m
    cov = a @ a.T + 0.01 * np.eye(m)
    cov -= cov.mean(axis=0, keepdims=True)
    cov -= cov.mean(axis=1, keepdims=True)
    draws = rank_draws(theta, cov, n_draws=999, rng=np.random.default_rng(1))
    first = rank_at(draws, 0.95, 3)
    for level in LEVELS:
        for k in (1, 5, m):
            got = with_k(rank_at(draws, level, 3), draws, k)
            want = rank_confidence(theta, cov, level, k, n_draws=999, rng=np.random.default_rng(1))
            np.testing.assert_array_equal(got.rank_ci, want.rank_ci)
            np.testing.assert_array_equal(got.rank_ci_simultaneous, want.rank_ci_simultaneous)
            np.testing.assert_allclose(got.p_top_k, want.p_top_k, rtol=0, atol=1e-12)
            assert got.critical_value == pytest.approx(want.critical_value, abs=1e-12)
    assert first.level == 0.95


def _winners_survey(rng, m=100, respondents=300, per=20, winners=3, eps=1.0):
    """Items 0 … winners−1 win every comparison (their answers sent as randomized at ε,
    so their debiased wins exceed their comparisons); the others follow BTL(θ*)."""
    theta, i, j, y, resp = _survey(rng, m, respondents, per, eps)
    won = (i < winners) & (j >= winners)
    lost = (j < winners) & (i >= winners)
    y = np.where(won, 1, np.where(lost, 0, y)).astype(np.int8)
    return theta, i, j, y, resp


@pytest.mark.slow
def test_a_few_items_that_win_everything_leave_the_others_their_intervals():
    """1–3 items win every comparison; the ranking keeps everyone else's intervals, which
    cover their scores (located by the identified items' mean, placed on the reported
    scale: θ*_i − mean θ* + mean θ̂ over them) at the level: 40 surveys × ~97 items, mean
    of per-survey coverage within Z Monte Carlo standard errors of 0.95 from below (and
    conservative by at most 0.05 above: the intervals use t(G − 1) and a PSD floor).
    The winners get [lower, +∞) with lower ≤ θ̂, a one-sided rank interval starting at 1,
    and every rank interval contains its rank; P(top-K) is non-increasing in the ranking."""
    shares = []
    for rep in range(40):
        rng = np.random.default_rng([77, rep])
        winners = 1 + rep % 3
        theta, i, j, y, resp = _winners_survey(rng, winners=winners)
        m = theta.size
        fit = fit_debiased_mle(m, i, j, y, 1.0)
        clusters = Clusters.from_answers(m, i, j, y, 1.0, resp)
        conf = confidence(fit, 0.95, clusters=clusters)
        reason = conf.interval_reason
        assert reason is not None
        top = np.array([r == "wins_all" for r in reason])
        assert top[:winners].all(), reason[:winners]
        assert np.all(np.isinf(conf.upper[top])) and np.all(conf.lower[top] <= fit.theta[top])
        assert np.all(np.isfinite(conf.lower[top]))
        normal = np.array([r is None for r in reason])
        assert normal.sum() >= 0.75 * m  # the winners, and the odd item the noise separates
        target = theta - theta[normal].mean() + fit.theta[normal].mean()
        covered = (conf.lower <= target) & (target <= conf.upper)
        shares.append(covered[normal].mean())
        draws = rank_draws(
            conf.estimate,
            conf.cov,
            rng=np.random.default_rng(rep),
            component=conf.variance_component,
            point=conf.theta,
            df=conf.df,
            ranking_component=conf.component,
        )
        ranks = rank_summaries(conf, draws, 0.95, 5)
        rank = competition_ranks(fit.theta)
        for arr in (ranks.rank_ci, ranks.rank_ci_simultaneous):
            assert np.all(arr[:, 0] <= rank) and np.all(rank <= arr[:, 1])
        assert np.all(ranks.rank_ci[top, 0] == 1)
        order = np.argsort(-fit.theta, kind="stable")
        assert np.all(np.diff(ranks.p_top_k[order]) <= 1e-12)
        assert ranks.p_top_k.sum() == pytest.approx(5)
    x = np.array(shares)
    coverage, se = float(x.mean()), float(x.std(ddof=1)) / math.sqrt(x.size)
    assert 0.95 - Z * se <= coverage <= 1.0, (coverage, se)


def test_a_quarter_of_the_items_unidentified_refuses_the_whole_ranking():
    """3 of 40 items winning everything are set aside; 12 of 40 (beyond
    MAX_UNIDENTIFIED_SHARE, a quarter) refuse the whole ranking as not identified."""
    from app.stats.inference import IntervalsUnavailable

    for winners, refused in ((3, False), (12, True)):
        rng = np.random.default_rng(5)
        _, i, j, y, resp = _winners_survey(rng, m=40, respondents=200, per=10, winners=winners)
        fit = fit_debiased_mle(40, i, j, y, 1.0)
        clusters = Clusters.from_answers(40, i, j, y, 1.0, resp)
        if refused:
            with pytest.raises(IntervalsUnavailable) as info:
                confidence(fit, clusters=clusters)
            assert info.value.reason == "not_identified"
        else:
            conf = confidence(fit, clusters=clusters)
            assert conf.interval_reason is not None
            assert all(conf.interval_reason[x] == "wins_all" for x in range(winners))
