"""Consensus rankings of synthetic (Mallows-privatized) rankings: intervals and real ballots.

Coverage tests use an exact population: a Plackett–Luce mixture over S_5 pushed
through the Mallows kernel, enumerated, so the estimands are known exactly. 400
replicates give a coverage standard error of ~0.011; the tolerance is z = 4.5.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from app.stats import fit_btl
from app.stats.consensus import borda_confidence, btl_confidence, fit_ranking_btl, position_covariance
from app.stats.preflib import read_preflib
from app.stats.rankings import (
    RankingStats,
    borda_aggregate,
    complete_ranking,
    kemeny_consensus,
    kemeny_objective,
    kendall_distance,
    lehmer_aggregate,
    mallows_log_pmf,
    mallows_privatize,
    positions_from_orders,
    ranking_stats,
)
from tests.helpers.stats import assert_close_mc, binomial_se

DATA = Path(__file__).resolve().parents[1] / "data" / "preflib-debian"
M = 5
PERMS = np.array(list(itertools.permutations(range(M))))


def _plackett_luce_pmf(weights: np.ndarray) -> np.ndarray:
    p = np.ones(len(PERMS))
    for k, order in enumerate(PERMS):
        left = weights.sum()
        for item in order[:-1]:
            p[k] *= weights[item] / left
            left -= weights[item]
    return p


@pytest.fixture(scope="module")
def population():
    """True rankings: 70% PL(w), 30% PL(w reversed-ish); synthetic law after Mallows(ε = 2)."""
    w = np.array([5.0, 3.0, 2.0, 1.2, 1.0])
    p0 = 0.7 * _plackett_luce_pmf(w) + 0.3 * _plackett_luce_pmf(w[[3, 4, 0, 1, 2]])
    eps = 2.0
    kernel = np.exp(np.array([mallows_log_pmf(PERMS, c, eps) for c in PERMS]))  # kernel[center, out]
    synthetic = p0 @ kernel
    assert synthetic.sum() == pytest.approx(1.0)
    return p0, eps, synthetic


def _draw(p0, eps, n, rng):
    idx = rng.choice(len(PERMS), size=n, p=p0)
    return mallows_privatize(PERMS[idx], eps, rng)


def test_position_covariance_is_the_sample_covariance():
    rng = np.random.default_rng(0)
    orders = np.array([rng.permutation(6) for _ in range(50)])
    pos = positions_from_orders(orders).astype(float)
    assert position_covariance(ranking_stats(orders)) == pytest.approx(np.cov(pos.T), abs=1e-12)


def test_borda_intervals_cover_the_expected_borda_points(population):
    p0, eps, synthetic = population
    pos = positions_from_orders(PERMS)
    truth = M - 1 - synthetic @ pos  # m − mean 1-based position = m − 1 − mean 0-based
    rng = np.random.default_rng(1)
    reps, n = 400, 300
    hits = np.zeros(M)
    for _ in range(reps):
        conf = borda_confidence(ranking_stats(_draw(p0, eps, n, rng)), 0.95)
        hits += (conf.lower <= truth) & (truth <= conf.upper)
    for item in range(M):
        assert_close_mc(hits[item] / reps, 0.95, binomial_se(reps, 0.95), what=f"item {item}")


def test_btl_cluster_robust_intervals_cover_the_population_fit(population):
    """The target is the same penalized composite-likelihood fit on the synthetic law itself
    (pair (i, j) 'won' R·P(i above j) times). Cluster-robust intervals cover it at the
    nominal rate; intervals that treat the implied pairs as independent would not."""
    p0, eps, synthetic = population
    pos = positions_from_orders(PERMS)
    n = 300
    i, j = np.triu_indices(M, 1)
    p_above = np.array([synthetic @ (pos[:, a] < pos[:, b]) for a, b in zip(i, j, strict=True)])
    target = fit_btl(M, i, j, np.full(i.size, float(n)), n * p_above, 1.0).theta
    rng = np.random.default_rng(2)
    reps = 400
    hits = np.zeros(M)
    naive_hits = np.zeros(M)
    for _ in range(reps):
        stats = ranking_stats(_draw(p0, eps, n, rng))
        fit = fit_ranking_btl(stats, 1.0)
        conf = btl_confidence(stats, fit, 0.95)
        hits += (conf.lower <= target) & (target <= conf.upper)
        # Independent-pairs (model) standard errors, for contrast.
        from app.stats.inference import confidence

        naive = confidence(fit, 0.95)
        naive_hits += (fit.theta - 1.96 * naive.se <= target) & (target <= fit.theta + 1.96 * naive.se)
    for item in range(M):
        assert_close_mc(hits[item] / reps, 0.95, binomial_se(reps, 0.95), what=f"item {item}")
    assert naive_hits.min() / reps < 0.9  # rankings are clusters: ignoring it under-covers


def test_btl_on_implied_pairs_orders_like_the_pairwise_majority(population):
    p0, eps, _ = population
    data = _draw(p0, eps, 4000, np.random.default_rng(3))
    stats = ranking_stats(data)
    fit = fit_ranking_btl(stats, 1.0)
    borda = borda_aggregate(stats, 0)
    assert np.argsort(-fit.theta).tolist() == borda.tolist()


# -- the Debian ballots -------------------------------------------------------------------------


def _expected_majority(ballots) -> np.ndarray:
    """W[a, b] = E #voters with a above b when unranked items are completed at random:
    ranked beats unranked; two unranked items count ½ each way."""
    m = ballots.n_items
    w = np.zeros((m, m))
    for order, count in zip(ballots.orders, ballots.counts, strict=True):
        ranked = list(order)
        rest = [x for x in range(m) if x not in set(order)]
        for a_pos, a in enumerate(ranked):
            for b in ranked[a_pos + 1 :] + rest:
                w[a, b] += count
        for a, b in itertools.permutations(rest, 2):
            w[a, b] += 0.5 * count
    return w


def _kemeny_brute(w: np.ndarray) -> np.ndarray:
    m = w.shape[0]
    best, arg = None, None
    for order in itertools.permutations(range(m)):
        o = np.array(order)
        cost = np.tril(w[np.ix_(o, o)], -1).sum()
        if best is None or cost < best - 1e-9:
            best, arg = cost, o
    return arg


@pytest.mark.parametrize("name", ["00002-00000001.soi", "00002-00000006.soi", "00002-00000008.soi"])
def test_debian_consensus_by_each_method(name):
    """Real ballots (completed at random below the ranked items): every method returns a
    permutation; Kemeny is exact and no method beats its objective; on these elections the
    methods agree on the winner with the expected-majority Kemeny ranking."""
    ballots = read_preflib(DATA / name)
    m = ballots.n_items
    rng = np.random.default_rng(4)
    orders = np.array([complete_ranking(np.array(o), m, rng) for o in ballots.expand()])
    stats = ranking_stats(orders)
    kem = kemeny_consensus(stats, rng)
    assert kem.exact and kem.n_optima >= 1
    results = {
        "borda": borda_aggregate(stats, rng),
        "lehmer": lehmer_aggregate(stats, rng),
        "kemeny": kem.order,
        "btl": np.argsort(-fit_ranking_btl(stats).theta),
    }
    reference = _kemeny_brute(_expected_majority(ballots))
    for method, order in results.items():
        assert sorted(order.tolist()) == list(range(m)), method
        assert kemeny_objective(order, stats) >= kem.objective, method
    for method in ("borda", "kemeny", "btl"):
        assert results[method][0] == reference[0], (method, results[method], reference)
    # Kemeny of the completed ballots is within a pair or two of the expected-majority order.
    assert kendall_distance(kem.order, reference) <= 2


def _completions(ballots):
    """complete(rng): every voter's ballot completed as :func:`complete_ranking` completes
    one (the ranked items first, in order, then the unranked in uniformly random order),
    all voters at once: the ranked items keep keys 0, 1, …, the unranked get keys
    m + U(0, 1), and each row is sorted by key."""
    m = ballots.n_items
    voters = ballots.expand()
    key = np.full((len(voters), m), np.inf)
    for v, order in enumerate(voters):
        key[v, list(order)] = np.arange(len(order))
    unranked = np.isinf(key)

    def complete(rng):
        return np.argsort(np.where(unranked, m + rng.random(key.shape), key), axis=1)

    return voters, complete


@pytest.mark.parametrize("name", ["00002-00000006.soi", "00002-00000008.soi"])
def test_debian_privatized_consensus_approaches_the_non_private_one_as_epsilon_grows(name):
    """Each voter's (completed) ballot is replaced by its Mallows synthetic ranking at ε; the
    Kendall distance of the consensus of the synthetic rankings to the non-private consensus
    falls as ε grows (non-increasing within Monte Carlo error) and vanishes at large ε."""
    ballots = read_preflib(DATA / name)
    m = ballots.n_items
    reference = _kemeny_brute(_expected_majority(ballots))
    rng = np.random.default_rng(5)
    voters, complete = _completions(ballots)
    first = complete(rng)
    assert all(
        row[: len(o)].tolist() == list(o) and sorted(row.tolist()) == list(range(m))
        for row, o in zip(first, voters, strict=True)
    )
    reps = 40
    out: dict[str, dict[float, tuple[float, float]]] = {"kemeny": {}, "borda": {}}
    for eps in (0.5, 2.0, 8.0, 32.0):
        dist = {"kemeny": [], "borda": []}
        for _ in range(reps):
            orders = complete(rng)
            stats = ranking_stats(mallows_privatize(orders, eps, rng))
            dist["kemeny"].append(kendall_distance(kemeny_consensus(stats, rng).order, reference))
            dist["borda"].append(kendall_distance(borda_aggregate(stats, rng), reference))
        for method, d in dist.items():
            out[method][eps] = (float(np.mean(d)), float(np.std(d, ddof=1)) / math.sqrt(reps) + 1e-9)
    for method, by_eps in out.items():
        for a, b in itertools.pairwise(sorted(by_eps)):
            assert by_eps[b][0] <= by_eps[a][0] + 4.5 * math.hypot(by_eps[a][1], by_eps[b][1]), (
                method,
                by_eps,
            )
        lo, hi = by_eps[0.5], by_eps[32.0]
        assert hi[0] + 4.5 * math.hypot(lo[1], hi[1]) < lo[0], (method, by_eps)
        assert hi[0] <= 2.0, (method, by_eps)


def test_ranking_stats_of_an_empty_set():
    s = RankingStats.empty(4)
    assert s.n == 0 and np.isnan(s.mean_position).all()
    with pytest.raises(ValueError):
        borda_confidence(s)
