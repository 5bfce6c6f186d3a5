"""Privacy audits: the exact ε of a mechanism by enumeration, and statistical bounds on ε
from a sampler's draws (the method and every audit's figures: docs/audits.md).

Exact audits (:func:`grid_law`, :func:`max_log_ratio`). A sampler that turns one
uniform u = k·2⁻⁵³ (k uniform on 0 … 2⁵³ − 1, what :func:`app.stats.mechanisms.system_uniform`
draws) into an output through a nondecreasing step function has an output law that is
a ratio of integers: :func:`grid_law` finds each step by bisection over k, calling the
sampler itself, so the law is the shipped code's, not a formula's. A sampler of two
uniforms a draw (the Mallows stages: u₁ + u₂·2⁻⁵³) is a step function of the index
k₁·2⁵³ + k₂ of a 2¹⁰⁶-point grid, bisected the same way. The privacy loss of
a mechanism with output law P(o | x) is max over neighbouring inputs x, x' and outputs o
of |log P(o | x) − log P(o | x')| [Dwork et al. 2006]; :func:`max_log_ratio` computes it.

Statistical audits (:func:`epsilon_bounds`, :func:`audit`) [Jagielski, Ullman & Oprea
2020; Nasr et al. 2021]. Fix neighbouring inputs D₁, D₀ and an event S; draw n₁ outputs
of M(D₁) and n₀ of M(D₀), of which k₁ and k₀ fall in S. An (ε, δ)-DP mechanism has
P₁ ≤ e^ε·P₀ + δ for P_b = P(M(D_b) ∈ S), so with one-sided Clopper–Pearson bounds
[Clopper & Pearson 1934] at level α/2 each,

  ε_lower = log((P₁⁻ − δ)/P₀⁺)  is below the mechanism's ε with probability ≥ 1 − α;
  ε_upper = log(P₁⁺/P₀⁻)        is above log(P₁/P₀) with probability ≥ 1 − α.

(Union bound over the two Clopper–Pearson bounds: it needs no independence between the
samples.) :func:`audit` asserts ε_lower ≤ ε (the mechanism is no less private than
claimed) and ε_upper ≥ log(P₁/P₀) of the claimed mechanism (it is not noisier than
claimed — its debiasing assumes the claimed noise); for an event S on which the
likelihood ratio is e^ε throughout (the Neyman–Pearson event), log(P₁/P₀) = ε, so a
correct mechanism passes both and a doubled flip rate or a halved noise scale fails one.

False alarms. Each bound is at :data:`ALPHA` = 10⁻⁸; the suite runs fewer than
:data:`MAX_AUDITS` audits of two bounds each, so a correct implementation fails any of
them with probability below 10⁻⁶ per run (seeded tests: over seeds; tests marked
``os_random``: per run).

References: C. J. Clopper, E. S. Pearson, *The use of confidence or fiducial limits
illustrated in the case of the binomial*, Biometrika 26(4), 1934. M. Jagielski,
J. Ullman, A. Oprea, *Auditing differentially private machine learning: how private
is private SGD?*, NeurIPS 2020. M. Nasr, S. Song, A. Thakurta, N. Papernot,
N. Carlini, *Adversary instantiation: lower bounds for differentially private machine
learning*, IEEE S&P 2021. C. Dwork, F. McSherry, K. Nissim, A. Smith, *Calibrating
noise to sensitivity in private data analysis*, TCC 2006.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as sps

__all__ = [
    "ALPHA",
    "GRID",
    "MAX_AUDITS",
    "AuditError",
    "EpsilonBounds",
    "FixedUniforms",
    "audit",
    "audit_events",
    "audit_thresholds",
    "check_grid_law",
    "check_grid_laws",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_bounds",
    "grid_law",
    "grid_laws",
    "grid_resolution",
    "identity_stages",
    "log_grid_probabilities",
    "mallows_law",
    "max_log_ratio",
    "neighbour_pairs",
    "orderings",
    "single_item_moves",
]

#: Level of each one-sided ε bound (ε_lower, ε_upper) of an audit.
ALPHA = 1e-8
#: Audits the suite may run within its false-alarm budget: 2·ALPHA·MAX_AUDITS = 10⁻⁶.
MAX_AUDITS = 50
#: Grid points of a 53-bit uniform: u = k / GRID, k = 0 … GRID − 1.
GRID = 2**53


# -- Clopper–Pearson and ε bounds -----------------------------------------------------------


def clopper_pearson_lower(k: int, n: int, alpha: float) -> float:
    """One-sided (1 − α) Clopper–Pearson lower bound on a binomial p from k successes in n:
    the α quantile of Beta(k, n − k + 1); 0 when k = 0."""
    _check_counts(k, n)
    return 0.0 if k == 0 else float(sps.beta.ppf(alpha, k, n - k + 1))


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided (1 − α) Clopper–Pearson upper bound: the 1 − α quantile of
    Beta(k + 1, n − k); 1 when k = n."""
    _check_counts(k, n)
    return 1.0 if k == n else float(sps.beta.isf(alpha, k + 1, n - k))


def _check_counts(k: int, n: int) -> None:
    if not (0 <= k <= n and n > 0):
        raise ValueError("need 0 <= k <= n and n > 0")


@dataclass(frozen=True)
class EpsilonBounds:
    """Two one-sided (1 − α) bounds on log(P₁/P₀) for an event S (module docstring):
    ``lower`` on the mechanism's ε (after δ), ``upper`` on the event's log ratio."""

    lower: float
    upper: float
    k1: int
    n1: int
    k0: int
    n0: int
    alpha: float
    delta: float = 0.0

    def __str__(self) -> str:
        return (
            f"ε ∈ [{self.lower:.4f}, {self.upper:.4f}] (k₁ = {self.k1:,} of {self.n1:,}, "
            f"k₀ = {self.k0:,} of {self.n0:,}; α = {self.alpha:g} per side, δ = {self.delta:g})"
        )


def epsilon_bounds(
    k1: int, n1: int, k0: int, n0: int, alpha: float = ALPHA, delta: float = 0.0
) -> EpsilonBounds:
    """ε_lower = log((P₁⁻ − δ)/P₀⁺) and ε_upper = log(P₁⁺/P₀⁻), each Clopper–Pearson bound
    at α/2 (module docstring). ε_lower is −∞ when P₁⁻ ≤ δ (no evidence), ε_upper +∞ when
    P₀⁻ = 0."""
    p1_lo = clopper_pearson_lower(k1, n1, alpha / 2)
    p1_hi = clopper_pearson_upper(k1, n1, alpha / 2)
    p0_lo = clopper_pearson_lower(k0, n0, alpha / 2)
    p0_hi = clopper_pearson_upper(k0, n0, alpha / 2)
    lower = math.log((p1_lo - delta) / p0_hi) if p1_lo > delta else -math.inf
    upper = math.log(p1_hi / p0_lo) if p0_lo > 0 else math.inf
    return EpsilonBounds(lower, upper, int(k1), int(n1), int(k0), int(n0), alpha, delta)


class AuditError(AssertionError):
    """An audit rejected the mechanism: more privacy loss than claimed, or more noise."""


def audit(
    k1: int,
    n1: int,
    k0: int,
    n0: int,
    epsilon: float,
    *,
    event_epsilon: float | None = None,
    alpha: float = ALPHA,
    delta: float = 0.0,
) -> EpsilonBounds:
    """Assert ε_lower ≤ ``epsilon`` and ε_upper ≥ ``event_epsilon`` (the claimed
    mechanism's exact log(P₁/P₀) for the event; default ``epsilon``, right for a
    Neyman–Pearson event of a mechanism that attains its ε). Returns the bounds;
    raises :class:`AuditError` naming the side that failed."""
    b = epsilon_bounds(k1, n1, k0, n0, alpha, delta)
    target = epsilon if event_epsilon is None else event_epsilon
    if b.lower > epsilon:
        raise AuditError(f"privacy loss exceeds the claimed ε = {epsilon:g}: {b}")
    if b.upper < target:
        raise AuditError(f"noisier than the claimed mechanism (log ratio {target:g} expected): {b}")
    return b


def audit_events(in_s_1: ArrayLike, in_s_0: ArrayLike, epsilon: float, **options) -> EpsilonBounds:
    """:func:`audit` from boolean arrays: draw k of M(D₁) (resp. M(D₀)) is in S."""
    s1, s0 = np.asarray(in_s_1, dtype=bool), np.asarray(in_s_0, dtype=bool)
    return audit(int(s1.sum()), s1.size, int(s0.sum()), s0.size, epsilon, **options)


def audit_thresholds(
    statistic_1: ArrayLike,
    statistic_0: ArrayLike,
    thresholds: ArrayLike,
    epsilon: float,
    *,
    event_epsilons: ArrayLike,
    alpha: float = ALPHA,
    delta: float = 0.0,
) -> list[EpsilonBounds]:
    """:func:`audit` of every event S_t = {statistic ≥ t}, t in ``thresholds``, at once.

    ``statistic_1`` (``statistic_0``): a one-dimensional statistic of each draw of M(D₁)
    (M(D₀)); ``event_epsilons[i]``: the claimed mechanism's exact log(P₁/P₀) for the event
    of ``thresholds[i]``. Each event's bounds are at α/T (T thresholds): by the union bound
    every Clopper–Pearson bound of the family holds at once with probability ≥ 1 − α, so
    the family is one audit of :data:`MAX_AUDITS`, and calls with other ``delta`` on the
    same draws and thresholds add no false alarms (their bounds on P₁ and P₀ are the same).
    Asserts max ε_lower ≤ ``epsilon`` and ε_upper ≥ the event's log ratio for every t.

    When the privacy loss is a nondecreasing function of the statistic (a Gaussian
    mechanism and the shift's direction), these are the Neyman–Pearson events at every
    level, and max over t of log((P₁(t) − δ)/P₀(t)) is the mechanism's exact ε at δ; a
    scan finds the events where a mechanism leaks more than claimed without knowing
    beforehand at which t (a mutant with half the noise leaks most at smaller t).
    """
    s1 = np.sort(np.asarray(statistic_1).ravel())
    s0 = np.sort(np.asarray(statistic_0).ravel())
    ts = np.asarray(thresholds)
    targets = np.broadcast_to(np.asarray(event_epsilons, dtype=np.float64), ts.shape)
    k1 = s1.size - np.searchsorted(s1, ts, side="left")
    k0 = s0.size - np.searchsorted(s0, ts, side="left")
    each = alpha / ts.size
    out = [epsilon_bounds(int(a), s1.size, int(b), s0.size, each, delta) for a, b in zip(k1, k0, strict=True)]
    worst = max(range(ts.size), key=lambda i: out[i].lower)
    if out[worst].lower > epsilon:
        raise AuditError(f"privacy loss exceeds the claimed ε = {epsilon:g} at t = {ts[worst]}: {out[worst]}")
    for t, b, target in zip(ts, out, targets, strict=True):
        if b.upper < target:
            raise AuditError(
                f"noisier than the claimed mechanism at t = {t} (log ratio {target:g} expected): {b}"
            )
    return out


# -- exact audits ---------------------------------------------------------------------------


class FixedUniforms:
    """A :class:`app.stats.mechanisms.RandomSource` returning given uniforms, one row of
    ``u`` per call row: axes missing from ``u`` are inserted after its first and the
    result broadcast to the shape asked for. A 1-d ``u`` gives every uniform of a row
    the same value; ``u`` of shape (n, 2) gives every stage of the Mallows sampler (shape
    (n, m − 1, 2)) the same pair. It lets a test evaluate the shipped sampler at chosen u."""

    def __init__(self, u: ArrayLike) -> None:
        self.u = np.asarray(u, dtype=np.float64)

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]:
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        u = self.u.reshape(self.u.shape[:1] + (1,) * (len(shape) - self.u.ndim) + self.u.shape[1:])
        return np.broadcast_to(u, shape).copy()


def grid_law(
    category_of: Callable[[NDArray[np.float64]], ArrayLike], n_categories: int, uniforms: int = 1
) -> NDArray:
    """Exact law of a sampler on the 53-bit uniform grid: how many of the 2⁵³ values
    u = k·2⁻⁵³ it maps to each category 0 … C − 1.

    ``category_of(u)`` evaluates the sampler at an array of uniforms and must be
    nondecreasing in u (an inverse-CDF sampler is; :func:`check_grid_law` checks it at
    random points). The first k of each category c ≥ 1 is found by bisection (53 steps,
    every category at once); the counts are the gaps between them. ``uniforms=2``: a
    sampler of two uniforms a draw, on the 2¹⁰⁶-point grid (:func:`grid_laws`).
    """
    (counts,) = grid_laws(lambda u: np.asarray(category_of(u))[:, None], [n_categories], uniforms)
    return counts


def grid_laws(
    categories_of: Callable[[NDArray[np.float64]], ArrayLike], n_categories: list[int], uniforms: int = 1
) -> list[NDArray]:
    """:func:`grid_law` of S samplers at once: ``categories_of(u)`` returns, for each
    uniform, the category of each sampler (shape (len(u), S)); sampler s has
    ``n_categories[s]`` categories. One call of ``categories_of`` per bisection step
    serves them all (for samplers that are costly to call, e.g. in a browser page).

    ``uniforms=2``: each draw takes two 53-bit uniforms (u₁, u₂) (``categories_of``
    gets shape (N, 2)) and the sampler must be nondecreasing in the index
    N = k₁·2⁵³ + k₂ of the 2¹⁰⁶-point grid (lexicographic order). The first N of each
    category is found in two bisections of 53 steps: over k₁ with k₂ at its largest (the
    boundary cell: the first k₁ whose last point reaches the category), then over k₂
    inside that cell. The counts are then Python integers out of :data:`GRID`².
    """
    if uniforms not in (1, 2):
        raise ValueError("uniforms must be 1 or 2")
    which = np.concatenate([np.full(n - 1, s, dtype=np.int64) for s, n in enumerate(n_categories)])
    c = np.concatenate([np.arange(1, n, dtype=np.int64) for n in n_categories])

    def first_at_least(point: Callable[[NDArray[np.int64]], NDArray[np.float64]]) -> NDArray[np.int64]:
        lo = np.full(c.size, -1, dtype=np.int64)  # below category c at lo (k = −1: below the grid)
        hi = np.full(c.size, GRID, dtype=np.int64)  # category ≥ c at hi (k = 2⁵³: above it)
        while np.any(hi - lo > 1):
            mid = (lo + hi) // 2
            got = np.asarray(categories_of(point(mid))).reshape(c.size, -1)
            at_least = got[np.arange(c.size), which] >= c
            hi, lo = np.where(at_least, mid, hi), np.where(at_least, lo, mid)
        return hi

    # k < 2⁵³, so k·2⁻⁵³ is exact in float64.
    if uniforms == 1:
        firsts = [int(k) for k in first_at_least(lambda k: k.astype(np.float64) * 2.0**-53)]
        total = GRID
    else:
        last = (GRID - 1) * 2.0**-53
        cell = first_at_least(lambda k: np.stack((k * 2.0**-53, np.full(k.size, last)), axis=1))
        inside = np.minimum(cell, GRID - 1)  # a category no point reaches starts at the grid's end
        k2 = first_at_least(lambda k: np.stack((inside * 2.0**-53, k * 2.0**-53), axis=1))
        firsts = [int(a) * GRID + int(b) if a < GRID else GRID * GRID for a, b in zip(cell, k2, strict=True)]
        total = GRID * GRID
    out = []
    for s in range(len(n_categories)):
        starts = [0] + [f for f, w in zip(firsts, which, strict=True) if w == s] + [total]
        counts = [b - a for a, b in itertools.pairwise(starts)]
        if any(x < 0 for x in counts):
            raise AssertionError("a sampler is not monotone in u: a category starts before the one below it")
        out.append(np.array(counts, dtype=np.int64 if uniforms == 1 else object))
    return out


def check_grid_law(
    category_of: Callable[[NDArray[np.float64]], ArrayLike],
    counts: NDArray,
    rng: np.random.Generator,
    size: int = 100_000,
    uniforms: int = 1,
) -> None:
    """Assert the sampler at ``size`` random grid points, and at both sides of every
    boundary, gives the category the table ``counts`` (from :func:`grid_law`) says."""
    check_grid_laws(lambda u: np.asarray(category_of(u))[:, None], [counts], rng, size, uniforms)


def check_grid_laws(
    categories_of: Callable[[NDArray[np.float64]], ArrayLike],
    laws: list[NDArray],
    rng: np.random.Generator,
    size: int = 100_000,
    uniforms: int = 1,
) -> None:
    """:func:`check_grid_law` for the S samplers of :func:`grid_laws` (with the same
    ``uniforms``), at the same points: random grid points and both sides of every
    category's first point."""
    firsts = [list(itertools.accumulate(counts[:-1], initial=0)) for counts in laws]
    total = GRID**uniforms
    edges = sorted({e for f in firsts for x in f[1:] for e in (x - 1, x) if 0 <= e < total})
    draws = rng.integers(0, GRID, (size, uniforms), dtype=np.int64).tolist()
    index = [sum(int(x) * GRID ** (uniforms - 1 - i) for i, x in enumerate(row)) for row in draws] + edges
    k = np.array([divmod(x, GRID) if uniforms == 2 else (x,) for x in index], dtype=np.int64)
    u = k.astype(np.float64) * 2.0**-53
    got = np.asarray(categories_of(u[:, 0] if uniforms == 1 else u)).reshape(len(index), -1)
    for s, first in enumerate(firsts):
        expected = [bisect.bisect_right(first, x) - 1 for x in index]
        bad = np.flatnonzero(got[:, s] != np.array(expected))
        if bad.size:
            raise AssertionError(f"sampler {s} disagrees with its grid law at index {index[bad[0]]}")


def log_grid_probabilities(counts: ArrayLike) -> NDArray[np.float64]:
    """log(count/total), the total being the law's grid (2⁵³, or 2¹⁰⁶ for two uniforms a
    draw); −∞ for a count of 0. The counts are exact integers: one rounding in the log."""
    ints = [int(c) for c in np.asarray(counts, dtype=object).ravel()]
    log_total = math.log(sum(ints))
    return np.array([math.log(c) - log_total if c else -math.inf for c in ints])


def max_log_ratio(log_p: ArrayLike, neighbours: ArrayLike) -> float:
    """max over neighbouring inputs (a, b) and outputs o of |log P(o | a) − log P(o | b)|.

    ``log_p[x, o]`` = log P(o | x) for every input x and output o (−∞ for an impossible
    output); ``neighbours`` is an array of index pairs. An output possible for one input
    and impossible for its neighbour gives ∞ (no finite ε); outputs impossible for both
    are skipped.
    """
    lp = np.asarray(log_p, dtype=np.float64)
    pairs = np.asarray(neighbours, dtype=np.int64).reshape(-1, 2)
    a, b = lp[pairs[:, 0]], lp[pairs[:, 1]]
    both_impossible = np.isneginf(a) & np.isneginf(b)
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.where(both_impossible, 0.0, a - b))
    return float(np.max(diff))


def grid_resolution(counts: ArrayLike, exact: ArrayLike, d: ArrayLike, total: int = GRID) -> float:
    """max over outputs of |log(count/total) − log P|, given (and asserted) |count − total·P| ≤ d
    (grid points; one bound, or one per output): log(1 + d/min(count, total·P)) bounds it, as
    |log x − log y| = log(1 + |x − y|/min(x, y))."""
    c = np.array([float(x) for x in np.asarray(counts, dtype=object).ravel()])
    scaled = np.asarray(exact, dtype=np.float64) * float(total)
    dd = np.broadcast_to(np.asarray(d, dtype=np.float64), c.shape)
    off = np.abs(c - scaled)
    assert np.all(off <= dd), f"a count is {float(np.max(off / dd)):g} times its bound off"
    return float(np.max(np.log1p(dd / np.minimum(c, scaled))))


# -- rankings: single-item moves and the Mallows sampler's stages ------------------------------


def orderings(m: int) -> NDArray[np.int64]:
    """All m! orderings of 0..m−1, in lexicographic order."""
    return np.array(list(itertools.permutations(range(m))), dtype=np.int64).reshape(-1, m)


def single_item_moves(order: tuple[int, ...]) -> set[tuple[int, ...]]:
    """The orderings one item's move away (docs/mechanisms.md §3.1): (m − 1)² of them."""
    out = set()
    for i, j in itertools.product(range(len(order)), repeat=2):
        if i != j:
            rest = list(order[:i] + order[i + 1 :])
            rest.insert(j, order[i])
            out.add(tuple(rest))
    return out


def neighbour_pairs(perms: NDArray[np.int64]) -> NDArray[np.int64]:
    """Index pairs (x, x′) of ``perms`` one single-item move apart (both orders)."""
    index = {tuple(p): k for k, p in enumerate(perms)}
    m = perms.shape[1]
    pairs = []
    for k, p in enumerate(perms):
        nb = single_item_moves(tuple(p))
        assert len(nb) == (m - 1) ** 2
        pairs.extend((k, index[q]) for q in nb)
    return np.array(pairs, dtype=np.int64)


def identity_stages(out: ArrayLike) -> NDArray[np.int64]:
    """V⁽ᵗ⁾, t = 2..m, of outputs of the Mallows sampler for the identity input: how many of
    the items 0..t−2 item t − 1 was placed after (docs/mechanisms.md §3.2)."""
    arr = np.asarray(out, dtype=np.int64)
    pos = np.argsort(arr, axis=1)
    m = arr.shape[1]
    return np.stack([np.sum(pos[:, : t - 1] < pos[:, t - 1 : t], axis=1) for t in range(2, m + 1)], axis=1)


def mallows_law(
    perms: NDArray[np.int64],
    stage_counts: list[NDArray[np.int64]],
    decode: Callable[[NDArray[np.int64], NDArray[np.int64]], ArrayLike],
) -> NDArray[np.float64]:
    """log P(σ̃ | σ) of a repeated-insertion sampler for every input and output (rows and
    columns in the order of ``perms``).

    ``stage_counts[t − 2][v]``: grid counts of V⁽ᵗ⁾ = v; ``decode(perms, vs)``: the
    sampler's outputs, shape (inputs, stage vectors, m), for every input and every stage
    vector (Π t = m! of them). The map from stage vectors to outputs must be a
    bijection for each input (asserted).
    """
    m = perms.shape[1]
    vs = np.array(list(itertools.product(*[range(t) for t in range(2, m + 1)])), dtype=np.int64)
    vs = vs.reshape(-1, m - 1)
    log_v = np.zeros(len(vs))
    for k, counts in enumerate(stage_counts):
        log_v += log_grid_probabilities(counts)[vs[:, k]]
    outputs = np.asarray(decode(perms, vs), dtype=np.int64)
    index = {tuple(p): k for k, p in enumerate(perms)}
    log_p = np.full((len(perms), len(perms)), -np.inf)
    for x in range(len(perms)):
        cols = [index[tuple(o)] for o in outputs[x]]
        assert sorted(cols) == list(range(len(perms))), "the sampler misses an output"
        log_p[x, cols] = log_v
    return log_p
