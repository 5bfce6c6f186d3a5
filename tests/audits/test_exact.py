"""Exact privacy audits by enumeration (docs/audits.md §2): randomized response and the
Mallows mechanism for every m ≤ 5, at the edges of the ε the product accepts.

Two laws per mechanism and ε:

* the **defining** law — the functions the sampler's probabilities come from
  (``flip_probability``; ``mallows_log_pmf``) — whose largest log ratio over
  neighbouring inputs must equal ε to floating-point rounding, :data:`FLOAT_TOL`;
* the **shipped sampler's** law — ``privatize`` / ``mallows_privatize`` evaluated on
  the uniforms it draws (``tests.helpers.audit.grid_law``: exact counts of the grid
  points per output; 2⁵³ points for randomized response, 2¹⁰⁶ for a Mallows stage, which
  draws two uniforms) and, for rankings, ``insertion_decode`` of every stage vector —
  whose largest log ratio may differ from ε only by the law's resolution: each count is
  within d of its exact value G·P, so each log probability within
  log(1 + d/min(count, G·P)), and the ratio within twice the sum of that over the
  stages. For randomized response d is one grid point, and at ε = 30 its flip of
  probability 9.4·10⁻¹⁴ is 843 points: there the resolution shows (the grid rounds the
  flip up, so the loss stays below ε). A Mallows stage's boundaries are exact to a
  relative rounding error (:func:`mallows_stage_bounds`), so its loss equals ε to
  :data:`FLOAT_TOL` at every ε.

Neighbours: randomized response protects one answer (y vs 1 − y,
docs/mechanisms.md §1.1); the Mallows mechanism protects a single-item move
(docs/mechanisms.md §3.1): every ordering's (m − 1)² neighbours.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.stats import mechanisms as mech
from app.stats import rankings as rk
from app.stats.mechanisms import EPSILON_FLOOR, flip_probability, privatize
from app.stats.rankings import insertion_decode, mallows_log_pmf, mallows_privatize
from app.stats.rankings import mallows as rk_mallows
from app.surveys.policy import MAX_EPSILON, MIN_EPSILON
from tests.helpers.audit import (
    GRID,
    FixedUniforms,
    check_grid_law,
    grid_law,
    grid_resolution,
    identity_stages,
    log_grid_probabilities,
    mallows_law,
    max_log_ratio,
    neighbour_pairs,
    orderings,
)

#: The ε the library accepts at its floor, the survey bounds (app.surveys.policy), and 1.
EPSILONS = (EPSILON_FLOOR, MIN_EPSILON, 1.0, MAX_EPSILON)
#: |ε̂ − ε| ≤ FLOAT_TOL·max(1, ε) for the defining law: each log probability is one
#: rounding (≈ 1e-16) off; 1e-12 leaves a factor 10⁴ and still catches a dispersion off
#: by any factor (at ε = 10⁻⁶ a factor (m−1)/m is 2·10⁻⁷ off).
FLOAT_TOL = 1e-12
#: How far (in grid points) a count of randomized response's law may be from 2⁵³·P:
#: P(u < p) is ⌈2⁵³p⌉/2⁵³ (1 point).
GRID_POINTS = {"rr": 1}
#: Unit roundoff of float64.
UNIT_ROUNDOFF = 2.0**-53


def mallows_stage_bounds(t: int, b: float) -> np.ndarray:
    """How far (in points of the 2¹⁰⁶ grid) the count of each V⁽ᵗ⁾ = k may be from
    2¹⁰⁶·P(V⁽ᵗ⁾ = k) for the shipped stage sampler, from its rounding errors.

    The sampler (app.stats.rankings.mallows._sample_stages) decides V⁽ᵗ⁾ ≥ k by
    log1p(V·expm1(bt))/b > k, whose exact boundary is V = S_(t−k) = expm1(bk)/expm1(bt).
    Relative errors, in units u = 2⁻⁵³: V = fl(K + U₂)·2⁻⁵³ moves a boundary by at most one
    step of its cell (2); expm1(bt) and log1p are within one ulp (2 each) and the products
    b·t, V·Q and the quotient by b one rounding each; the ulp of log1p and the quotient's
    rounding move the boundary in V·Q by a factor 1 + bk ≤ 1 + bt more, and b·t moves
    expm1(bt) by the same factor: 2 + 2 + 1 + 4(1 + bt). The reference
    ``stage_pmf`` is off by e^(−b(t−1−k)) (2 + bt) and its sum (t + 1). So each boundary is
    within ρ·S of S, ρ = (12 + t + 5bt)·u, and the count of V⁽ᵗ⁾ = k, the grid points in
    (S_(t−k), S_(t−k−1)], within ρ·2¹⁰⁶·(S_(t−k) + S_(t−k−1)) + 2 points.
    """
    rho = (12 + t + 5 * b * t) * UNIT_ROUNDOFF
    below = np.concatenate(([0.0], np.cumsum(rk.stage_pmf(t, b))))  # P(V⁽ᵗ⁾ < k) = S_(t−k), k = 0..t
    return rho * float(GRID**2) * (below[:-1] + below[1:]) + 2


# -- randomized response ---------------------------------------------------------------------


def rr_sampler_law(epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """log P(ỹ | y) of ``privatize`` on the 53-bit grid ([y, ỹ]) and the counts of y = 1."""
    log_p = np.empty((2, 2))
    counts = {}
    for y in (0, 1):

        def kept(u, y=y):  # 0: flipped (u < p), 1: kept — nondecreasing in u
            return (privatize(np.full(u.size, y, np.int8), epsilon, FixedUniforms(u)) == y).astype(int)

        c = grid_law(kept, 2)
        check_grid_law(kept, c, np.random.default_rng(7))
        log_p[y, y], log_p[y, 1 - y] = log_grid_probabilities(c[::-1])
        counts[y] = c
    assert np.array_equal(counts[0], counts[1])  # the flip does not depend on the answer
    return log_p, counts[1]


@pytest.mark.parametrize("eps", EPSILONS)
def test_randomized_response_loses_exactly_epsilon(eps):
    """Defining law: log((1 − p_ε)/p_ε) = ε. Sampler: its flip probability is ⌈2⁵³p_ε⌉/2⁵³,
    so its loss is never above ε and below it by at most the grid's resolution."""
    p = float(flip_probability(eps))
    defining = np.log([[1 - p, p], [p, 1 - p]])
    assert max_log_ratio(defining, [(0, 1)]) == pytest.approx(eps, rel=0, abs=FLOAT_TOL * max(1, eps))

    log_p, counts = rr_sampler_law(eps)
    assert counts[0] == math.ceil(p * GRID)  # P(u < p): every grid point below p flips
    shipped = max_log_ratio(log_p, [(0, 1)])
    slack = 2 * grid_resolution(counts, np.array([p, 1 - p]), GRID_POINTS["rr"])
    assert shipped <= eps + FLOAT_TOL * max(1, eps)
    assert eps - shipped <= slack + FLOAT_TOL * max(1, eps), (shipped, slack)


@pytest.mark.parametrize(("factor", "eps"), [(2.0, 1.0), (0.5, 1.0), (2.0, MAX_EPSILON)])
def test_the_exact_audit_rejects_a_flip_rate_off_by_a_factor(monkeypatch, factor, eps):
    """A flip probability doubled (more noise, wrong debiasing) or halved (less privacy)
    moves the shipped sampler's loss far outside the grid's resolution."""
    real = flip_probability
    monkeypatch.setattr(mech, "flip_probability", lambda e: factor * real(e))
    log_p, counts = rr_sampler_law(eps)
    shipped = max_log_ratio(log_p, [(0, 1)])
    p = float(real(eps))
    slack = 2 * float(np.max(np.log1p(1 / np.minimum(counts, np.array([p, 1 - p]) * GRID))))
    assert abs(shipped - eps) > slack + 0.1, shipped


# -- the Mallows mechanism --------------------------------------------------------------------


def mallows_stage_laws(m: int, eps: float) -> list[np.ndarray]:
    """Grid counts (out of 2¹⁰⁶) of V^(t) (nondecreasing in the pair of uniforms) for
    t = 2..m, read off ``mallows_privatize`` of the identity with every stage drawing the
    same pair (u₁, u₂)."""
    identity = np.arange(m)
    laws = []
    for t in range(2, m + 1):

        def v_of(u, t=t):
            out = mallows_privatize(np.tile(identity, (len(u), 1)), eps, FixedUniforms(u))
            return identity_stages(out)[:, t - 2]

        c = grid_law(v_of, t, uniforms=2)
        check_grid_law(v_of, c, np.random.default_rng(t), size=20_000, uniforms=2)
        laws.append(c)
    return laws


def mallows_sampler_law(m: int, eps: float, perms: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """log P(σ̃ | σ) of the shipped sampler for every input and output: the stage laws on
    the grid, mapped through ``insertion_decode`` of every stage vector."""
    laws = mallows_stage_laws(m, eps)

    def decode(inputs, vs):
        return np.stack([insertion_decode(np.tile(order, (len(vs), 1)), vs) for order in inputs])

    return mallows_law(perms, laws, decode), laws


def test_mallows_privatize_is_insertion_decode_of_its_stages():
    """The stage laws are read off the identity; for every other input the sampler is
    insertion_decode of the same stages — checked on random inputs and uniforms."""
    rng = np.random.default_rng(5)
    m, n = 5, 20_000
    inputs = np.array([rng.permutation(m) for _ in range(n)])
    u = rng.random((n, m - 1, 2))
    eps = rng.choice(EPSILONS, n)
    v = identity_stages(mallows_privatize(np.tile(np.arange(m), (n, 1)), eps, FixedUniforms(u)))
    assert np.array_equal(mallows_privatize(inputs, eps, FixedUniforms(u)), insertion_decode(inputs, v))


@pytest.mark.parametrize("m", [2, 3, 4, 5])
@pytest.mark.parametrize("eps", EPSILONS)
def test_mallows_loses_exactly_epsilon_over_single_item_moves(m, eps):
    """Defining law (mallows_log_pmf): max log ratio over all (m − 1)²·m! neighbour pairs
    and m! outputs = ε to FLOAT_TOL. Shipped sampler: every stage's law within its rounding
    bound of the truncated geometric, and its loss = ε to FLOAT_TOL plus that bound."""
    perms = orderings(m)
    pairs = neighbour_pairs(perms)
    defining = np.array([mallows_log_pmf(perms, p, eps) for p in perms])
    assert max_log_ratio(defining, pairs) == pytest.approx(eps, rel=0, abs=FLOAT_TOL * max(1, eps))

    log_p, laws = mallows_sampler_law(m, eps, perms)
    b = eps / (m - 1)
    slack = 2 * sum(
        grid_resolution(law, rk.stage_pmf(t, b), mallows_stage_bounds(t, b), GRID**2)
        for t, law in enumerate(laws, start=2)
    )
    assert slack <= 1e-12  # exact to rounding at every ε, including the rarest outcome at ε = 30
    shipped = max_log_ratio(log_p, pairs)
    assert abs(shipped - eps) <= slack + FLOAT_TOL * max(1, eps), (shipped, slack)


@pytest.mark.parametrize("factor", [2.0, 0.5])
def test_the_exact_audit_rejects_a_dispersion_off_by_a_factor(monkeypatch, factor):
    """b = 2ε/(m − 1) (half the noise: 2ε-ranking DP) or ε/(2(m − 1)) (twice the noise)
    in the shipped sampler: its loss is 2ε or ε/2, far outside the grid's resolution."""
    real = rk_mallows.mallows_dispersion
    monkeypatch.setattr(rk_mallows, "mallows_dispersion", lambda m, e: factor * real(m, e))
    m, eps = 4, 1.0
    perms = orderings(m)
    log_p, _ = mallows_sampler_law(m, eps, perms)
    assert max_log_ratio(log_p, neighbour_pairs(perms)) == pytest.approx(factor * eps, abs=1e-9)
