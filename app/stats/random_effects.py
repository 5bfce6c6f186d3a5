"""Respondents who differ: the random-effect scale τ, estimated from a survey's answers.

Respondent r answers with scores θ + τ·u_r, u_r ~ N(0, I): :func:`estimate_tau` estimates
τ by the method of moments, with the logistic–normal correction for the slopes the random
effects flatten, and :func:`attenuation` is the factor c by which population scores are
respondents' scores / c. :mod:`app.stats.survey_plan` simulates such respondents
(docs/how-to/plan.md, "Planning from where a survey stands").
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit, ndtri

from .inference import Clusters

__all__ = ["MAX_TAU", "attenuation", "estimate_tau"]

#: The largest random-effect scale estimated or simulated (score units).
MAX_TAU = 5.0


def _residual_moments(theta, i, j, z, v, resp, n_items, n_resp):
    """Per respondent: ‖s_r‖² minus its expectation without random effects, and
    Σ_{a≠b} w_a w_b (x_aᵀx_b)² (see :func:`estimate_tau`)."""
    d = theta[i] - theta[j]
    p = expit(d)
    w = p * (1.0 - p)
    res = z - p
    # Per (respondent, item): s_r[i] = Σ ± residual, D_r[i] = Σ weights.
    keys = np.concatenate((resp * n_items + i, resp * n_items + j))
    uniq, inv = np.unique(keys, return_inverse=True)
    s = np.bincount(inv, np.concatenate((res, -res)), uniq.size)
    deg = np.bincount(inv, np.concatenate((w, w)), uniq.size)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    pair_keys, pair_inv = np.unique((resp * n_items + lo) * n_items + hi, return_inverse=True)
    wp = np.bincount(pair_inv, w, pair_keys.size)
    owner, pair_owner = uniq // n_items, pair_keys // (n_items * n_items)
    excess = np.bincount(owner, s * s, n_resp) - np.bincount(resp, 2.0 * (w + v), n_resp)
    # Σ_{a≠b} w_a w_b (x_aᵀx_b)² = ‖A_r‖_F² − Σ_a w_a² ‖x_a‖⁴ (‖x_a‖² = 2): one answer
    # alone has variance p̄(1 − p̄) + v whatever τ; only pairs of answers covary.
    frob = (
        np.bincount(owner, deg * deg, n_resp)
        + np.bincount(pair_owner, 2.0 * wp * wp, n_resp)
        - np.bincount(resp, 4.0 * w * w, n_resp)
    )
    return excess, frob


def _tau_of(t: float) -> float:
    t = max(0.0, t)
    denominator = 1.0 - math.pi * t / 4.0
    if denominator <= t / MAX_TAU**2:
        return MAX_TAU
    return min(MAX_TAU, math.sqrt(t / denominator))


def estimate_tau(theta: ArrayLike, clusters: Clusters, level: float = 0.95) -> tuple[float, list[float]]:
    """Method-of-moments estimate of the respondent random-effect scale τ, with an interval.

    Parameters
    ----------
    theta : array_like (m,)
        The fit at which the moments are taken.
    clusters : Clusters
        The survey's comparisons with their respondents.
    level : float, default 0.95
        Level of the interval.

    Returns
    -------
    tuple of (float, list of float)
        τ̂ (capped at :data:`MAX_TAU`) and its interval. With one answer per respondent (or
        one respondent) nothing separates a respondent effect from the answers' noise:
        τ̂ = 0 with interval [0, MAX_TAU].

    Notes
    -----
    Model: respondent r answers with scores θ + τ·u_r, u_r ~ N(0, I). To first order
    E[z | u_r] = σ(d) + σ'(d)(u_ri − u_rj), so respondent r's score residual
    s_r = Σ_answers (z − σ(d))(e_i − e_j), x_a = e_i − e_j, has
    E‖s_r‖² = Σ_a 2 Var z_a + τ² Σ_{a≠b} σ'(d_a) σ'(d_b) (x_aᵀx_b)²: one answer alone is
    Bernoulli whatever τ (its variance is p̄(1 − p̄) + e^ε/(e^ε − 1)², Lemma 2), and two
    answers of one respondent covary only when they share an item. Summing over
    respondents at θ = ``theta`` (the fit) gives the ratio T = Σ_r excess_r / Σ_r f_r.

    The slopes there are the population's, which random effects flatten: with
    δ ~ N(0, s²), E σ(d + δ) ≈ σ(d/c), c = √(1 + πs²/8) (the logistic–normal
    approximation; Monahan & Stefanski 1992), so the fit estimates d/c and the
    covariance of two answers involves E σ'(d + δ) ≈ σ'(d/c)/c, not σ'(d/c). With
    s² = 2τ² that is τ² = c² T = T (1 + πτ²/4), i.e. τ̂² = T / (1 − πT/4). Without that
    step the estimate is biased low (τ = 1 came out as 0.74 on non-private data; with
    it, 0.99).

    The interval maps T ± z·se(T), se from the ratio estimator's linearization over
    respondents (they are independent), through the same formula. At small ε the
    answers' own noise dominates and the interval is wide.
    """
    th = np.asarray(theta, dtype=np.float64)
    if clusters.n_clusters < 2 or clusters.i.size <= clusters.n_clusters:
        return 0.0, [0.0, MAX_TAU]
    excess, frob = _residual_moments(
        th,
        clusters.i,
        clusters.j,
        clusters.z,
        clusters.v,
        clusters.cluster,
        clusters.n_items,
        clusters.n_clusters,
    )
    total = float(frob.sum())
    if not total > 1e-12:
        return 0.0, [0.0, MAX_TAU]
    t = float(excess.sum()) / total
    g = excess.size
    se = math.sqrt(g / (g - 1) * float(np.sum((excess - t * frob) ** 2))) / total
    z = float(ndtri(0.5 + level / 2.0))
    return _tau_of(t), [_tau_of(t - z * se), _tau_of(t + z * se)]


def attenuation(tau: float) -> float:
    """c = √(1 + πτ²/4): population BTL scores are respondents' scores / c.

    Parameters
    ----------
    tau : float
        Respondent random-effect scale τ.

    Returns
    -------
    float
        c (see :func:`estimate_tau`).

    Examples
    --------
    >>> from app.stats.random_effects import attenuation
    >>> attenuation(0.0)
    1.0
    """
    return math.sqrt(1.0 + math.pi * tau * tau / 4.0)
