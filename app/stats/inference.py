"""Uncertainty of the debiased MLE: standard errors, confidence intervals, rank
intervals, top-K probabilities — under privacy noise.

The paper gives rates, not intervals (note §7.4). What is implemented here:

**Sandwich covariance** (note §7.4, validated there by simulation). The estimating
equation of J is U(θ) = Σ_{i<j} (n_ij σ(θ_i − θ_j) − S_ij)(e_i − e_j) + 2λθ. Its
Jacobian H = L_W + 2λI (L_W: the Laplacian with weights W_ij = n_ij σ'(θ_i − θ_j))
does not depend on the data, and Var U(θ*) = L_V with V_ij = Var S_ij = Σ_k Var z_k
= n_ij σ'(θ*_i − θ*_j) + Σ_k e^{ε_k}/(e^{ε_k}−1)² by Lemma 2's closed form. So

    Cov θ̂ ≈ H⁻¹ L_V H⁻¹,

which differs from the naive inverse Fisher information H⁻¹ L_W H⁻¹ exactly by the
privacy term Σ_k e^{ε_k}/(e^{ε_k}−1)² — at ε = 1 that term is 0.92 per comparison
against σ'(d) ≤ 0.25, so naive intervals are roughly 2–4× too narrow.

**Bias-corrected centre for intervals.** θ̂ is biased in two ways that do not
vanish relative to its standard error at the sample sizes of real surveys:

1. the ridge pulls θ̂ towards 0 by ≈ 2λ L_W⁺ θ̂ (O(λ/n) against se O(1/√n)); one
   Newton step of the unpenalized objective from θ̂ removes it:
   θ̃ = θ̂ + L_W(θ̂)⁺ 2λθ̂;
2. the M-estimator's own second-order bias (Cox & Snell 1968): because the
   Jacobian is data-free, b = −½ L_W⁺ Σ_{i<j} n_ij σ''(θ_i − θ_j) Var(θ̂_i − θ̂_j)
   (e_i − e_j), pushing scores away from 0; it grows with the privacy noise.

Intervals are θ̌ ± z·se with θ̌ = θ̃ − b̂ and se from C̃ = L_W⁺ L_V L_W⁺ evaluated at
θ̃. In the coverage study (tests and ``tests/benchmarks/bench_coverage.py``) they
cover at 95–96% for m = 10, L ∈ {200, 800}, ε ∈ {0.5, 1, 2}, complete and
incomplete designs, homogeneous and heterogeneous ε; intervals centred at θ̂
cover 89% at L = 200, ε = 0.5, and naive ones 27%.

**Parametric bootstrap** (:func:`bootstrap_confidence`) for small samples:
re-simulate privatized answers from θ̂ with the observed design and ε's, refit,
and use the spread and bias of the replicates.

**Ranks.** :func:`rank_confidence` gives per-item *marginal* rank intervals and
top-K probabilities by drawing θ ~ N(θ̌, C̃), and *simultaneous* rank intervals
from all pairwise differences with a max-|t| critical value, which also yield
the groups of statistically tied items and the certain members of the top-K.

Scores in different components of the comparison graph are not comparable: their
differences have infinite variance here (never "significant"), and items that
were never compared get no interval (NaN).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, ndtri

from .btl import BTLFit, fit_btl
from .mechanisms import RandomSource, privatize, system_uniform, validate_epsilon
from .pairs import pair_stats, validate_comparisons

__all__ = [
    "MAX_ITEMS_COVARIANCE",
    "Confidence",
    "RankConfidence",
    "bootstrap_confidence",
    "confidence",
    "laplacian",
    "laplacian_pinv",
    "rank_confidence",
]

#: Dense m×m covariance is computed up to this many items (O(m³) time, O(m²) memory).
MAX_ITEMS_COVARIANCE = 2000


def laplacian(n_items: int, i: NDArray, j: NDArray, w: NDArray) -> NDArray[np.float64]:
    """Dense graph Laplacian Σ w_ij (e_i − e_j)(e_i − e_j)ᵀ over distinct pairs."""
    lap = np.zeros((n_items, n_items))
    lap[i, j] = -w
    lap[j, i] = -w
    lap[np.diag_indices(n_items)] = np.bincount(i, w, n_items) + np.bincount(j, w, n_items)
    return lap


def laplacian_pinv(lap: NDArray[np.float64], component: NDArray[np.int64]) -> NDArray[np.float64]:
    """Moore–Penrose inverse of a (possibly disconnected) Laplacian.

    With P = Σ_c 1_c1_cᵀ/|c| the projector on its null space and ρ > 0,
    (L + ρP)⁻¹ = L⁺ + P/ρ, so L⁺ = (L + ρP)⁻¹ − P/ρ by one Cholesky factorization.
    """
    m = lap.shape[0]
    sizes = np.bincount(component, minlength=int(component.max(initial=-1)) + 1).astype(float)
    proj = (component[:, None] == component[None, :]) / sizes[component][:, None]
    rho = max(float(np.mean(np.diag(lap))), 1.0)
    factor = scipy.linalg.cho_factor(lap + rho * proj, lower=True, check_finite=False)
    return scipy.linalg.cho_solve(factor, np.eye(m), check_finite=False) - proj / rho


def _weights(theta: NDArray, stats_like: tuple[NDArray, NDArray, NDArray, NDArray]):
    i, j, n, v = stats_like
    s = expit(theta[i] - theta[j])
    sp = s * (1.0 - s)
    w = n * sp
    return s, sp, w, w + v


@dataclass(frozen=True)
class Confidence:
    """Per-item estimates with standard errors and confidence intervals.

    Attributes
    ----------
    estimate : (m,) the interval centre θ̌ (bias-corrected; see the module doc)
    cov : (m, m) covariance of ``estimate`` on each component's sum-to-zero subspace
    se : (m,) standard errors (NaN for items never compared)
    level : confidence level of ``lower``/``upper``
    lower, upper : (m,) interval end points
    component : (m,) connected component of each item
    method : "sandwich" or "bootstrap"
    theta : (m,) the point estimate θ̂ the intervals belong to
    """

    estimate: NDArray[np.float64]
    cov: NDArray[np.float64]
    se: NDArray[np.float64]
    level: float
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    component: NDArray[np.int64]
    method: str
    theta: NDArray[np.float64]
    identified: NDArray[np.bool_] = field(repr=False)

    @property
    def z(self) -> float:
        return float(ndtri(0.5 + self.level / 2.0))

    def difference_se(self) -> NDArray[np.float64]:
        """se of θ_a − θ_b for every pair (∞ across components, NaN if unidentified)."""
        c = self.cov
        d = np.diag(c)
        var = d[:, None] + d[None, :] - 2.0 * c
        se = np.sqrt(np.maximum(var, 0.0))
        se[self.component[:, None] != self.component[None, :]] = np.inf
        se[~self.identified, :] = np.nan
        se[:, ~self.identified] = np.nan
        np.fill_diagonal(se, 0.0)
        return se

    def win_probability(self) -> tuple[NDArray, NDArray, NDArray]:
        """P(a beats b) = σ(θ_a − θ_b) with its interval, as (p, lower, upper) m×m arrays.

        The interval for the difference maps through the increasing σ. Pairs in
        different components get p = NaN and the vacuous interval [0, 1].
        """
        diff = self.estimate[:, None] - self.estimate[None, :]
        se = self.difference_se()
        half = self.z * se
        with np.errstate(invalid="ignore"):
            p = expit(diff)
            lo = expit(diff - half)
            hi = expit(diff + half)
        cross = ~np.isfinite(se)
        p[cross] = np.nan
        lo[cross] = 0.0
        hi[cross] = 1.0
        np.fill_diagonal(p, np.nan)
        np.fill_diagonal(lo, np.nan)
        np.fill_diagonal(hi, np.nan)
        return p, lo, hi


def _finish(estimate, cov, level, component, method, theta) -> Confidence:
    sizes = np.bincount(component)
    identified = sizes[component] > 1
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    se[~identified] = np.nan
    z = float(ndtri(0.5 + level / 2.0))
    return Confidence(
        estimate, cov, se, level, estimate - z * se, estimate + z * se, component, method, theta, identified
    )


def _check_level(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    return level


def _unshrink(theta: NDArray, lam: float, data, component: NDArray) -> tuple[NDArray, NDArray]:
    """One Newton step of the unpenalized objective from θ̂: θ̃ = θ̂ + L_W(θ̂)⁺ 2λθ̂.

    Removes the ridge's pull towards 0 to first order. Returns θ̃ and L_W(θ̂)⁺.
    """
    m = theta.size
    _, _, w, _ = _weights(theta, (data.i, data.j, data.n, data.v))
    lw_pinv = laplacian_pinv(laplacian(m, data.i, data.j, w), component)
    return theta + lw_pinv @ (2.0 * lam * theta), lw_pinv


def confidence(fit: BTLFit, level: float = 0.95, variance: str = "model") -> Confidence:
    """Sandwich confidence intervals for θ* from a fit (see the module doc).

    ``variance="model"`` uses Lemma 2's Var z = σ'(d) + e^ε/(e^ε−1)² (needs the
    fit's privacy-variance sums, which every fit from comparisons or
    :class:`PairStats` carries); ``"empirical"`` uses the observed spread of z
    within each pair, Σ(z − z̄)²·n/(n−1), robust to a misspecified model.
    """
    level = _check_level(level)
    m = fit.theta.size
    if m > MAX_ITEMS_COVARIANCE:
        raise ValueError(f"covariances are computed for at most {MAX_ITEMS_COVARIANCE} items")
    if variance not in ("model", "empirical"):
        raise ValueError("variance must be 'model' or 'empirical'")
    data = fit.data
    i, j, n = data.i, data.j, data.n
    if variance == "empirical":
        if data.s2 is None:
            raise ValueError("the empirical variance needs Σz² per pair (fit from PairStats)")
        zbar = data.s / n
        spread = np.maximum(data.s2 - n * zbar**2, 0.0) * n / np.maximum(n - 1.0, 1.0)
    comp = fit.component
    # 1. Undo the ridge: one Newton step of the unpenalized objective from θ̂.
    centre, _ = _unshrink(fit.theta, fit.lam, data, comp)
    # 2. Sandwich at the corrected point.
    s, sp, w, v_model = _weights(centre, (i, j, n, data.v))
    v = spread if variance == "empirical" else v_model
    lw_pinv = laplacian_pinv(laplacian(m, i, j, w), comp)
    cov = lw_pinv @ laplacian(m, i, j, v) @ lw_pinv
    cov = 0.5 * (cov + cov.T)
    # 3. Second-order (Cox–Snell) bias of the M-estimator.
    var_d = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
    g = n * sp * (1.0 - 2.0 * s) * var_d  # n σ''(d) Var(d̂)
    bias = -0.5 * lw_pinv @ (np.bincount(i, g, m) - np.bincount(j, g, m))
    return _finish(centre - bias, cov, level, comp, "sandwich", fit.theta)


def bootstrap_confidence(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    epsilon: ArrayLike,
    fit: BTLFit,
    level: float = 0.95,
    n_boot: int = 200,
    rng: RandomSource | None = None,
) -> Confidence:
    """Parametric bootstrap for small samples.

    The estimator bootstrapped is the one the sandwich intervals use before their
    analytic second-order correction: the fit followed by the ridge-removal step,
    θ̃ = θ̂ + L_W⁺2λθ̂. Answers are re-simulated from θ̃ through randomized response
    with the observed design (i, j) and each comparison's ε, refitted with the
    same λ, and unshrunk the same way. The spread of the replicates gives the
    covariance, and their mean offset from θ̃ estimates the bias, which is removed:
    centre = θ̃ − (mean θ̃* − θ̃). This replaces the normal approximation's
    analytic bias and variance where n_ij is small. ``rng`` as in
    :func:`~app.stats.mechanisms.privatize` (None: OS CSPRNG).
    """
    level = _check_level(level)
    if n_boot < 20:
        raise ValueError("n_boot must be at least 20")
    if fit.estimator != "debiased":
        raise ValueError("the bootstrap re-simulates randomized response: it needs a debiased-MLE fit")
    if fit.theta.size > MAX_ITEMS_COVARIANCE:
        raise ValueError(f"covariances are computed for at most {MAX_ITEMS_COVARIANCE} items")
    ia, ja = validate_comparisons(n_items, i, j)
    eps = np.broadcast_to(validate_epsilon(epsilon), ia.shape)
    comp = fit.component
    base, _ = _unshrink(fit.theta, fit.lam, fit.data, comp)
    truth_p = expit(base[ia] - base[ja])
    reps = np.empty((n_boot, base.size))
    for b in range(n_boot):
        u = rng.random(ia.size) if rng is not None else system_uniform(ia.size)
        y = (u < truth_p).astype(np.int8)
        stats = pair_stats(n_items, ia, ja, privatize(y, eps, rng=rng), eps)
        refit = fit_btl(
            n_items, stats.i, stats.j, stats.n, stats.sum_z, fit.lam, v=stats.sum_v, theta0=fit.theta
        )
        reps[b] = _unshrink(refit.theta, fit.lam, refit.data, refit.component)[0]
    cov = np.atleast_2d(np.cov(reps, rowvar=False))
    return _finish(2.0 * base - reps.mean(axis=0), cov, level, comp, "bootstrap", fit.theta)


@dataclass(frozen=True)
class RankConfidence:
    """Rank intervals (1 = best) and top-K probabilities.

    Attributes
    ----------
    rank_ci : (m, 2) int, marginal intervals: each item's rank lies in [lo, hi]
        with probability ``level`` (quantiles of ranks under θ ~ N(θ̌, C)).
    rank_ci_simultaneous : (m, 2) int, simultaneous intervals: all ranks lie in
        their intervals jointly with probability ≥ ``level`` (max-|t| over all
        pairwise differences; Bonferroni when that would be too costly).
    kind : "marginal" — the kind of ``rank_ci``.
    p_top_k : (m,) probability of being in the top-K (sums to K), given ``k``.
    top_k_certain : (m,) bool, items in the top-K at the confidence level
        (simultaneous: their intervals end at or above K).
    tied_groups : list of index arrays, best first: the maximal runs of items,
        consecutive in estimated order, no two of which differ significantly
        (simultaneously at ``level``). Groups may overlap, like the letters of a
        compact letter display: in A > B > C with only A vs C significant, the
        groups are {A, B} and {B, C}.
    tiers : list of index arrays, best first: a partition, split only where every
        item above is significantly better than every item below.
    critical_value : the simultaneous critical value for pairwise differences.
    """

    rank_ci: NDArray[np.int64]
    rank_ci_simultaneous: NDArray[np.int64]
    kind: str
    level: float
    p_top_k: NDArray[np.float64] | None
    top_k_certain: NDArray[np.bool_] | None
    tied_groups: list[NDArray[np.int64]]
    tiers: list[NDArray[np.int64]]
    critical_value: float


def rank_confidence(
    theta: ArrayLike,
    cov: ArrayLike,
    level: float = 0.95,
    k: int | None = None,
    n_draws: int = 4000,
    rng: np.random.Generator | None = None,
    component: ArrayLike | None = None,
) -> RankConfidence:
    """Rank intervals and top-K probabilities from an estimate and its covariance.

    ``theta``, ``cov``: e.g. ``Confidence.estimate`` and ``Confidence.cov``.
    ``component`` (default: all connected) marks incomparable groups of items.
    ``rng`` seeds the normal draws (they describe uncertainty; they do not
    protect anyone, so a seedable generator is fine; default: OS-seeded).
    """
    level = _check_level(level)
    est = np.asarray(theta, dtype=np.float64)
    c = np.asarray(cov, dtype=np.float64)
    m = est.size
    if c.shape != (m, m):
        raise ValueError("cov must be m×m")
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= m):
        raise ValueError(f"k must be an integer between 1 and {m}")
    comp = np.zeros(m, dtype=np.int64) if component is None else np.asarray(component, dtype=np.int64)
    gen = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    diag = np.diag(c)
    var = diag[:, None] + diag[None, :] - 2.0 * c
    se_pair = np.sqrt(np.maximum(var, 1e-300))
    cross = comp[:, None] != comp[None, :]
    se_pair[cross] = np.inf
    iu = np.triu_indices(m, 1)
    same = ~cross[iu]
    # Simultaneous critical value: the level-quantile of max |Z_a − Z_b|/se_ab.
    n_pairs = int(same.sum())
    alpha = 1.0 - level
    if n_pairs == 0:
        crit = 0.0
    elif n_pairs * n_draws <= 20_000_000:
        zdraw = _mvn(gen, c, n_draws)
        stats = np.abs(zdraw[:, iu[0][same]] - zdraw[:, iu[1][same]]) / se_pair[iu][same]
        crit = float(np.quantile(stats.max(axis=1), level))
    else:
        crit = float(ndtri(1.0 - alpha / (2.0 * n_pairs)))  # Bonferroni
    diff = est[:, None] - est[None, :]
    above = diff > crit * se_pair  # a significantly above b
    sim_lo = 1 + above.sum(axis=0)  # items significantly above a
    sim_hi = m - above.sum(axis=1)  # m − items significantly below a
    simultaneous = np.column_stack((sim_lo, sim_hi)).astype(np.int64)
    p_top = None
    connected = comp.max(initial=0) == 0
    if connected:
        draws = est + _mvn(gen, c, n_draws)
        ranks = np.empty_like(draws, dtype=np.int64)
        order = np.argsort(-draws, axis=1)
        np.put_along_axis(ranks, order, np.arange(1, m + 1)[None, :].repeat(n_draws, 0), axis=1)
        lo = np.quantile(ranks, alpha / 2.0, axis=0, method="lower")
        hi = np.quantile(ranks, 1.0 - alpha / 2.0, axis=0, method="higher")
        marginal = np.column_stack((lo, hi)).astype(np.int64)
        if k is not None:
            p_top = (ranks <= k).mean(axis=0)
    else:
        marginal = simultaneous.copy()  # ranks across components are not identified
    certain = None if k is None else simultaneous[:, 1] <= k
    order = np.argsort(-est, kind="stable")
    tiers: list[NDArray[np.int64]] = []
    start = 0
    for r in range(1, m + 1):
        # Boundary after position r: every item above is significantly above every item below.
        if r == m or np.all(simultaneous[order[:r], 1] <= r):
            tiers.append(order[start:r])
            start = r
    # Maximal runs of mutually indistinguishable items in estimated order.
    sig = above[np.ix_(order, order)]
    reach = np.empty(m, dtype=np.int64)  # last position e such that order[s..e] has no significant pair
    e = 0
    for s_ in range(m):
        e = max(e, s_)
        while e + 1 < m and not sig[s_ : e + 1, e + 1].any():
            e += 1
        reach[s_] = e
    tied = [order[s_ : reach[s_] + 1] for s_ in range(m) if s_ == 0 or reach[s_] > reach[s_ - 1]]
    return RankConfidence(marginal, simultaneous, "marginal", level, p_top, certain, tied, tiers, crit)


def _mvn(gen: np.random.Generator, cov: NDArray, n: int) -> NDArray:
    """n draws from N(0, cov) for a PSD (possibly singular) covariance."""
    vals, vecs = np.linalg.eigh(0.5 * (cov + cov.T))
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    return gen.standard_normal((n, cov.shape[0])) @ root.T
