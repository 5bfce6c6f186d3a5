"""The pairwise certificate (app.stats.pairwise_goal).

Monte Carlo tolerances: a failure count F of R independent runs is judged by its
one-sided 99% Clopper–Pearson lower bound, which must not exceed the rate the theory
allows (a correct procedure fails this with probability ≤ 1%); other rates allow
four standard errors sqrt(p(1 − p)/R).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import beta, chi2

from app.stats.adaptive import RHO_ANSWERS, mixture_radius, simulate_goal
from app.stats.mechanisms import debias, privatize
from app.stats.pair_sequences import MAX_ITEMS, PairSequences, pair_index
from app.stats.pairwise_goal import draw_pairwise_respondent, pairwise_goal_status, simulate_pairwise_goal
from tests.helpers.stats import size


def _cp_lower(failures: int, runs: int) -> float:
    """One-sided 99% Clopper–Pearson lower bound on a failure rate."""
    return 0.0 if failures == 0 else float(beta.ppf(0.01, failures, runs - failures + 1))


def test_pair_index_follows_triu_indices_and_refuses_bad_pairs():
    m = 7
    a, b = np.triu_indices(m, 1)
    idx, forward = pair_index(a, b, m)
    assert idx.tolist() == list(range(a.size)) and forward.all()
    idx, forward = pair_index(b, a, m)
    assert idx.tolist() == list(range(a.size)) and not forward.any()
    for i, j in (([1], [1]), ([0], [7]), ([-1], [2])):
        with pytest.raises(ValueError):
            pair_index(i, j, m)
    with pytest.raises(ValueError):
        PairSequences(MAX_ITEMS + 1)
    with pytest.raises(ValueError):
        PairSequences(1)


def test_sequences_match_the_closed_form_and_orient_answers():
    """An answer on (j, i) with j > i counts as 1 − z for the pair (i, j); the bounds are
    the mixture boundary at α/C(m, 2), divided by Σλ."""
    s = PairSequences(3)
    eps = 1.0
    z = debias(np.array([1, 0, 1, 1], dtype=np.int8), eps)
    s.add([0, 0, 2, 1], [2, 2, 0, 0], z, eps)
    lam = math.tanh(eps / 2) ** 2
    est, lo, hi = s.intervals(0.9)
    value = np.array([z[0], z[1], 1 - z[2], 1 - z[3]])
    assert est[1] == pytest.approx(value[:3].mean()) and est[0] == pytest.approx(value[3])
    half = mixture_radius(3 * lam / 4, 0.1 / 3, RHO_ANSWERS / 4)[()] / (3 * lam)
    assert hi[1] == pytest.approx(min(1.0, est[1] + half)) and lo[1] == pytest.approx(max(0.0, est[1] - half))
    assert (est[2], lo[2], hi[2]) == (0.5, 0.0, 1.0)  # pair (1, 2): nothing counted
    assert s.answers.tolist() == [1, 3, 0]
    with pytest.raises(ValueError):
        s.add([0], [1], [5.0], eps)  # not a debiased answer at ε = 1


def test_the_pair_sequences_hold_at_all_times_under_data_dependent_sampling():
    """300 runs of 4 items (6 pairs, P(a beats b) near ½ and not BTL), 2,000 answers in
    batches of 10, each batch on the pair whose estimate is farthest from ½ or, a fifth
    of the time, the least-answered: the bounds of some pair exclude its true P at some
    check in at most 1 − level = 10% of the runs (the bounds PairwiseGoalStatus
    intersects: one excludes P at some check if and only if a fresh one does)."""
    rng = np.random.default_rng(2026)
    truth = np.array([0.5, 0.55, 0.62, 0.48, 0.4, 0.7])
    m, eps, level, runs = 4, 1.0, 0.9, 300
    alpha, lam = (1 - level) / 6, math.tanh(eps / 2) ** 2
    rows = np.arange(runs)
    total, count = np.zeros((runs, 6)), np.zeros((runs, 6))
    failed = np.zeros(runs, dtype=bool)
    est = np.full((runs, 6), 0.5)
    for _ in range(200):  # all runs at once, with the bounds PairSequences.intervals computes
        k = np.where(rng.random(runs) < 0.2, count.argmin(axis=1), np.abs(est - 0.5).argmax(axis=1))
        y = (rng.random((runs, 10)) < truth[k][:, None]).astype(np.int8)
        np.add.at(total, (rows, k), debias(privatize(y, eps, rng), eps).sum(axis=1))
        count[rows, k] += 10
        est = np.where(count > 0, total / np.maximum(count, 1), 0.5)
        half = np.where(
            count > 0, mixture_radius(count * lam / 4, alpha, RHO_ANSWERS / 4) / (count * lam + 1e-300), 1.0
        )
        failed |= np.any(np.abs(est - truth) > half, axis=1)
    # The class gives the same bounds (last run).
    s = PairSequences(m)
    s.weighted, s.weight = total[-1] * lam, count[-1] * lam
    _, lo, hi = s.intervals(level)
    seen = count[-1] > 0
    np.testing.assert_allclose(lo[seen], np.clip(est[-1] - half[-1], 0, 1)[seen], atol=1e-12)
    np.testing.assert_allclose(hi[seen], np.clip(est[-1] + half[-1], 0, 1)[seen], atol=1e-12)
    assert _cp_lower(int(failed.sum()), runs) <= 1 - level


@pytest.mark.validation
@pytest.mark.parametrize("tau", [0.0, 1.0])
def test_no_false_certification_on_a_tie_free_profile(tau):
    """Surveys of 5 items 0.5 apart, top-2 at level 0.8, ε = 2: the certified set is
    wrong in at most 20% of them (with or without respondent effects τ), judged by the
    Clopper–Pearson bound of the runs made: 10 surveys in the ordinary run, 50 at full
    size (PRIVRANK_VALIDATION=full)."""
    theta = np.array([1.0, 0.5, 0.0, -0.5, -1.0])
    runs, wrong, met = size(10, 50), 0, 0
    for r in range(runs):
        run = simulate_pairwise_goal(
            theta, 2.0, 0.8, "adaptive", np.random.default_rng([7, r, int(tau)]), top_k=2, tau=tau
        )
        if run.certified is not None:
            met += 1
            wrong += set(run.certified.tolist()) != {0, 1}
    assert met == runs
    assert _cp_lower(wrong, runs) <= 0.2


def test_once_met_a_goal_stays_met_and_the_relation_only_grows():
    """A survey of 5 items checked every 50 answers, 40 checks past the first that meets
    top-2: the goal stays met with the same set, the certified relation only gains
    pairs and every pair's bounds only shrink."""
    rng = np.random.default_rng(8)
    theta = np.array([1.0, 0.6, -0.2, -0.6, -0.8])
    s = PairSequences(5)
    g = pairwise_goal_status(s, 0.9, top_k=2)
    after, first = 0, None
    while after < 40:
        i, j = draw_pairwise_respondent(g, np.zeros(5, dtype=bool), 2, rng, explore=1.0)
        for _ in range(24):
            x, y = draw_pairwise_respondent(g, np.zeros(5, dtype=bool), 2, rng, explore=1.0)
            i, j = np.concatenate([i, x]), np.concatenate([j, y])
        win = (rng.random(i.size) < 1 / (1 + np.exp(theta[j] - theta[i]))).astype(np.int8)
        s.add(i, j, debias(privatize(win, 3.0, rng), 3.0), 3.0)
        g2 = pairwise_goal_status(s, 0.9, top_k=2, previous=g)
        assert np.all(g2.pair_lower >= g.pair_lower) and np.all(g2.pair_upper <= g.pair_upper)
        assert np.all(g2.beats >= g.beats)
        if first is not None:
            assert g2.met and g2.certified.tolist() == first
        elif g2.met:
            first = g2.certified.tolist()
        after += first is not None
        g = g2
    assert sorted(first) == [0, 1]


def test_contradicting_answers_empty_a_pairs_bounds_and_certify_nothing_there():
    """300 answers saying 0 beats 1 and 0 beats 2, then 2,000 saying 1 beats 0: the
    intersection for (0, 1) is empty (the all-times event failed), so 0 and 1 are
    contradicted and kept in doubt."""
    s = PairSequences(3)
    s.add([0] * 300 + [0] * 300, [1] * 300 + [2] * 300, [1.0] * 600, float("inf"))
    g = pairwise_goal_status(s, 0.95, top_k=1)
    assert g.met and g.certified.tolist() == [0]
    s.add([1] * 2000, [0] * 2000, [1.0] * 2000, float("inf"))
    g2 = pairwise_goal_status(s, 0.95, top_k=1, previous=g)
    assert not g2.met and g2.contradicted.tolist() == [0, 1] and g2.active[[0, 1]].all()
    with pytest.raises(ValueError):
        pairwise_goal_status(s, 0.9, top_k=1, previous=g)  # another level


def test_full_ranking_is_certified_as_a_total_order():
    theta = np.array([0.0, 1.5, -1.5, 3.0])
    run = simulate_pairwise_goal(theta, 4.0, 0.95, "adaptive", np.random.default_rng(3))
    assert run.certified is not None and run.certified.tolist() == [3, 1, 0, 2]
    beats = run.status.beats
    off = ~np.eye(4, dtype=bool)
    assert np.all((beats | beats.T)[off]) and not np.any((beats & beats.T)[off])
    assert run.status.lower.tolist() == run.status.upper.tolist() == [1.0, 2.0, 0.0, 3.0]
    assert not run.status.active.any()


def test_a_cycle_is_never_certified():
    """A Condorcet cycle 0 > 1 > 2 > 0: without closure no majority top-1 exists — each
    item is certainly beaten by another, so each is certainly out — and no order either;
    closed transitively it is a contradiction (WST fails), so nothing is certified."""
    s = PairSequences(3)
    s.add([0] * 500 + [1] * 500 + [2] * 500, [1] * 500 + [2] * 500 + [0] * 500, [1.0] * 1500, float("inf"))
    g = pairwise_goal_status(s, 0.95, top_k=1)
    assert not g.met and g.certified.size == 0 and g.contradicted.size == 0  # true cycles are no failure
    assert g.upper.tolist() == [1.0, 1.0, 1.0]  # each certainly beaten by one: out of any top 1
    assert g.unreachable  # so no majority top 1 exists
    rng = np.random.default_rng(0)
    assert draw_pairwise_respondent(g, np.zeros(3, dtype=bool), 1, rng, explore=0.0)[0].size == 0
    full = pairwise_goal_status(s, 0.95)
    assert not full.met and full.active.all() and full.contradicted.size == 0 and full.unreachable
    closed = pairwise_goal_status(s, 0.95, top_k=1, transitive=True)
    assert not closed.met and closed.contradicted.tolist() == [0, 1, 2] and closed.active.all()
    assert not closed.unreachable
    assert pairwise_goal_status(s, 0.95, top_k=2).unreachable  # three items each beat one: no top 2


def test_without_closure_each_member_must_beat_each_other_item_directly():
    s = PairSequences(4)
    inf = float("inf")
    s.add([0] * 300 + [1] * 300 + [2] * 300, [1] * 300 + [2] * 300 + [3] * 300, [1.0] * 900, inf)
    assert pairwise_goal_status(s, 0.95, top_k=1, transitive=True).met  # 0 > 1 > 2 > 3, closed
    g = pairwise_goal_status(s, 0.95, top_k=1)
    assert not g.met and not g.transitive
    i, j = draw_pairwise_respondent(g, np.zeros(4, dtype=bool), 2, np.random.default_rng(0), explore=0.0)
    assert {frozenset(p) for p in zip(i.tolist(), j.tolist(), strict=True)} <= {
        frozenset((0, 2)),
        frozenset((0, 3)),
    }
    s.add([0] * 600, [2] * 300 + [3] * 300, [1.0] * 600, inf)
    g = pairwise_goal_status(s, 0.95, top_k=1)
    assert g.met and g.certified.tolist() == [0]


def test_the_drawer_asks_a_boundary_pair_whose_items_are_both_resolved():
    """Top-2 of 4 with 0 > 1, 0 > 3, 1 > 2 and 3 > 2 certified: item 0 is *in* (it beats
    two) and item 2 *out* (beaten by two), yet 0 > 2 is not certified. Without closure
    the goal needs it, so the drawer serves (0, 2) with the other open boundary pair
    (1, 3); under closure 0 > 1 > 2 settles it and only (1, 3) is served."""
    s = PairSequences(4)
    inf = float("inf")
    s.add([0] * 300 + [0] * 300 + [1] * 300 + [3] * 300, [1] * 300 + [3] * 300 + [2] * 600, [1.0] * 1200, inf)
    rng = np.random.default_rng(2)
    g = pairwise_goal_status(s, 0.95, top_k=2)
    assert g.lower[0] == 2 and g.upper[2] == 1 and not g.active[[0, 2]].any() and not g.met
    i, j = draw_pairwise_respondent(g, np.zeros(4, dtype=bool), 2, rng, explore=0.0)
    assert {frozenset(p) for p in zip(i.tolist(), j.tolist(), strict=True)} == {
        frozenset((0, 2)),
        frozenset((1, 3)),
    }
    closed = pairwise_goal_status(s, 0.95, top_k=2, transitive=True)
    i, j = draw_pairwise_respondent(closed, np.zeros(4, dtype=bool), 2, rng, explore=0.0)
    assert {frozenset(p) for p in zip(i.tolist(), j.tolist(), strict=True)} == {frozenset((1, 3))}


def test_the_drawer_serves_disjoint_unanswered_items_and_never_a_repeat():
    rng = np.random.default_rng(9)
    m = 9
    g = pairwise_goal_status(PairSequences(m), 0.9, top_k=3)
    answered = np.zeros(m, dtype=bool)
    answered[[2, 5]] = True
    for explore in (0.0, 0.3, 1.0):
        for _ in range(200):
            i, j = draw_pairwise_respondent(g, answered, 10, rng, explore=explore)
            items = np.concatenate([i, j]).tolist()
            assert len(items) == len(set(items))  # disjoint pairs: no repeat, no item twice
            assert not set(items) & {2, 5}
            assert i.size <= (m - 2) // 2
    s = PairSequences(2)
    s.add([0] * 300, [1] * 300, [1.0] * 300, float("inf"))
    met = pairwise_goal_status(s, 0.9, top_k=1)
    assert met.met and draw_pairwise_respondent(met, [False, False], 3, rng)[0].size == 0


def test_the_drawer_asks_across_the_estimated_boundary_least_answered_first():
    """Top-1 of 6 with item 4 leading the fit: without exploration every pair holds item
    4 (the boundary of Ŝ = {4}), the least-answered first; counts passed are updated."""
    rng = np.random.default_rng(4)
    s = PairSequences(6)
    s.add([4] * 40, [0] * 40, [1.0] * 40, float("inf"))
    g = pairwise_goal_status(s, 0.95, top_k=1)
    assert g.order[0] == 4
    counts = s.answers.astype(np.float64)
    seen = []
    for _ in range(4):
        i, j = draw_pairwise_respondent(g, np.zeros(6, dtype=bool), 5, rng, counts, explore=0.0)
        assert i.size == 1 and 4 in (i[0], j[0])
        seen.append(frozenset((int(i[0]), int(j[0]))))
    assert len(set(seen)) == 4 and frozenset((4, 0)) not in seen  # (4, 0) was asked 40 times
    for pair in seen:
        x, y = sorted(pair)
        assert counts[pair_index([x], [y], 6)[0][0]] == 1.0  # each served pair counted once
    assert counts.sum() == 40 + 4


def test_exploration_keeps_every_item_in_play():
    """With explore = ½, one pair per respondent: half are uniform over the 15 pairs, so
    a pair without the boundary's item 4 comes 1/2 · 10/15 = 1/3 of the time, and the
    uniform share covers all 15 pairs evenly (χ² test at 0.1%)."""
    rng = np.random.default_rng(12)
    s = PairSequences(6)
    s.add([4] * 40, [0] * 40, [1.0] * 40, float("inf"))
    g = pairwise_goal_status(s, 0.95, top_k=1)
    n = 6000
    pairs = Counter()
    without = 0
    for _ in range(n):
        i, j = draw_pairwise_respondent(g, np.zeros(6, dtype=bool), 1, rng, explore=0.5)
        pairs[(min(i[0], j[0]), max(i[0], j[0]))] += 1
        without += 4 not in (i[0], j[0])
    assert abs(without / n - 1 / 3) <= 4 * math.sqrt((1 / 3) * (2 / 3) / n)
    counts = np.array([v for k, v in pairs.items() if 4 not in k])
    assert counts.size == 10
    assert chi2.sf(((counts - counts.mean()) ** 2 / counts.mean()).sum(), 9) > 0.001
    with pytest.raises(ValueError):
        draw_pairwise_respondent(g, np.zeros(6, dtype=bool), 1, rng, rule="random")  # type: ignore[arg-type]


def test_pairwise_adaptive_needs_fewer_answers_than_borda_balanced_where_the_top_is_separated():
    """Separated top-2 of 6 (1 above the rest), ε = 2, level 0.9, 4 surveys each: the
    pairwise certificate with adaptive pairs needs under half the answers of the Borda
    certificate with balanced pairs, and certifies the truth (``python -m
    tests.benchmarks.bench_adaptive --sizes 6 --ks 2 --epsilons 2 --profiles separated
    --certificate pairwise`` prints the saving, at level 0.95)."""
    theta = np.array([2.0, 1.75, 0.75, 0.0, -0.75, -1.5])
    pw, bb = [], []
    for r in range(4):
        run = simulate_pairwise_goal(theta, 2.0, 0.9, "adaptive", np.random.default_rng([1, r]), top_k=2)
        assert run.certified is not None and set(run.certified.tolist()) == {0, 1}
        pw.append(run.answers)
        bb.append(simulate_goal(theta, 2.0, 0.9, "balanced", np.random.default_rng([2, r]), top_k=2).answers)
    assert np.mean(pw) < np.mean(bb) / 2
