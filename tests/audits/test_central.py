"""Black-box audits of the central releases' noise, drawn by OpenDP from its own CSPRNG as
the release path calls it (docs/audits.md §4). OpenDP cannot be seeded: these tests are
``os_random``; each audit's two bounds are at α = 10⁻⁸, so a correct release fails one
with probability below 2·10⁻⁸ per run (and the mutants pass one with probability below
10⁻²⁰ at their sizes, from the same bounds at the mutant's own ε).

Noisy counts (Algorithms 2 and 3; docs/mechanisms.md §2.2). Neighbouring datasets: one
comparison (edge) or one person's L comparisons (individual) change winner, so item a
loses L wins and item b gains L (L = 1 for edge): N = (c, c) and N' = (c − L, c + L).
The event S = {X_a ≥ c, X_b ≤ c} has, under discrete Laplace noise of scale s = 2L/ε,
P(S | N) = (1 + e^{−1/s})⁻² and P(S | N') = e^{−2L/s}·P(S | N): log ratio exactly ε. Each
audit releases 250,000 copies of the pair as one vector through ``noisy_counts`` for
N and for N' (10⁶ noise draws in all): the coordinates of a release are independent
draws, which the joint event also checks.

Perturbed MLE (Algorithm 1; docs/mechanisms.md §2.3). Its noise w ~ Laplace(λ)ⁿ pays
for the gradient's change between neighbours, at most 4κ₁ in ℓ₁ (edge): e^{4κ₁/λ} =
e^{ε/2}, the other half of ε paying for the Jacobian. The audit draws 10⁶ values of w
from ``central.laplace`` at the λ that ``perturbed_mle`` passes it and bounds
log P(w ≥ 0)/P(w ≥ 4κ₁) = 4κ₁/λ against ε/2 (the same draws serve both events: the
union bound behind the Clopper–Pearson pair needs no independence).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.stats import central
from tests.helpers.audit import AuditError, audit_events

pytestmark = pytest.mark.os_random

COUNT = 1_000  # c: any count ≥ L


def counts_events(eps: float, unit: str, L: int | None, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    shift = 1 if unit == "edge" else int(L or 1)
    events = []
    for a, b in ((COUNT, COUNT), (COUNT - shift, COUNT + shift)):
        release = central.noisy_counts(np.tile([a, b], pairs), eps, unit, L)
        x = release.values.reshape(pairs, 2)
        events.append((x[:, 0] >= COUNT) & (x[:, 1] <= COUNT))
    return events[0], events[1]


@pytest.mark.slow
def test_noisy_counts_audit():
    """Edge (scale 2/ε) and individual with L = 3 (scale 2L/ε = 6/ε; the paper's L/ε would
    lose 2ε), ε = 1: ε_lower ≤ 1 ≤ ε_upper from 10⁶ noise draws each."""
    for unit, L in (("edge", None), ("individual", 3)):
        b = audit_events(*counts_events(1.0, unit, L, 250_000), 1.0)
        assert b.upper - b.lower < 0.15, (unit, b)


@pytest.mark.parametrize(("factor", "side"), [(0.5, "exceeds"), (2.0, "noisier")])
def test_noisy_counts_audit_rejects_a_scale_off_by_a_factor(monkeypatch, factor, side):
    """Half the scale (Algorithm 3 as printed, L/ε: a loss of 2ε) or twice it, patched into
    the release path, fails the audit at 10⁵ noise draws."""
    real = central.noisy_counts_scale
    monkeypatch.setattr(central, "noisy_counts_scale", lambda *a: factor * real(*a))
    with pytest.raises(AuditError, match=side):
        audit_events(*counts_events(1.0, "individual", 3, 25_000), 1.0)


def released_lambda(eps: float) -> float:
    """The λ ``perturbed_mle`` passes to ``central.laplace`` for an edge release."""
    seen = []
    real = central.laplace

    def spy(scale, size, rng=None):
        seen.append(scale)
        return real(scale, size, rng)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(central, "laplace", spy)
        central.perturbed_mle(3, [0, 1], [1, 2], [2, 2], [1, 1], eps, "edge")
    (scale,) = seen
    return scale


def laplace_events(eps: float, draws: int) -> tuple[np.ndarray, np.ndarray]:
    w = central.laplace(released_lambda(eps), draws)
    shift = 4 * central.KAPPA1  # the gradient's largest ℓ₁ change between edge neighbours
    return w >= 0, w >= shift


@pytest.mark.slow
def test_perturbed_mle_noise_audit():
    """ε = 1, λ = 8: log P(w ≥ 0)/P(w ≥ 4) = 1/2 = ε/2, bounded from 10⁶ draws."""
    assert released_lambda(1.0) == central.perturbed_mle_parameters(3, 1.0, "edge")["lambda"]
    b = audit_events(*laplace_events(1.0, 1_000_000), 0.5)
    assert b.upper - b.lower < 0.1, b


@pytest.mark.parametrize(("factor", "side"), [(0.5, "exceeds"), (2.0, "noisier")])
def test_perturbed_mle_noise_audit_rejects_a_scale_off_by_a_factor(monkeypatch, factor, side):
    """λ halved (the noise pays for a loss of ε instead of ε/2) or doubled, patched into the
    parameters the release uses, fails the audit at 10⁵ draws."""
    real = central.perturbed_mle_parameters
    monkeypatch.setattr(
        central,
        "perturbed_mle_parameters",
        lambda *a, **k: {**real(*a, **k), "lambda": factor * real(*a, **k)["lambda"]},
    )
    with pytest.raises(AuditError, match=side):
        audit_events(*laplace_events(1.0, 100_000), 0.5)
