"""The cluster-robust meat of the sandwich: respondents as clusters, CR1, CR2 with
Bell–McCaffrey degrees of freedom, and the worst-case bound (docs/uncertainty.md §3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, ndtri, stdtrit

from ..laplacian import laplacian
from ..mechanisms import (
    debias,
    privacy_noise_variance,
    validate_epsilon,
)
from ..pairs import reduce_by_pair, validate_comparisons


@dataclass(frozen=True, eq=False)
class Clusters:
    """Comparisons grouped by respondent, the independent unit of a survey.

    One row per comparison: items ``i``, ``j`` (any orientation), ``z`` its
    debiased value in that orientation (eq. (1): E z = σ(θ_i − θ_j)), ``v`` the
    variance randomized response added to it (e^ε/(e^ε−1)², 0 without privacy)
    and ``cluster`` the respondent's code in 0 … n_clusters − 1.
    """

    n_items: int
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    z: NDArray[np.float64]
    v: NDArray[np.float64]
    cluster: NDArray[np.int64]
    n_clusters: int

    @classmethod
    def from_answers(
        cls, n_items: int, i: ArrayLike, j: ArrayLike, y_tilde: ArrayLike, epsilon: ArrayLike, respondent
    ) -> Clusters:
        """From reported answers (``y_tilde`` = 1 when i won; privatized at ``epsilon``,
        ``inf`` for true answers) and any respondent labels (strings or numbers)."""
        ia, ja = validate_comparisons(n_items, i, j)
        eps = np.broadcast_to(validate_epsilon(epsilon), ia.shape)
        y = np.asarray(y_tilde, dtype=np.float64).reshape(-1)
        labels = np.asarray(respondent).reshape(-1)
        if y.shape != ia.shape or labels.shape != ia.shape:
            raise ValueError("y_tilde and respondent need one value per comparison")
        _, codes = np.unique(labels, return_inverse=True)
        codes = codes.astype(np.int64).reshape(-1)
        return cls(
            int(n_items),
            ia,
            ja,
            debias(y, eps),
            privacy_noise_variance(eps) * np.ones(ia.size),
            codes,
            int(codes.max(initial=-1)) + 1,
        )

    @property
    def sizes(self) -> NDArray[np.int64]:
        """Comparisons per respondent."""
        return np.bincount(self.cluster, minlength=self.n_clusters)

    def meat(self, theta: NDArray) -> NDArray[np.float64]:
        """Σ_r u_r u_rᵀ at ``theta`` (:func:`_cluster_meat`)."""
        return _cluster_meat(theta, self)

    def as_rows(self, n_items: int) -> Clusters:
        """These clusters (the interface of :class:`~app.stats.clusters.ClusterMoments`,
        whose rows are materialized on demand)."""
        return self

    def _check_matches(self, data) -> None:
        """Refuse clusters that are not the fit's data (counts and Σz per pair)."""
        m = self.n_items
        lo, hi = np.minimum(self.i, self.j), np.maximum(self.i, self.j)
        z = np.where(self.i < self.j, self.z, 1.0 - self.z)
        key = lo * m + hi
        fit_key = data.i * m + data.j
        if self.i.size != round(float(data.n.sum())):
            raise ValueError("the clusters are not the comparisons the fit used")
        if m * m <= 4 * max(key.size, 1):  # a direct lookup table of the fit's pairs
            table = np.full(m * m, -1, dtype=np.int64)
            table[fit_key] = np.arange(fit_key.size)
            pos = table[key]
        else:
            pos = np.searchsorted(fit_key, key)
            pos[pos >= fit_key.size] = 0
            pos[fit_key[pos] != key] = -1
        if np.any(pos < 0):
            raise ValueError("the clusters are not the comparisons the fit used")
        n = np.bincount(pos, minlength=fit_key.size)
        s = np.bincount(pos, z, minlength=fit_key.size)
        same_s = np.allclose(s, data.s, rtol=0.0, atol=1e-6 * (1.0 + np.abs(data.s).max(initial=0.0)))
        if not (np.array_equal(n, np.rint(data.n)) and same_s):
            raise ValueError("the clusters are not the comparisons the fit used")


class ClusterSource(Protocol):
    """Comparisons grouped by respondent, as :func:`confidence` uses them: :class:`Clusters`
    (the rows) or :class:`~app.stats.clusters.ClusterMoments` (sums kept as answers arrive)."""

    @property
    def n_clusters(self) -> int: ...

    def meat(self, theta: NDArray) -> NDArray[np.float64]:
        """Σ_r u_r u_rᵀ at ``theta``."""
        ...

    def as_rows(self, n_items: int) -> Clusters:
        """The rows, over ``n_items`` items."""
        ...

    def _check_matches(self, data) -> None: ...


def _cluster_meat(theta: NDArray, clusters: Clusters) -> NDArray[np.float64]:
    """Σ_r u_r u_rᵀ with u_r = Σ_{k ∈ r} (σ(θ_i − θ_j) − z_k)(e_i − e_j): the spread of
    the estimating equation over respondents (sparse: Σ_r (items of r)² work)."""
    m, c = clusters.n_items, clusters
    resid = expit(theta[c.i] - theta[c.j]) - c.z
    if c.n_clusters * m <= 20_000_000:  # dense G×m and one BLAS product: faster when it fits
        u = np.asarray(np.bincount(c.cluster * m + c.i, resid, c.n_clusters * m), dtype=np.float64)
        u -= np.bincount(c.cluster * m + c.j, resid, c.n_clusters * m)
        u = u.reshape(c.n_clusters, m)
        return u.T @ u
    rows = np.concatenate((c.cluster, c.cluster))
    cols = np.concatenate((c.i, c.j))
    vals = np.concatenate((resid, -resid))
    u = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(c.n_clusters, m))
    meat = (u.T @ u).toarray()
    return 0.5 * (meat + meat.T)


def _comparison_laplacian(m: int, i: NDArray, j: NDArray, w: NDArray) -> NDArray[np.float64]:
    """Σ_k w_k (e_i − e_j)(e_i − e_j)ᵀ over comparisons k, pairs repeated or in either
    orientation (summed per pair first: :func:`laplacian` takes distinct pairs)."""
    if i.size == 0:
        return np.zeros((m, m))
    lo, hi, _, (ws,) = reduce_by_pair(np.minimum(i, j), np.maximum(i, j), m, (np.asarray(w, dtype=float),))
    return laplacian(m, lo, hi, ws)


def _bound_meat(theta: NDArray, clusters: Clusters) -> NDArray[np.float64]:
    """An upper bound (in the PSD order) on E Σ_r u_r u_rᵀ whatever the correlation of
    one respondent's true answers: the privacy noise is independent across answers
    (drawn afresh from the CSPRNG), and for the true-answer part Cauchy–Schwarz
    gives Var(Σ_{k∈r} a_k) ⪯ L_r Σ_{k∈r} Var(a_k). So each comparison counts with
    variance v_k + L_r σ'(θ_i − θ_j), L_r its respondent's number of answers."""
    c = clusters
    s = expit(theta[c.i] - theta[c.j])
    weight = c.v + c.sizes[c.cluster] * s * (1.0 - s)
    return _comparison_laplacian(c.n_items, c.i, c.j, weight)


#: :func:`_cr2` is used while G·(n + m)² and m·G² stay within CR2_MAX_WORK (n: the most
#: answers of one respondent): it takes O(G·(n + m)² + m·G²) memory and
#: O(G·(n + m)³ + m²·G²) operations; beyond, the bound (:func:`_bound_meat`).
CR2_MAX_WORK = 4_000_000


def _cr2(
    theta: NDArray, clusters: Clusters, lw_pinv: NDArray, resid: NDArray | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The bias-reduced cluster-robust meat (CR2) and the Bell–McCaffrey degrees of freedom.

    Linearized at θ with x_k = e_i − e_j, W = diag(σ'_k), Φ = diag(σ'_k + v_k) (the
    working model: answers independent with Lemma 2's variance, privacy noise
    included), H = XᵀWX (``lw_pinv`` = H⁺): the residuals e = z − σ(Xθ) of a fit are
    ê ≈ (I − Q)e with Q = WXH⁺Xᵀ, so under the working model
    E ê_g ê_gᵀ = B_g = Φ_g − W_g X_g H⁺X_gᵀ Φ_g − Φ_g X_g H⁺X_gᵀ W_g + W_g X_g C X_gᵀ W_g,
    C = H⁺ L_Φ H⁺ the model-based covariance. With
    A_g = Φ_g^{1/2} (Φ_g^{-1/2} B_g Φ_g^{-1/2})^{-1/2} Φ_g^{-1/2} (pseudo-inverse roots),
    A_g B_g A_gᵀ = Φ_g, and the meat Σ_g X_gᵀ A_g ê_g ê_gᵀ A_gᵀ X_g is unbiased for
    XᵀΦX under the working model (Bell & McCaffrey 2002, *Survey Methodology* 28(2);
    Pustejovsky & Tipton 2018, *J. Business & Economic Statistics* 36(4), eq. (6)–(7)).

    Degrees of freedom (Satterthwaite on V̂ = Σ_g (p_gᵀ ê_g)², p_g = A_gᵀ X_g H⁺ c):
    with t_g = (I − Q)ᵀ p_g (p_g padded with zeros) and Ω_gh = t_gᵀ Φ t_h,
    df = (tr Ω)² / tr Ω² (Bell & McCaffrey 2002 §3; Imbens & Kolesár 2016,
    *Review of Economics and Statistics* 98(4), eq. (8)), for c = each identified item's
    score (NaN where Ω = 0: an item no cluster's residuals inform). Ω expands
    with r_g = H⁺X_gᵀW_g p_g and s_g = X_gᵀ Φ_g p_g into
    δ_gh p_gᵀΦ_g p_g − s_gᵀr_h − r_gᵀs_h + r_gᵀ L_Φ r_h, all in item space.

    ``resid`` replaces z − σ(Xθ) (tests feed residuals of the linear working model).
    Work: O(G·(n + m)³ + m²·G²), n the most answers of one respondent (rows padded to n).
    """
    c = clusters
    m, g_count = c.n_items, c.n_clusters
    s = expit(theta[c.i] - theta[c.j])
    w = s * (1.0 - s)
    phi = np.maximum(w + c.v, np.finfo(float).tiny)
    e = c.z - s if resid is None else np.asarray(resid, dtype=np.float64)
    l_phi = _comparison_laplacian(m, c.i, c.j, phi)
    c_model = lw_pinv @ l_phi @ lw_pinv
    # Every respondent's rows padded to the largest respondent's count: a padded row has
    # x = 0, w = 0, Φ = 1 and residual 0, so its block of B is the identity, A is the
    # identity there, and it adds nothing to the meat or to Ω. Batched over respondents.
    order = np.argsort(c.cluster, kind="stable")
    sizes = c.sizes
    width = int(sizes.max(initial=1))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    who = c.cluster[order]
    slot = np.full((g_count, width), -1, dtype=np.int64)
    slot[who, np.arange(order.size) - starts[who]] = order
    valid = slot >= 0
    take = np.where(valid, slot, 0)
    ig, jg = np.where(valid, c.i[take], 0), np.where(valid, c.j[take], 0)
    wg = np.where(valid, w[take], 0.0)
    pg = np.where(valid, phi[take], 1.0)
    eg = np.where(valid, e[take], 0.0)
    sq = np.sqrt(pg)
    x = np.zeros((g_count, width, m))  # X_g, zero rows for padding
    gi, ki = np.nonzero(valid)
    x[gi, ki, ig[gi, ki]] = 1.0
    x[gi, ki, jg[gi, ki]] -= 1.0
    xh = x @ lw_pinv  # X_g H⁺
    xhx = xh @ x.transpose(0, 2, 1)  # X_g H⁺ X_gᵀ
    xcx = (x @ c_model) @ x.transpose(0, 2, 1)  # X_g C X_gᵀ
    t = wg[:, :, None] * xhx * pg[:, None, :]  # W_g X_g H⁺X_gᵀ Φ_g
    b = -t - t.transpose(0, 2, 1) + wg[:, :, None] * xcx * wg[:, None, :]
    b[:, np.arange(width), np.arange(width)] += pg
    b = b / sq[:, :, None] / sq[:, None, :]
    vals, vecs = np.linalg.eigh(0.5 * (b + b.transpose(0, 2, 1)))
    keep = vals > 1e-10 * np.maximum(vals.max(axis=1, keepdims=True), 1.0)
    inv_root = np.where(keep, 1.0 / np.sqrt(np.where(keep, vals, 1.0)), 0.0)
    a = sq[:, :, None] * ((vecs * inv_root[:, None, :]) @ vecs.transpose(0, 2, 1)) / sq[:, None, :]
    u = (x.transpose(0, 2, 1) @ (a @ eg[:, :, None]))[:, :, 0]  # X_gᵀ A_g ê_g, (G, m)
    meat = u.T @ u
    p = a.transpose(0, 2, 1) @ xh  # p_g for each item's contrast (columns), (G, n, m)
    xt = x.transpose(0, 2, 1)
    r_all = lw_pinv @ (xt @ (wg[:, :, None] * p))  # r_g = H⁺X_gᵀW_g p_g, (G, m, m)
    s_all = xt @ (pg[:, :, None] * p)  # s_g = X_gᵀΦ_g p_g
    d_all = (pg[:, :, None] * p * p).sum(axis=1)  # p_gᵀΦ_g p_g, (G, m)
    meat = 0.5 * (meat + meat.T)
    # Ω for every contrast a at once, (m, G, G), by batched products.
    r_t = r_all.transpose(2, 0, 1)  # (a, g, i)
    cross = s_all.transpose(2, 0, 1) @ r_all.transpose(2, 1, 0)  # s_gᵀ r_h
    omega = (r_t @ l_phi) @ r_all.transpose(2, 1, 0) - cross - cross.transpose(0, 2, 1)
    diag = np.arange(g_count)
    omega[:, diag, diag] += d_all.T
    tr = np.trace(omega, axis1=1, axis2=2)
    tr2 = np.einsum("agh,ahg->a", omega, omega)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(tr2 > 0, tr * tr / tr2, np.nan)
    return meat, df


def _psd_max(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """An upper bound of both in the PSD order: a + (b − a)₊, the positive part by
    eigendecomposition (an upper bound, not the least one: two matrices that are not
    ordered have no least upper bound, Kadison 1951; docs/uncertainty.md §3). Used as
    cluster meat ∨ model meat: an item seen by only a handful of respondents has a
    cluster-robust variance estimated from that handful,
    which can be far too small (measured: se 0.10 where the model gives 1.9 for an
    item in 27 comparisons from 3 respondents); the model-based meat floors it, while
    items with many respondents keep their (larger) cluster-robust variance."""
    vals, vecs = np.linalg.eigh(0.5 * ((b - a) + (b - a).T))
    pos = vals > 0
    return a + (vecs[:, pos] * vals[pos]) @ vecs[:, pos].T


#: The cluster covariances :func:`confidence` can be asked for (``cluster_variance``):
#: "auto" chooses (docs/uncertainty.md §3, "Which one"); the others force one, for the comparison in
#: ``tests/benchmarks/bench_small_sample.py``.
CLUSTER_VARIANCES = ("auto", "cr1", "cr2", "cr2_unfloored", "bound")


def _cr2_affordable(clusters: Clusters) -> bool:
    """Whether :func:`_cr2` fits its budget (:data:`CR2_MAX_WORK`)."""
    g, m = clusters.n_clusters, clusters.n_items
    n = int(clusters.sizes.max(initial=0))
    return g * (n + m) ** 2 <= CR2_MAX_WORK and m * g * g <= CR2_MAX_WORK


def _cluster_variance(
    centre: NDArray,
    clusters: ClusterSource,
    lw_pinv: NDArray,
    model_meat: NDArray,
    identified: NDArray,
    min_clusters: int,
    choice: str,
    level: float,
) -> tuple[str, NDArray[np.float64], float | None]:
    """The cluster meat of :func:`confidence`, its method name and the degrees of freedom of
    its Student-t critical value (None: normal), as chosen by ``choice``.

    "auto": from max(``min_clusters``, 2 × identified items) respondents on, CR1 with
    t(G − 1). Below, CR2 with Bell–McCaffrey degrees of freedom or the worst-case bound,
    whichever is narrower *under the working model*: CR2's meat is then unbiased for the
    model meat L_Φ, so its expected half-width is t_df·se_model, against z·se_bound for the
    bound (means over the identified items). Both depend on the design and the centre
    only, not on the residuals whose spread the chosen interval then measures: the choice
    does not select the narrower of two realized intervals (which would undercover).
    """
    if choice not in CLUSTER_VARIANCES:
        raise ValueError(f"cluster_variance must be one of {', '.join(CLUSTER_VARIANCES)}")
    g = clusters.n_clusters
    if choice == "auto" and g >= max(min_clusters, 2 * int(identified.sum())):
        choice = "cr1"
    if choice == "cr1":
        cr1 = clusters.meat(centre) * (g / (g - 1.0))
        return "cluster", _psd_max(cr1, model_meat), float(g - 1)
    # The small-sample covariances need each respondent's answers.
    clusters = clusters.as_rows(centre.size)
    if choice == "auto" and not _cr2_affordable(clusters):
        choice = "bound"
    if choice == "bound":
        return "cluster_bound", _bound_meat(centre, clusters), None
    meat, dfs = _cr2(centre, clusters, lw_pinv)
    dfs = dfs[identified & np.isfinite(dfs)]
    # One critical value for every item: the smallest degrees of freedom of the items'
    # scores (the widest t quantile), at most G − 1 (the CR1 reference distribution).
    df = float(min(dfs.min(initial=np.inf), g - 1.0))
    if choice == "auto":
        bound = _bound_meat(centre, clusters)
        # diag(L_W⁺ M L_W⁺) as ((L_W⁺ M) ∘ L_W⁺)·1 (L_W⁺ is symmetric): one BLAS product.
        se_model = np.sqrt(np.maximum(((lw_pinv @ model_meat) * lw_pinv).sum(axis=1), 0.0))
        se_bound = np.sqrt(np.maximum(((lw_pinv @ bound) * lw_pinv).sum(axis=1), 0.0))
        t_width = float(stdtrit(df, 0.5 + level / 2.0)) * se_model[identified].mean()
        if t_width > float(ndtri(0.5 + level / 2.0)) * se_bound[identified].mean():
            return "cluster_bound", bound, None
    if choice != "cr2_unfloored":
        meat = _psd_max(meat, model_meat)
    return "cluster_cr2", meat, df
