"""The regularized Bradley–Terry–Luce objective J(θ) and its minimizer, the engine of every fit.

Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*, eq. (3)
in the per-comparison form J(θ) = Σ_{i<j} [S_ij (θ_j − θ_i) + n_ij log(1 + e^{θ_i − θ_j})]
+ λ‖θ‖² (docs/estimator.md §4.1; in the paper's complete design J = L × (3) with
λ = L·λ_paper). Its exact gradient and Hessian, strong convexity whatever z̄ and the
per-component centring are §4.2–4.3; the default ridge §4.4; the solver's settings
(:class:`FitOptions`) §4.5, the solver itself :mod:`app.stats.newton`. The debiased MLE
and the baselines built on :func:`fit_btl` are in :mod:`app.stats.mle`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.csgraph import connected_components
from scipy.special import expit

from .laplacian import MAX_ITEMS_COVARIANCE, laplacian, laplacian_pinv
from .mechanisms import validate_epsilon
from .newton import _linear_solver, _minimize, _Problem
from .pairs import PairStats, item_count, reduce_by_pair, validate_comparisons

__all__ = [
    "BTLFit",
    "FitOptions",
    "default_lambda",
    "fit_btl",
    "objective",
]

#: The solvers :class:`FitOptions` accepts.
_SOLVERS = ("auto", "dense", "cg")


@dataclass(frozen=True)
class FitOptions:
    """How :func:`fit_btl` minimizes J: the Newton solver's settings, not the data.

    Validated on construction, so that one object can be built once and passed to many
    fits (:func:`fit_btl` and the estimators of :mod:`app.stats.mle`).

    Attributes
    ----------
    tol : float, default 1e-10
        Relative tolerance: stop when ‖∇J‖∞ ≤ tol · max(1, max_k Σ_j n_kj), the largest
        number of comparisons of one item. Finite and > 0.
    atol : float, optional
        Absolute tolerance: stop when ‖∇J‖∞ ≤ atol instead, a threshold that does not
        depend on the data (the central-model releases need one). Finite and > 0.
    max_iter : int, default 100
        Newton iteration cap, ≥ 1.
    solver : {"auto", "dense", "cg"}, default "auto"
        The Newton systems' solver: dense Cholesky or preconditioned conjugate gradients;
        "auto": dense up to 200 items, and up to 2,000 items when at least a quarter of
        all pairs are observed; CG otherwise (docs/estimator.md §4.5).

    Raises
    ------
    ValueError
        On a non-positive or non-finite tolerance, a ``max_iter`` below 1 or an unknown
        solver.

    Examples
    --------
    >>> from app.stats import FitOptions
    >>> FitOptions(solver="cg", tol=1e-8)
    FitOptions(tol=1e-08, atol=None, max_iter=100, solver='cg')
    """

    tol: float = 1e-10
    atol: float | None = None
    max_iter: int = 100
    solver: str = "auto"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tol) and self.tol > 0):
            raise ValueError("tol must be a finite number > 0")
        if self.atol is not None and not (math.isfinite(self.atol) and self.atol > 0):
            raise ValueError("atol must be None or a finite number > 0")
        max_iter = self.max_iter
        if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
            raise ValueError("max_iter must be an integer >= 1")
        if self.solver not in _SOLVERS:
            raise ValueError("solver must be 'auto', 'dense' or 'cg'")


@dataclass(frozen=True, eq=False)
class FitData:
    """The per-pair data a fit used (canonical pairs i < j), kept for its uncertainty.

    ``s``: Σ of the values fitted (z, ỹ or y); ``v``: Σ over each pair's comparisons
    of the variance the privacy mechanism adds (e^ε/(e^ε−1)² for RR; 0 without
    privacy); ``s2``: Σ of the squared values when known (empirical variances).
    """

    i: NDArray[np.int64]
    j: NDArray[np.int64]
    n: NDArray[np.float64]
    s: NDArray[np.float64]
    v: NDArray[np.float64]
    s2: NDArray[np.float64] | None = None


@dataclass(frozen=True, eq=False)
class BTLFit:
    """Result of a BTL fit.

    ``cov`` and ``se`` (computed on first use, up to 2,000 items) are the sandwich
    covariance of θ̂ and its standard errors; see :mod:`app.stats.inference`, whose
    :func:`~app.stats.inference.confidence` gives bias-corrected intervals.

    Attributes
    ----------
    theta : ndarray (m,)
        θ̂; sums to zero on each connected component of the comparison graph
        (hence overall). Items with no comparisons get 0.
    lam : float
        The ridge λ used (in the per-comparison scaling of J).
    iterations : int
        Newton iterations taken.
    converged : bool
        Whether ‖∇J‖∞ ≤ tol · max(1, largest item comparison count).
    gradient_norm : float
        ‖∇J(θ̂)‖∞ at the returned point.
    objective : float
        J(θ̂).
    n_components : int
        Connected components of the comparison graph (isolated items included).
        With several components the scores of different components are not
        comparable: each is only identified up to its own shift.
    component : ndarray (m,)
        Component label of each item (0 .. n_components−1).
    n_comparisons, n_pairs : int
        Comparisons and distinct pairs the fit used.
    solver : str
        "dense" (Cholesky) or "cg" (preconditioned conjugate gradients).
    estimator : str
        "debiased", "naive" (classic RR), "laplace" or "custom" (:func:`fit_btl`).
    data : FitData
        The per-pair data the fit used.

    """

    theta: NDArray[np.float64]
    lam: float
    iterations: int
    converged: bool
    gradient_norm: float
    objective: float
    n_components: int
    component: NDArray[np.int64] = field(repr=False)
    n_comparisons: int = 0
    n_pairs: int = 0
    solver: str = "dense"
    estimator: str = "custom"
    data: FitData | None = field(default=None, repr=False)

    @property
    def fit_data(self) -> FitData:
        """``data``, for fits known to carry it (every fit this module makes does)."""
        if self.data is None:
            raise ValueError("this fit carries no per-pair data")
        return self.data

    @property
    def connected(self) -> bool:
        """True when every item is linked to every other through comparisons."""
        return self.n_components == 1

    @cached_property
    def cov(self) -> NDArray[np.float64]:
        """Sandwich covariance of θ̂ (on each component's sum-to-zero subspace):
        H⁻¹ L_V H⁻¹ with H = L_W + 2λI, W = nσ'(d̂), V = nσ'(d̂) + Σ e^ε/(e^ε−1)²
        (Lemma 2). Rows of never-compared items are 0."""
        m = self.theta.size
        if self.data is None or m > MAX_ITEMS_COVARIANCE:
            raise ValueError(f"cov needs the fit's data and at most {MAX_ITEMS_COVARIANCE} items")
        d = self.data
        sig = expit(self.theta[d.i] - self.theta[d.j])
        w = d.n * sig * (1.0 - sig)
        lap_w = laplacian(m, d.i, d.j, w)
        if self.lam > 0:
            h_inv = np.linalg.inv(lap_w + 2.0 * self.lam * np.eye(m))
        else:
            h_inv = laplacian_pinv(lap_w, self.component)
        cov = h_inv @ laplacian(m, d.i, d.j, w + d.v) @ h_inv
        return 0.5 * (cov + cov.T)

    @cached_property
    def se(self) -> NDArray[np.float64]:
        """Standard errors of θ̂: the square roots of ``cov``'s diagonal."""
        return np.sqrt(np.maximum(np.diag(self.cov), 0.0))


def default_lambda(stats_or_epsilon: PairStats | ArrayLike) -> float:
    """Default ridge λ = G(ε), the mean of coth²(ε/2) over the comparisons.

    Parameters
    ----------
    stats_or_epsilon : PairStats or array_like
        The fit's statistics, or the ε of each comparison.

    Returns
    -------
    float
        λ in the scaling of J; 1 with no comparisons.

    Notes
    -----
    The paper's experiments use λ_paper ≍ G(ε)/L for objective (3), which averages each
    pair over its L respondents (Scenario I, paper §5.1; docs/estimator.md §4.4 on why G/L
    and not the literal (e^ε+1)²/((e^ε−1)L)). J sums instead of averaging, so J = L·(3)
    and λ = L·λ_paper = G(ε) with constant 1. The same holds in incomplete designs with L
    replaced by any per-pair count, which cancels: the ridge is a fixed O(G) penalty while
    the data term grows with the number of comparisons, so its pull on θ̂ is O(G/n) per
    item — vanishing, and larger exactly when the privacy noise (variance ∝ G) is larger.
    λ > 0 always, which existence needs when z̄ ∉ [0, 1] (docs/estimator.md §4.3).

    Examples
    --------
    >>> from app.stats import default_lambda
    >>> round(default_lambda([2.0, 2.0]), 4)  # G(ε) = coth²(ε/2)
    1.7241
    """
    if isinstance(stats_or_epsilon, PairStats):
        return stats_or_epsilon.G
    eps = validate_epsilon(stats_or_epsilon)
    if eps.size == 0:
        return 1.0
    return float(np.mean(1.0 / np.tanh(eps / 2.0) ** 2))


def objective(theta: ArrayLike, i: ArrayLike, j: ArrayLike, n: ArrayLike, s: ArrayLike, lam: float) -> float:
    """J(θ) for pairs (i, j) with counts n and sums s (any orientation of i, j).

    Parameters
    ----------
    theta : array_like (m,)
        Scores.
    i, j : array_like of int
        The pairs.
    n : array_like
        Comparisons per pair.
    s : array_like
        Σ of the per-comparison values per pair, read as "i beat j".
    lam : float
        Ridge λ.

    Returns
    -------
    float
        J(θ) = Σ_{i<j} [S_ij (θ_j − θ_i) + n_ij log(1 + e^{θ_i − θ_j})] + λ‖θ‖².

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    eq. (3); docs/estimator.md §4.1.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import objective
    >>> round(objective(np.zeros(2), [0], [1], [1], [1], 0.0), 4)  # log 2
    0.6931
    """
    theta = np.asarray(theta, dtype=np.float64)
    d = theta[np.asarray(i)] - theta[np.asarray(j)]
    return float(
        np.dot(np.asarray(n, dtype=np.float64), np.logaddexp(0.0, d))
        - np.dot(np.asarray(s, dtype=np.float64), d)
        + lam * np.dot(theta, theta)
    )


def fit_btl(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    n: ArrayLike,
    s: ArrayLike,
    lam: float,
    *,
    v: ArrayLike | None = None,
    s2: ArrayLike | None = None,
    linear: ArrayLike | None = None,
    theta0: ArrayLike | None = None,
    estimator: str = "custom",
    options: FitOptions | None = None,
) -> BTLFit:
    """Minimize J(θ) for per-pair counts ``n`` and sums ``s`` (the engine of every fit).

    Parameters
    ----------
    n_items : int
        m.
    i, j : int arrays
        Distinct pairs (any orientation; S is read as "i beat j" for each row).
    n : array
        Comparisons per pair (> 0; non-integer weights are allowed).
    s : array
        Σ of the per-comparison values per pair: z for the debiased MLE, ỹ for
        classic RR, y for non-private data. Any real values.
    lam : float
        Ridge λ ≥ 0. λ = 0 (the plain MLE, each component centered) is accepted
        only when the minimizer exists: all z̄ in [0, 1] and Ford's condition
        (docs/estimator.md §4.3).
    v, s2 : arrays, optional
        Per pair: Σ of the privacy mechanism's added variance, and Σ of squared
        values; only used for uncertainty (``BTLFit.cov``, :mod:`.inference`).
    linear : array (m,), optional
        Adds bᵀθ to J (objective perturbation, :mod:`app.stats.central`). With
        λ > 0 the minimizer's component means are −1_cᵀb/(2λ|c|); θ̂ is returned
        centred per component, i.e. only b's part orthogonal to each component's
        constant vector is used (the means do not change any comparison of items).
    theta0 : array (m,), optional
        Warm start (e.g. the previous fit's θ̂ after new answers arrived); default 0.
    estimator : str, default "custom"
        What ``s`` sums, recorded in the result as ``BTLFit.estimator``.
    options : FitOptions, optional
        How to minimize: tolerances, iteration cap and solver; default ``FitOptions()``.

    Returns
    -------
    BTLFit
        θ̂ centred per connected component, with the solver's diagnostics and the data
        the fit used.

    Raises
    ------
    ValueError
        On inconsistent or non-finite inputs, λ < 0, or λ = 0 when the unpenalized
        minimizer does not exist (and :class:`FitOptions` on invalid settings).

    Notes
    -----
    The arguments say what is minimized and where to start; ``options`` how. The data —
    pairs, counts, sums and the per-pair ``v`` and ``s2`` — the ridge and the linear term
    define J, and ``estimator`` names it. ``theta0`` changes where Newton starts, not the
    minimizer, but it is the caller's previous answer rather than a setting (as ``x0`` is
    an argument of :func:`scipy.optimize.minimize`), so it stays an argument. The
    settings in :class:`FitOptions` are the ones a caller chooses once and reuses across
    fits; they are validated when the object is made.

    Damped Newton with Armijo backtracking on the exact gradient and Hessian; the Newton
    system by dense Cholesky or Jacobi-preconditioned conjugate gradients on a sparse
    Hessian (docs/estimator.md §4.5; :mod:`app.stats.newton`).

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import FitOptions, fit_btl
    >>> fit = fit_btl(2, [0], [1], [10], [7], 0.0)  # 7 wins in 10: θ₀ − θ₁ = logit(0.7)
    >>> fit.converged, np.round(fit.theta, 4).tolist()
    (True, [0.4236, -0.4236])
    >>> fit_btl(2, [0], [1], [10], [7], 0.0, options=FitOptions(solver="cg")).solver
    'cg'
    """
    opts = FitOptions() if options is None else options
    m = item_count(n_items)
    ia, ja = validate_comparisons(m, i, j)
    n_arr = np.asarray(n, dtype=np.float64).reshape(-1)
    s_arr = np.asarray(s, dtype=np.float64).reshape(-1)
    if n_arr.shape != ia.shape or s_arr.shape != ia.shape:
        raise ValueError("n and s need one value per pair")
    if np.any(n_arr <= 0) or not np.all(np.isfinite(n_arr)) or not np.all(np.isfinite(s_arr)):
        raise ValueError("n must be positive and n, s finite")
    v_arr = np.zeros_like(n_arr) if v is None else np.asarray(v, dtype=np.float64).reshape(-1)
    s2_arr = None if s2 is None else np.asarray(s2, dtype=np.float64).reshape(-1)
    if v_arr.shape != n_arr.shape or (s2_arr is not None and s2_arr.shape != n_arr.shape):
        raise ValueError("v and s2 need one value per pair")
    ia, ja, n_arr, s_arr, v_arr, s2_arr = _canonical_pairs(m, ia, ja, n_arr, s_arr, v_arr, s2_arr)
    lam = float(lam)
    if not lam >= 0 or not math.isfinite(lam):
        raise ValueError("lambda must be a finite number >= 0")

    graph = scipy.sparse.coo_matrix((np.ones(ia.size), (ia, ja)), shape=(m, m))
    n_comp, labels = connected_components(graph, directed=False)
    labels = labels.astype(np.int64)
    sizes = np.bincount(labels, minlength=n_comp).astype(np.float64)

    prob = _Problem(m, ia, ja, n_arr, s_arr, lam)
    if linear is not None:
        b = np.array(linear, dtype=np.float64).reshape(-1)
        if b.shape != (m,) or not np.all(np.isfinite(b)):
            raise ValueError("linear must be a finite vector of length n_items")
        # Keep b's part orthogonal to the component constants: the centred minimizer.
        prob.linear = b - (np.bincount(labels, b, n_comp) / sizes)[labels]
    lin = _linear_solver(prob, labels, sizes, n_comp, opts.solver)

    def center(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return x - (np.bincount(labels, x, n_comp) / sizes)[labels]

    if lam == 0:
        _check_mle_exists(m, ia, ja, n_arr, s_arr, labels, n_comp)
    start = np.zeros(m) if theta0 is None else np.array(theta0, dtype=np.float64).reshape(-1)
    if start.shape != (m,) or not np.all(np.isfinite(start)):
        raise ValueError("theta0 must be a finite vector of length n_items")
    scale = max(1.0, float((np.bincount(ia, n_arr, m) + np.bincount(ja, n_arr, m)).max(initial=0.0)))
    threshold = opts.tol * scale if opts.atol is None else float(opts.atol)
    theta, iterations, gnorm = _minimize(
        prob, lin, start, theta0 is not None, threshold, scale, opts.max_iter, center
    )

    # Lemma 3: the exact minimizer sums to zero on each component; remove the
    # rounding drift so that callers can rely on it.
    theta = center(theta)
    return BTLFit(
        theta=theta,
        lam=lam,
        iterations=iterations,
        converged=bool(gnorm <= threshold),
        gradient_norm=gnorm,
        objective=prob.value(theta, prob.new_cache()),
        n_components=int(n_comp),
        component=labels,
        n_comparisons=round(float(n_arr.sum())),
        n_pairs=int(ia.size),
        solver=lin.name,
        estimator=estimator,
        data=FitData(ia, ja, n_arr, s_arr, v_arr, s2_arr),
    )


def _check_mle_exists(m, ia, ja, n_arr, s_arr, labels, n_comp) -> None:
    """λ = 0: raise ``ValueError`` unless the unpenalized minimizer exists.

    With every z̄_ij = S_ij/n_ij in [0, 1] (non-private or classic-RR data), J is
    the BTL likelihood and its maximizer exists iff, within each connected
    component, the digraph "a beat b at least once" is strongly connected (Ford,
    1957). With some z̄ outside [0, 1] — debiased private data — J can be
    unbounded below (docs/estimator.md §4.3), so λ must be positive.
    """
    if np.any(s_arr < 0) or np.any(s_arr > n_arr):
        raise ValueError(
            "lambda = 0 is not allowed for debiased data (some pair's mean z lies outside [0, 1], "
            "so the objective can be unbounded below); use lambda > 0"
        )
    won = s_arr > 0  # i beat j at least once
    lost = s_arr < n_arr  # j beat i at least once
    src = np.concatenate((ia[won], ja[lost]))
    dst = np.concatenate((ja[won], ia[lost]))
    digraph = scipy.sparse.coo_matrix((np.ones(src.size), (src, dst)), shape=(m, m))
    n_strong, _ = connected_components(digraph, directed=True, connection="strong")
    if n_strong != n_comp:
        raise ValueError(
            "the unpenalized MLE does not exist: some items won (or lost) every comparison against "
            "the rest of their component; use lambda > 0"
        )


def _canonical_pairs(m, ia, ja, n_arr, s_arr, v_arr, s2_arr):
    """Orient every pair i < j (S → n − S, S² → Σ(1 − x)² when swapped) and merge
    repeated pairs, so that each pair is one Laplacian edge; a no-op for
    :class:`PairStats` data."""
    key = np.minimum(ia, ja) * m + np.maximum(ia, ja)
    if np.all(ia < ja) and np.all(key[1:] > key[:-1]):
        return ia, ja, n_arr, s_arr, v_arr, s2_arr
    swap = ia > ja
    lo, hi = np.where(swap, ja, ia), np.where(swap, ia, ja)
    if s2_arr is not None:  # Σ(1 − x)² = n − 2Σx + Σx²
        s2_arr = np.where(swap, n_arr - 2.0 * s_arr + s2_arr, s2_arr)
    s_arr = np.where(swap, n_arr - s_arr, s_arr)
    weights = (n_arr, s_arr, v_arr) if s2_arr is None else (n_arr, s_arr, v_arr, s2_arr)
    lo, hi, _, sums = reduce_by_pair(lo, hi, m, weights)
    return lo, hi, sums[0], sums[1], sums[2], (sums[3] if s2_arr is not None else None)
