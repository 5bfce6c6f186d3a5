"""Damped Newton for the BTL objective J(θ) of :mod:`app.stats.btl` (docs/estimator.md §4.5).

Exact gradient and Hessian in preallocated buffers; Newton systems by dense Cholesky on an
m × m matrix or by Jacobi-preconditioned conjugate gradients on a sparse Hessian (no m × m
matrix then), each made definite along the components' constant vectors; Armijo
backtracking, re-centring per component, and the fallbacks from a stalled warm start or
stalled inexact steps.
"""

from __future__ import annotations

import threading

import numpy as np
import scipy.linalg
import scipy.sparse
from numpy.typing import NDArray
from threadpoolctl import ThreadpoolController

__all__ = ["DENSE_MAX_ITEMS"]

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


def _linear_solver(
    prob: _Problem, labels: NDArray[np.int64], sizes: NDArray[np.float64], n_comp: int, solver: str
) -> _DenseSolver | _CGSolver:
    """The Newton systems' solver: ``solver``, or for "auto" the cheaper one for the design."""
    m = prob.m
    # Cholesky costs m³/3 per step whatever the design; a CG step costs a few dozen
    # passes over the P observed pairs. CG wins on sparse designs and dense on complete
    # ones (rows 3 and 2 of `python -m tests.benchmarks.bench_stats` time each, with the
    # solver it chose), and dense is immune to ill-conditioning.
    dense_enough = prob.i.size >= 0.25 * m * (m - 1) / 2
    use_dense = solver == "dense" or (
        solver == "auto" and (m <= 200 or (m <= DENSE_MAX_ITEMS and dense_enough))
    )
    if use_dense:
        return _DenseSolver(prob, [np.flatnonzero(labels == c) for c in range(n_comp)])
    return _CGSolver(prob, labels, sizes)


def _minimize(
    prob: _Problem,
    lin: _DenseSolver | _CGSolver,
    start: NDArray[np.float64],
    warm: bool,
    threshold: float,
    scale: float,
    max_iter: int,
    center,
) -> tuple[NDArray[np.float64], int, float]:
    """Newton from ``start`` (a warm start when ``warm``), with its fallbacks; returns
    (θ, iterations, ‖∇J‖∞)."""
    m = prob.m

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
    if gnorm > threshold and warm:
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
    return theta, iterations, gnorm


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
