"""Simulated BTL surveys: true scores, designs, privatized answers.

Data generation follows the paper's §5.1–5.2 (docs/estimator.md §1, §9): θ* ~
Uniform(−2, 2) or evenly spaced with gap Δ; y_ij ~ Bernoulli(σ(θ*_i − θ*_j)) drawn once
per respondent and unordered pair; then RR at the respondent's own ε. Beyond the paper,
designs may be incomplete (random subsets of pairs, or comparisons on random pairs of a
large item set) and ε may differ between respondents. Beyond BTL, :class:`Population`
is any population of pairwise preferences (a probability matrix, or a mixture of groups
with their own θ or strict ranking) with the truths of both goal estimands
(docs/uncertainty.md §9). Every function takes an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from .mechanisms import debias, flip_probability, privacy_noise_variance, privatize, validate_epsilon
from .pairs import PairStats, pair_stats

__all__ = [
    "Design",
    "Population",
    "SimulatedSurvey",
    "all_pairs",
    "borda_scores",
    "borda_top_k",
    "complete_design",
    "evenly_spaced_theta",
    "majority_order",
    "majority_top_k",
    "random_pairs_design",
    "simulate_pair_stats",
    "simulate_survey",
    "sparse_design",
    "uniform_theta",
]


def uniform_theta(
    n_items: int, rng: np.random.Generator, low: float = -2.0, high: float = 2.0
) -> NDArray[np.float64]:
    """θ* with i.i.d. Uniform(low, high) entries, centered to sum to 0.

    Parameters
    ----------
    n_items : int
        m.
    rng : numpy.random.Generator
        The simulation's generator.
    low, high : float, default -2.0 and 2.0
        The uniform's bounds.

    Returns
    -------
    numpy.ndarray of float64 (m,)
        The scores (docs/estimator.md §6, §9; paper §5.1).
    """
    theta = rng.uniform(low, high, size=n_items)
    return theta - theta.mean()


def evenly_spaced_theta(n_items: int, delta: float) -> NDArray[np.float64]:
    """θ*_i = Δ((m+1)/2 − i), i = 1..m: item 0 is best, gaps exactly Δ, sum 0.

    Parameters
    ----------
    n_items : int
        m.
    delta : float
        The gap Δ.

    Returns
    -------
    numpy.ndarray of float64 (m,)
        The scores (docs/estimator.md §9; paper §5.2).

    Examples
    --------
    >>> from app.stats.simulation import evenly_spaced_theta
    >>> evenly_spaced_theta(3, 1.0).tolist()
    [1.0, 0.0, -1.0]
    """
    return np.asarray(delta * ((n_items + 1) / 2.0 - np.arange(1, n_items + 1)), dtype=np.float64)


def all_pairs(n_items: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """All pairs i < j in lexicographic order (the order :class:`PairStats` keeps).

    Parameters
    ----------
    n_items : int
        m.

    Returns
    -------
    tuple of numpy.ndarray of int64
        (i, j).

    Examples
    --------
    >>> from app.stats.simulation import all_pairs
    >>> [a.tolist() for a in all_pairs(3)]
    [[0, 0, 1], [1, 2, 2]]
    """
    i, j = np.triu_indices(n_items, k=1)
    return i.astype(np.int64), j.astype(np.int64)


@dataclass(frozen=True)
class Design:
    """Who compares which pair: one row per comparison."""

    n_items: int
    n_respondents: int
    respondent: NDArray[np.int64]
    i: NDArray[np.int64]
    j: NDArray[np.int64]


def complete_design(n_items: int, n_respondents: int) -> Design:
    """The paper's design: every respondent answers every pair once.

    Parameters
    ----------
    n_items : int
        m.
    n_respondents : int
        L.

    Returns
    -------
    Design
        L·m(m−1)/2 comparisons.
    """
    pi, pj = all_pairs(n_items)
    n_pairs = pi.size
    return Design(
        n_items,
        n_respondents,
        np.repeat(np.arange(n_respondents, dtype=np.int64), n_pairs),
        np.tile(pi, n_respondents),
        np.tile(pj, n_respondents),
    )


def random_pairs_design(
    n_items: int, n_respondents: int, pairs_per_respondent: int, rng: np.random.Generator
) -> Design:
    """Each respondent answers distinct pairs chosen uniformly at random (the service's incomplete design).

    Parameters
    ----------
    n_items : int
        m.
    n_respondents : int
        L.
    pairs_per_respondent : int
        Distinct pairs per respondent, 1..m(m−1)/2, each shown in a random orientation.
    rng : numpy.random.Generator
        The simulation's generator.

    Returns
    -------
    Design
        The comparisons.

    Raises
    ------
    ValueError
        If ``pairs_per_respondent`` is out of range.
    """
    n_pairs = n_items * (n_items - 1) // 2
    k = int(pairs_per_respondent)
    if not 1 <= k <= n_pairs:
        raise ValueError(f"pairs_per_respondent must be between 1 and {n_pairs}")
    if 4 * k >= n_pairs:
        idx = np.argsort(rng.random((n_respondents, n_pairs)), axis=1)[:, :k]
    else:
        # Draw with replacement and redraw repeats within a respondent's row.
        idx = rng.integers(0, n_pairs, size=(n_respondents, k))
        while True:
            order = np.argsort(idx, axis=1)
            srt = np.take_along_axis(idx, order, axis=1)
            dup_sorted = np.zeros_like(srt, dtype=bool)
            dup_sorted[:, 1:] = srt[:, 1:] == srt[:, :-1]
            if not dup_sorted.any():
                break
            dup = np.zeros_like(dup_sorted)
            np.put_along_axis(dup, order, dup_sorted, axis=1)
            idx[dup] = rng.integers(0, n_pairs, size=int(dup.sum()))
    pi, pj = all_pairs(n_items)
    flat = idx.reshape(-1)
    i, j = pi[flat], pj[flat]
    swap = rng.random(flat.size) < 0.5
    i, j = np.where(swap, j, i), np.where(swap, i, j)
    respondent = np.repeat(np.arange(n_respondents, dtype=np.int64), k)
    return Design(n_items, n_respondents, respondent, i, j)


def sparse_design(
    n_items: int, n_comparisons: int, rng: np.random.Generator, comparisons_per_respondent: int = 1
) -> Design:
    """Comparisons on uniformly random pairs (with repetition) of a large item set.

    Parameters
    ----------
    n_items : int
        m.
    n_comparisons : int
        Comparisons.
    rng : numpy.random.Generator
        The simulation's generator.
    comparisons_per_respondent : int, default 1
        Consecutive comparisons given to one respondent.

    Returns
    -------
    Design
        The comparisons.
    """
    i = rng.integers(0, n_items, size=n_comparisons)
    j = rng.integers(0, n_items - 1, size=n_comparisons)
    j = j + (j >= i)  # uniform over the other m − 1 items
    per = max(1, int(comparisons_per_respondent))
    respondent = np.arange(n_comparisons, dtype=np.int64) // per
    return Design(
        n_items,
        int(respondent[-1]) + 1 if n_comparisons else 0,
        respondent,
        i.astype(np.int64),
        j.astype(np.int64),
    )


@dataclass(frozen=True)
class SimulatedSurvey:
    """Simulated comparisons: truth ``y`` and privatized ``y_tilde``, per-comparison ε."""

    n_items: int
    respondent: NDArray[np.int64]
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    y: NDArray[np.int8]
    y_tilde: NDArray[np.int8]
    epsilon: NDArray[np.float64]

    def stats(self) -> PairStats:
        return pair_stats(self.n_items, self.i, self.j, self.y_tilde, self.epsilon)


def simulate_survey(
    theta: ArrayLike, design: Design, epsilon: ArrayLike, rng: np.random.Generator
) -> SimulatedSurvey:
    """Answer ``design`` under BTL(θ*) and privatize each answer with its respondent's ε.

    Parameters
    ----------
    theta : array_like (m,)
        True scores θ*.
    design : Design
        Who compares which pair.
    epsilon : float or array_like
        A scalar or one value per respondent (heterogeneous privacy).
    rng : numpy.random.Generator
        The simulation's generator.

    Returns
    -------
    SimulatedSurvey
        The true and privatized answers with each comparison's ε.

    Raises
    ------
    ValueError
        On an invalid ε or an ``epsilon`` with neither one value nor one per respondent.
    """
    theta = np.asarray(theta, dtype=np.float64)
    eps_resp = validate_epsilon(epsilon)
    if eps_resp.ndim == 0:
        eps = np.full(design.i.size, float(eps_resp))
    else:
        if eps_resp.size != design.n_respondents:
            raise ValueError("need one epsilon per respondent")
        eps = eps_resp[design.respondent]
    y = (rng.random(design.i.size) < expit(theta[design.i] - theta[design.j])).astype(np.int8)
    y_tilde = privatize(y, eps, rng=rng)
    return SimulatedSurvey(design.n_items, design.respondent, design.i, design.j, y, y_tilde, eps)


def simulate_pair_stats(
    theta: ArrayLike,
    n_per_pair: ArrayLike,
    epsilon: float,
    rng: np.random.Generator,
    pairs: tuple[ArrayLike, ArrayLike] | None = None,
) -> PairStats:
    """Sufficient statistics of a homogeneous-ε group without simulating each answer.

    Parameters
    ----------
    theta : array_like (m,)
        True scores θ*.
    n_per_pair : int or array_like
        A scalar or one count per pair.
    epsilon : float
        ε (``inf`` simulates non-private data).
    rng : numpy.random.Generator
        The simulation's generator.
    pairs : tuple of array_like, optional
        Distinct pairs (i, j), any orientation; default all pairs i < j.

    Returns
    -------
    PairStats
        The statistics of the simulated answers.

    Raises
    ------
    ValueError
        On an invalid ε or pairs that are not distinct pairs of different items.

    Notes
    -----
    Given ε, the number of reported "i wins" of a pair is Binomial(n_ij, q_ij) with
    q_ij = p_ε + (1−2p_ε)σ(θ_i − θ_j) (Lemma 1), and z is a function of ỹ, so
    (Σỹ, Σz, Σz²) follow exactly from one binomial draw per pair (docs/estimator.md §9,
    "Exact shortcut").
    """
    theta = np.asarray(theta, dtype=np.float64)
    m = theta.size
    if pairs is None:
        pi, pj = all_pairs(m)
    else:
        a, b = (np.asarray(x, dtype=np.int64) for x in pairs)
        pi, pj = np.minimum(a, b), np.maximum(a, b)
    n = np.broadcast_to(np.asarray(n_per_pair, dtype=np.int64), pi.shape)
    order = np.lexsort((pj, pi))
    pi, pj, n = pi[order], pj[order], n[order]
    if np.any(pi == pj) or np.any((pi[1:] == pi[:-1]) & (pj[1:] == pj[:-1])):
        raise ValueError("pairs must be distinct pairs of different items")
    keep = n > 0
    pi, pj, n = pi[keep], pj[keep], n[keep]
    eps = float(validate_epsilon(epsilon))
    p = float(flip_probability(eps))
    q = p + (1.0 - 2.0 * p) * expit(theta[pi] - theta[pj])
    wins = rng.binomial(n, q).astype(np.float64)
    losses = n - wins
    z1, z0 = float(debias(1, eps)), float(debias(0, eps))
    return PairStats(
        m,
        pi,
        pj,
        n.astype(np.int64),
        wins,
        wins * z1 + losses * z0,
        wins * z1**2 + losses * z0**2,
        np.asarray(n * float(privacy_noise_variance(eps)), dtype=np.float64),
        epsilon_min=eps,
    )


#: Gauss–Hermite nodes for the population's P(i beats j) under respondent effects.
_HERMITE = np.polynomial.hermite.hermgauss(40)


def _logit(p: NDArray[np.float64]) -> NDArray[np.float64]:
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)  # ±inf for certain preferences


@dataclass(frozen=True)
class Population:
    """A population of pairwise preferences: groups g = 0, 1, … with shares ``weights``,
    a member of group g preferring i to j with probability ``prob[g, i, j]``
    (``prob[g, j, i]`` = 1 − ``prob[g, i, j]``). A simulated respondent belongs to one
    group, drawn by the shares, and answers from its group's preferences; with
    respondent effects τ its probabilities are σ(logit P_g(i, j) + τ(ζ_i − ζ_j)) with
    its own ζ ~ N(0, 1) per item (for one BTL group: the θ + τ·N(0, 1) of
    :func:`app.stats.adaptive.simulated_answers`), so one person's answers go together
    (a group certain of a pair, as a ranking's, stays certain).

    Examples
    --------
    >>> pop = Population.rankings([[0, 1, 2], [1, 2, 0]], [0.6, 0.4])  # polarized
    >>> pop.pairwise().round(2).tolist()
    [[0.5, 0.6, 0.6], [0.4, 0.5, 1.0], [0.4, 0.0, 0.5]]
    >>> sorted(majority_top_k(pop.pairwise(), 1)), sorted(borda_top_k(pop.pairwise(), 1))
    ([0], [1])
    """

    prob: NDArray[np.float64]
    weights: NDArray[np.float64]

    def __post_init__(self) -> None:
        p, w = np.asarray(self.prob, dtype=np.float64), np.asarray(self.weights, dtype=np.float64)
        if p.ndim != 3 or p.shape[1] != p.shape[2] or p.shape[1] < 2 or w.shape != (p.shape[0],):
            raise ValueError("prob must be (groups, m, m) with m ≥ 2 and weights one per group")
        off = ~np.eye(p.shape[1], dtype=bool)
        if np.any((p < 0) | (p > 1)) or not np.allclose((p + p.transpose(0, 2, 1))[:, off], 1.0):
            raise ValueError("prob must be probabilities with P(i beats j) + P(j beats i) = 1")
        if np.any(w < 0) or not np.isclose(w.sum(), 1.0):
            raise ValueError("weights must be shares summing to 1")
        object.__setattr__(self, "prob", p)
        object.__setattr__(self, "weights", w)

    @classmethod
    def matrix(cls, prob: ArrayLike) -> Population:
        """One group with these P(i beats j) (the diagonal is ignored)."""
        p = np.array(prob, dtype=np.float64)
        np.fill_diagonal(p, 0.5)
        return cls(p[None], np.ones(1))

    @classmethod
    def btl(cls, thetas: ArrayLike, weights: ArrayLike | None = None) -> Population:
        """Groups with BTL scores ``thetas`` (one row per group; equal shares by default)."""
        t = np.atleast_2d(np.asarray(thetas, dtype=np.float64))
        w = np.full(t.shape[0], 1.0 / t.shape[0]) if weights is None else weights
        return cls(expit(t[:, :, None] - t[:, None, :]), np.asarray(w, dtype=np.float64))

    @classmethod
    def rankings(cls, rankings: ArrayLike, weights: ArrayLike) -> Population:
        """Groups each holding a strict ranking (items best first) and answering by it."""
        r = np.atleast_2d(np.asarray(rankings, dtype=np.int64))
        m = r.shape[1]
        if not np.all(np.sort(r, axis=1) == np.arange(m)):
            raise ValueError("each ranking must order all m items")
        pos = np.argsort(r, axis=1)  # each item's place in each ranking
        p = (pos[:, :, None] < pos[:, None, :]).astype(np.float64)
        p[:, np.arange(m), np.arange(m)] = 0.5
        return cls(p, np.asarray(weights, dtype=np.float64))

    @property
    def n_items(self) -> int:
        return int(self.prob.shape[1])

    def pairwise(self, tau: float = 0.0) -> NDArray[np.float64]:
        """The population's P(i beats j): the groups' mixed, and with respondent effects τ
        averaged over ζ_i − ζ_j ~ N(0, 2τ²) (40-node Gauss–Hermite quadrature)."""
        p = self.prob
        if tau > 0:
            x, w = _HERMITE
            d = 2.0 * tau * x  # √2 · (√2 τ) · node: N(0, 2τ²) by E f(X) = Σ w f(√2 σ x)/√π
            p = (expit(_logit(p)[..., None] + d) * w).sum(axis=-1) / np.sqrt(np.pi)
        out = np.tensordot(self.weights, p, axes=1)
        np.fill_diagonal(out, 0.5)
        return out

    def answers(
        self,
        i: NDArray[np.int64],
        j: NDArray[np.int64],
        who: NDArray[np.int64],
        respondents: int,
        tau: float,
        rng: np.random.Generator,
    ) -> NDArray[np.int8]:
        """True answers (1: i preferred) of respondents ``who`` (0 to ``respondents`` − 1),
        each drawn from a group by the shares, on the pairs (i, j)."""
        group = rng.choice(self.weights.size, size=respondents, p=self.weights)
        g = group[who]
        if tau > 0:
            own = rng.normal(0.0, tau, size=(respondents, self.n_items))
            q = expit(_logit(self.prob[g, i, j]) + own[who, i] - own[who, j])
        else:
            q = self.prob[g, i, j]
        return (rng.random(i.size) < q).astype(np.int8)


def borda_scores(prob: ArrayLike) -> NDArray[np.float64]:
    """Borda scores b_i = (1/(m − 1)) Σ_{j≠i} P(i beats j).

    Parameters
    ----------
    prob : array_like (m, m)
        P(i beats j).

    Returns
    -------
    numpy.ndarray of float64 (m,)
        Each item's chance of beating an opponent drawn uniformly from the others.

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.simulation import borda_scores
    >>> p = np.array([[0.5, 0.6, 0.7], [0.4, 0.5, 0.9], [0.3, 0.1, 0.5]])
    >>> np.round(borda_scores(p), 4).tolist()
    [0.65, 0.65, 0.2]
    """
    p = np.asarray(prob, dtype=np.float64)
    m = p.shape[0]
    return (p.sum(axis=1) - np.diagonal(p)) / (m - 1)


def borda_top_k(prob: ArrayLike, k: int, tol: float = 1e-12) -> set[int] | None:
    """The K items of highest Borda score; None when the K-th and (K+1)-th tie.

    Parameters
    ----------
    prob : array_like (m, m)
        P(i beats j).
    k : int
        K.
    tol : float, default 1e-12
        Scores closer than this tie.

    Returns
    -------
    set of int or None
        The Borda top-K (docs/uncertainty.md §9).
    """
    b = borda_scores(prob)
    order = np.argsort(-b, kind="stable")
    if b[order[k - 1]] - b[order[k]] <= tol:
        return None
    return {int(x) for x in order[:k]}


def majority_top_k(prob: ArrayLike, k: int) -> set[int] | None:
    """The majority top-K: the set of K items each beating each other item with probability > ½.

    Parameters
    ----------
    prob : array_like (m, m)
        P(i beats j).
    k : int
        K.

    Returns
    -------
    set of int or None
        The set; None when there is none (a Condorcet cycle across the boundary).

    Notes
    -----
    If it exists it is the K items with the most majority wins: each has at least m − K,
    every other item at most m − K − 1 (docs/uncertainty.md §9).

    Examples
    --------
    >>> import numpy as np
    >>> from app.stats.simulation import borda_top_k, majority_top_k
    >>> p = np.array([[0.5, 0.6, 0.7], [0.4, 0.5, 0.9], [0.3, 0.1, 0.5]])
    >>> majority_top_k(p, 1), borda_top_k(p, 1)  # item 0 beats both; Borda ties 0 and 1
    ({0}, None)
    """
    p = np.asarray(prob, dtype=np.float64)
    m = p.shape[0]
    wins = (p > 0.5).sum(axis=1)
    order = np.argsort(-wins, kind="stable")
    inside = order[:k]
    outside = np.setdiff1d(np.arange(m), inside)
    return {int(x) for x in inside} if bool((p[np.ix_(inside, outside)] > 0.5).all()) else None


def majority_order(prob: ArrayLike) -> list[int] | None:
    """The majority ranking: each item beats every later one with probability > ½.

    Parameters
    ----------
    prob : array_like (m, m)
        P(i beats j).

    Returns
    -------
    list of int or None
        The order; None when the majorities have a cycle or a tie.
    """
    p = np.asarray(prob, dtype=np.float64)
    m = p.shape[0]
    order = np.argsort(-(p > 0.5).sum(axis=1), kind="stable")
    ok = all(p[order[x], order[y]] > 0.5 for x in range(m) for y in range(x + 1, m))
    return [int(x) for x in order] if ok else None
