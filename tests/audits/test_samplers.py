"""Black-box audits of the local samplers the server ships (docs/audits.md §3): 10⁶ draws
per input from ``privatize`` and ``mallows_privatize`` as the service calls them
(``rng=None``: :mod:`app.stats.entropy`, seeded per test by tests/conftest.py), and
one-sided Clopper–Pearson bounds on ε from both sides (tests.helpers.audit, α = 10⁻⁸
per side). The same audits reject the sampler with a flip rate doubled or halved, or a
Mallows dispersion doubled or halved, patched into the shipped code.

Events (Neyman–Pearson: the likelihood ratio is e^ε on all of them, so log(P₁/P₀) = ε):

* randomized response, y = 1 vs y = 0: S = {ỹ = 1}, P₁ = e^ε/(1 + e^ε), P₀ = 1/(1 + e^ε);
* Mallows, σ = (0, 1, …, m−1) vs σ' = (1, …, m−1, 0) (item 0 moved from the top to the
  bottom, a single-item move): S = {item 0 first}. Every output in S has item 0 above all
  others, m − 1 concordant pairs more with σ than with σ', so the ratio is
  e^{b(m−1)} = e^ε; P(S | σ) = Z_{m−1}/Z_m = (1 − e^{−b})/(1 − e^{−bm}).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.rankings import ballot_import
from app.rankings import service as ranking_surveys
from app.respondents import imports, ingestion
from app.stats import mechanisms as mech
from app.stats.mechanisms import privatize
from app.stats.rankings import mallows as rk_mallows
from app.stats.rankings import mallows_privatize
from tests.helpers.audit import AuditError, audit_events

#: Draws per input.
N = 1_000_000


def test_the_service_calls_the_audited_samplers():
    """Server-side privatization on arrival, at import and for rankings is these very functions."""
    assert ingestion.privatize is privatize
    assert imports.privatize is privatize
    assert ranking_surveys.mallows_privatize is mallows_privatize
    assert ballot_import.mallows_privatize is mallows_privatize


def rr_events(eps: float, per_answer: bool = False) -> tuple[np.ndarray, np.ndarray]:
    e = np.full(N, eps) if per_answer else eps  # the import path passes one ε per row
    return privatize(np.ones(N, np.int8), e) == 1, privatize(np.zeros(N, np.int8), e) == 1


@pytest.mark.parametrize(("eps", "per_answer"), [(0.5, False), (1.0, True), (3.0, False)])
def test_randomized_response_audit(eps, per_answer):
    """ε_lower ≤ ε ≤ ε_upper from 10⁶ + 10⁶ draws (docs/audits.md §3 lists the bounds)."""
    b = audit_events(*rr_events(eps, per_answer), eps)
    assert b.upper - b.lower < 0.1  # the audit has the power to see a factor 2 in the flip rate


@pytest.mark.parametrize(("factor", "side"), [(2.0, "noisier"), (0.5, "exceeds")])
def test_randomized_response_audit_rejects_a_flip_rate_off_by_a_factor(monkeypatch, factor, side):
    """A doubled flip rate (ε = 1: flips 53.8 % of answers) is noisier than claimed; a halved
    one loses ε ≈ 1.7. At 10⁶ draws either misses the audit with probability < 10⁻¹⁰⁰."""
    real = mech.flip_probability
    monkeypatch.setattr(mech, "flip_probability", lambda e: factor * real(e))
    with pytest.raises(AuditError, match=side):
        audit_events(*rr_events(1.0), 1.0)


def mallows_events(m: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    sigma = np.arange(m)
    moved = np.roll(sigma, -1)  # item 0 from the top to the bottom
    first_1 = mallows_privatize(np.tile(sigma, (N, 1)), eps)[:, 0] == 0
    first_0 = mallows_privatize(np.tile(moved, (N, 1)), eps)[:, 0] == 0
    return first_1, first_0


@pytest.mark.parametrize(("m", "eps"), [(3, 2.0), (5, 1.0)])
def test_mallows_audit(m, eps):
    """ε_lower ≤ ε ≤ ε_upper for the single-item move with the largest loss; the event's
    frequency under σ is also checked against (1 − e^{−b})/(1 − e^{−bm})."""
    s1, s0 = mallows_events(m, eps)
    b_ = eps / (m - 1)
    p1 = -math.expm1(-b_) / -math.expm1(-b_ * m)
    assert abs(s1.mean() - p1) <= 5.6 * math.sqrt(p1 * (1 - p1) / N)
    b = audit_events(s1, s0, eps)
    assert b.upper - b.lower < 0.1


@pytest.mark.parametrize(("factor", "side"), [(0.5, "noisier"), (2.0, "exceeds")])
def test_mallows_audit_rejects_a_dispersion_off_by_a_factor(monkeypatch, factor, side):
    """b halved (twice the noise: the event's log ratio is ε/2) or doubled (half the noise:
    2ε-ranking DP) in the shipped sampler, m = 5, ε = 1."""
    real = rk_mallows.mallows_dispersion
    monkeypatch.setattr(rk_mallows, "mallows_dispersion", lambda m, e: factor * real(m, e))
    with pytest.raises(AuditError, match=side):
        audit_events(*mallows_events(5, 1.0), 1.0)
