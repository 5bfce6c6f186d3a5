"""A survey's privacy settings: the ε bounds and their defaults, each respondent's budget,
and a central survey's total budget and accounting.

The defaults are those of docs/privacy.md §2, "Defaults"; a central survey's
accounting (pure ε-DP, or zCDP at a δ) is that of docs/mechanisms.md §2.6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.db.models import Survey
from ..core.errors import Invalid
from ..stats.accounting import DEFAULT_DELTA

__all__ = [
    "DEFAULT_EPSILON",
    "DEFAULT_EPSILON_MAX",
    "DEFAULT_EPSILON_MIN",
    "DEFAULT_RESPONDENT_BUDGET",
    "MAX_DELTA",
    "MAX_EPSILON",
    "MAX_TOTAL_BUDGET",
    "MIN_DELTA",
    "MIN_EPSILON",
    "UNLIMITED",
    "LocalPolicy",
    "PrivacyPolicy",
    "budget_policy",
    "central_limits",
    "local_epsilons",
    "resolve_accounting",
]

#: ε above this is not privacy (the flip probability e^{-30} ≈ 1e-13).
MAX_EPSILON = 30.0
#: ε below this carries no usable information (the flip probability is within
#: 0.00025 of a coin toss); it also keeps every stored ε far above the
#: statistics core's numerical floor.
MIN_EPSILON = 0.001
#: The defaults of a local survey's privacy (docs/privacy.md, "Privacy by default").
#: ε of one answer when neither the survey nor the respondent chooses: an observer of the
#: stored answer guesses the true one right at most e/(1+e) = 73% of the time.
DEFAULT_EPSILON = 1.0
#: Smallest ε a respondent may choose (below the default).
DEFAULT_EPSILON_MIN = 0.1
#: Largest ε a respondent may choose (above the default): 88% at most for one answer.
DEFAULT_EPSILON_MAX = 2.0
#: A pairwise survey's cap on each respondent's total ε (basic composition) when the admin
#: gives none: five answers at the default ε. A ranking survey's default cap is its
#: epsilon_max (one ranking per respondent). ``"unlimited"`` opts out, explicitly.
DEFAULT_RESPONDENT_BUDGET = 5.0
#: The value of ``respondent_budget`` that opts a survey out of a per-respondent cap.
UNLIMITED = "unlimited"


@dataclass(frozen=True)
class PrivacyPolicy:
    model: str = "local"
    epsilon_default: float | None = None
    epsilon_min: float | None = None
    epsilon_max: float | None = None
    #: A cap (a number), ``"unlimited"`` (the explicit opt-out), or None: the default cap.
    respondent_budget: float | str | None = None
    total_budget: float | None = None
    max_comparisons_per_respondent: int | None = None
    #: Central: "pure" (default) or "zcdp" (docs/mechanisms.md §2.6), and zCDP's δ.
    accounting: str | None = None
    delta: float | None = None


#: Largest total budget a central survey may hold, and largest cap on a respondent's total ε
#: (beyond it the guarantee protects nothing: a guess right with probability 1 − e⁻¹⁰⁰).
MAX_TOTAL_BUDGET = 100.0


#: The δ range a zCDP survey may state its (ε, δ) at: δ must be far below 1/population.
MIN_DELTA = 1e-20
MAX_DELTA = 1e-6


def resolve_accounting(accounting: str | None, delta: float | None) -> tuple[str, float | None]:
    """A central survey's ``(accounting, delta)``, checked: "pure" takes no δ; "zcdp" takes
    δ in [:data:`MIN_DELTA`, :data:`MAX_DELTA`], by default
    :data:`~app.stats.accounting.DEFAULT_DELTA` (docs/mechanisms.md §2.6)."""
    accounting = accounting or "pure"
    if accounting not in ("pure", "zcdp"):
        raise Invalid("privacy.accounting must be 'pure' or 'zcdp'")
    if accounting == "pure":
        if delta is not None:
            raise Invalid("privacy.delta belongs to zcdp accounting (pure ε-DP has δ = 0)")
        return "pure", None
    if delta is None:
        return "zcdp", DEFAULT_DELTA
    if not (math.isfinite(delta) and MIN_DELTA <= delta <= MAX_DELTA):
        raise Invalid(
            f"privacy.delta must be in [{MIN_DELTA:g}, {MAX_DELTA:g}]: far below one over the number of "
            "people the survey could reach"
        )
    return "zcdp", float(delta)


def _resolve_central(p: PrivacyPolicy, n_items: int) -> tuple[float, int]:
    if any(v is not None for v in (p.epsilon_default, p.epsilon_min, p.epsilon_max, p.respondent_budget)):
        raise Invalid(
            "central surveys take total_budget and max_comparisons_per_respondent; the epsilon bounds "
            "and respondent_budget belong to local surveys"
        )
    budget, cap = p.total_budget, p.max_comparisons_per_respondent
    if budget is None or not (math.isfinite(budget) and 0 < budget <= MAX_TOTAL_BUDGET):
        raise Invalid(
            f"privacy.total_budget must be a number in (0, {MAX_TOTAL_BUDGET:g}] for a central survey"
        )
    n_pairs = n_items * (n_items - 1) // 2
    if cap is None or not 1 <= cap <= n_pairs:
        raise Invalid(
            f"privacy.max_comparisons_per_respondent must be between 1 and the number of pairs ({n_pairs})"
        )
    return float(budget), int(cap)


@dataclass(frozen=True)
class LocalPolicy:
    """A local survey's resolved privacy settings, as stored."""

    epsilon_default: float
    epsilon_min: float
    epsilon_max: float
    #: The cap on a respondent's total ε; None only with ``unlimited``.
    respondent_budget: float | None
    #: The admin opted out of a cap (``"respondent_budget": "unlimited"``).
    unlimited: bool


def _resolve_policy(p: PrivacyPolicy, kind: str) -> LocalPolicy:
    """A local survey's settings with the defaults filled in (docs/privacy.md, "Privacy by
    default"): ε 1 in [0.1, 2]; a finite cap on each respondent's total ε unless the admin
    sends ``"respondent_budget": "unlimited"``."""
    if p.model != "local":
        raise Invalid("privacy.model must be 'local' or 'central'")
    if p.total_budget is not None or p.max_comparisons_per_respondent is not None:
        raise Invalid("total_budget and max_comparisons_per_respondent belong to central surveys")
    if p.accounting is not None or p.delta is not None:
        raise Invalid(
            "accounting and delta belong to central surveys (a local survey's answers are randomized)"
        )
    default = DEFAULT_EPSILON if p.epsilon_default is None else p.epsilon_default
    lo = p.epsilon_min if p.epsilon_min is not None else min(DEFAULT_EPSILON_MIN, default)
    hi = p.epsilon_max if p.epsilon_max is not None else max(DEFAULT_EPSILON_MAX, default)
    for name, value in (("epsilon_default", default), ("epsilon_min", lo), ("epsilon_max", hi)):
        if not (math.isfinite(value) and MIN_EPSILON <= value <= MAX_EPSILON):
            raise Invalid(f"privacy.{name} must be a number in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]")
    if not lo <= default <= hi:
        raise Invalid("privacy bounds must satisfy epsilon_min <= epsilon_default <= epsilon_max")
    budget = p.respondent_budget
    if budget == UNLIMITED:
        return LocalPolicy(default, lo, hi, None, unlimited=True)
    if isinstance(budget, str):
        raise Invalid(f"privacy.respondent_budget must be a number or {UNLIMITED!r}")
    if budget is None:
        if kind == "ranking":
            budget = hi  # one ranking per respondent: the cap is the largest ε it may have
        elif hi > DEFAULT_RESPONDENT_BUDGET:
            raise Invalid(
                f"privacy.epsilon_max {hi:g} is above the default respondent budget "
                f"{DEFAULT_RESPONDENT_BUDGET:g}: give privacy.respondent_budget (a total ε per respondent), "
                f"or {UNLIMITED!r} to allow each respondent to spend without limit"
            )
        else:
            budget = DEFAULT_RESPONDENT_BUDGET
    if not (math.isfinite(budget) and lo <= budget <= MAX_TOTAL_BUDGET):
        raise Invalid(
            f"privacy.respondent_budget must be a number from epsilon_min to {MAX_TOTAL_BUDGET:g}, or "
            f"{UNLIMITED!r} for no cap (absent or null: the default, {DEFAULT_RESPONDENT_BUDGET:g} for "
            "pairwise surveys)"
        )
    return LocalPolicy(default, lo, hi, float(budget), unlimited=False)


def budget_policy(survey: Survey) -> str | None:
    """How a local survey caps each respondent's total ε: ``"capped"`` (a finite cap),
    ``"unlimited"`` (the admin opted out) or ``"unset"`` (stored without a cap and without an
    opt-out: no cap applies; such surveys keep their settings). None for central surveys."""
    if survey.privacy_model != "local":
        return None
    if survey.respondent_budget is not None:
        return "capped"
    return "unlimited" if survey.respondent_budget_unlimited else "unset"


def local_epsilons(survey: Survey) -> tuple[float, float, float]:
    """``(epsilon_min, epsilon_default, epsilon_max)`` of a local-model survey, which always
    has them (``ck_surveys_privacy``); the caller has checked the privacy model."""
    lo, default, hi = survey.epsilon_min, survey.epsilon_default, survey.epsilon_max
    if lo is None or default is None or hi is None:
        raise RuntimeError(f"survey {survey.id} has no epsilon bounds: not a local-model survey")
    return lo, default, hi


def central_limits(survey: Survey) -> tuple[float, int]:
    """``(total_budget, max_comparisons)`` of a central-model survey, which always has them
    (``ck_surveys_privacy``); the caller has checked the privacy model."""
    total, cap = survey.total_budget, survey.max_comparisons
    if total is None or cap is None:
        raise RuntimeError(f"survey {survey.id} has no total budget: not a central-model survey")
    return total, cap
