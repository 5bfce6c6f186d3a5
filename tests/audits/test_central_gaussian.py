"""Black-box audit of the zCDP releases' discrete Gaussian noise, drawn by OpenDP from its
own CSPRNG as the release path calls it (docs/audits.md §4; the mechanism:
docs/mechanisms.md §2.6). OpenDP cannot be seeded: these tests are ``os_random``.

The claim. ``gaussian_noisy_counts`` adds N_ℤ(0, σ²) to each win count with
σ = Δ₂/√(2ρ), Δ₂ = √2·L (L = 1 for edge), so the release is ρ-zCDP [Bun & Steinke 2016,
Prop. 1.6; Canonne, Kamath & Steinke 2020, Theorem 4] and hence (ε(δ), δ)-DP for every
δ > 0 with ε(δ) = ``zcdp_epsilon(ρ, δ)`` [Canonne, Kamath & Steinke 2020, Corollary 13].
A Gaussian mechanism is not pure ε-DP: the audit checks ε(δ) at δ = 10⁻² and 10⁻³, where
the events that bind have probabilities of 10⁻³ to 10⁻¹, measurable in 10⁶ draws.

Neighbours and the statistic. One comparison (edge) or one person's L comparisons
(individual) change winner: N = (c, c) and N' = (c − L, c + L), the shift of largest ℓ₂
norm. With independent noise Z_a, Z_b ~ N_ℤ(0, σ²), the privacy loss of an output x is

    log P(x | N)/P(x | N') = ((x_a − c + L)² − (x_a − c)² + (x_b − c − L)² − (x_b − c)²)/(2σ²)
                           = L·(D + L)/σ²,  D = x_a − x_b,

a function of the difference D alone, increasing in it. So D is sufficient for the pair,
the events {D ≥ t} are the Neyman–Pearson events at every level, and the exact privacy
profile of the pair is the one of D (the other direction, N' against N, is the same
with D ↦ −D). Under N, D = Z_a − Z_b; under N', D − 2L has that law. Completing the square,
k² + (k − d)² = 2(k − d/2)² + d²/2, gives the law of D exactly:

    P(D = d) = e^{−d²/(4σ²)}·θ_{d mod 2}/Z²,   Z = Σ_k e^{−k²/(2σ²)},
    θ₀ = Σ_k e^{−k²/σ²},  θ₁ = Σ_k e^{−(k + ½)²/σ²},

a discrete Gaussian of variance parameter 2σ² weighted by the parity of d (for the
continuous Gaussian D ~ N(0, 2σ²) and the parity factor is 1). The profile
δ(ε) = sup_S P(S | N) − e^ε·P(S | N') is attained by a threshold event, so the exact ε at
δ is ε*(δ) = max_t log((P(D ≥ t) − δ)/P(D ≥ t + 2L)), from the tail sums of this law.
The continuous Gaussian's profile is Balle & Wang's analytic Gaussian [2018, Theorem 8]:
δ(ε) = Φ(Δ₂/(2σ) − εσ/Δ₂) − e^ε·Φ(−Δ₂/(2σ) − εσ/Δ₂).

The audit (``audit_thresholds``): 250,000 copies of the pair released as one vector
through ``gaussian_noisy_counts`` for N and for N' (10⁶ noise draws per unit), and every
event {D ≥ t}, t = 0 … ⌈6·√2·σ⌉ (six standard deviations of D), with its two bounds at
α/T (α = 10⁻⁸: a correct release fails with probability below 2·10⁻⁸ per run, both δ
together). It asserts max_t ε_lower ≤ ε(δ), the claim, and also ≤ ε*(δ), the exact
profile of the claimed σ (tighter; the same Clopper–Pearson bounds guarantee it for an
exact sampler), and ε_upper ≥ the claimed σ's log P(D ≥ t)/P(D ≥ t + 2L) at every t
(not noisier than claimed: the helper's upper side does not involve δ, so it works for
δ > 0 unchanged).

References: M. Bun, T. Steinke, *Concentrated differential privacy: simplifications,
extensions, and lower bounds*, TCC 2016. C. L. Canonne, G. Kamath, T. Steinke, *The
discrete Gaussian for differential privacy*, NeurIPS 2020. B. Balle, Y.-X. Wang,
*Improving the Gaussian mechanism for differential privacy: analytical calibration and
optimal denoising*, ICML 2018.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from app.releases import service as releases
from app.stats import central
from app.stats.accounting import zcdp_epsilon
from tests.helpers.audit import AuditError, EpsilonBounds, audit_thresholds

pytestmark = pytest.mark.os_random

COUNT = 1_000  # c: any count ≥ L
RHO = 0.5  # σ = √2 (edge), 3√2 (individual, L = 3)
DELTAS = (1e-2, 1e-3)
UNITS = (("edge", None), ("individual", 3))


def claimed_sigma(rho: float, unit: str, L: int | None) -> float:
    """σ of the claim ρ = Δ₂²/(2σ²), Δ₂ = √2·L: L/√ρ (not the shipped function, which the
    mutants patch)."""
    shift = 1 if unit == "edge" else int(L or 1)
    return shift / math.sqrt(rho)


# -- the exact law of D and the privacy profile ------------------------------------------------


def discrete_gaussian_pmf(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """k and P(Z = k) ∝ e^{−k²/(2σ²)} for |k| ≤ 40σ + 2 (beyond it each term is below
    e^{−800}: zero in float64)."""
    K = math.ceil(40 * sigma) + 2
    k = np.arange(-K, K + 1)
    w = np.exp(-(k * k) / (2 * sigma * sigma))
    return k, w / math.fsum(w)


def difference_law(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """d and P(Z_a − Z_b = d) for independent Z ~ N_ℤ(0, σ²), by convolution."""
    k, p = discrete_gaussian_pmf(sigma)
    return np.arange(2 * k[0], 2 * k[-1] + 1), np.convolve(p, p[::-1])


def difference_law_closed_form(sigma: float, d: np.ndarray) -> np.ndarray:
    """e^{−d²/(4σ²)}·θ_{d mod 2}/Z² (module docstring)."""
    k = np.arange(-math.ceil(40 * sigma) - 2, math.ceil(40 * sigma) + 3)
    z = math.fsum(np.exp(-(k * k) / (2 * sigma * sigma)))
    theta = [math.fsum(np.exp(-((k + h) ** 2) / sigma**2)) for h in (0.0, 0.5)]
    return np.exp(-(d * d) / (4 * sigma * sigma)) * np.where(d % 2 == 0, theta[0], theta[1]) / z**2


def tail(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """d and P(D ≥ d), summed from the far tail up (each sum adds increasing terms)."""
    d, pmf = difference_law(sigma)
    return d, np.cumsum(pmf[::-1])[::-1]


def event_log_ratios(sigma: float, shift: int, ts: np.ndarray) -> np.ndarray:
    """log P(D ≥ t)/P(D ≥ t + shift) under the claimed σ (shift = 2L)."""
    d, sf = tail(sigma)
    i = np.searchsorted(d, ts)
    return np.log(sf[i]) - np.log(sf[i + shift])


def exact_epsilon(sigma: float, shift: int, delta: float) -> tuple[float, int]:
    """ε*(δ) = max_t log((P(D ≥ t) − δ)/P(D ≥ t + shift)) and the t attaining it."""
    d, sf = tail(sigma)
    p1, p0 = sf[:-shift], sf[shift:]
    ok = (p1 > delta) & (p0 > 0)
    eps = np.full(p1.size, -np.inf)
    eps[ok] = np.log(p1[ok] - delta) - np.log(p0[ok])
    i = int(np.argmax(eps))
    return float(eps[i]), int(d[i])


def analytic_gaussian_epsilon(sensitivity: float, sigma: float, delta: float) -> float:
    """The continuous Gaussian's exact ε at δ [Balle & Wang 2018, Theorem 8]."""
    a, b = sensitivity / (2 * sigma), sigma / sensitivity

    def excess(e: float) -> float:
        return float(norm.cdf(a - e * b) - math.exp(e) * norm.cdf(-a - e * b) - delta)

    return float(brentq(excess, 0.0, 200.0, xtol=1e-12))


def thresholds(sigma: float) -> np.ndarray:
    """t = 0 … ⌈6·√2·σ⌉: six standard deviations of D."""
    return np.arange(0, math.ceil(6 * math.sqrt(2) * sigma) + 1)


def test_the_difference_of_two_discrete_gaussians_has_the_closed_form_law():
    """Convolution and closed form agree to 10⁻¹² relative (float64 sums of ~10² terms);
    the law sums to 1 and its log ratio at shift 2L is L(d + L)/σ², the privacy loss."""
    for unit, L in UNITS:
        sigma = claimed_sigma(RHO, unit, L)
        shift = 2 * (L or 1)
        d, pmf = difference_law(sigma)
        keep = pmf > 1e-250
        closed = difference_law_closed_form(sigma, d)
        assert np.max(np.abs(pmf[keep] / closed[keep] - 1)) < 1e-12
        assert abs(math.fsum(pmf) - 1) < 1e-14
        inner = np.flatnonzero(pmf > 1e-200)[:-shift]
        loss = np.log(pmf[inner]) - np.log(pmf[inner + shift])
        assert np.allclose(loss, (L or 1) * (d[inner] + (L or 1)) / sigma**2, rtol=0, atol=1e-9)


@pytest.mark.parametrize("delta", [1e-2, 1e-3, 1e-6, 1e-10])
def test_the_exact_profile_is_within_the_claimed_conversion(delta):
    """ε*(δ) of the discrete Gaussian, and the continuous analytic Gaussian's ε at the same
    σ, are below zcdp_epsilon(ρ, δ): what the zCDP claim implies [CKS20 Theorem 4 and
    Corollary 13]. A conversion that were too small (the claim's ε below the exact one)
    would be caught here."""
    for unit, L in UNITS:
        sigma = claimed_sigma(RHO, unit, L)
        claim = zcdp_epsilon(RHO, delta)
        exact, _ = exact_epsilon(sigma, 2 * (L or 1), delta)
        continuous = analytic_gaussian_epsilon(math.sqrt(2) * (L or 1), sigma, delta)
        assert 0 < exact < claim
        assert 0 < continuous < claim
        # the same bound at a four times larger ρ (half the σ) is exceeded: the check has teeth
        assert exact_epsilon(sigma / 2, 2 * (L or 1), delta)[0] > claim


# -- the audit ---------------------------------------------------------------------------------


def difference_draws(rho: float, unit: str, L: int | None, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """D of ``pairs`` releases of N = (c, c) and of N' = (c − L, c + L), both released as
    one vector of ``pairs`` copies through ``gaussian_noisy_counts`` (4·pairs draws)."""
    shift = 1 if unit == "edge" else int(L or 1)
    out = []
    for a, b in ((COUNT, COUNT), (COUNT - shift, COUNT + shift)):
        release = central.gaussian_noisy_counts(np.tile([a, b], pairs), rho, unit, L)
        assert release.rho == rho
        x = release.values.reshape(pairs, 2).astype(np.int64)
        out.append(x[:, 0] - x[:, 1])
    return out[0], out[1]


def gaussian_audit(rho: float, unit: str, L: int | None, pairs: int, delta: float) -> list[EpsilonBounds]:
    """The audit of the module docstring at one δ, against the claim for ``rho``."""
    sigma = claimed_sigma(rho, unit, L)
    shift = 2 * (L or 1)
    ts = thresholds(sigma)
    d1, d0 = difference_draws(rho, unit, L, pairs)
    return audit_thresholds(
        d1, d0, ts, zcdp_epsilon(rho, delta), event_epsilons=event_log_ratios(sigma, shift, ts), delta=delta
    )


def test_the_release_path_calls_the_audited_function():
    assert releases.gaussian_noisy_counts is central.gaussian_noisy_counts


@pytest.mark.slow
@pytest.mark.parametrize(("unit", "L"), UNITS)
def test_gaussian_counts_audit(unit, L):
    """ρ = 1/2, 10⁶ noise draws: at δ = 10⁻² and 10⁻³ (the same draws), the best event's
    ε_lower is below the claim ε(δ) and below the exact profile ε*(δ) of the claimed σ."""
    sigma = claimed_sigma(RHO, unit, L)
    shift = 2 * (L or 1)
    ts = thresholds(sigma)
    d1, d0 = difference_draws(RHO, unit, L, 250_000)
    for delta in DELTAS:
        bounds = audit_thresholds(
            d1,
            d0,
            ts,
            zcdp_epsilon(RHO, delta),
            event_epsilons=event_log_ratios(sigma, shift, ts),
            delta=delta,
        )
        best = max(bounds, key=lambda b: b.lower)
        exact, _ = exact_epsilon(sigma, shift, delta)
        assert best.lower <= exact, (unit, delta, best, exact)


@pytest.mark.parametrize(("unit", "L"), UNITS)
@pytest.mark.parametrize(("factor", "side"), [(0.5, "exceeds"), (2.0, "noisier")])
def test_gaussian_counts_audit_rejects_a_sigma_off_by_a_factor(monkeypatch, unit, L, factor, side):
    """σ halved (ρ four times the claim: ε*(10⁻²) = 5.9 against a claimed 2.75) or doubled,
    patched into the release path, fails the audit at δ = 10⁻² with 10⁵ noise draws."""
    real = central.gaussian_noisy_counts_sigma
    monkeypatch.setattr(central, "gaussian_noisy_counts_sigma", lambda *a: factor * real(*a))
    with pytest.raises(AuditError, match=side):
        gaussian_audit(RHO, unit, L, 25_000, 1e-2)
