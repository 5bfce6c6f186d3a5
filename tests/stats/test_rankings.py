"""Permutations, the Mallows mechanism and rank aggregation (docs/mechanisms.md §3, docs/federated.md).

Exact tests enumerate S_m for m ≤ 6; statistical ones are seeded with z = 4.5
tolerances (tests/conftest.py) or χ² p-values against 1e-4.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats as sps

from app.stats import rankings as rk
from app.stats.rankings import (
    RankingStats,
    borda_aggregate,
    borda_scores,
    complete_ranking,
    expected_concordant_pairs,
    insertion_decode,
    kemeny_consensus,
    kemeny_objective,
    kendall_distance,
    laplace_expected_concordant_pairs,
    laplace_rank_privatize,
    lehmer_aggregate,
    lehmer_code,
    lehmer_decode,
    mallows_dispersion,
    mallows_log_normalizer,
    mallows_log_pmf,
    mallows_privatize,
    mallows_sample,
    orders_from_positions,
    positions_from_orders,
    ranking_stats,
    stage_moments,
    stage_pmf,
)
from app.stats.rankings import mallows as rk_mallows
from tests.helpers.stats import assert_close_mc, binomial_se, size


def perms(m: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(m))), dtype=np.int64)


def brute_kendall(a, b) -> int:
    pa = {x: k for k, x in enumerate(a)}
    pb = {x: k for k, x in enumerate(b)}
    return sum((pa[x] - pa[y]) * (pb[x] - pb[y]) < 0 for x, y in itertools.combinations(range(len(a)), 2))


def neighbours(order) -> set[tuple[int, ...]]:
    """Orderings obtained by taking one item out and reinserting it elsewhere
    (docs/mechanisms.md §3.1; Definition 2)."""
    out = set()
    for k in range(len(order)):
        rest = list(order[:k]) + list(order[k + 1 :])
        for at in range(len(order)):
            cand = tuple([*rest[:at], order[k], *rest[at:]])
            if cand != tuple(order):
                out.add(cand)
    return out


# A non-involutive centre: its ordering and its position vector differ.
CENTER5 = np.array([2, 0, 3, 4, 1])


# -- permutations, Kendall, Lehmer -------------------------------------------------------


def test_orderings_and_position_vectors_are_inverse():
    # Rank vector vs ordering (docs/README.md §2): rank vector (2,3,1) (1-based) has ordering (I3, I1, I2).
    pos = np.array([1, 2, 0])
    assert orders_from_positions(pos).tolist() == [2, 0, 1]
    assert positions_from_orders(np.array([2, 0, 1])).tolist() == [1, 2, 0]
    p = perms(5)
    assert np.array_equal(orders_from_positions(positions_from_orders(p)), p)


def test_kendall_distance_matches_brute_force_both_paths():
    rng = np.random.default_rng(0)
    for m in (2, 3, 7, 70, 130):  # ≤ 64: broadcast path; > 64: Fenwick path
        a = np.array([rng.permutation(m) for _ in range(6)])
        b = np.array([rng.permutation(m) for _ in range(6)])
        got = kendall_distance(a, b)
        assert got.tolist() == [brute_kendall(x, y) for x, y in zip(a, b, strict=True)]
    assert kendall_distance(np.arange(6), np.arange(6)[::-1]) == 15
    assert kendall_distance(np.array([2, 0, 1]), np.array([0, 1, 2])) == 2
    # Invariant to relabelling the items (docs/federated.md §2).
    a, b, relabel = rng.permutation(9), rng.permutation(9), rng.permutation(9)
    assert kendall_distance(relabel[a], relabel[b]) == kendall_distance(a, b)


def test_lehmer_worked_examples_and_round_trip():
    # docs/federated.md §2, Lehmer examples (1-based positions there, 0-based here).
    assert lehmer_code(np.array([2, 0, 1])).tolist() == [0, 1, 1]
    assert lehmer_code(np.array([1, 3, 0, 2])).tolist() == [0, 0, 2, 1]
    assert lehmer_code(np.array([3, 2, 1, 0])).tolist() == [0, 1, 2, 3]
    assert orders_from_positions(np.array([1, 3, 0, 2])).tolist() == [2, 0, 3, 1]
    for m in range(1, 7):
        p = perms(m)
        codes = lehmer_code(p)
        assert np.all(codes <= np.arange(m)) and np.all(codes >= 0)
        assert np.array_equal(lehmer_decode(codes), p)
        assert len({tuple(c) for c in codes}) == math.factorial(m)  # a bijection onto the codes
    with pytest.raises(ValueError):
        lehmer_decode(np.array([0, 2, 0]))


def test_kendall_to_identity_is_the_sum_of_the_lehmer_code():
    # D2: K(e, σ) = Σ L_σ; K(σ₀, σ) = Σ L_{σ∘σ₀⁻¹} (position vectors).
    for m in range(2, 7):
        p = perms(m)  # orderings
        pos = positions_from_orders(p)
        assert np.array_equal(kendall_distance(np.arange(m), p), lehmer_code(pos).sum(axis=1))
        center = np.roll(np.arange(m), 1)  # ordering; not an involution for m ≥ 3
        pos0 = positions_from_orders(center)
        composed = pos[:, center]  # (σ ∘ σ₀⁻¹)(t) = σ(σ₀⁻¹(t)), σ₀⁻¹ = the centre's ordering
        assert np.array_equal(kendall_distance(center, p), lehmer_code(composed).sum(axis=1))
        assert pos0.shape == (m,)


# -- the Mallows mechanism: exact distribution ---------------------------------------------


@pytest.mark.parametrize("m", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_insertion_sampler_law_equals_mallows_pmf(m, eps):
    """Every V sequence (Π t = m! of them) with its probability Π P(V^(t)) maps to an output;
    the output law equals exp(−b d_K)/Z exactly (Lemma 2), for a non-involutive centre."""
    center = np.roll(np.arange(m), 2) if m > 2 else np.array([1, 0])
    b = float(mallows_dispersion(m, eps))
    vs = np.array(list(itertools.product(*[range(t) for t in range(2, m + 1)])), dtype=np.int64)
    prob = np.ones(len(vs))
    for col, t in enumerate(range(2, m + 1)):
        prob *= stage_pmf(t, b)[vs[:, col]]
    outs = insertion_decode(np.broadcast_to(center, (len(vs), m)), vs)
    law: dict[tuple, float] = {}
    for o, pr in zip(map(tuple, outs), prob, strict=True):
        law[o] = law.get(o, 0.0) + pr
    assert len(law) == math.factorial(m)
    for o, pr in law.items():
        expected = math.exp(mallows_log_pmf(np.array(o), center, eps))
        assert pr == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)


class _GridUniform:
    """A 'generator' whose draws put each stage's V = U₁ + U₂·2⁻⁵³ at the midpoints of a
    regular grid (U₂ = 0), the same for every stage column."""

    def __init__(self, g: int):
        self.g = g

    def random(self, shape):
        n = shape[0]
        u = np.zeros(shape)
        u[..., 0] = ((np.arange(n) + 0.5) / n)[:, None]
        return u


@pytest.mark.parametrize("eps", [0.01, 1.0, 8.0, 30.0])
def test_inverse_cdf_stage_sampler_reproduces_the_truncated_geometric(eps):
    """The float inverse CDF maps a fine grid of uniforms onto V^(t) in the exact proportions
    of stage_pmf, to the grid's resolution (1/G per boundary)."""
    m, g = 7, 200_000
    b = np.full(g, float(mallows_dispersion(m, eps)))
    v = rk_mallows._sample_stages(b, m, _GridUniform(g))
    for col, t in enumerate(range(2, m + 1)):
        freq = np.bincount(v[:, col], minlength=t) / g
        assert np.max(np.abs(freq - stage_pmf(t, b[0]))) <= 2.0 / g


class _PairUniform:
    """A 'generator' giving every stage of every row the same pair (U₁, U₂)."""

    def __init__(self, u1: float, u2: float = 0.0):
        self.pair = (u1, u2)

    def random(self, shape):
        u = np.empty(shape)
        u[..., 0], u[..., 1] = self.pair
        return u


def test_stage_sampler_boundaries_in_both_forms_and_its_limits():
    """V⁽ᵗ⁾ ≥ k exactly when V > S_(t−k) = P(J ≥ t − k) (docs/mechanisms.md §3.2,
    "Sampling"), in the expm1 form (b·t ≤ 700) and the form used beyond it (b = 1,
    t = 750); b = 0 is ⌈V·t⌉ − 1, b = ∞ the input order; V = 0 and V = 1 stay in 0..t−1."""
    b, m = 1.0, 751
    for t in (600, 750):
        for j in range(1, 6):  # S_j = (e^(−bj) − e^(−bt))/(1 − e^(−bt))
            s = (math.exp(-b * j) - math.exp(-b * t)) / -math.expm1(-b * t)
            above = rk_mallows._sample_stages(np.array([b]), m, _PairUniform(s * (1 + 1e-9)))[0, t - 2]
            below = rk_mallows._sample_stages(np.array([b]), m, _PairUniform(s * (1 - 1e-9)))[0, t - 2]
            assert (above, below) == (t - j, t - j - 1)
    for v, expected in [(0.0, 0), (0.3, 1), (1.0, 3)]:
        assert rk_mallows._sample_stages(np.array([0.0]), 5, _PairUniform(v))[0, 2] == expected  # t = 4
    for v in (0.0, 0.5, 1.0):
        assert rk_mallows._sample_stages(np.array([np.inf]), 5, _PairUniform(v)).tolist() == [[1, 2, 3, 4]]
        for bb in (1e-6, 1.0, 30.0, 800.0):
            got = rk_mallows._sample_stages(np.array([bb]), 5, _PairUniform(v))[0]
            assert np.all((got >= 0) & (got <= np.arange(1, 5)))
            if v == 0:  # V = 0 (probability 2⁻¹⁰⁶) falls in the rarest outcome
                assert np.all(got == 0)


@pytest.mark.parametrize(("m", "eps"), [(4, 2.0), (5, 1.0)])
def test_sampler_chi_square_against_mallows(m, eps):
    rng = np.random.default_rng(11)
    n = 240_000
    center = CENTER5[:m] if m == 5 else np.array([2, 0, 3, 1])
    out = mallows_privatize(np.tile(center, (n, 1)), eps, rng)
    counts = Counter(map(tuple, out))
    ps = perms(m)
    expected = np.exp(mallows_log_pmf(ps, center, eps)) * n
    observed = np.array([counts[tuple(p)] for p in ps])
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert sps.chi2.sf(chi2, len(ps) - 1) > 1e-4, chi2


@pytest.mark.os_random
def test_default_randomness_comes_from_the_os(monkeypatch):
    import os

    calls = []
    original = os.urandom

    def spy(n):
        calls.append(n)
        return original(n)

    monkeypatch.setattr(os, "urandom", spy)
    out = mallows_privatize(CENTER5, 1.0)
    assert sorted(out.tolist()) == list(range(5))
    assert sum(calls) == 8 * 2 * 4  # two 64-bit words per stage t = 2..5


def test_privacy_loss_over_neighbours_equals_epsilon_exactly():
    """Lemma 1, tight (docs/mechanisms.md §3.2): max over every input, each of its (m−1)² single-move
    neighbours and every output of |log P(σ̃|φ) − log P(σ̃|φ')| is exactly ε. And the exact
    LDP level over arbitrary input pairs is εm/2 (docs/mechanisms.md §3.3)."""
    for m in (3, 4, 5, 6):
        p = perms(m)
        index = {tuple(x): k for k, x in enumerate(p)}
        dist = np.array([kendall_distance(x, p) for x in p])  # dist[input, output]
        inputs = range(len(p)) if m <= 5 else [0, 1, 7, 400, 719]
        for eps in (0.5, 1.0, 2.0):
            b = float(mallows_dispersion(m, eps))
            worst = 0.0
            for k in inputs:
                nb = neighbours(p[k])
                assert len(nb) == (m - 1) ** 2
                rows = dist[[index[x] for x in nb]]
                worst = max(worst, float(np.max(np.abs(b * (rows - dist[k])))))
            assert worst == pytest.approx(eps, rel=1e-12)
            ldp = b * float(np.max(dist[:, None, :] - dist[None, :, :])) if m <= 5 else None
            if ldp is not None:
                assert ldp == pytest.approx(eps * m / 2, rel=1e-12)


def test_normalizer_matches_brute_force_and_reference_values():
    for m in (3, 5, 6):
        for b in (0.1, 0.7, 2.5):
            brute = np.exp(-b * kendall_distance(np.arange(m), perms(m))).sum()
            assert math.exp(mallows_log_normalizer(m, b)) == pytest.approx(brute, rel=1e-12)
    # Ψ = e^{b·C(m,2)}·Z, reference values of docs/mechanisms.md §3.5.
    for m, eps, psi in [(3, 0.7, 10.72329163), (5, 2.0, 2413.388299), (8, 0.7, 177365.473)]:
        b = eps / (m - 1)
        assert math.exp(mallows_log_normalizer(m, b) + b * m * (m - 1) / 2) == pytest.approx(psi, rel=1e-8)
    # docs/federated.md §2 and §7: Z for N = 5, φ = 0.5 (the federated paper's printed
    # normalizer is off by one).
    assert math.exp(mallows_log_normalizer(5, math.log(2))) == pytest.approx(9.5361328125, rel=1e-12)


def test_stage_moments_theorem_1_3():
    # Reference values of docs/mechanisms.md §3.5 (Theorem 1(3)) and the exact moments of stage_pmf.
    assert stage_moments(3, 5, 1.0) == pytest.approx((1.16495374, 0.64629443), abs=1e-8)
    assert stage_moments(7, 10, 3.0) == pytest.approx((4.22397087, 3.09019727), abs=1e-8)
    for m in (3, 6):
        for eps in (0.3, 1.0, 4.0):
            b = float(mallows_dispersion(m, eps))
            for t in range(2, m + 1):
                pmf = stage_pmf(t, b)
                k = np.arange(t)
                mean, var = stage_moments(t, m, eps)
                assert mean == pytest.approx((k * pmf).sum(), rel=1e-10)
                assert var == pytest.approx(((k - mean) ** 2 * pmf).sum(), rel=1e-8)
    # And the sampler's V^(t) have these moments (Monte Carlo, z = 4.5).
    rng = np.random.default_rng(3)
    n, m, eps = 200_000, 6, 1.5
    v = rk_mallows._sample_stages(np.full(n, float(mallows_dispersion(m, eps))), m, rng)
    for col, t in enumerate(range(2, m + 1)):
        mean, var = stage_moments(t, m, eps)
        assert_close_mc(v[:, col].mean(), mean, math.sqrt(var / n), what=f"E V^({t})")
    # Limits: ε → ∞ gives t−1, ε → 0 gives (t−1)/2.
    assert stage_moments(5, 6, 1e4)[0] == pytest.approx(4.0)
    assert stage_moments(5, 6, 1e-7)[0] == pytest.approx(2.0, abs=1e-6)


def test_adjacent_pairs_flip_with_probability_one_over_one_plus_e_b():
    for m, eps in [(4, 1.0), (6, 1.5)]:
        p = perms(m)
        prob = np.exp(mallows_log_pmf(p, np.arange(m), eps))
        pos = positions_from_orders(p)
        for a in range(m - 1):
            flipped = prob[pos[:, a] > pos[:, a + 1]].sum()
            assert flipped == pytest.approx(rk.adjacent_flip_probability(m, eps), rel=1e-12)
    # Adjacent swap probability 1/(1 + e^{ε/(m−1)}) (docs/mechanisms.md §3.2): m = 6, ε = 1.5 → 0.4256.
    assert rk.adjacent_flip_probability(6, 1.5) == pytest.approx(0.4256, abs=1e-4)


def test_edge_cases_and_limits():
    assert mallows_privatize(np.array([4]), 1.0).tolist() == [4]
    assert mallows_privatize(CENTER5, math.inf).tolist() == CENTER5.tolist()
    # m = 2 is randomized response on one bit: keep with probability e^ε/(1+e^ε).
    rng = np.random.default_rng(5)
    n = 100_000
    out = mallows_privatize(np.tile([1, 0], (n, 1)), 1.0, rng)
    kept = float(np.mean(out[:, 0] == 1))
    p = math.exp(1) / (1 + math.exp(1))
    assert_close_mc(kept, p, binomial_se(n, p), what="m=2 keep")
    # Per-row ε, and labels that are not 0..m−1.
    both = mallows_privatize(np.array([[10, 20, 30], [10, 20, 30]]), np.array([math.inf, math.inf]))
    assert both.tolist() == [[10, 20, 30], [10, 20, 30]]
    with pytest.raises(ValueError):
        mallows_privatize(CENTER5, 0.0)
    with pytest.raises(ValueError):
        mallows_privatize(np.tile(CENTER5, (3, 1)), np.ones(2))
    # Near ε = 0 the output is uniform: E C → C(m,2)/2.
    assert expected_concordant_pairs(5, 1e-9) == pytest.approx(5.0, abs=1e-6)


def test_lemma_4_mallows_keeps_more_concordant_pairs_than_laplace():
    # Exact table of docs/mechanisms.md §3.4 (Lemma 4).
    table = [
        (3, 1, 1.9426, 1.7448),
        (5, 2, 6.9328, 6.1850),
        (10, 4, 34.1055, 30.5079),
        (30, 30, 419.5542, 402.3714),
    ]
    for m, eps, mallows, laplace in table:
        assert expected_concordant_pairs(m, eps) == pytest.approx(mallows, abs=1e-4)
        assert laplace_expected_concordant_pairs(m, eps) == pytest.approx(laplace, abs=1e-4)
    # Monte Carlo of both mechanisms at m = 10, ε = 4 (z = 4.5).
    rng = np.random.default_rng(9)
    n, m = 40_000, 10
    center = rng.permutation(m)
    for mech, exact in ((mallows_privatize, 34.1055), (laplace_rank_privatize, 30.5079)):
        c = 45 - kendall_distance(center, mech(np.tile(center, (n, 1)), 4.0, rng))
        assert_close_mc(c.mean(), exact, c.std() / math.sqrt(n), what=mech.__name__)


# -- aggregation ---------------------------------------------------------------------------


def test_aggregators_return_orderings_not_position_vectors():
    """With every ranking equal to a non-involutive σ₀, each aggregator must return σ₀ itself
    (the printed Borda output, σ̂₀(j) = i_j read as positions, would return σ₀⁻¹)."""
    center = np.array([3, 0, 4, 1, 2])
    assert not np.array_equal(center, orders_from_positions(center))
    data = np.tile(center, (7, 1))
    for agg in (borda_aggregate, lehmer_aggregate, rk.kemeny_aggregate):
        assert agg(data, np.random.default_rng(0)).tolist() == center.tolist()
    assert borda_scores(data).tolist() == (positions_from_orders(center) + 1).tolist()
    big = np.tile(np.random.default_rng(1).permutation(25), (3, 1))
    assert kemeny_consensus(big).order.tolist() == big[0].tolist()  # approximate path, m > 16


def test_ranking_stats_add_up_and_match_definitions():
    rng = np.random.default_rng(2)
    a = np.array([rng.permutation(6) for _ in range(40)])
    b = np.array([rng.permutation(6) for _ in range(25)])
    s = ranking_stats(a) + ranking_stats(b)
    whole = ranking_stats(np.concatenate((a, b)))
    for field in ("position_sum", "before", "lehmer"):
        assert np.array_equal(getattr(s, field), getattr(whole, field))
    assert s.n == 65 and RankingStats.empty(6).n == 0
    both = np.concatenate((a, b))
    pos = positions_from_orders(both)
    assert whole.before[2, 4] == int(np.sum(pos[:, 2] < pos[:, 4]))
    assert whole.lehmer[3].sum() == 65 and np.all(whole.lehmer[3, 4:] == 0)
    with pytest.raises(ValueError):
        ranking_stats(np.array([[0, 1, 1]]))


def test_borda_breaks_exact_ties_uniformly():
    data = np.array([[0, 1, 2], [1, 0, 2]])  # items 0 and 1 tie exactly
    rng = np.random.default_rng(4)
    firsts = Counter(int(borda_aggregate(data, rng)[0]) for _ in range(4000))
    assert set(firsts) == {0, 1}
    assert_close_mc(firsts[0] / 4000, 0.5, binomial_se(4000, 0.5), what="tie")


def test_kemeny_exact_matches_brute_force_and_counts_optima():
    """Against every ordering of S_m (m ≤ 7), its total Kendall distance to the rankings
    computed from the definition, Σ_r d_K(σ, σ_r)."""
    rng = np.random.default_rng(6)
    for m, n_rank in [(4, 6), (5, 9), (6, 4), (7, 11)]:
        every = perms(m)
        for _ in range(3):
            data = mallows_sample(rng.permutation(m), 0.8, n_rank, rng)
            objs = sum(kendall_distance(every, np.broadcast_to(row, every.shape)) for row in data)
            res = kemeny_consensus(data, rng)
            assert res.exact and res.objective == objs.min()
            assert res.n_optima == int((objs == objs.min()).sum())
            assert kemeny_objective(res.order, data) == res.objective
            assert res.lower_bound <= res.objective
            total = int(sum(kendall_distance(res.order, data)))
            assert total == res.objective


def test_kemeny_picks_uniformly_among_optima():
    """χ² over 1,000 draws at 1e-4. Power: a tie-break that favoured one of the four
    optima 2:1 over each other (2/5 against 1/5) would give a noncentrality of 120, and the
    test would miss it with probability 4e-11."""
    data = np.array([[0, 1, 2, 3], [1, 0, 3, 2]])  # four optimal orderings
    res = kemeny_consensus(data)
    assert res.n_optima == 4
    rng = np.random.default_rng(8)
    n = 1000
    seen = Counter(tuple(kemeny_consensus(data, rng).order) for _ in range(n))
    assert len(seen) == 4
    chi2 = sum((c - n / 4) ** 2 / (n / 4) for c in seen.values())
    assert sps.chi2.sf(chi2, 3) > 1e-4


def test_kemeny_approximation_is_locally_optimal_and_certified():
    rng = np.random.default_rng(10)
    for phi in (0.7, 0.95):
        m = 18
        data = mallows_sample(rng.permutation(m), phi, 60, rng)
        approx = kemeny_consensus(data, rng, exact_max_items=0)
        exact = kemeny_consensus(data, rng, exact_max_items=18)
        assert not approx.exact or approx.objective == approx.lower_bound
        assert exact.exact
        assert exact.objective <= approx.objective
        assert approx.lower_bound <= exact.objective
        # The certificate holds: the excess over the optimum is at most objective − lower bound.
        assert approx.objective - exact.objective <= approx.objective - approx.lower_bound
        # No single-item move improves the approximate order (local optimality).
        o = approx.order.tolist()
        for p in range(m):
            for q in range(m):
                cand = o[:p] + o[p + 1 :]
                cand.insert(q, o[p])
                assert kemeny_objective(np.array(cand), data) >= approx.objective


@pytest.mark.validation
def test_inference_attack_kemeny_error_obeys_the_binomial_bound_and_reference():
    """Ranking DP §4, Theorem 2 (docs/mechanisms.md §3.4–3.5): N synthetic copies of one
    ranking; the attacker's MLE (Kemeny) errs at least P(Bin(N, 1/(1+e^{ε/(m−1)})) > N/2)
    of the time, and its error (uniform tie-breaking) matches the Monte Carlo reference of
    docs/mechanisms.md §3.5 within MC error. 300 attacks per setting in the ordinary run,
    1,000 at full size (PRIVRANK_VALIDATION=full); the copies of all of them are
    privatized in one call."""
    rng = np.random.default_rng(12)
    reps = size(300, 1000)
    for m, eps, n_copies, ref in [(4, 2.0, 20, 0.209), (3, 1.0, 50, 0.081), (5, 2.0, 20, 0.493)]:
        truth = np.arange(m)
        attacks = mallows_privatize(np.tile(truth, (reps * n_copies, 1)), eps, rng).reshape(reps, n_copies, m)
        errors = 0
        for copies in attacks:
            errors += kemeny_consensus(copies, rng).order.tolist() != truth.tolist()
        rate = errors / reps
        flip = rk.adjacent_flip_probability(m, eps)
        bound = float(sps.binom.sf(n_copies // 2, n_copies, flip))
        assert rate >= bound - 4.5 * binomial_se(reps, max(bound, 1e-3))
        se = math.sqrt(binomial_se(reps, ref) ** 2 + binomial_se(1000, ref) ** 2)  # ours and the reference's
        assert_close_mc(rate, ref, se, what=f"attack m={m} eps={eps} N={n_copies}")


def test_complete_ranking_appends_the_rest_uniformly():
    out = complete_ranking(np.array([3, 1]), 5)
    assert out[:2].tolist() == [3, 1] and sorted(out.tolist()) == list(range(5))
    rng = np.random.default_rng(13)
    n = 6000
    tails = Counter(tuple(complete_ranking(np.array([4]), 4 + 1, rng)[1:]) for _ in range(n))
    assert len(tails) == 24
    chi2 = sum((c - n / 24) ** 2 / (n / 24) for c in tails.values())
    assert sps.chi2.sf(chi2, 23) > 1e-4
    with pytest.raises(ValueError):
        complete_ranking(np.array([1, 1]), 3)
    with pytest.raises(ValueError):
        complete_ranking(np.array([5]), 3)
    # The CSPRNG path (rng=None) draws a valid uniform-looking permutation.
    assert sorted(rk.random_permutation(50).tolist()) == list(range(50))


def test_kemeny_backtracking_is_uniform_over_optima_not_over_last_items():
    """With optima whose last items are unevenly shared, only path-count weighting is
    uniform over the optimal orderings (an unweighted backward pass is not). χ² over
    1,000 draws at 1e-4. Power: on the profile found here (8 optima; 2 rankings, the
    first profile drawn), an unweighted backward pass gives half the optima 1/12 and the
    other half 1/6: a noncentrality of 111, missed with probability 2e-8."""
    rng = np.random.default_rng(14)
    found = None
    for _ in range(2000):
        data = np.array([rng.permutation(4) for _ in range(int(rng.integers(2, 5)))])
        objs = np.array([kemeny_objective(p, data) for p in perms(4)])
        optima = [tuple(p) for p, o in zip(perms(4), objs, strict=True) if o == objs.min()]
        lasts = Counter(o[-1] for o in optima)
        if len(optima) >= 3 and len(set(lasts.values())) > 1:
            found = (data, optima)
            break
    assert found is not None
    data, optima = found
    n = 1000
    seen = Counter(tuple(kemeny_consensus(data, rng).order.tolist()) for _ in range(n))
    assert set(seen) == set(optima)
    expected = n / len(optima)
    chi2 = sum((seen[o] - expected) ** 2 / expected for o in optima)
    assert sps.chi2.sf(chi2, len(optima) - 1) > 1e-4


def test_kemeny_gap_is_zero_when_proved_optimal_even_on_a_condorcet_cycle():
    cycle = np.array([[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    res = kemeny_consensus(cycle)
    assert res.exact and res.lower_bound < res.objective and res.gap == 0.0


def test_per_row_epsilon_is_honoured():
    """Rows privatized at ε = ∞ come back unchanged while rows at ε = 0.5 follow the Mallows
    law at 0.5 (χ² over S_3), in one call."""
    rng = np.random.default_rng(15)
    n = 60_000
    center = np.array([1, 2, 0])
    eps = np.where(np.arange(n) % 2 == 0, math.inf, 0.5)
    out = mallows_privatize(np.tile(center, (n, 1)), eps, rng)
    assert np.all(out[::2] == center)
    counts = Counter(map(tuple, out[1::2]))
    ps = perms(3)
    expected = np.exp(mallows_log_pmf(ps, center, 0.5)) * (n // 2)
    observed = np.array([counts[tuple(p)] for p in ps])
    assert sps.chisquare(observed, expected).pvalue > 1e-4


@pytest.mark.os_random
def test_completion_and_shuffles_use_the_os_csprng(monkeypatch):
    import secrets

    calls = []
    real = secrets.randbelow

    def spy(k):
        calls.append(k)
        return real(k)

    monkeypatch.setattr(secrets, "randbelow", spy)
    out = complete_ranking(np.array([2]), 6)
    assert out[0] == 2 and sorted(out.tolist()) == list(range(6))
    assert calls == [5, 4, 3, 2]  # Fisher–Yates over the five unranked items
