"""Borda FRA and Lehmer FRA with secure aggregation (docs/federated.md §2–7)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from app.stats.federated import (
    FederatedScheme,
    fra_experiment,
    mask_message,
    mask_stream,
    pairwise_mask,
    secure_sum,
)
from app.stats.fra import (
    borda_centroids,
    borda_client_message,
    borda_quantize,
    lehmer_client_message,
    lehmer_concentration,
    lehmer_low_bits,
    lehmer_server_order,
)
from app.stats.rankings import (
    lehmer_code,
    lehmer_decode,
    mallows_log_pmf,
    mallows_sample,
    orders_from_positions,
    positions_from_orders,
)
from tests.helpers.stats import Z, full_validation, size

# -- Borda centroids and the quantizer ----------------------------------------------------


def test_centroids_match_the_reference_table_and_lemma_2():
    table = {
        0.1: [1.1111, 2.0202, 3.003, 4.0004, 5.0, 6.0, 6.9996, 7.997, 8.9798, 9.8889],
        0.3: [1.4285, 2.1976, 3.0827, 4.0311, 5.0078, 5.9922, 6.9689, 7.9173, 8.8024, 9.5715],
        0.5: [1.9902, 2.6491, 3.3972, 4.2115, 5.0661, 5.9339, 6.7885, 7.6028, 8.3509, 9.0098],
        0.6: [2.4392, 3.0334, 3.6899, 4.394, 5.1279, 5.8721, 6.606, 7.3101, 7.9666, 8.5608],
    }
    for phi, ref in table.items():
        e = borda_centroids(10, phi)
        assert e == pytest.approx(ref, abs=6e-5)
        assert np.all(np.diff(e) >= (1 - phi) / (1 + phi) - 1e-12)  # D5: gap of eq. (18)
        assert e + e[::-1] == pytest.approx(np.full(10, 11.0))  # symmetry
    assert borda_centroids(20, 0.5)[[0, -1]] == pytest.approx([2.0, 19.0], abs=1e-4)


@pytest.mark.parametrize("phi", [0.3, 0.8])
def test_centroids_equal_the_exact_expectation_for_any_centre(phi):
    """E_j = E[σ(σ₀⁻¹(j))] by enumeration of S_6 under Mallows(σ₀, φ), σ₀ non-involutive."""
    m = 6
    center = np.array([4, 2, 0, 5, 1, 3])
    ps = np.array(list(itertools.permutations(range(m))))
    prob = np.exp(mallows_log_pmf(ps, center, -math.log(phi) * (m - 1)))
    pos = positions_from_orders(ps) + 1  # 1-based positions
    expected = (prob[:, None] * pos[:, center]).sum(axis=0)  # E[position of the item σ₀ puts j-th]
    assert borda_centroids(m, phi) == pytest.approx(expected, abs=1e-12)


def test_quantizer_nearest_centroid_with_midpoints_to_the_larger_index():
    e = borda_centroids(10, 0.6)
    mids = (e[:-1] + e[1:]) / 2
    assert mids == pytest.approx(
        [2.7363, 3.3616, 4.0419, 4.761, 5.5, 6.239, 6.9581, 7.6384, 8.2637], abs=1e-4
    )
    assert borda_quantize(mids, e).tolist() == list(range(2, 11))  # D6: a tie goes up
    assert borda_quantize(np.nextafter(mids, -np.inf), e).tolist() == list(range(1, 10))
    assert borda_quantize([-5.0, 1.0, 50.0], e).tolist() == [1, 1, 10]
    # A site's message may repeat values: it is not projected onto a permutation.
    msg = borda_client_message(np.array([[0, 1, 2, 3], [1, 0, 3, 2]]), 0.6)
    assert len(set(msg.tolist())) < 4


# -- Lehmer FRA ---------------------------------------------------------------------------


def test_lehmer_parameters():
    assert lehmer_concentration(10, 0.5) == pytest.approx(0.7991, abs=1e-4)
    assert lehmer_low_bits(10, 0.5, 500, 0.01) == 8  # docs/federated.md §4.2 example (paper eq. (5))
    with pytest.raises(ValueError, match="phi"):
        lehmer_low_bits(20, 0.62, 500, 0.01)
    # φ + φ² < 1 + φ^N holds up to φ ≈ 0.618 at every N, and fails at 0.62 for N ≥ 20.
    assert all(lehmer_concentration(n, 0.618) < 1 for n in (5, 10, 20, 100))
    assert lehmer_concentration(20, 0.62) >= 1


@pytest.mark.parametrize("low_bits", [1, 2, 3, 5])
def test_bit_split_round_trips_when_all_sites_agree(low_bits):
    """D7: with every site holding the same ranking, the server reconstructs its Lehmer code
    exactly through the high/low split (2^I·V + Maj), for every coordinate."""
    rng = np.random.default_rng(0)
    m, sites = 24, 5
    for _ in range(20):
        order = rng.permutation(m)
        msgs = [lehmer_client_message(order[None, :], low_bits, rng) for _ in range(sites)]
        total = np.sum(msgs, axis=0)
        est, code = lehmer_server_order(total, m, sites, low_bits, rng)
        assert est.tolist() == order.tolist()
        assert code.tolist() == lehmer_code(positions_from_orders(order)).tolist()
    # docs/federated.md §4.3, correction 3: coordinate i = 20 (1-based), I = 2, v = 19 → high 4, low 3.
    code = np.zeros(20, dtype=np.int64)
    code[19] = 19
    order = orders_from_positions(lehmer_decode(code))
    msg = lehmer_client_message(order[None, :], 2)
    scheme = FederatedScheme("lehmer", 20, 1, 0.5, 2)
    assert msg.size == scheme.length
    _, back = lehmer_server_order(msg, 20, 1, 2)
    assert back[19] == 19


def test_exact_histogram_and_bit_split_agree_under_concentration():
    """D9: when every site's local majority lies within 2^I of the true code and more than half
    of the sites hold the true value (Lemma 3's event), both modes return the same order."""
    rng = np.random.default_rng(1)
    m, sites, phi = 16, 9, 0.2
    for _ in range(30):
        center = np.arange(m)
        data = [mallows_sample(center, phi, 15, rng) for _ in range(sites)]
        exact = FederatedScheme("lehmer", m, sites, phi, 4)  # 4 ≥ bits of 15: exact histograms
        split = FederatedScheme("lehmer", m, sites, phi, 2)
        assert exact.exact_histogram and not split.exact_histogram
        tie_seed = int(rng.integers(1 << 30))
        out = []
        for scheme in (exact, split):
            msgs = [scheme.message(d, np.random.default_rng(7)) for d in data]
            out.append(scheme.consensus(np.sum(msgs, axis=0), tie_seed)["order"].tolist())
        assert out[0] == out[1]


# -- secure aggregation ------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["borda", "lehmer"])
def test_masks_cancel_and_the_masked_sum_is_the_plain_sum(method):
    """D8: masks sum to 0 mod 2^b; the server's output from masked messages equals the
    aggregation of the plain messages (Borda sums; Lehmer histograms and high bits)."""
    rng = np.random.default_rng(2)
    m, sites = 40, 6
    scheme = FederatedScheme(method, m, sites, 0.5, 3 if method == "lehmer" else None)
    bits = scheme.bits
    seeds = {(a, b): rng.bytes(32) for a in range(sites) for b in range(a + 1, sites)}
    masks = [
        pairwise_mask(a, {b: seeds[min(a, b), max(a, b)] for b in range(sites) if b != a}, bits)
        for a in range(sites)
    ]
    assert np.all(secure_sum(masks, bits) == 0)
    data = [mallows_sample(rng.permutation(m), 0.5, 8, rng) for _ in range(sites)]
    plain = [scheme.message(d, np.random.default_rng(3)) for d in data]
    masked = [mask_message(p, z, bits) for p, z in zip(plain, masks, strict=True)]
    assert np.array_equal(secure_sum(masked, bits), np.sum(plain, axis=0))
    assert all(not np.array_equal(x, p) for x, p in zip(masked, plain, strict=True))
    a = scheme.consensus(secure_sum(masked, bits), 5)["order"]
    b = scheme.consensus(np.sum(plain, axis=0), 5)["order"]
    assert a.tolist() == b.tolist()
    with pytest.raises(ValueError):
        mask_message(np.full(scheme.length, 1 << 62), masks[0], bits)


def test_masked_messages_are_uniform_and_independent_of_the_message():
    """Each masked entry is uniform on Z_{2^b} whatever the site's message: χ² over fresh
    seeds for two different messages, per entry width, and a two-sample test between them."""
    rng = np.random.default_rng(4)
    scheme = FederatedScheme("lehmer", 8, 3, 0.5, 1)  # mixes 2-bit one-hots and wider high parts
    bits = scheme.bits
    msg_a = scheme.message(np.arange(8)[None, :], rng)
    msg_b = scheme.message(np.arange(8)[::-1][None, :], rng)
    assert not np.array_equal(msg_a, msg_b)
    reps = 4000
    samples = {}
    for name, msg in (("a", msg_a), ("b", msg_b)):
        rows = []
        for _ in range(reps):
            peers = {1: rng.bytes(32), 2: rng.bytes(32)}
            rows.append(mask_message(msg, pairwise_mask(0, peers, bits), bits))
        samples[name] = np.array(rows, dtype=np.int64)
    for k in range(bits.size):
        size = 1 << int(bits[k])
        for name in ("a", "b"):
            counts = np.bincount(samples[name][:, k], minlength=size)
            assert sps.chisquare(counts).pvalue > 1e-4, (k, name)
        table = np.array([np.bincount(samples[x][:, k], minlength=size) for x in ("a", "b")])
        assert sps.chi2_contingency(table)[1] > 1e-4, k


def test_mask_stream_is_deterministic_per_seed_and_differs_across_seeds():
    bits = np.full(100, 20)
    s = b"\x01" * 32
    assert np.array_equal(mask_stream(s, bits), mask_stream(s, bits))
    assert not np.array_equal(mask_stream(s, bits), mask_stream(b"\x02" * 32, bits))
    assert mask_stream(s, bits).max() < 1 << 20
    with pytest.raises(ValueError):
        mask_stream(b"short", bits)


# -- the paper's synthetic experiments (S1–S4) -------------------------------------------------

# Mean K(σ₀, σ̂) over REPS replicates per configuration (validation tier: 100 in the
# ordinary run, 300 with PRIVRANK_VALIDATION=full), N = 10, L = 10; each stderr from the
# sample. The experiments sum the plain messages (``masked=False``): the masked protocol
# returns the same distances (test_the_masked_experiment_equals_the_plain_one).
REPS = size(100, 300)


def _mean_se(x):
    return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(x.size)) + 1e-9


class _Experiments(dict):
    """(φ, random centre, rankings per site) → the experiment's distances, run on first
    use, each configuration from its own seeded stream (so a test needs only the
    configurations it reads, and their numbers do not depend on which others ran)."""

    def __missing__(self, key):
        phi, random_center, per_site = key
        rng = np.random.default_rng([2026, round(10 * phi), int(random_center), per_site])
        self[key] = fra_experiment(10, 10, per_site, phi, REPS, random_center, rng, masked=False)
        return self[key]


@pytest.fixture(scope="module")
def experiments():
    return _Experiments()


def test_the_masked_experiment_equals_the_plain_one():
    """The experiments' shortcut: through the masked protocol (SHAKE-256 masks from fresh
    pairwise seeds, secure_sum) every replicate's distances equal those from the plain
    sums, for both methods, exact-histogram and bit-split Lehmer alike."""
    for low_bits, random_center in ((None, True), (2, False)):
        a, b = (
            fra_experiment(10, 10, 3, 0.5, 4, random_center, np.random.default_rng(8), low_bits, masked=m)
            for m in (True, False)
        )
        for name in a:
            assert np.array_equal(a[name], b[name]), (low_bits, name)


@pytest.mark.validation
def test_s1_identity_centre_borda_and_lehmer_fra_nearly_identical(experiments):
    """Fig. 3(a,b): at σ₀ = e both FRA methods are within half a discordant pair (of 45) of
    each other on average, track their centralized versions, and reach σ₀ by m_ℓ = 20.
    "Reach σ₀" (mean distance ≤ 0.05 Borda, ≤ 0.1 Lehmer) is checked at full size only
    (PRIVRANK_VALIDATION=full): the thresholds are fixed numbers, not derived from the
    size run; the ordinary run checks the fall to m_ℓ = 20 in test_s3_error_falls_with_samples_per_site."""
    for phi in (0.3, 0.5):
        for per_site in (1, 5):
            run = experiments[phi, False, per_site]
            diff = run["borda_fra"] - run["lehmer_fra"]
            mean, se = _mean_se(diff)
            assert abs(mean) <= 0.5 + Z * se, (phi, per_site, mean)
            for method in ("borda", "lehmer"):
                gap, gse = _mean_se(run[f"{method}_fra"] - run[f"{method}_central"])
                assert abs(gap) <= 0.5 + Z * gse, (phi, per_site, method, gap)
    if full_validation():
        done = experiments[0.5, False, 20]
        assert done["borda_fra"].mean() <= 0.05 and done["lehmer_fra"].mean() <= 0.1


@pytest.mark.validation
def test_s2_random_centre_borda_clearly_better(experiments):
    """Fig. 3(c): with σ₀ a random permutation Lehmer codes are no longer truncated
    geometric; Borda FRA's mean error is clearly below Lehmer FRA's (paired, by more than
    Z = 4.5 standard errors)."""
    for per_site in (1, 5, 20):
        run = experiments[0.5, True, per_site]
        mean, se = _mean_se(run["lehmer_fra"] - run["borda_fra"])
        assert mean > Z * se, (per_site, mean, se)
    # And Borda FRA is label-equivariant: its error does not depend on the centre.
    for per_site in (1, 5, 20):
        a, sa = _mean_se(experiments[0.5, True, per_site]["borda_fra"])
        b, sb = _mean_se(experiments[0.5, False, per_site]["borda_fra"])
        assert abs(a - b) <= Z * math.hypot(sa, sb)


@pytest.mark.validation
def test_s3_error_falls_with_samples_per_site(experiments):
    for phi, center in ((0.5, False), (0.5, True)):
        for method in ("borda_fra", "lehmer_fra"):
            seq = [experiments[phi, center, n][method] for n in (1, 5, 20)]
            for lo, hi in itertools.pairwise(seq):
                d, se = _mean_se(lo)[0] - _mean_se(hi)[0], math.hypot(_mean_se(lo)[1], _mean_se(hi)[1])
                assert d > -Z * se
            assert seq[0].mean() > seq[-1].mean() + Z * math.hypot(_mean_se(seq[0])[1], _mean_se(seq[-1])[1])


@pytest.mark.validation
def test_s3_error_falls_with_the_number_of_sites():
    reps = size(100, 200)
    rng = np.random.default_rng(77)
    few = fra_experiment(10, 2, 3, 0.5, reps, True, rng, masked=False)["borda_fra"]
    many = fra_experiment(10, 20, 3, 0.5, reps, True, rng, masked=False)["borda_fra"]
    (a, sa), (b, sb) = _mean_se(few), _mean_se(many)
    assert a - b > Z * math.hypot(sa, sb)


@pytest.mark.validation
def test_s4_lehmer_mean_is_worse_than_majority(experiments):
    for key in ((0.5, False, 5), (0.5, False, 20), (0.3, False, 5)):
        run = experiments[key]
        mean, se = _mean_se(run["lehmer_mean"] - run["lehmer_central"])
        assert mean > Z * se, key


@pytest.mark.validation
def test_reference_values_within_monte_carlo_error(experiments):
    """The reference values of docs/federated.md §7 (an independent re-implementation,
    100 replicates): our means agree within the combined Monte Carlo error (z = 4.5, the
    reference's se estimated from our spread)."""
    ref = {
        (0.3, False, 1): {"borda_fra": 0.31, "lehmer_fra": 0.25},
        (0.5, False, 5): {"borda_fra": 0.18, "lehmer_fra": 0.38},
        (0.5, True, 1): {"borda_fra": 1.77, "lehmer_fra": 3.16},
        (0.5, True, 5): {"borda_fra": 0.20, "lehmer_fra": 1.57},
        (0.5, True, 20): {"borda_fra": 0.00, "lehmer_fra": 0.50},
    }
    for key, values in ref.items():
        for method, value in values.items():
            x = experiments[key][method]
            mean, se = _mean_se(x)
            se_ref = float(np.std(x, ddof=1)) / math.sqrt(100) + 0.005  # rounding of the table
            assert abs(mean - value) <= Z * math.hypot(se, se_ref), (key, method, mean, value)


def test_lehmer_server_rounds_high_bits_half_up_and_clamps():
    """Four sites with local majorities 3, 3, 4, 5 at coordinate i = 5 (values 0..5), I = 2:
    high parts 0, 0, 1, 1 average 0.5 → V = 1 (round half up; floor would give 0); the low
    parts' plurality is 3, so 2^I·V + Maj = 7 > 5 and is clamped to 5."""
    m, sites, low_bits = 6, 4, 2
    scheme = FederatedScheme("lehmer", m, sites, 0.5, low_bits)
    total = np.zeros(scheme.length, dtype=np.int64)
    for v in (3, 3, 4, 5):
        code = np.zeros(m, dtype=np.int64)
        code[5] = v
        order = orders_from_positions(lehmer_decode(code))
        total += lehmer_client_message(order[None, :], low_bits)
    _, code = lehmer_server_order(total, m, sites, low_bits, 0)
    assert code[5] == 5
    # Floor would give 0·4 + 3 = 3: the mean of the high parts must round half up.
    sites3 = [3, 4, 4]  # high 0, 1, 1 → mean 0.67 → V = 1; lows 3, 0, 0 → Maj 0 → 4
    total = np.zeros(scheme.length, dtype=np.int64)
    for v in sites3:
        code = np.zeros(m, dtype=np.int64)
        code[5] = v
        total += lehmer_client_message(orders_from_positions(lehmer_decode(code))[None, :], low_bits)
    _, code = lehmer_server_order(total, m, 3, low_bits, 0)
    assert code[5] == 4


def test_borda_server_breaks_exact_ties_at_random():
    from app.stats.fra import borda_server_order

    rng = np.random.default_rng(16)
    firsts = {int(borda_server_order(np.array([5, 5, 9]), rng)[0]) for _ in range(200)}
    assert firsts == {0, 1}


def test_borda_consensus_publishes_ties_with_shared_ranks_whatever_the_random_order():
    """The aggregate [9, 11, 14, 6, 6] ties items 3 and 4: whichever order the tie-break
    draws, they form one tied group and share rank 1 (competition ranking: 1, 1, 3, 4, 5)."""
    from app.stats.fra import competition_ranks, tied_groups

    scheme = FederatedScheme("borda", 5, 3, 0.5)
    total = np.array([9, 11, 14, 6, 6])
    orders = set()
    for seed in range(40):
        out = scheme.consensus(total, seed)
        orders.add(tuple(out["order"].tolist()))
        assert [sorted(g) for g in out["ties"]] == [[3, 4]]
        assert out["ties"][0] == out["order"][:2].tolist()  # listed as published
        assert out["rank"].tolist() == [3, 4, 5, 1, 1]
        assert np.allclose(out["mean_site_quantized_position"], total / 3)
    assert orders == {(3, 4, 0, 1, 2), (4, 3, 0, 1, 2)}
    assert competition_ranks([2, 2, 2, 1]).tolist() == [2, 2, 2, 1]
    assert tied_groups([5, 5, 9, 9, 1], [4, 1, 0, 3, 2]) == [[1, 0], [3, 2]]
    assert tied_groups([1, 2, 3], [0, 1, 2]) == []


def test_lehmer_consensus_has_no_tied_items_but_names_coordinates_drawn_at_random():
    scheme = FederatedScheme("lehmer", 3, 2, 0.5, 2)
    # Two sites: codes (0, 0, 0) and (0, 1, 2): coordinates 1 and 2 have tied pluralities.
    total = np.zeros(scheme.length, dtype=np.int64)
    for code in ([0, 0, 0], [0, 1, 2]):
        order = orders_from_positions(lehmer_decode(np.array(code)))
        total += lehmer_client_message(order[None, :], 2)
    out = scheme.consensus(total, 0)
    assert out["ties"] == [] and out["random_coordinates"] == [1, 2]
    assert sorted(out["rank"].tolist()) == [1, 2, 3]
    assert out["rank"][out["order"][0]] == 1
