"""The Mallows mechanism of ε-ranking DP: dispersion, stage laws, sampling and
privatizing a ranking, and the Laplace baseline (docs/mechanisms.md §3).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..mechanisms import RandomSource, uniform_draws
from .permutations import insertion_decode, kendall_distance

#: 2⁻⁵³: one step of a 53-bit uniform.
_TWO_POW_MINUS_53 = 2.0**-53


#: Largest b·t for which a Mallows stage is drawn through expm1(bt) (it overflows at 709.78).
_LOG1P_FORM_MAX = 700.0


def mallows_dispersion(n_items: int, epsilon: ArrayLike) -> NDArray[np.float64]:
    """b = ε/(m − 1): the weight per concordant pair that gives ε-ranking DP.

    Parameters
    ----------
    n_items : int
        m.
    epsilon : float or array_like
        ε > 0 (``inf`` for no privacy).

    Returns
    -------
    numpy.ndarray of float64
        b.

    Raises
    ------
    ValueError
        If ε is not positive.

    Notes
    -----
    Lemma 1 with the normalised T (docs/mechanisms.md §3.2, "Printed normalization").

    Examples
    --------
    >>> from app.stats.rankings import mallows_dispersion
    >>> float(mallows_dispersion(5, 2.0))
    0.5
    """
    eps = np.asarray(epsilon, dtype=np.float64)
    if np.any(np.isnan(eps)) or np.any(eps <= 0):
        raise ValueError("epsilon must be > 0 (inf for no privacy)")
    if n_items < 2:
        return np.full_like(eps, np.inf)
    return eps / (n_items - 1)


def stage_pmf(t: int, b: float) -> NDArray[np.float64]:
    """P(V^(t) = k), k = 0..t-1: the truncated geometric q^k (q−1)/(q^t−1), q = e^b.

    Parameters
    ----------
    t : int
        The stage, 2..m.
    b : float
        The weight per concordant pair; ``inf`` puts all mass on t − 1.

    Returns
    -------
    numpy.ndarray of float64 (t,)
        The probabilities.

    Notes
    -----
    Theorem 1(3) of *Ranking Differential Privacy*; docs/mechanisms.md §3.2.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.rankings import stage_pmf
    >>> np.round(stage_pmf(3, np.log(2)), 4).tolist()  # 1/7, 2/7, 4/7
    [0.1429, 0.2857, 0.5714]
    """
    k = np.arange(t, dtype=np.float64)
    if math.isinf(b):
        return (k == t - 1).astype(np.float64)
    if b == 0:
        return np.full(t, 1.0 / t)
    # e^{-b(t-1-k)} normalised; computed from the top to avoid overflow.
    w = np.exp(-b * (t - 1 - k))
    return w / w.sum()


def stage_moments(t: int, n_items: int, epsilon: float) -> tuple[float, float]:
    """Theorem 1(3): E V^(t) = t q^t/(q^t−1) − q/(q−1) and Var V^(t), q = e^{ε/(m−1)}.

    Parameters
    ----------
    t : int
        The stage, 2..m.
    n_items : int
        m.
    epsilon : float
        ε.

    Returns
    -------
    tuple of float
        (E V^(t), Var V^(t)).
    """
    b = float(mallows_dispersion(n_items, epsilon))
    if math.isinf(b):
        return float(t - 1), 0.0
    if b * t < 1e-5:  # second-order series: the closed forms cancel catastrophically
        return (t - 1) / 2 + b * (t * t - 1) / 12, (t * t - 1) / 12
    # In e^{-b} so that nothing overflows: 1 − q^{-t} = −expm1(−tb).
    d_t, d_1 = -math.expm1(-t * b), -math.expm1(-b)
    mean = t / d_t - 1 / d_1
    # Var = d²/db² log Σ_k e^{bk} = q/(q−1)² − t² q^t/(q^t−1)².
    var = math.exp(-b) / d_1**2 - t * t * math.exp(-t * b) / d_t**2
    return mean, var


def mallows_log_normalizer(n_items: int, b: float) -> float:
    """log Z(b), Z(b) = Σ_σ e^{−b d_K(σ₀, σ)} = Π_{t=1}^m (1 − e^{−tb})/(1 − e^{−b}).

    Parameters
    ----------
    n_items : int
        m.
    b : float
        The weight per discordant pair.

    Returns
    -------
    float
        log Z(b), independent of σ₀.

    Notes
    -----
    docs/mechanisms.md §3.2; docs/federated.md §2, eq. (1) of the federated paper with
    φ = e^{−b}.
    """
    if math.isinf(b):
        return 0.0
    t = np.arange(1, n_items + 1, dtype=np.float64)
    if b == 0:
        return float(np.sum(np.log(t)))
    return float(np.sum(np.log(-np.expm1(-t * b)) - math.log(-math.expm1(-b))))


def mallows_log_pmf(sample: ArrayLike, center: ArrayLike, epsilon: float) -> NDArray[np.float64] | float:
    """log P(𝒜_ε(center) = sample) = −b d_K(center, sample) − log Z(b), b = ε/(m−1).

    Parameters
    ----------
    sample : array_like of int
        Output ordering(s).
    center : array_like of int
        The input ordering.
    epsilon : float
        ε.

    Returns
    -------
    float or numpy.ndarray
        The log-probability of each sample.
    """
    s = np.asarray(sample)
    m = s.shape[-1]
    b = float(mallows_dispersion(m, epsilon))
    d = np.asarray(kendall_distance(center, sample), dtype=np.float64)
    out = np.where(d == 0, 0.0, -np.inf) if math.isinf(b) else -b * d - mallows_log_normalizer(m, b)
    return float(out) if out.ndim == 0 else out


def _survival_uniform(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """V = U₁ + U₂·2⁻⁵³ on [0, 1] from two 53-bit uniforms (last axis): with U₁ = K·2⁻⁵³,
    V = fl(K + U₂)·2⁻⁵³, nondecreasing in (K, U₂) taken in lexicographic order. Near 0
    its resolution is 2⁻¹⁰⁶ (K = 0) or one unit in the last place of V (K ≥ 1), so
    P(V ≤ s) = s to a relative 2⁻⁵² for every s ≥ 2⁻⁵³: a stage outcome of probability
    e^(−30) ≈ 10⁻¹³ gets its exact share, where one uniform would give it a whole number of
    2⁻⁵³ steps (docs/mechanisms.md §3.2, "Sampling")."""
    return u[..., 0] + u[..., 1] * _TWO_POW_MINUS_53


def _sample_stages(b: NDArray[np.float64], m: int, rng: RandomSource | None) -> NDArray[np.int64]:
    """V^(t), t = 2..m, for each row's dispersion b: the truncated geometric
    P(V^(t) = k) ∝ e^(bk), k = 0..t−1 (Algorithm 1 of *Ranking Differential Privacy* as
    the repeated-insertion model; docs/mechanisms.md §3.2, "Sampling"), two uniforms per
    stage.

    With J = t − 1 − V^(t) (discordant pairs) and V uniform on [0, 1],
    J ≥ j ⇔ V ≤ S_j = P(J ≥ j) = (e^(−bj) − e^(−bt))/(1 − e^(−bt)), so that the rarest
    outcome, J = t − 1, is the event V ≤ S_(t−1) ≈ e^(−b(t−1)) next to V = 0, where
    :func:`_survival_uniform` has full relative precision. Solved for V^(t):
    V^(t) ≥ k ⇔ V > S_(t−k) = expm1(bk)/expm1(bt) ⇔ log1p(V·expm1(bt)) > bk, i.e.

      V^(t) = ⌈log1p(V·expm1(bt))/b⌉ − 1,

    each operation exact to a relative rounding, so every boundary S_j is hit to a
    relative error of order (1 + bt)·2⁻⁵³ for every b (no cancellation for small b,
    none near V = 0 for large b). Where expm1(bt) would overflow (bt > 700, beyond the
    service's ε) the same function is V^(t) = t − 1 − ⌊−log(e^(−bt) + V·(1 − e^(−bt)))/b⌋.
    Limits: b = 0 gives ⌈V·t⌉ − 1 (uniform), b = ∞ gives t − 1 (the input order); V = 0
    (probability 2⁻¹⁰⁶) falls in the rarest outcome, V = 1 in the likeliest.
    """
    n = b.size
    t = np.arange(2, m + 1, dtype=np.float64)[None, :]
    v = _survival_uniform(uniform_draws(rng, (n, m - 1, 2)))
    bb = b[:, None]
    bt = bb * t
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = np.ceil(np.log1p(v * np.expm1(np.minimum(bt, _LOG1P_FORM_MAX))) / bb) - 1
        far = (t - 1) - np.floor(-np.log(np.exp(-bt) - v * np.expm1(-bt)) / bb)
    k = np.where(bt > _LOG1P_FORM_MAX, far, k)
    k = np.where(bb == 0, np.ceil(v * t) - 1, k)  # b = 0: uniform
    k = np.where(np.isinf(bb), t - 1, k)  # ε = ∞: the input order
    return np.clip(k, 0, t - 1).astype(np.int64)


def mallows_privatize(order: ArrayLike, epsilon: ArrayLike, rng: RandomSource | None = None) -> NDArray:
    """ε-ranking-DP synthetic ranking: Algorithm 1 of *Ranking Differential Privacy*.

    Parameters
    ----------
    order : array_like
        One ordering (1-d) or one per row, best → worst; its entries may be any item
        labels.
    epsilon : float or array_like
        A scalar or one value per row (``inf``: no privacy).
    rng : RandomSource, optional
        For reproducible simulations; ``None`` draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray
        An ordering (best → worst) per input, distributed as the Mallows model centred at
        ``order`` with weight b = ε/(m − 1) per concordant pair,
        P(σ̃) ∝ exp(−b·d_K(order, σ̃)) (Lemma 2).

    Raises
    ------
    ValueError
        If ``order`` is not 1-d or 2-d, or ``epsilon`` has neither one value nor one per row.

    Notes
    -----
    Implemented as the repeated-insertion model the algorithm reduces to
    (docs/mechanisms.md §3.2: τ(k, χ) = k, so V^(t) is a truncated geometric, independent
    across stages): O(m²).

    Guarantee: for orderings that differ by moving one item (the paper's neighbours,
    Definition 2; docs/mechanisms.md §3.1) the output probabilities differ by at most e^ε
    (Lemma 1; exact, attained). Against arbitrary changes of the ranking it is εm/2-LDP
    (docs/mechanisms.md §3.3) — not ε-LDP. Privatizing the same ranking twice composes.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.rankings import mallows_privatize
    >>> out = mallows_privatize([0, 1, 2, 3], 2.0, np.random.default_rng(0))  # the service: OS CSPRNG
    >>> sorted(out.tolist())  # a permutation of the same items
    [0, 1, 2, 3]
    """
    arr = np.asarray(order)
    if arr.ndim not in (1, 2):
        raise ValueError("give one ordering (1-d) or one ordering per row (2-d)")
    single = arr.ndim == 1
    arr = np.atleast_2d(arr)
    n, m = arr.shape
    eps = np.asarray(epsilon, dtype=np.float64)
    if eps.ndim > 1 or (eps.ndim == 1 and eps.size != n):
        raise ValueError("epsilon must be a scalar or one value per ranking")
    b = np.broadcast_to(mallows_dispersion(m, eps), (n,)).astype(np.float64)
    if m < 2:
        return arr[0].copy() if single else arr.copy()
    v = _sample_stages(b, m, rng)
    out = insertion_decode(arr, v)
    return out[0] if single else out


def mallows_sample(
    center: ArrayLike, phi: float, size: int, rng: RandomSource | None = None
) -> NDArray[np.int64]:
    """``size`` orderings from the Mallows model P(σ) ∝ φ^{d_K(center, σ)}, φ ∈ (0, 1].

    Parameters
    ----------
    center : array_like of int
        The central ordering.
    phi : float
        Dispersion φ ∈ (0, 1] (1: uniform).
    size : int
        Number of orderings.
    rng : RandomSource, optional
        For reproducible simulations; ``None`` draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray of int64 (size, m)
        The orderings.

    Raises
    ------
    ValueError
        If φ is outside (0, 1] or ``center`` is not one ordering.

    Notes
    -----
    docs/federated.md §2, federated paper eq. (1); the same sampler as
    :func:`mallows_privatize` with b = −log φ.
    """
    if not 0 < phi <= 1:
        raise ValueError("phi must be in (0, 1]")
    c = np.asarray(center)
    if c.ndim != 1:
        raise ValueError("center must be one ordering")
    b = np.full(size, -math.log(phi) if phi < 1 else 0.0)
    if c.size < 2:
        return np.broadcast_to(c, (size, c.size)).copy()
    v = _sample_stages(b, c.size, rng)
    return insertion_decode(np.broadcast_to(c, (size, c.size)), v)


def adjacent_flip_probability(n_items: int, epsilon: float) -> float:
    """P(two items adjacent in the input swap in 𝒜_ε) = 1/(1 + e^{ε/(m−1)}).

    Parameters
    ----------
    n_items : int
        m.
    epsilon : float
        ε.

    Returns
    -------
    float
        The probability (docs/mechanisms.md §3.2, §3.5).

    Examples
    --------
    >>> from app.stats.rankings import adjacent_flip_probability
    >>> round(adjacent_flip_probability(3, 2.0), 4)  # 1/(1 + e)
    0.2689
    """
    b = float(mallows_dispersion(n_items, epsilon))
    return 0.0 if math.isinf(b) else 1.0 / (1.0 + math.exp(b))


def expected_concordant_pairs(n_items: int, epsilon: float) -> float:
    """E C(φ, 𝒜_ε(φ)) = Σ_{t=2}^m E V^(t) (Theorem 1(3); docs/mechanisms.md §3.2).

    Parameters
    ----------
    n_items : int
        m.
    epsilon : float
        ε.

    Returns
    -------
    float
        The expected concordant pairs of input and output, C(m, 2) as ε → ∞.
    """
    return float(sum(stage_moments(t, n_items, epsilon)[0] for t in range(2, n_items + 1)))


def laplace_rank_privatize(order: ArrayLike, epsilon: float, rng: RandomSource | None = None) -> NDArray:
    """The paper's competitor (Lemma 3): Laplace(2(m−1)/ε) noise on each item's rank, re-sorted.

    Parameters
    ----------
    order : array_like
        One ordering (1-d) or one per row.
    epsilon : float
        ε.
    rng : RandomSource, optional
        For reproducible simulations; ``None`` draws from the OS CSPRNG.

    Returns
    -------
    numpy.ndarray
        The re-sorted ordering(s) (post-processing of the noisy ranks).

    Notes
    -----
    A research baseline only: continuous noise from a floating-point inverse CDF is not
    hardened against floating-point attacks.
    """
    arr = np.asarray(order)
    single = arr.ndim == 1
    arr = np.atleast_2d(arr)
    n, m = arr.shape
    scale = 2.0 * (m - 1) / float(epsilon)
    u = (uniform_draws(rng, (n, m)) - 0.5) + 2.0**-54
    noisy = np.arange(m)[None, :] - np.sign(u) * np.log1p(-2.0 * np.abs(u)) * scale
    out = np.take_along_axis(arr, np.argsort(noisy, axis=1, kind="stable"), axis=1)
    return out[0] if single else out


def laplace_expected_concordant_pairs(n_items: int, epsilon: float) -> float:
    """E C under :func:`laplace_rank_privatize`.

    Parameters
    ----------
    n_items : int
        m.
    epsilon : float
        ε.

    Returns
    -------
    float
        Σ_d (m−d)[1 − (½ + dε/(8(m−1)))e^{−dε/(2(m−1))}] (Lemma 4's proof;
        docs/mechanisms.md §3.4, table).
    """
    m = n_items
    d = np.arange(1, m, dtype=np.float64)
    x = d * epsilon / (2.0 * (m - 1))
    return float(np.sum((m - d) * (1.0 - (0.5 + x / 4.0) * np.exp(-x))))
