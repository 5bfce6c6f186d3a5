"""Per-pair sufficient statistics (docs/estimator.md §4.1): exact against a brute-force loop."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from app.stats import G, H, PairStats, debias, pair_stats, privacy_noise_variance
from app.stats.pairs import reduce_by_pair


def brute_force(n_items, i, j, y, eps):
    """Loop over comparisons, orient each as (min, max), sum the fields."""
    acc = defaultdict(lambda: np.zeros(5))
    for a, b, yy, e in zip(i, j, y, eps, strict=True):
        z = float(debias(yy, e))
        v = float(privacy_noise_variance(e))
        if a > b:
            a, b, yy, z = b, a, 1 - yy, 1 - z
        acc[(a, b)] += [1, yy, z, z * z, v]
    keys = sorted(acc)
    arr = np.array([acc[k] for k in keys]).reshape(-1, 5)
    return np.array(keys, dtype=np.int64).reshape(-1, 2), arr


def as_table(stats: PairStats):
    return (
        np.column_stack((stats.i, stats.j)),
        np.column_stack((stats.n, stats.sum_y, stats.sum_z, stats.sum_z2, stats.sum_v)),
    )


def random_comparisons(rng, m, n, eps_choices=(0.3, 1.0, 2.5, np.inf)):
    i = rng.integers(0, m, n)
    j = (i + rng.integers(1, m, n)) % m
    y = rng.integers(0, 2, n)
    eps = rng.choice(eps_choices, n)
    return i, j, y, eps


@pytest.mark.parametrize(
    ("m", "n"),
    [
        (6, 500),  # dense bincount path (m² ≤ 16N)
        (400, 2_000),  # sparse: 16-bit radix sort
        (70_000, 300),
    ],  # sparse: m > 65,536, comparison sort
)
def test_pair_stats_equal_brute_force_heterogeneous_epsilon(m, n):
    rng = np.random.default_rng(m)
    i, j, y, eps = random_comparisons(rng, m, n)
    if m == 400:  # force repeated pairs in the sparse path too
        i[:50], j[:50] = 3, 7
        i[50:80], j[50:80] = 7, 3
    keys, expected = brute_force(m, i, j, y, eps)
    got_keys, got = as_table(pair_stats(m, i, j, y, eps))
    np.testing.assert_array_equal(got_keys, keys)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("m", [8, 3000])
def test_homogeneous_fast_path_equals_general_path(m):
    rng = np.random.default_rng(1)
    i, j, y, _ = random_comparisons(rng, m, 5_000)
    eps = 0.8
    fast = pair_stats(m, i, j, y, eps)
    general = PairStats.from_values(m, i, j, y, debias(y, eps), privacy_noise_variance(np.full(y.size, eps)))
    for a, b in zip(as_table(fast), as_table(general), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)
    assert fast.epsilon_min == 0.8


def test_orientation_is_canonical():
    # "1 beat 0" reported as (1, 0, ỹ=1) equals (0, 1, ỹ=0).
    a = pair_stats(3, [1], [0], [1], 1.0)
    b = pair_stats(3, [0], [1], [0], 1.0)
    for x, y in zip(as_table(a), as_table(b), strict=True):
        np.testing.assert_allclose(x, y, atol=1e-15)
    assert a.i.tolist() == [0] and a.j.tolist() == [1]


def test_merge_equals_statistics_of_the_union():
    rng = np.random.default_rng(7)
    m = 50
    i, j, y, eps = random_comparisons(rng, m, 3_000)
    whole = pair_stats(m, i, j, y, eps)
    parts = [
        pair_stats(m, i[s], j[s], y[s], eps[s])
        for s in (slice(0, 1000), slice(1000, 1100), slice(1100, None))
    ]
    merged = parts[0] + parts[1] + parts[2]
    for x, w in zip(as_table(merged), as_table(whole), strict=True):
        np.testing.assert_allclose(x, w, rtol=1e-12, atol=1e-9)
    assert merged.epsilon_min == whole.epsilon_min == 0.3
    assert merged.n.dtype == np.int64
    empty = PairStats.empty(m)
    assert (empty + whole) is whole and (whole + empty) is whole
    with pytest.raises(ValueError, match="different item sets"):
        whole + PairStats.empty(m + 1)


def test_G_H_and_counts_from_statistics():
    rng = np.random.default_rng(2)
    m = 12
    i, j, y, eps = random_comparisons(rng, m, 4_000, eps_choices=(0.3, 1.0, 2.5))
    stats = pair_stats(m, i, j, y, eps)
    assert pytest.approx(G(eps), rel=1e-12) == stats.G
    assert pytest.approx(H(eps), rel=1e-12) == stats.H
    assert stats.n_comparisons == 4_000
    expected = np.bincount(i, minlength=m) + np.bincount(j, minlength=m)
    np.testing.assert_array_equal(stats.item_counts(), expected)
    dense = stats.to_dense()
    np.testing.assert_allclose(dense["sum_z"] + dense["sum_z"].T, dense["n"])  # z_ji = 1 − z_ij


@pytest.mark.parametrize("n_rows", [20_000, 4_000])  # m² = 90,000: bincount path, then sort path
def test_reduce_by_pair_matches_unique_reference(n_rows):
    rng = np.random.default_rng(4)
    m = 300
    lo = rng.integers(0, m - 1, n_rows)
    hi = lo + 1 + rng.integers(0, m - 1 - lo)
    w = rng.random(n_rows)
    pi, pj, counts, (sums,) = reduce_by_pair(lo, hi, m, (w,))
    keys, inverse, ref_counts = np.unique(lo * m + hi, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(pi * m + pj, keys)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_allclose(sums, np.bincount(inverse, w), rtol=1e-12)


@pytest.mark.parametrize(
    ("i", "j", "message"),
    [
        ([0, 1], [0, 2], "different items"),
        ([0, 5], [1, 2], r"\[0, 4\)"),
        ([-1], [2], r"\[0, 4\)"),
        ([0.0], [1.0], "integers"),
        ([0, 1], [1], "equal length"),
    ],
)
def test_invalid_comparisons_rejected(i, j, message):
    with pytest.raises(ValueError, match=message):
        pair_stats(4, i, j, [1] * len(i), 1.0)


def test_float_item_count_and_epsilon_length():
    a = pair_stats(3.0, [0, 1], [1, 2], [1, 0], 1.0)
    assert a.n_items == 3 and isinstance(a.n_items, int)
    with pytest.raises(ValueError, match="positive integer"):
        pair_stats(3.5, [0], [1], [1], 1.0)
    with pytest.raises(ValueError, match="one value per comparison"):
        pair_stats(3, [0, 1, 0], [1, 2, 2], [1, 0, 1], [1.0, 1.0])  # equal values, wrong length


def test_int32_statistics_do_not_overflow_for_large_m():
    m = 100_000

    def ps(i, j):
        z = np.zeros(len(i))
        return PairStats(
            m, np.array(i, np.int32), np.array(j, np.int32), np.ones(len(i), np.int64), z, z, z, z
        )

    # (5, 60000) and (85904, 94592) collide modulo 2³² as int32 keys i·m + j.
    merged = ps([5, 85904], [60000, 94592]) + ps([5], [60000])
    assert merged.i.tolist() == [5, 85904] and merged.n.tolist() == [2, 1]


def test_invalid_answers_rejected():
    with pytest.raises(ValueError, match="0 or 1"):
        pair_stats(4, [0], [1], [2], 1.0)


def test_empty_input():
    stats = pair_stats(5, [], [], [], 1.0)
    assert stats.n_pairs == 0 and stats.n_comparisons == 0 and stats.G == 1.0
