"""What a year of weekly central releases costs: pure-ε basic composition against zCDP.

    python -m tests.benchmarks.bench_accounting

prints the table of docs/mechanisms.md §2.6 (``tests/stats/test_accounting.py`` checks
that the page shows these figures). For each per-release ε, one release of noisy counts
with discrete Laplace noise of scale 2L/ε (pure ε-DP, person-level ε) is set against
one with discrete Gaussian noise of exactly the same variance (σ solved from
Var N_ℤ(0, σ²) = Var of the discrete Laplace). Fifty-two of the first cost 52·ε by basic
composition; fifty-two of the second cost ρ = 52·L²/σ² (ℓ₂ sensitivity √2·L), shown as
the ε of its (ε, δ) guarantee at δ = 10⁻¹⁰ with the tight conversion and with the
classical ρ + 2√(ρ log(1/δ)). The last column charges the 52 Laplace releases in zCDP
(ε²/2 each): zCDP pays off for Gaussian noise, not for pure-ε releases of large ε.
The table is for L = 1; with a larger L, σ grows L-fold and ρ and the zCDP totals come
out slightly smaller (the discrete laws approach the continuous ones, for which
ρ = ε²/8 exactly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import brentq

from app.stats.accounting import DEFAULT_DELTA, pure_rho, zcdp_epsilon, zcdp_epsilon_classical
from app.stats.noise import discrete_gaussian_variance

#: Per-release ε of the table.
EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0)
WEEKS = 52


def discrete_laplace_variance(scale: float) -> float:
    """2e^{−1/s}/(1 − e^{−1/s})² [Ghosh, Roughgarden & Sundararajan 2012]."""
    q = math.exp(-1.0 / scale)
    return 2.0 * q / (1.0 - q) ** 2


@dataclass(frozen=True)
class Year:
    epsilon: float  # per release, person-level (individual unit)
    sigma: float  # discrete Gaussian σ with the Laplace release's variance (L = 1)
    rho: float  # per release
    pure_total: float  # 52·ε, basic composition
    zcdp_total: float  # ε at δ of 52·ρ, tight conversion
    zcdp_classical: float  # ε at δ of 52·ρ, ρ + 2√(ρ log(1/δ))
    laplace_in_zcdp: float  # ε at δ of 52·ε²/2


def year_of_weekly_releases(
    epsilon: float, L: int = 1, delta: float = DEFAULT_DELTA, weeks: int = WEEKS
) -> Year:
    """The year's cost of ``weeks`` releases at ``epsilon``'s accuracy, both ways."""
    variance = discrete_laplace_variance(2.0 * L / epsilon)
    sigma = brentq(lambda s: discrete_gaussian_variance(s) - variance, 0.25, 100.0 * L / epsilon, xtol=1e-12)
    rho = L * L / sigma**2  # (√2·L)²/(2σ²)
    return Year(
        epsilon=epsilon,
        sigma=sigma / L,
        rho=rho,
        pure_total=weeks * epsilon,
        zcdp_total=zcdp_epsilon(weeks * rho, delta),
        zcdp_classical=zcdp_epsilon_classical(weeks * rho, delta),
        laplace_in_zcdp=zcdp_epsilon(weeks * pure_rho(epsilon), delta),
    )


def table_rows() -> list[str]:
    """The rows of the docs table, as markdown."""
    rows = []
    for eps in EPSILONS:
        y = year_of_weekly_releases(eps)
        rows.append(
            f"| {eps:g} | {y.sigma:.2f} | {y.rho:.5f} | {y.pure_total:.1f} | {y.zcdp_total:.2f} | "
            f"{y.zcdp_total / y.pure_total:.2f} | {y.zcdp_classical:.2f} | {y.laplace_in_zcdp:.2f} |"
        )
    return rows


HEADER = (
    "| ε per release | σ (same variance) | ρ per release | 52 releases, pure (52·ε) | 52 releases, zCDP "
    "(ε at δ = 10⁻¹⁰) | ratio | zCDP, classical conversion | 52 Laplace releases charged in zCDP |\n"
    "|---|---|---|---|---|---|---|---|"
)


if __name__ == "__main__":
    print(HEADER)
    print("\n".join(table_rows()))
