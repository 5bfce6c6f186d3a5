"""The planner of adaptive designs: how many answers and respondents a goal needs with
adaptive assignment against balanced assignment, from surveys simulated as the service runs
them (docs/uncertainty.md §9). The Borda certificate and its simulation are in
:mod:`app.stats.adaptive`, the pairwise one in :mod:`app.stats.pairwise_goal`; this module
builds on both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from .adaptive import simulate_goal
from .mechanisms import validate_epsilon
from .pairwise_goal import simulate_pairwise_goal

__all__ = ["GoalPlan", "StrategyPlan", "plan_goal"]


@dataclass(frozen=True)
class StrategyPlan:
    """What one strategy needed over a plan's simulated surveys."""

    answers_mean: float
    answers_se: float
    respondents_mean: float
    #: Simulated surveys that met the goal within the cap, and those whose certified
    #: set or order was wrong.
    met: int
    false_certifications: int


@dataclass(frozen=True)
class GoalPlan:
    """Adaptive against balanced assignment for one goal (:func:`plan_goal`)."""

    n_items: int
    top_k: int | None
    level: float
    epsilon: float
    pairs_per_respondent: int
    replications: int
    max_answers: int
    adaptive: StrategyPlan
    balanced: StrategyPlan
    #: balanced / adaptive mean answers; None unless both met the goal in every run.
    saving: float | None
    #: The adaptive design's certificate (balanced assignment is always Borda-certified).
    certificate: str = "borda"


def plan_goal(
    theta: ArrayLike,
    epsilon: float,
    level: float,
    top_k: int | None = None,
    replications: int = 10,
    seed: int = 0,
    pairs_per_respondent: int = 10,
    max_answers: int = 1_000_000,
    check: Callable[[], None] | None = None,
    certificate: Literal["borda", "pairwise"] = "borda",
) -> GoalPlan:
    """The planner of adaptive designs: adaptive against balanced assignment for one goal.

    Parameters
    ----------
    theta : array_like
        True scores.
    epsilon : float
        ε of every answer.
    level : float
        Confidence level of the certificate.
    top_k : int, optional
        K; None: the whole ranking.
    replications : int, default 10
        Surveys simulated per strategy.
    seed : int, default 0
        Seed of the simulation.
    pairs_per_respondent : int, default 10
        The most pairs served to one respondent.
    max_answers : int, default 1000000
        The cap of each simulated survey.
    check : callable, optional
        Called before each batch; may raise to stop the work.
    certificate : {"borda", "pairwise"}, default "borda"
        ``"pairwise"`` simulates the adaptive design with the pairwise certificate
        (:func:`app.stats.pairwise_goal.simulate_pairwise_goal`, at most its
        ``MAX_ITEMS`` items); the balanced one is Borda-certified either way, as the
        service runs it.

    Returns
    -------
    GoalPlan
        The answers and respondents each strategy needs to meet the goal, and the saving.

    Raises
    ------
    ValueError
        On non-positive counts, an invalid ε, or an unknown certificate.

    Notes
    -----
    Each survey is simulated as the service runs it (:func:`simulate_goal`).

    Examples
    --------
    >>> p = plan_goal([2.0, 0.0, -0.5, -1.0], 2.0, 0.9, top_k=1, replications=4)
    >>> p.adaptive.met, p.balanced.met, p.saving > 1
    (4, 4, True)
    """
    theta = np.asarray(theta, dtype=np.float64)
    validate_epsilon(epsilon)
    if replications < 1 or pairs_per_respondent < 1 or max_answers < 1:
        raise ValueError("replications, pairs_per_respondent and max_answers must be positive")
    if certificate not in ("borda", "pairwise"):
        raise ValueError("certificate must be 'borda' or 'pairwise'")
    truth = np.argsort(-theta, kind="stable")
    out: dict[str, StrategyPlan] = {}
    for name in ("adaptive", "balanced"):
        simulate = (
            simulate_pairwise_goal if name == "adaptive" and certificate == "pairwise" else simulate_goal
        )
        runs = [
            simulate(
                theta,
                epsilon,
                level,
                name,
                np.random.default_rng([seed, r, name == "adaptive"]),
                top_k=top_k,
                max_answers=max_answers,
                pairs_per_respondent=pairs_per_respondent,
                check=check,
            )
            for r in range(replications)
        ]
        answers = np.array([r.answers for r in runs], dtype=float)
        wrong = 0
        for r in runs:
            if r.certified is None:
                continue
            if top_k is None:
                wrong += r.certified.tolist() != truth.tolist()
            else:
                wrong += set(r.certified.tolist()) != set(truth[:top_k].tolist())
        out[name] = StrategyPlan(
            float(answers.mean()),
            float(answers.std(ddof=1) / np.sqrt(answers.size)) if answers.size > 1 else float("nan"),
            float(np.mean([r.respondents for r in runs])),
            sum(r.certified is not None for r in runs),
            wrong,
        )
    a, b = out["adaptive"], out["balanced"]
    saving = b.answers_mean / a.answers_mean if a.met == b.met == replications else None
    return GoalPlan(
        theta.size,
        top_k,
        level,
        float(epsilon),
        pairs_per_respondent,
        replications,
        max_answers,
        a,
        b,
        saving,
        certificate,
    )
