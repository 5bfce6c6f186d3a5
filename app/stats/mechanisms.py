"""Local privacy mechanisms for one pairwise comparison (docs/mechanisms.md §1).

Randomized response (RR) and its debiasing follow Xu, Sun & Cheng, *Rate-Optimal Rank
Aggregation with Private Pairwise Rankings* (2024; docs/estimator.md §2–3); the Laplace
mechanism is the paper's Scenario V baseline (§5.3), reconstructed as in
docs/estimator.md §8.2. Every function that draws takes ``rng``: ``rng=None`` (the
default, and the only value the service uses) draws from the operating system's CSPRNG
(:mod:`app.stats.entropy`); a seedable generator is used only when the caller passes
one (simulations and tests, for reproducibility).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from scipy.stats import chi2

from . import entropy

__all__ = [
    "RandomSource",
    "debias",
    "flip_probability",
    "laplace_privatize",
    "privacy_noise_variance",
    "privatize",
    "randomization_p_value",
    "rr_probability",
    "system_uniform",
    "uniform_draws",
    "validate_binary",
    "validate_epsilon",
    "z_variance",
]


class RandomSource(Protocol):
    """Anything with NumPy's ``Generator.random(size)`` signature."""

    def random(self, size: int | tuple[int, ...]) -> NDArray[np.float64]: ...


_TWO_POW_MINUS_53 = 2.0**-53


def system_uniform(size: int | tuple[int, ...]) -> NDArray[np.float64]:
    """Uniform draws on [0, 1) from the OS CSPRNG (``os.urandom``).

    Parameters
    ----------
    size : int or tuple of int
        Shape of the output.

    Returns
    -------
    numpy.ndarray of float64
        Draws of shape ``size``.

    Notes
    -----
    Each value is ``k · 2⁻⁵³`` with ``k`` the top 53 bits of 8 random bytes, so every one
    of the 2⁵³ representable grid points is equally likely and ``P(u < p)`` differs from
    ``p`` by less than 2⁻⁵³.
    """
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    n = int(np.prod(shape, dtype=np.int64))
    words = np.frombuffer(entropy.random_bytes(8 * n), dtype=np.uint64)
    return ((words >> np.uint64(11)).astype(np.float64) * _TWO_POW_MINUS_53).reshape(shape)


def uniform_draws(rng: RandomSource | None, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Uniforms on [0, 1): from the OS CSPRNG (``rng=None``: privatization) or ``rng``.

    Parameters
    ----------
    rng : RandomSource or None
        A generator for reproducible simulations, or ``None`` for :func:`system_uniform`.
    shape : tuple of int
        Shape of the output.

    Returns
    -------
    numpy.ndarray of float64
        Draws of shape ``shape``.
    """
    if rng is None:
        return system_uniform(shape)
    return np.asarray(rng.random(shape), dtype=np.float64)


#: Smallest ε accepted: below it an answer carries no usable information
#: (z = ±1/ε·…, Var z ≈ 1/ε²) and the arithmetic of the estimator overflows.
EPSILON_FLOOR = 1e-6


def validate_epsilon(epsilon: ArrayLike) -> NDArray[np.float64]:
    """Return ε as a float array, rejecting ε < 1e-6 and NaN.

    Parameters
    ----------
    epsilon : float or array_like
        Privacy levels. ε = +∞ is allowed and means "no privacy" (the answer is never
        flipped).

    Returns
    -------
    numpy.ndarray of float64
        ``epsilon`` as an array.

    Raises
    ------
    ValueError
        If any value is below :data:`EPSILON_FLOOR` or NaN.
    """
    eps = np.asarray(epsilon, dtype=np.float64)
    if eps.size and not np.all(eps >= EPSILON_FLOOR):  # also false for NaN
        raise ValueError("epsilon must be > 0 (at least 1e-6; use inf for non-private answers)")
    return eps


def validate_binary(y: ArrayLike, what: str = "answers") -> NDArray:
    """Return ``y`` as an array after checking every value is 0 or 1.

    Parameters
    ----------
    y : array_like
        Answers (booleans pass as they are).
    what : str, default "answers"
        What ``y`` is, for the error message.

    Returns
    -------
    numpy.ndarray
        ``y`` as an array.

    Raises
    ------
    ValueError
        If a value is neither 0 nor 1. The message never echoes the offending values:
        they may be raw answers.
    """
    arr = np.asarray(y)
    if arr.size == 0 or arr.dtype == np.bool_:
        return arr
    if np.issubdtype(arr.dtype, np.integer):
        ok = arr.min() >= 0 and arr.max() <= 1
    else:
        ok = bool(np.all((arr == 0) | (arr == 1)))
    if not ok:
        raise ValueError(f"{what} must be 0 or 1")
    return arr


def flip_probability(epsilon: ArrayLike) -> NDArray[np.float64]:
    """Flip probability of ε-LDP randomized response, p_ε = 1/(1+e^ε).

    Parameters
    ----------
    epsilon : float or array_like
        Privacy level(s), each at least :data:`EPSILON_FLOOR`; ``inf`` for no privacy.

    Returns
    -------
    numpy.ndarray of float64
        p_ε, of the shape of ``epsilon``; 0 at ε = ∞.

    Raises
    ------
    ValueError
        If ε is below :data:`EPSILON_FLOOR` or NaN.

    Notes
    -----
    Computed as ``exp(-ε)/(1+exp(-ε))`` (the ``expit(-ε)`` form) so that it neither
    overflows for large ε nor loses precision.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    §3.1; docs/mechanisms.md §1.1.

    Examples
    --------
    >>> from app.stats import flip_probability
    >>> round(float(flip_probability(1.0)), 4)
    0.2689
    >>> float(flip_probability(float('inf')))
    0.0
    """
    eps = validate_epsilon(epsilon)
    t = np.exp(-eps)
    return t / (1.0 + t)


def privatize(y: ArrayLike, epsilon: ArrayLike, rng: RandomSource | None = None) -> NDArray[np.int8]:
    """Randomized response: report ``1 - y`` with probability 1/(1+e^ε), else ``y``.

    Parameters
    ----------
    y : array_like of {0, 1}
        True answers (1 means the first item of the pair won).
    epsilon : float or array_like
        Privacy level, a scalar or one value per answer (broadcast against ``y``, never
        enlarging it: an answer is randomized once).
    rng : RandomSource, optional
        Source of uniforms for reproducible simulations (a ``numpy.random.Generator``).
        ``None`` (default) draws from the OS CSPRNG; never pass a seeded generator for
        real answers.

    Returns
    -------
    numpy.ndarray of int8
        The reported answers ỹ, of the shape of ``y``.

    Raises
    ------
    ValueError
        If an answer is not 0 or 1, ε is invalid, or ``epsilon`` has more values than
        ``y``.

    Notes
    -----
    This is the mechanism 𝒜_p of the paper (§3.1, Definition 1 and the line after it):
    it is ε-locally differentially private for one comparison, because
    ``P(ỹ | y) / P(ỹ | 1-y) ≤ e^ε``.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    §3.1; docs/mechanisms.md §1.1.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import privatize
    >>> rng = np.random.default_rng(0)  # tests only: the service uses the OS CSPRNG (rng=None)
    >>> privatize([1, 1, 0, 0, 1], 2.0, rng).tolist()
    [1, 1, 1, 1, 1]
    >>> privatize([1, 0, 1], float('inf')).tolist()  # ε = ∞: never flipped
    [1, 0, 1]
    """
    y_arr = validate_binary(y, "answers")
    p = flip_probability(epsilon)
    _check_one_draw_per_answer(y_arr.shape, p.shape)
    y_arr, p = np.broadcast_arrays(y_arr.astype(np.int8), p)
    flips = uniform_draws(rng, y_arr.shape) < p
    return np.where(flips, 1 - y_arr, y_arr).astype(np.int8)


def _check_one_draw_per_answer(y_shape: tuple[int, ...], eps_shape: tuple[int, ...]) -> None:
    """ε may broadcast *to* the answers, never enlarge them: randomizing one answer
    several times lets the draws be averaged and the answer recovered (docs/mechanisms.md §1.2)."""
    try:
        shape = np.broadcast_shapes(y_shape, eps_shape)
    except ValueError:
        raise ValueError("epsilon must be a scalar or have one value per answer") from None
    if shape != tuple(y_shape):
        raise ValueError(
            "epsilon must be a scalar or have one value per answer (an answer is randomized once)"
        )


def debias(y_tilde: ArrayLike, epsilon: ArrayLike) -> NDArray[np.float64]:
    """Debiased response z of eq. (1): z = ((e^ε+1)ỹ − 1)/(e^ε − 1).

    Parameters
    ----------
    y_tilde : array_like of {0, 1}
        Reported (randomized) answers ỹ.
    epsilon : float or array_like
        The ε each answer was randomized at (broadcast against ``y_tilde``).

    Returns
    -------
    numpy.ndarray of float64
        z, with E z = σ(θ_i − θ_j) exactly (Lemma 2).

    Raises
    ------
    ValueError
        If ε is below :data:`EPSILON_FLOOR` or NaN.

    Notes
    -----
    Evaluated in the equivalent, overflow-free form z = (ỹ − p_ε)/tanh(ε/2)
    (docs/estimator.md §3). z takes the values −1/(e^ε−1) or e^ε/(e^ε−1), so z is never
    in [0, 1] for finite ε. ε = ∞ gives z = ỹ.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    eq. (1) and Lemma 2; docs/estimator.md §3.

    Examples
    --------
    >>> from app.stats import debias
    >>> import numpy as np
    >>> print(np.round(debias([1, 0], 1.0), 4))
    [ 1.582 -0.582]
    >>> print(debias([1, 0], float('inf')))  # no privacy: z = ỹ
    [1. 0.]
    """
    yt = np.asarray(y_tilde, dtype=np.float64)
    eps = validate_epsilon(epsilon)
    return (yt - flip_probability(eps)) / np.tanh(eps / 2.0)


def rr_probability(theta_i: ArrayLike, theta_j: ArrayLike, epsilon: ArrayLike) -> NDArray[np.float64]:
    """P(ỹ_ij = 1) under BTL followed by RR: p_ε + (1 − 2p_ε)·σ(θ_i − θ_j).

    Parameters
    ----------
    theta_i, theta_j : float or array_like
        Scores of the pair's first and second items.
    epsilon : float or array_like
        Privacy level(s).

    Returns
    -------
    numpy.ndarray of float64
        The probability that the reported answer says i won, shrunk towards ½.

    Raises
    ------
    ValueError
        If ε is below :data:`EPSILON_FLOOR` or NaN.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    Lemma 1.

    Examples
    --------
    >>> from app.stats import rr_probability
    >>> round(float(rr_probability(1.0, 0.0, 1.0)), 4)  # P(ỹ = 1): shrunk towards 1/2
    0.6068
    """
    p = flip_probability(epsilon)
    d = np.asarray(theta_i, dtype=np.float64) - np.asarray(theta_j, dtype=np.float64)
    return p + (1.0 - 2.0 * p) * _sigmoid(d)


def privacy_noise_variance(epsilon: ArrayLike) -> NDArray[np.float64]:
    """The variance RR adds to z: e^ε/(e^ε − 1)² = 1/(4 sinh²(ε/2)).

    Parameters
    ----------
    epsilon : float or array_like
        Privacy level(s).

    Returns
    -------
    numpy.ndarray of float64
        The privacy term of Var(z); 0 at ε = ∞.

    Raises
    ------
    ValueError
        If ε is below :data:`EPSILON_FLOOR` or NaN.

    Notes
    -----
    Lemma 2 in closed form reads Var(z) = σ'(θ_i − θ_j) + this term, which does not
    depend on θ (docs/estimator.md §3).

    Examples
    --------
    >>> from app.stats import privacy_noise_variance
    >>> round(float(privacy_noise_variance(1.0)), 4)
    0.9207
    """
    eps = validate_epsilon(epsilon)
    # e^{-ε}/(1 − e^{-ε})², written with expm1 so that large ε neither overflows nor warns.
    t = np.exp(-eps)
    return t / np.expm1(-eps) ** 2


def z_variance(theta_i: ArrayLike, theta_j: ArrayLike, epsilon: ArrayLike) -> NDArray[np.float64]:
    """Var(z_ij) of Lemma 2: c_ε²/4 − (½ − p_ε)²·c_ε²·tanh²((θ_i−θ_j)/2), c_ε = coth(ε/2).

    Parameters
    ----------
    theta_i, theta_j : float or array_like
        Scores of the pair's items.
    epsilon : float or array_like
        Privacy level(s).

    Returns
    -------
    numpy.ndarray of float64
        The variance of one debiased answer.

    Raises
    ------
    ValueError
        If ε is below :data:`EPSILON_FLOOR` or NaN.

    Notes
    -----
    Written exactly as the paper prints it, so that a test can compare it with the closed
    form σ'(d) + e^ε/(e^ε−1)² (docs/estimator.md §3).

    Examples
    --------
    >>> from app.stats import z_variance
    >>> round(float(z_variance(0.0, 0.0, 2.0)), 4)
    0.431
    """
    eps = validate_epsilon(epsilon)
    d = np.asarray(theta_i, dtype=np.float64) - np.asarray(theta_j, dtype=np.float64)
    c = 1.0 / np.tanh(eps / 2.0)
    half_minus_p = 0.5 - flip_probability(eps)
    return c**2 * (0.25 - half_minus_p**2 * np.tanh(d / 2.0) ** 2)


def laplace_privatize(
    y: ArrayLike, epsilon: ArrayLike, rng: RandomSource | None = None
) -> NDArray[np.float64]:
    """Laplace-mechanism baseline of Scenario V: y + Lap(0, 1/ε) per comparison.

    Parameters
    ----------
    y : array_like of {0, 1}
        True answers.
    epsilon : float or array_like
        Privacy level, a scalar or one value per answer.
    rng : RandomSource, optional
        Source of uniforms; ``None`` (default) draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray of float64
        The noisy answers, unbiased for ``y`` (not clipped or rounded).

    Raises
    ------
    ValueError
        If ε is invalid or ``epsilon`` has more values than ``y``.

    Notes
    -----
    The paper names the Laplace mechanism without its details; this is the
    reconstruction of docs/estimator.md §8.2: an answer in {0, 1} has sensitivity 1, so
    scale 1/ε gives ε-LDP per comparison, matching RR. The output needs no debiasing and
    must not be clipped or rounded. Its variance, p(1−p) + 2/ε², exceeds debiased RR's for
    every ε > 0.

    This is a research baseline: continuous Laplace noise from floating-point
    inverse-CDF sampling is not hardened against floating-point attacks, so the service
    never uses it to protect real answers.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import laplace_privatize
    >>> laplace_privatize([1, 0], 1.0, np.random.default_rng(0)).round(3).tolist()
    [1.32, -0.617]
    """
    y_arr = np.asarray(y, dtype=np.float64)
    eps = validate_epsilon(epsilon)
    _check_one_draw_per_answer(y_arr.shape, eps.shape)
    y_arr, eps = np.broadcast_arrays(y_arr, eps)
    # Centre [0, 1) on 0 and shift by half a grid step: both steps are exact, so
    # |u| ≤ 1/2 − 2⁻⁵⁴ and the inverse CDF below stays finite.
    u = (uniform_draws(rng, y_arr.shape) - 0.5) + 2.0**-54
    noise = -np.sign(u) * np.log1p(-2.0 * np.abs(u)) / eps
    return y_arr + noise


def _sigmoid(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return expit(x)


def randomization_p_value(n: ArrayLike, wins: ArrayLike, truthful: ArrayLike) -> float:
    """How compatible reported answers are with randomized response at their declared ε.

    Parameters
    ----------
    n : array_like of int
        Answers per pair.
    wins : array_like
        Reported wins of one orientation per pair.
    truthful : array_like
        Σₖ e^{εₖ}/(1 + e^{εₖ}) over each pair's answers: the most truthful answers
        randomized response can report, in expectation.

    Returns
    -------
    float
        A p-value for "these answers were randomized at the declared ε" (conservative);
        1.0 when no pair has answers.

    Raises
    ------
    ValueError
        If ``n``, ``wins`` and ``truthful`` do not have one value per pair.

    Notes
    -----
    Answer k is reported truthfully with probability qₖ = e^{εₖ}/(1 + e^{εₖ})
    (docs/estimator.md §3), so whatever the true answers, a pair's reported wins are a
    sum of independent Bernoulli draws with success probabilities in [1 − qₖ, qₖ]; by
    Hoeffding's inequality they exceed ``truthful`` (or fall below n − ``truthful``) by t
    with probability at most exp(−2t²/n), so pₖ = min(1, 2·exp(−2tₖ²/nₖ)) is a valid
    p-value for pair k. Given the true answers the pairs' randomizations are
    independent, so Fisher's combination X = −2 Σₖ log pₖ is stochastically below χ²
    with 2P degrees of freedom, and P(χ²_{2P} ≥ X) is the p-value (conservative: each pₖ
    is). Tiny values mean the answers agree more often than randomized response allows —
    for example a frontend that sends true answers while declaring them privatized.
    Answers without privacy (ε = ∞) have qₖ = 1 and never count against it.

    References
    ----------
    Hoeffding (1963), Theorem 2; Fisher (1932), §21.1; docs/uncertainty.md §5.

    Examples
    --------
    >>> q = 0.7310585786300049  # e/(1 + e): ε = 1
    >>> randomization_p_value([200], [200], [200 * q]) < 1e-9  # unanimous at ε = 1
    True
    >>> randomization_p_value([200], [140], [200 * q])  # 140 ≤ 146.2: possible
    1.0
    """
    counts = np.asarray(n, dtype=np.float64).reshape(-1)
    w = np.asarray(wins, dtype=np.float64).reshape(-1)
    top = np.asarray(truthful, dtype=np.float64).reshape(-1)
    if not counts.shape == w.shape == top.shape:
        raise ValueError("n, wins and truthful need one value per pair")
    seen = counts > 0
    if not seen.any():
        return 1.0
    counts, w, top = counts[seen], w[seen], top[seen]
    excess = np.maximum(np.maximum(w - top, (counts - top) - w), 0.0)
    log_p = np.minimum(math.log(2.0) - 2.0 * excess**2 / counts, 0.0)
    return float(chi2.sf(-2.0 * float(log_p.sum()), 2 * counts.size))
