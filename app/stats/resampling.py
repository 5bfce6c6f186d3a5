"""Coverage under respondent resampling: does an interval cover the population's scores?

A survey's respondents are a sample of a population, and the intervals of
:func:`~app.stats.inference.confidence` are about that population's BTL scores
(docs/uncertainty.md §1), not about a model that generated each answer independently.
:func:`coverage` draws surveys from a finite :class:`Population` (real ballots, or
simulated respondents with random effects, :func:`heterogeneous_population`) and reports
the share of cluster-robust, model-based and naive intervals that cover the population's
own BTL fit, with how often intervals were refused (its docstring gives the loop).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, ndtri

from .btl import fit_btl
from .inference import Clusters, IntervalsUnavailable, confidence, laplacian, laplacian_pinv
from .mechanisms import privatize, validate_epsilon
from .mle import fit_debiased_mle_stats
from .pairs import pair_stats
from .preflib import Ballots, ballot_comparisons
from .simulation import all_pairs

__all__ = ["Coverage", "Population", "Sample", "coverage", "heterogeneous_population"]


@dataclass(frozen=True)
class Sample:
    """One survey drawn from a population: privatized answers and their respondents."""

    n_items: int
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    y_tilde: NDArray[np.int8]
    epsilon: NDArray[np.float64]
    respondent: NDArray[np.int64]


@dataclass(frozen=True)
class Population:
    """A finite population: every respondent's true pairwise answers.

    One row per comparison: ``respondent`` (0..N−1), items ``i < j`` and ``y``
    (1 when i is preferred). Rows of one respondent are contiguous.
    """

    n_items: int
    respondent: NDArray[np.int64]
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    y: NDArray[np.int8]
    #: Row where each respondent's comparisons start (plus the total): set by __post_init__.
    _start: NDArray[np.int64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        order = np.argsort(self.respondent, kind="stable")
        for name in ("respondent", "i", "j", "y"):
            object.__setattr__(self, name, np.asarray(getattr(self, name))[order])
        sizes = np.bincount(self.respondent)
        if sizes.size == 0 or np.any(sizes == 0):
            raise ValueError("respondents must be numbered 0..N−1, each with at least one comparison")
        object.__setattr__(self, "_start", np.concatenate([[0], np.cumsum(sizes)]))

    @classmethod
    def from_ballots(cls, ballots: Ballots, unranked: str = "below") -> Population:
        """Each voter's ballot as the pairwise answers it implies."""
        voter, i, j, y = ballot_comparisons(ballots, unranked)
        return cls(ballots.n_items, voter, i, j, y)

    @property
    def n_respondents(self) -> int:
        return self._start.size - 1

    @property
    def sizes(self) -> NDArray[np.int64]:
        """Comparisons per respondent, |C_r|."""
        return np.diff(self._start)

    def estimand(self, pairs_per_respondent: int | None = None) -> NDArray[np.float64]:
        """The population's BTL scores (sum zero) under a design that asks each
        respondent ``pairs_per_respondent`` of its comparisons at random (None: all)."""
        sizes = self.sizes
        k = sizes if pairs_per_respondent is None else np.minimum(pairs_per_respondent, sizes)
        weight = (k / sizes)[self.respondent]
        m = self.n_items
        key = self.i * m + self.j
        n = np.bincount(key, weight, m * m)
        s = np.bincount(key, weight * self.y, m * m)
        seen = np.flatnonzero(n)
        fit = fit_btl(m, seen // m, seen % m, n[seen], s[seen], 1e-9 * float(n.sum()))
        if np.unique(fit.component).size > 1:
            raise ValueError("the population's comparison graph is not connected")
        return fit.theta - fit.theta.mean()

    def sample(
        self,
        n_respondents: int,
        epsilon: ArrayLike,
        rng: np.random.Generator,
        pairs_per_respondent: int | None = None,
    ) -> Sample:
        """L respondents drawn with replacement, each answering all its comparisons
        (or ``pairs_per_respondent`` of them at random), privatized at ``epsilon``
        (one value, or one per drawn respondent). Each draw is its own respondent."""
        L = int(n_respondents)
        if L < 1:
            raise ValueError("n_respondents must be at least 1")
        eps = np.broadcast_to(validate_epsilon(epsilon), (L,)).astype(float)
        drawn = rng.integers(0, self.n_respondents, size=L)
        sizes = self.sizes[drawn]
        if pairs_per_respondent is None:
            take = sizes
            rows = np.concatenate([np.arange(self._start[r], self._start[r + 1]) for r in drawn])
        else:
            take = np.minimum(int(pairs_per_respondent), sizes)
            rows = np.concatenate(
                [
                    self._start[r] + rng.choice(size, size=t, replace=False)
                    for r, size, t in zip(drawn, sizes, take, strict=True)
                ]
            )
        who = np.repeat(np.arange(L), take)
        e = eps[who]
        y = privatize(self.y[rows], e, rng=rng)
        return Sample(self.n_items, self.i[rows], self.j[rows], y, e, who)


def heterogeneous_population(
    theta: ArrayLike,
    n_respondents: int,
    pairs_per_respondent: int,
    tau: float,
    rng: np.random.Generator,
) -> Population:
    """A simulated population with respondent-level random effects.

    Parameters
    ----------
    theta : array_like (m,)
        The population's scores θ.
    n_respondents : int
        Respondents in the population.
    pairs_per_respondent : int
        k: the random distinct pairs each respondent answers.
    tau : float
        τ ≥ 0.
    rng : numpy.random.Generator
        The simulation's generator.

    Returns
    -------
    Population
        Respondent r answers its k pairs by BTL with scores θ + τ·u_r, u_r ~ N(0, I).

    Raises
    ------
    ValueError
        If k is out of range or τ is negative.
    """
    theta = np.asarray(theta, dtype=float)
    m = theta.size
    pi, pj = all_pairs(m)
    k = int(pairs_per_respondent)
    if not 1 <= k <= pi.size:
        raise ValueError(f"pairs_per_respondent must be between 1 and {pi.size}")
    if tau < 0:
        raise ValueError("tau must be non-negative")
    N = int(n_respondents)
    picks = np.argsort(rng.random((N, pi.size)), axis=1)[:, :k].reshape(-1)
    who = np.repeat(np.arange(N), k)
    scores = theta[None, :] + tau * rng.standard_normal((N, m))
    p = expit(scores[who, pi[picks]] - scores[who, pj[picks]])
    y = (rng.random(p.size) < p).astype(np.int8)
    return Population(m, who, pi[picks], pj[picks], y)


@dataclass(frozen=True)
class Coverage:
    """Shares of nominal intervals covering the estimand, over the surveys that got them."""

    cluster: float
    model: float
    naive: float
    refused: float
    replications: int
    intervals: int
    method: str
    mean_width: float
    #: Per survey that got intervals, the shares of its items covered (columns cluster,
    #: model, naive): the Monte Carlo errors of :meth:`mc_se`.
    shares: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)

    @property
    def se(self) -> float:
        """Binomial Monte Carlo se of ``cluster`` (intervals of one survey are
        correlated, so the true se is somewhat larger)."""
        return math.sqrt(max(self.cluster * (1 - self.cluster), 1e-12) / max(self.intervals, 1))

    def mc_se(self, column: str, minus: str | None = None) -> float:
        """Monte Carlo se of the coverage ``column`` ("cluster", "model" or "naive"), or of
        its difference from ``minus`` on the same surveys, from the per-survey shares (the
        surveys are independent; one survey's intervals are not)."""
        if self.shares is None or self.shares.shape[0] < 2:
            return math.nan
        names = ("cluster", "model", "naive")
        x = self.shares[:, names.index(column)]
        if minus is not None:
            x = x - self.shares[:, names.index(minus)]
        return float(x.std(ddof=1)) / math.sqrt(x.size)


def coverage(
    population: Population,
    n_respondents: int,
    epsilon: ArrayLike,
    replications: int,
    rng: np.random.Generator,
    pairs_per_respondent: int | None = None,
    level: float = 0.95,
) -> Coverage:
    """Draw surveys from ``population``, fit, and count intervals covering its estimand.

    Parameters
    ----------
    population : Population
        The finite population.
    n_respondents : int
        L, drawn with replacement per survey.
    epsilon : float or array_like
        The respondents' ε.
    replications : int
        Surveys drawn.
    rng : numpy.random.Generator
        The simulation's generator.
    pairs_per_respondent : int, optional
        k of each respondent's comparisons drawn at random (None: all).
    level : float, default 0.95
        Nominal level of the intervals.

    Returns
    -------
    Coverage
        The shares of ``cluster``, ``model`` and ``naive`` intervals covering the
        estimand, over the surveys that got intervals, and the share ``refused``.

    Notes
    -----
    ``cluster`` uses the respondents as clusters (the service's default: the robust
    sandwich, or below its threshold the worst-case bound); ``model`` takes answers as
    independent; ``naive`` is θ̌ ± z·se from the inverse Fisher information, ignoring
    privacy noise and clustering. A survey whose intervals are refused
    (:class:`~app.stats.inference.IntervalsUnavailable`) counts in ``refused`` only.

    The loop checks the intervals the way the data arise, since a check that draws every
    answer independently from the fitted model cannot find what real data break (one
    person's answers are correlated: the same taste decides several pairs):

    1. **A finite population** of respondents, each with the pairwise answers it would
       give: real ballots (:meth:`Population.from_ballots`; every ranked item beats every
       item below it), or a simulated population with respondent-level random effects
       (:func:`heterogeneous_population`: respondent r answers with scores θ + τ·u_r,
       u_r ~ N(0, I), so τ > 0 correlates one person's answers).
    2. **The estimand**: the population's BTL fit, unpenalized (λ → 0), over the
       comparisons the survey's design would ask — with k of a respondent's |C_r|
       comparisons drawn at random, each weighted k/|C_r| (:meth:`Population.estimand`).
       Real preferences are not exactly BTL; the estimand is then the BTL projection the
       M-estimator converges to (Huber 1967; White 1982).
    3. **Surveys drawn from it**: L respondents with replacement, each answering all its
       comparisons or k of them at random, every answer privatized by randomized response
       at the respondent's ε (:meth:`Population.sample`); then the service's fit and
       intervals, and whether each interval covers the estimand.

    References
    ----------
    Liang & Zeger (1986), Biometrika 73(1), and Cameron & Miller (2015), J. Human
    Resources 50(2), for the cluster-robust sandwich; Efron & Tibshirani (1993) §6 for
    resampling a finite population as its own model.
    """
    truth = population.estimand(pairs_per_respondent)
    m = population.n_items
    z = float(ndtri(0.5 + level / 2))
    hits = np.zeros(3)
    shares: list[list[float]] = []
    count = refused = 0
    width = 0.0
    methods: set[str] = set()
    for _ in range(int(replications)):
        s = population.sample(n_respondents, epsilon, rng, pairs_per_respondent)
        fit = fit_debiased_mle_stats(pair_stats(m, s.i, s.j, s.y_tilde, s.epsilon))
        if np.unique(fit.component).size > 1:
            refused += 1
            continue
        clusters = Clusters.from_answers(m, s.i, s.j, s.y_tilde, s.epsilon, s.respondent)
        try:
            robust = confidence(fit, level, clusters=clusters)
            model = confidence(fit, level)
        except IntervalsUnavailable:
            refused += 1
            continue
        methods.add(robust.method)
        d = fit.fit_data
        q = expit(model.estimate[d.i] - model.estimate[d.j])
        naive_se = np.sqrt(np.diag(laplacian_pinv(laplacian(m, d.i, d.j, d.n * q * (1 - q)), fit.component)))
        survey = [
            np.sum((robust.lower <= truth) & (truth <= robust.upper)),
            np.sum((model.lower <= truth) & (truth <= model.upper)),
            np.sum(np.abs(model.estimate - truth) <= z * naive_se),
        ]
        hits += survey
        shares.append([float(h) / m for h in survey])
        width += float(np.mean(robust.upper - robust.lower))
        count += 1
    n = max(count * m, 1)
    return Coverage(
        cluster=float(hits[0] / n),
        model=float(hits[1] / n),
        naive=float(hits[2] / n),
        refused=refused / int(replications),
        replications=int(replications),
        intervals=count * m,
        method="/".join(sorted(methods)) or "none",
        mean_width=width / max(count, 1),
        shares=np.array(shares, dtype=np.float64).reshape(-1, 3),
    )
