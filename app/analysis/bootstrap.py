"""The bootstrap intervals of a fit: their bounds, their predicted cost, and running them.

``uncertainty=bootstrap`` refits on resampled answers, once per replicate: over the
respondents (``covariance=cluster``) or parametric, of independent answers (``model``).
A bootstrap predicted far beyond the time budget (:func:`bootstrap_seconds`) is refused
before it starts (docs/uncertainty.md §7, "Bootstraps").
"""

from __future__ import annotations

import math

import numpy as np

from ..core.db.models import Survey
from ..core.deadline import Deadline
from ..core.errors import Invalid
from ..stats import BTLFit
from ..stats.inference import Clusters, Confidence, bootstrap_confidence, cluster_bootstrap_confidence
from .fits import _Entry, _seed

__all__ = [
    "BOOTSTRAP_MAX_COMPARISONS",
    "BOOTSTRAP_MAX_REPLICATES",
    "BOOTSTRAP_MIN_REPLICATES",
    "BOOTSTRAP_REPLICATES",
    "bootstrap_seconds",
    "eps_of",
]

#: The bootstrap refits on every stored comparison: reserved for small samples.
BOOTSTRAP_MAX_COMPARISONS = 200_000
#: Replicates of the bootstrap: the default, and the range a client may ask for.
BOOTSTRAP_REPLICATES = 200
BOOTSTRAP_MIN_REPLICATES = 20
BOOTSTRAP_MAX_REPLICATES = 2000
#: Predicted cost of one bootstrap replicate with one BLAS thread, fitted to replicates
#: at 2,000 items and 100,000 comparisons from 1,000 respondents. Per comparison
#: (resampling, reduction to pairs, the warm-started refit) and per m³ (the m×m
#: pseudo-inverse of each parametric replicate). They are lower bounds in practice,
#: and a request is refused only when the prediction exceeds
#: ``BOOTSTRAP_REFUSE_FACTOR`` × the budget; anything closer is left to the deadline.
BOOTSTRAP_SECONDS_PER_COMPARISON = 2.0e-7
BOOTSTRAP_SECONDS_PER_CUBE = 6.0e-11
BOOTSTRAP_REFUSE_FACTOR = 2.0


def bootstrap_seconds(n_items: int, n_comparisons: int, replicates: int, covariance: str) -> float:
    """Predicted seconds of a bootstrap (see ``BOOTSTRAP_SECONDS_PER_COMPARISON``)."""
    per = n_comparisons * BOOTSTRAP_SECONDS_PER_COMPARISON
    if covariance == "model":
        per += float(n_items) ** 3 * BOOTSTRAP_SECONDS_PER_CUBE
    return replicates * per


def _check_bootstrap(fit: BTLFit, covariance: str, replicates: int, budget: float) -> None:
    """Refuse, before any work, a bootstrap that cannot finish: too many comparisons,
    replicates out of range, or a predicted run time far beyond the time budget."""
    if not BOOTSTRAP_MIN_REPLICATES <= replicates <= BOOTSTRAP_MAX_REPLICATES:
        raise Invalid(f"replicates must be between {BOOTSTRAP_MIN_REPLICATES} and {BOOTSTRAP_MAX_REPLICATES}")
    if fit.n_comparisons > BOOTSTRAP_MAX_COMPARISONS:
        raise Invalid(
            f"uncertainty=bootstrap is for small samples (at most {BOOTSTRAP_MAX_COMPARISONS} "
            "comparisons); use the default sandwich intervals"
        )
    predicted = bootstrap_seconds(fit.theta.size, fit.n_comparisons, replicates, covariance)
    if math.isfinite(budget) and predicted > BOOTSTRAP_REFUSE_FACTOR * budget:
        raise Invalid(
            f"uncertainty=bootstrap with {replicates} replicates would take about {predicted:.0f} s here "
            f"({fit.theta.size} items, {fit.n_comparisons} comparisons), beyond the analysis time budget "
            f"of {budget:g} s; ask for fewer replicates"
            + (" or use covariance=cluster" if covariance == "model" else "")
            + ", or use the default sandwich intervals"
        )


def _bootstrap(
    survey: Survey,
    entry: _Entry,
    level: float,
    covariance: str,
    clusters: Clusters,
    replicates: int,
    deadline: Deadline,
) -> Confidence:
    """``covariance=cluster``: the nonparametric bootstrap over respondents (nothing is
    privatized again); ``model``: the parametric bootstrap of independent answers."""
    fit = entry.fit
    _check_bootstrap(fit, covariance, replicates, deadline.seconds)
    rng = np.random.default_rng(_seed(survey.id, fit.n_comparisons, "bootstrap", covariance))
    if covariance == "cluster":
        return cluster_bootstrap_confidence(
            fit, clusters, level, n_boot=replicates, rng=rng, check=deadline.check
        )
    return bootstrap_confidence(
        fit.theta.size,
        clusters.i,
        clusters.j,
        eps_of(clusters.v),
        fit,
        level,
        n_boot=replicates,
        rng=rng,
        check=deadline.check,
    )


def eps_of(v: np.ndarray) -> np.ndarray:
    """ε from the privacy variance v = 1/(4 sinh²(ε/2))."""
    with np.errstate(divide="ignore"):
        return 2.0 * np.arcsinh(0.5 / np.sqrt(v))
