"""The debiased regularized MLE of the Bradley–Terry–Luce model and its baselines.

Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*, eq. (3)
in the per-comparison form J(θ) = Σ_{i<j} [S_ij (θ_j − θ_i) + n_ij log(1 + e^{θ_i − θ_j})]
+ λ‖θ‖² (docs/estimator.md §4.1; in the paper's complete design J = L × (3) with
λ = L·λ_paper). Its exact gradient and Hessian, strong convexity whatever z̄ and the
per-component centring are §4.2–4.3; the default ridge §4.4; the solver (damped Newton,
dense Cholesky or preconditioned CG on a sparse Hessian, no m × m matrix then) §4.5; the
baselines §8.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.linalg
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.csgraph import connected_components
from scipy.special import expit
from threadpoolctl import ThreadpoolController

from .laplacian import MAX_ITEMS_COVARIANCE, laplacian, laplacian_pinv
from .mechanisms import validate_epsilon
from .pairs import PairStats, item_count, pair_stats, reduce_by_pair, validate_comparisons

__all__ = [
    "BTLFit",
    "default_lambda",
    "fit_btl",
    "fit_debiased_mle",
    "fit_debiased_mle_stats",
    "fit_laplace_mle",
    "fit_naive_mle",
    "fit_naive_mle_stats",
    "objective",
]

#: Above this many items the Newton system is solved by conjugate gradients.
DENSE_MAX_ITEMS = 2000

_threadpools: ThreadpoolController | None = None


def _single_threaded_blas():
    """Context pinning BLAS to one thread. OpenBLAS's worker threads spin after
    each call and steal the core that the surrounding NumPy passes need; on small
    machines a one-thread Cholesky inside the Newton loop is faster overall (row 2 of
    ``python -m tests.benchmarks.bench_stats``, m = 1,000 complete, times it). The limit is
    process-wide, so it is only taken on the main thread (threaded servers set
    their own policy)."""
    global _threadpools
    if _threadpools is None:
        _threadpools = ThreadpoolController()
    return _threadpools.limit(limits=1, user_api="blas")


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


class _Problem:
    """J restricted to the observed pairs, with its exact derivatives.

    Newton's cost is a handful of passes over the P observed pairs per
    iteration, so every pass writes into preallocated buffers: allocating fresh
    multi-megabyte temporaries costs more than the arithmetic itself.
    """

    def __init__(
        self,
        m: int,
        i: NDArray[np.int64],
        j: NDArray[np.int64],
        n: NDArray[np.float64],
        s: NDArray[np.float64],
        lam: float,
    ) -> None:
        self.m, self.i, self.j, self.n, self.s, self.lam = m, i, j, n, s, lam
        self.linear: NDArray[np.float64] | None = None  # an optional term bᵀθ
        size = i.size
        self._tmp = np.empty(size)
        self._tmp2 = np.empty(size)
        self._mask = np.empty(size, dtype=bool)
        self.weights = np.empty(size)

    def new_cache(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return np.empty(self.i.size), np.empty(self.i.size)

    def value(
        self, theta: NDArray[np.float64], cache: tuple[NDArray[np.float64], NDArray[np.float64]]
    ) -> float:
        """J(θ); leaves d = θ_i − θ_j and e^{−|d|} in ``cache`` for :meth:`derivatives`."""
        d, e = cache
        tmp, tmp2 = self._tmp, self._tmp2
        np.take(theta, self.i, out=d, mode="clip")
        d -= np.take(theta, self.j, out=tmp, mode="clip")
        np.abs(d, out=e)
        np.negative(e, out=e)
        np.exp(e, out=e)
        # softplus(d) = log(1 + e^d) = max(d, 0) + log1p(e^{−|d|}): stable for any d.
        np.log1p(e, out=tmp)
        np.maximum(d, 0.0, out=tmp2)
        tmp += tmp2
        value = float(self.n @ tmp - self.s @ d + self.lam * (theta @ theta))
        return value if self.linear is None else value + float(self.linear @ theta)

    def derivatives(
        self, theta: NDArray[np.float64], cache: tuple[NDArray[np.float64], NDArray[np.float64]]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """∇J(θ) and the Laplacian edge weights n_ij σ'(θ_i − θ_j) at the cached point."""
        d, e = cache
        r, sig, w = self._tmp, self._tmp2, self.weights
        np.add(e, 1.0, out=r)
        np.reciprocal(r, out=r)  # r = 1/(1 + e^{−|d|})
        np.multiply(e, r, out=sig)  # σ(d) for d < 0 ...
        np.greater_equal(d, 0.0, out=self._mask)
        np.copyto(sig, r, where=self._mask)  # ... and for d ≥ 0
        sig *= self.n
        sig -= self.s  # n σ(d) − S
        g = np.bincount(self.i, sig, self.m).astype(np.float64, copy=False)  # int64 when empty
        g -= np.bincount(self.j, sig, self.m)
        g += 2.0 * self.lam * theta
        if self.linear is not None:
            g += self.linear
        np.multiply(r, r, out=w)
        w *= e
        w *= self.n  # n σ'(d) = n e^{−|d|} r²
        return g, w


class _DenseSolver:
    """Newton systems (L_w + 2λI [+ P]) x = b by Cholesky on an m×m matrix.

    Only the lower triangle is written (LAPACK ``potrf`` reads no more), into a
    Fortran-ordered buffer so that no copy is made on the way to LAPACK.
    """

    name = "dense"

    def __init__(self, prob: _Problem, components: list[NDArray[np.int64]]) -> None:
        self.prob = prob
        self.components = components
        self.hess = np.zeros((prob.m, prob.m), order="F")
        self.diag = np.diag_indices(prob.m)

    def solve(self, w: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        p, h = self.prob, self.hess
        h.fill(0.0)
        h[p.j, p.i] = -w  # j > i: the lower triangle
        diag = np.bincount(p.i, w, p.m) + np.bincount(p.j, w, p.m)
        h[self.diag] = diag + 2.0 * p.lam
        # L_w is singular along each component's 1_c, so with λ tiny or 0 the
        # factorization would fail. θ is kept centered per component, the gradient
        # is then ⊥ 1_c, and adding ρ·1_c1_cᵀ/|c| leaves the Newton step unchanged
        # while making the matrix definite; ρ matches L_w's scale.
        rho = max(float(diag.mean()), 1.0)
        for members in self.components:
            if members.size == p.m:
                h += rho / p.m
            else:
                h[np.ix_(members, members)] += rho / members.size
        factor = scipy.linalg.cho_factor(h, lower=True, overwrite_a=True, check_finite=False)
        return scipy.linalg.cho_solve(factor, b, check_finite=False)


class _CGSolver:
    """Newton systems by Jacobi-preconditioned CG on a CSR Hessian (no m×m array)."""

    name = "cg"

    def __init__(self, prob: _Problem, labels: NDArray[np.int64], sizes: NDArray[np.float64]) -> None:
        self.prob = prob
        m, n_pairs = prob.m, prob.i.size
        rows = np.concatenate((prob.i, prob.j, np.arange(m)))
        cols = np.concatenate((prob.j, prob.i, np.arange(m)))
        # Build the sparsity pattern once; tag[k] tells which input entry sits at
        # CSR slot k, so later iterations only permute new values into place.
        tag = np.arange(1, rows.size + 1, dtype=np.float64)
        self.mat = scipy.sparse.csr_matrix((tag, (rows, cols)), shape=(m, m))
        self.mat.sort_indices()
        self.slot = np.rint(self.mat.data).astype(np.int64) - 1
        self.buf = np.empty(2 * n_pairs + m)
        self.labels, self.sizes = labels, sizes
        self.rtol = 0.1
        self.exact = False  # solve every Newton system to round-off (the fallback)

    def solve(self, w: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        p = self.prob
        n_pairs = p.i.size
        diag = np.bincount(p.i, w, p.m) + np.bincount(p.j, w, p.m) + 2.0 * p.lam
        self.buf[:n_pairs] = -w
        self.buf[n_pairs : 2 * n_pairs] = -w
        self.buf[2 * n_pairs :] = diag
        self.mat.data[:] = self.buf[self.slot]
        mat, labels, sizes = self.mat, self.labels, self.sizes
        # As in the dense solver: ρ Σ_c 1_c1_cᵀ/|c| makes the system definite
        # without changing the step (θ stays centered per component).
        rho = max(float(diag.mean()), 1.0)

        def matvec(x: NDArray[np.float64]) -> NDArray[np.float64]:
            return mat.dot(x) + rho * (np.bincount(labels, x, sizes.size) / sizes)[labels]

        return _pcg(matvec, b, 1.0 / (diag + rho / sizes[labels]), self.rtol)


def _pcg(matvec, b: NDArray[np.float64], precond: NDArray[np.float64], rtol: float) -> NDArray[np.float64]:
    """Preconditioned conjugate gradients for an SPD system, from x = 0.

    In exact arithmetic CG ends in at most m steps; 2m (≥ 1,000) allows for
    round-off. An inexact last iterate is still a descent direction for Newton.
    """
    max_iter = max(1000, 2 * b.size)
    x = np.zeros_like(b)
    r = b.copy()
    target = rtol * np.linalg.norm(b)
    zv = precond * r
    p = zv.copy()
    rz = r @ zv
    for _ in range(max_iter):
        if np.linalg.norm(r) <= target:
            break
        ap = matvec(p)
        alpha = rz / (p @ ap)
        x += alpha * p
        r -= alpha * ap
        zv = precond * r
        rz_new = r @ zv
        p *= rz_new / rz
        p += zv
        rz = rz_new
    return x


def fit_btl(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    n: ArrayLike,
    s: ArrayLike,
    lam: float,
    *,
    theta0: ArrayLike | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
    solver: str = "auto",
    v: ArrayLike | None = None,
    s2: ArrayLike | None = None,
    estimator: str = "custom",
    linear: ArrayLike | None = None,
    atol: float | None = None,
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
    theta0 : array, optional
        Warm start (e.g. the previous fit's θ̂ after new answers arrived).
    tol : float
        Stop when ‖∇J‖∞ ≤ tol · max(1, max_k Σ_j n_kj).
    max_iter : int
        Newton iteration cap.
    solver : {"auto", "dense", "cg"}
        "auto": dense Cholesky up to 200 items, and up to 2,000 items when at least
        a quarter of all pairs are observed; CG otherwise.
    v, s2 : arrays, optional
        Per pair: Σ of the privacy mechanism's added variance, and Σ of squared
        values; only used for uncertainty (``BTLFit.cov``, :mod:`.inference`).
    estimator : str
        A label recorded in the result.
    linear : array (m,), optional
        Adds bᵀθ to J (objective perturbation, :mod:`app.stats.central`). With
        λ > 0 the minimizer's component means are −1_cᵀb/(2λ|c|); θ̂ is returned
        centred per component, i.e. only b's part orthogonal to each component's
        constant vector is used (the means do not change any comparison of items).
    atol : float, optional
        Stop when ‖∇J‖∞ ≤ atol instead: a threshold that does not depend on the
        data (the central-model releases need one).

    Returns
    -------
    BTLFit
        θ̂ centred per connected component, with the solver's diagnostics and the data
        the fit used.

    Raises
    ------
    ValueError
        On inconsistent or non-finite inputs, λ < 0, an unknown solver, or λ = 0 when the
        unpenalized minimizer does not exist.

    Notes
    -----
    Damped Newton with Armijo backtracking on the exact gradient and Hessian; the Newton
    system by dense Cholesky or Jacobi-preconditioned conjugate gradients on a sparse
    Hessian (docs/estimator.md §4.5).

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import fit_btl
    >>> fit = fit_btl(2, [0], [1], [10], [7], 0.0)  # 7 wins in 10: θ₀ − θ₁ = logit(0.7)
    >>> fit.converged, np.round(fit.theta, 4).tolist()
    (True, [0.4236, -0.4236])
    """
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
    if solver not in ("auto", "dense", "cg"):
        raise ValueError("solver must be 'auto', 'dense' or 'cg'")

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
    # Cholesky costs m³/3 per step whatever the design; a CG step costs a few dozen
    # passes over the P observed pairs. CG wins on sparse designs and dense on complete
    # ones (rows 3 and 2 of `python -m tests.benchmarks.bench_stats` time each, with the
    # solver it chose), and dense is immune to ill-conditioning.
    dense_enough = ia.size >= 0.25 * m * (m - 1) / 2
    use_dense = solver == "dense" or (
        solver == "auto" and (m <= 200 or (m <= DENSE_MAX_ITEMS and dense_enough))
    )
    if use_dense:
        lin: _DenseSolver | _CGSolver = _DenseSolver(
            prob, [np.flatnonzero(labels == c) for c in range(n_comp)]
        )
    else:
        lin = _CGSolver(prob, labels, sizes)

    def center(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return x - (np.bincount(labels, x, n_comp) / sizes)[labels]

    if lam == 0:
        _check_mle_exists(m, ia, ja, n_arr, s_arr, labels, n_comp)
    start = np.zeros(m) if theta0 is None else np.array(theta0, dtype=np.float64).reshape(-1)
    if start.shape != (m,) or not np.all(np.isfinite(start)):
        raise ValueError("theta0 must be a finite vector of length n_items")
    scale = max(1.0, float((np.bincount(ia, n_arr, m) + np.bincount(ja, n_arr, m)).max(initial=0.0)))
    threshold = tol * scale if atol is None else float(atol)

    def run(theta: NDArray[np.float64]) -> tuple[NDArray[np.float64], int, float]:
        if (
            isinstance(lin, _DenseSolver)
            and m >= 128
            and threading.current_thread() is threading.main_thread()
        ):
            with _single_threaded_blas():
                return _newton(prob, lin, center(theta), threshold, scale, max_iter, center)
        return _newton(prob, lin, center(theta), threshold, scale, max_iter, center)

    theta, iterations, gnorm = run(start)
    if gnorm > threshold and theta0 is not None:
        # A warm start far from the optimum can stall (weights underflow there);
        # the cold start from 0 is the robust default.
        theta, more, gnorm = run(np.zeros(m))
        iterations += more
    if gnorm > threshold and isinstance(lin, _CGSolver):
        # Inexact steps can strand Newton on a nearly piecewise-linear objective
        # (extreme debiased data: most weights underflow, and which ones do
        # depends on the path, hence on BLAS round-off). Exact steps from 0 follow
        # the dense solver's path, which gets there in a few iterations.
        lin.exact = True
        theta, more, gnorm = run(np.zeros(m))
        iterations += more

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


def _newton(
    prob: _Problem,
    lin: _DenseSolver | _CGSolver,
    theta: NDArray[np.float64],
    threshold: float,
    scale: float,
    max_iter: int,
    center,
) -> tuple[NDArray[np.float64], int, float]:
    """Damped Newton with Armijo backtracking; returns (θ, iterations, ‖∇J‖∞).

    θ is re-centered on every component after each step: the minimizer is
    centered (Lemma 3, per component), centering never increases J, and it keeps
    the gradient orthogonal to the components' constant vectors, which the
    linear solvers rely on.
    """
    cache, spare = prob.new_cache(), prob.new_cache()
    value = prob.value(theta, cache)
    g, w = prob.derivatives(theta, cache)
    gnorm = float(np.abs(g).max(initial=0.0))
    previous = gnorm
    iterations = 0
    history: list[float] = []
    while gnorm > threshold and iterations < max_iter:
        history.append(gnorm)
        stalled = len(history) > 10 and gnorm > 0.5 * history[-11]
        if isinstance(lin, _CGSolver) and not lin.exact and stalled:
            break  # ten steps did not halve ‖∇J‖; the caller falls back to exact steps
        if isinstance(lin, _CGSolver) and lin.exact:
            lin.rtol = 1e-12
        elif isinstance(lin, _CGSolver):
            # Inexact Newton, Eisenstat–Walker choice 2: solve loosely far from
            # the optimum, tightly as the gradient shrinks (superlinear rate).
            # Safeguard: EW loosens the solve to 0.1 whenever the gradient stops
            # shrinking, which on nearly piecewise-linear objectives (extreme
            # debiased data, weights underflowing off a few hundred pairs) makes
            # inexact steps that never progress. So when the last step did not
            # at least halve the gradient, tighten a hundredfold instead; an
            # almost exact solve gives the dense solver's Newton step.
            ratio = gnorm / previous if previous > 0 else 1.0
            forcing = min(0.1, 0.9 * ratio * ratio)
            if iterations > 0 and ratio > 0.5:
                forcing = min(forcing, 0.01 * lin.rtol)
            lin.rtol = max(forcing, 0.5 * threshold / gnorm, 1e-12)
        try:
            step = lin.solve(w, -g)
        except np.linalg.LinAlgError:
            break  # reported as not converged
        slope = float(g @ step)
        if not slope < 0:  # numerical breakdown; a Newton direction always descends
            step, slope = -g, -float(g @ g)
        iterations += 1
        t = 1.0
        while True:
            candidate = theta + t * step
            new_value = prob.value(candidate, spare)
            if new_value <= value + 1e-4 * t * slope:
                break
            if new_value - value <= 1e-13 * (1.0 + abs(value)):
                # The change is below the objective's round-off: judge the step
                # by the gradient instead (standard near the optimum).
                g_new, _ = prob.derivatives(candidate, spare)
                if np.abs(g_new).max(initial=0.0) < gnorm:
                    break
            t *= 0.5
            if t < 1e-10:
                return theta, iterations, gnorm  # no further progress in floating point
        theta = center(candidate)
        value = new_value
        cache, spare = spare, cache
        previous = gnorm
        g, w = prob.derivatives(theta, cache)
        gnorm = float(np.abs(g).max(initial=0.0))
    return theta, iterations, gnorm


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


def _fit_stats(stats: PairStats, sums, lam, estimator: str, v, s2, options: dict) -> BTLFit:
    lam = default_lambda(stats) if lam is None else lam
    return fit_btl(
        stats.n_items, stats.i, stats.j, stats.n, sums, lam, v=v, s2=s2, estimator=estimator, **options
    )


def fit_debiased_mle_stats(stats: PairStats, lam: float | None = None, **options) -> BTLFit:
    """The debiased regularized MLE (eq. (3)) from sufficient statistics.

    Parameters
    ----------
    stats : PairStats
        Per-pair sufficient statistics (:func:`~app.stats.pairs.pair_stats`).
    lam : float, optional
        Ridge λ; ``None`` uses :func:`default_lambda` (λ = G(ε)).
    **options
        ``theta0``, ``tol``, ``max_iter``, ``solver`` of :func:`fit_btl`.

    Returns
    -------
    BTLFit
        The fit, with the privacy variance and Σz² kept for its uncertainty.

    Raises
    ------
    ValueError
        As :func:`fit_btl`.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    eq. (3); docs/estimator.md §4.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import fit_debiased_mle_stats, pair_stats
    >>> stats = pair_stats(3, [0, 0, 1, 1], [1, 2, 2, 2], [1, 1, 0, 1], 1.0)
    >>> np.round(fit_debiased_mle_stats(stats).theta, 4).tolist()
    [0.2141, -0.107, -0.107]
    """
    return _fit_stats(stats, stats.sum_z, lam, "debiased", stats.sum_v, stats.sum_z2, options)


def fit_naive_mle_stats(stats: PairStats, lam: float | None = None, **options) -> BTLFit:
    """Classic-RR baseline: the same fit on the raw privatized ỹ, no debiasing.

    Parameters
    ----------
    stats : PairStats
        Per-pair sufficient statistics.
    lam : float, optional
        Ridge λ; ``None``: the same default λ as the debiased fit.
    **options
        ``theta0``, ``tol``, ``max_iter``, ``solver`` of :func:`fit_btl`.

    Returns
    -------
    BTLFit
        The fit of the privatized answers taken as BTL data.

    Raises
    ------
    ValueError
        As :func:`fit_btl`.

    Notes
    -----
    The paper's Scenario V comparator (paper §5.3; docs/estimator.md §8.1): its scores
    converge to the BTL fit of q_ij = p_ε + (1−2p_ε)σ(θ*_i−θ*_j), attenuated towards 0 by
    about tanh(ε/2), so it is inconsistent for θ* (its ranking is not, in complete
    homogeneous designs).

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import fit_naive_mle_stats, pair_stats
    >>> stats = pair_stats(3, [0, 0, 1, 1], [1, 2, 2, 2], [1, 1, 0, 1], 1.0)
    >>> np.round(fit_naive_mle_stats(stats).theta, 4).tolist()  # shrunk towards 0
    [0.0989, -0.0494, -0.0494]
    """
    # ỹ² = ỹ; the classic-RR model treats ỹ as BTL data, so it adds no variance term.
    return _fit_stats(stats, stats.sum_y, lam, "naive", None, stats.sum_y, options)


def fit_debiased_mle(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    y_tilde: ArrayLike,
    epsilon: ArrayLike,
    lam: float | None = None,
    **options,
) -> BTLFit:
    """Debiased regularized MLE of Xu, Sun & Cheng, eq. (3), from comparisons.

    Parameters
    ----------
    n_items : int
        Number of items m (indices 0 .. m−1).
    i, j : int arrays (N,)
        The compared items of each comparison.
    y_tilde : {0, 1} array (N,)
        Privatized outcome, 1 if i was reported the winner.
    epsilon : float or array (N,)
        The RR privacy level each comparison was randomized with (∞: not).
    lam : float, optional
        Ridge λ in the scaling of J; default :func:`default_lambda`.
    **options
        ``theta0``, ``tol``, ``max_iter``, ``solver`` of :func:`fit_btl`.

    Returns
    -------
    BTLFit
        θ̂ centred per connected component, with the solver's diagnostics.

    Raises
    ------
    ValueError
        On invalid comparisons, answers or ε, and as :func:`fit_btl`.

    References
    ----------
    Xu, Sun & Cheng, *Rate-Optimal Rank Aggregation with Private Pairwise Rankings*,
    eq. (3); docs/estimator.md §4.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats import fit_debiased_mle, privatize
    >>> rng = np.random.default_rng(1)
    >>> theta = np.array([1.0, 0.0, -1.0])
    >>> i, j = rng.integers(0, 3, 3000), rng.integers(0, 3, 3000)
    >>> keep = i != j; i, j = i[keep], j[keep]
    >>> y = (rng.random(i.size) < 1 / (1 + np.exp(theta[j] - theta[i]))).astype(int)
    >>> fit = fit_debiased_mle(3, i, j, privatize(y, 2.0, rng), 2.0)
    >>> fit.converged, np.argsort(-fit.theta).tolist()
    (True, [0, 1, 2])
    >>> bool(np.abs(fit.theta - theta).max() < 0.2)
    True
    """
    return fit_debiased_mle_stats(pair_stats(n_items, i, j, y_tilde, epsilon), lam, **options)


def fit_naive_mle(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    y_tilde: ArrayLike,
    epsilon: ArrayLike,
    lam: float | None = None,
    **options,
) -> BTLFit:
    """Classic-RR baseline from comparisons; see :func:`fit_naive_mle_stats`.

    Parameters
    ----------
    n_items : int
        Number of items m.
    i, j : int arrays (N,)
        The compared items of each comparison.
    y_tilde : {0, 1} array (N,)
        Privatized outcome, 1 if i was reported the winner.
    epsilon : float or array (N,)
        The ε each comparison was randomized with (for the default λ).
    lam : float, optional
        Ridge λ; default :func:`default_lambda`.
    **options
        ``theta0``, ``tol``, ``max_iter``, ``solver`` of :func:`fit_btl`.

    Returns
    -------
    BTLFit
        The fit of the privatized answers taken as BTL data.

    Raises
    ------
    ValueError
        On invalid comparisons, answers or ε, and as :func:`fit_btl`.
    """
    return fit_naive_mle_stats(pair_stats(n_items, i, j, y_tilde, epsilon), lam, **options)


def fit_laplace_mle(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    y_noisy: ArrayLike,
    epsilon: ArrayLike,
    lam: float | None = None,
    **options,
) -> BTLFit:
    """Laplace baseline of Scenario V: eq. (3) with z replaced by y + Lap(1/ε).

    Parameters
    ----------
    n_items : int
        Number of items m.
    i, j : int arrays (N,)
        The compared items of each comparison.
    y_noisy : array (N,)
        The Laplace mechanism's outputs (:func:`~app.stats.mechanisms.laplace_privatize`).
    epsilon : float or array (N,)
        The ε of each comparison.
    lam : float, optional
        Ridge λ; default the same G(ε) as for RR at that ε, for a like-for-like comparison.
    **options
        ``theta0``, ``tol``, ``max_iter``, ``solver`` of :func:`fit_btl`.

    Returns
    -------
    BTLFit
        The fit, with the Laplace variance 2/ε² per comparison kept for its uncertainty.

    Raises
    ------
    ValueError
        On invalid comparisons or ε, and as :func:`fit_btl`.

    Notes
    -----
    The Laplace output is already unbiased, so it enters J as is (docs/estimator.md §8.2).
    """
    eps = validate_epsilon(epsilon)
    ia, ja = validate_comparisons(n_items, i, j)
    y = np.broadcast_to(np.asarray(y_noisy, dtype=np.float64), ia.shape)
    stats = PairStats.from_values(n_items, ia, ja, y, y, np.broadcast_to(2.0 / eps**2, ia.shape))
    lam = default_lambda(np.broadcast_to(eps, ia.shape)) if lam is None else lam
    return _fit_stats(stats, stats.sum_z, lam, "laplace", stats.sum_v, stats.sum_z2, options)
