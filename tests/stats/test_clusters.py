"""The cluster-robust sums kept as answers arrive equal the sums over every stored answer.

The exactness tolerance is rounding: the meat is a sum of O(N) products whose terms cancel
by at most a factor of the privacy noise's variance, so 1e-9 of its largest entry leaves
six orders of magnitude of room over float64 rounding at these sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.stats import fit_debiased_mle_stats, pair_stats
from app.stats.clusters import MOMENTS_MAX_ITEMS, ClusterMoments, pair_ends, pair_index
from app.stats.inference import Clusters, IntervalsUnavailable, confidence
from app.stats.inference.sandwich import _cluster_meat
from app.stats.mechanisms import randomization_p_value

EXACT = 1e-9


def _answers(rng, m: int, respondents: int, per: tuple[int, int], eps=(0.5, 1.0, 2.0)):
    """Answers of ``respondents`` people, each to distinct pairs (as the service stores
    them), in a shuffled arrival order; respondents coded by first arrival."""
    n_pairs = m * (m - 1) // 2
    rows = []
    for r in range(respondents):
        k = int(rng.integers(per[0], per[1] + 1))
        pairs = rng.choice(n_pairs, size=min(k, n_pairs), replace=False)
        e = float(rng.choice(eps))
        rows += [(r, int(p), int(rng.integers(0, 2)), e) for p in pairs]
    rows = [rows[x] for x in rng.permutation(len(rows))]
    code, pair, y, epsilon = (np.array(c) for c in zip(*rows, strict=True))
    _, first = np.unique(code, return_index=True)
    remap = np.empty(respondents, dtype=np.int64)
    remap[code[np.sort(first)]] = np.arange(respondents)
    i, j = pair_ends(pair)
    return remap[code], i, j, y.astype(np.int8), epsilon.astype(float)


def _in_parts(moments: ClusterMoments, cols, parts: int) -> ClusterMoments:
    for chunk in np.array_split(np.arange(cols[0].size), parts):
        moments = moments.added(*(c[chunk] for c in cols))
    return moments


def _close(a, b) -> bool:
    return float(np.abs(a - b).max()) <= EXACT * max(float(np.abs(b).max()), 1.0)


def test_pair_index_is_stable_as_items_are_added():
    e = np.arange(200_000)
    i, j = pair_ends(e)
    assert np.all(i < j)
    assert np.array_equal(pair_index(i, j), e)
    # The pairs of the first m items are the first m(m − 1)/2 indices, whatever comes later.
    assert set(pair_index(*np.triu_indices(7, 1)).tolist()) == set(range(21))


@pytest.mark.parametrize(
    ("m", "respondents", "per", "parts"),
    [
        (12, 60, (1, 8), 9),  # many small clusters: sparse updates
        (15, 12, (60, 105), 5),  # few respondents answering most pairs: dense updates
        (30, 200, (1, 40), 13),  # both, respondents returning across many updates
    ],
)
def test_meat_from_the_sums_equals_the_meat_over_every_answer(m, respondents, per, parts):
    rng = np.random.default_rng(m * 1000 + respondents)
    cols = _answers(rng, m, respondents, per)
    moments = _in_parts(ClusterMoments.empty(), cols, parts)
    code, i, j, y, eps = cols
    rows = Clusters.from_answers(m, i, j, y, eps, code)
    assert moments.n_rows == i.size
    assert moments.n_clusters == respondents
    assert np.array_equal(moments.sizes, np.bincount(code, minlength=respondents))
    assert np.allclose(moments.spent, np.bincount(code, eps, minlength=respondents), rtol=1e-12, atol=0)
    for _ in range(3):
        theta = rng.normal(scale=1.5, size=m)
        assert _close(moments.meat(theta), _cluster_meat(theta, rows))
    # The rows it keeps are the answers themselves, respondents coded the same way.
    theta = rng.normal(size=m)
    assert _close(_cluster_meat(theta, moments.clusters(m)), _cluster_meat(theta, rows))


def test_one_update_equals_many():
    """Folding the same answers in one step or in many gives the same sums."""
    rng = np.random.default_rng(5)
    cols = _answers(rng, 20, 80, (1, 60))
    one = ClusterMoments.empty().added(*cols)
    many = _in_parts(ClusterMoments.empty(), cols, 25)
    assert one.nn is not None and many.nn is not None
    assert np.array_equal(one.nn, many.nn)  # counts: exact
    assert _close(many.q, one.q) and _close(many.w, one.w)


def test_the_pair_statistics_and_randomization_check_are_those_of_every_answer():
    rng = np.random.default_rng(7)
    m = 14
    _, i, j, y, eps = cols = _answers(rng, m, 50, (1, 30))
    moments = _in_parts(ClusterMoments.empty(), cols, 6)
    whole = pair_stats(m, i, j, y, eps)
    st = moments.stats
    assert np.array_equal(st.i, whole.i) and np.array_equal(st.j, whole.j)
    assert np.array_equal(st.n, whole.n)
    for name in ("sum_y", "sum_z", "sum_z2", "sum_v"):
        assert _close(getattr(st, name), getattr(whole, name)), name
    assert st.epsilon_min == whole.epsilon_min
    truthful = np.bincount(pair_index(i, j), 1.0 / (1.0 + np.exp(-eps)), minlength=m * (m - 1) // 2)
    expected = randomization_p_value(whole.n, whole.sum_y, truthful[pair_index(whole.i, whole.j)])
    assert moments.randomization_p_value() == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_items_added_later_extend_the_sums():
    """Answers reaching new items (a survey that grows) keep the earlier sums and add pairs."""
    rng = np.random.default_rng(9)
    code, i, j, y, eps = _answers(rng, 18, 70, (1, 25))
    early = j < 10
    moments = ClusterMoments.empty().added(code[early], i[early], j[early], y[early], eps[early])
    assert moments.n_items <= 10
    moments = moments.added(code[~early], i[~early], j[~early], y[~early], eps[~early])
    order = np.concatenate((np.flatnonzero(early), np.flatnonzero(~early)))
    rows = Clusters.from_answers(18, i[order], j[order], y[order], eps[order], code[order])
    theta = rng.normal(size=18)
    assert _close(moments.meat(theta), _cluster_meat(theta, rows))
    # A θ with more items than the answers reach: their rows and columns are zero.
    wider = moments.meat(np.concatenate((theta, [0.3, -0.2])))
    assert _close(wider[:18, :18], _cluster_meat(theta, rows)) and not wider[18:].any()


def test_beyond_the_item_limit_the_meat_is_summed_over_the_rows():
    rng = np.random.default_rng(11)
    m = MOMENTS_MAX_ITEMS + 6
    code, i, j, y, eps = cols = _answers(rng, m, 40, (5, 40))
    moments = _in_parts(ClusterMoments.empty(), cols, 3)
    assert moments.nn is None and not moments.has_sums
    theta = rng.normal(size=m)
    assert _close(moments.meat(theta), _cluster_meat(theta, Clusters.from_answers(m, i, j, y, eps, code)))


@pytest.mark.parametrize(("respondents", "method"), [(120, "cluster"), (12, None)])
def test_intervals_from_the_sums_equal_those_from_the_rows(respondents, method):
    """confidence() with the sums and with the rows: the same intervals, whichever
    covariance it chooses (CR1 with many respondents; CR2 or the bound with few)."""
    rng = np.random.default_rng(respondents)
    m = 8
    theta_true = np.linspace(-1.0, 1.0, m)
    code, i, j, _, eps = _answers(rng, m, respondents, (10, 28), eps=(1.0, 2.0))
    p = 1.0 / (1.0 + np.exp(-(theta_true[i] - theta_true[j])))
    y_true = (rng.random(i.size) < p).astype(np.int8)
    keep = rng.random(i.size) < 1.0 / (1.0 + np.exp(-eps))
    y = np.where(keep, y_true, 1 - y_true).astype(np.int8)
    moments = _in_parts(ClusterMoments.empty(), (code, i, j, y, eps), 4)
    fit = fit_debiased_mle_stats(moments.stats)
    rows = Clusters.from_answers(m, i, j, y, eps, code)
    try:
        want = confidence(fit, 0.95, clusters=rows)
    except IntervalsUnavailable as exc:  # pragma: no cover - the seeds give intervals
        pytest.fail(f"no intervals: {exc.reason}")
    got = confidence(fit, 0.95, clusters=moments)
    assert got.method == want.method
    if method is not None:
        assert got.method == method
    assert got.df == want.df
    assert _close(got.cov, want.cov)
    assert _close(got.lower, want.lower) and _close(got.upper, want.upper)


def test_sums_that_are_not_the_fits_data_are_refused():
    rng = np.random.default_rng(3)
    cols = _answers(rng, 8, 40, (5, 20))
    moments = ClusterMoments.empty().added(*cols)
    fewer = ClusterMoments.empty().added(*(c[:-5] for c in cols))
    fit = fit_debiased_mle_stats(fewer.stats)
    with pytest.raises(ValueError, match="not the comparisons"):
        confidence(fit, 0.95, clusters=moments)


def test_updates_leave_earlier_moments_unchanged():
    """Moments are immutable: a request keeps the version it read while others add answers."""
    rng = np.random.default_rng(4)
    cols = _answers(rng, 10, 30, (5, 30))
    half = cols[0].size // 2
    first = ClusterMoments.empty().added(*(c[:half] for c in cols))
    assert first.nn is not None
    nn, w, n_rows = first.nn.copy(), first.w.copy(), first.n_rows
    code, i, j, y, eps = (c[:half] for c in cols)
    rows = Clusters.from_answers(10, i, j, y, eps, code)
    first.added(*(c[half:] for c in cols))
    assert np.array_equal(first.nn, nn) and np.array_equal(first.w, w) and first.n_rows == n_rows
    theta = rng.normal(size=10)
    assert _close(_cluster_meat(theta, first.clusters(10)), _cluster_meat(theta, rows))
    # Extending the earlier moments again gives them their own rows: both stay right.
    other = first.added(*(c[half:] for c in cols))
    assert _close(_cluster_meat(theta, first.clusters(10)), _cluster_meat(theta, rows))
    everything = Clusters.from_answers(10, cols[1], cols[2], cols[3], cols[4], cols[0])
    assert _close(other.meat(theta), _cluster_meat(theta, everything))
    assert _close(_cluster_meat(theta, other.clusters(10)), _cluster_meat(theta, everything))
