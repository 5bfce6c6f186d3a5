"""Items the data do not identify (winning or losing every debiased comparison), set
aside one at a time so that the others keep their intervals (docs/uncertainty.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from ..btl import BTLFit, fit_btl
from .sandwich import Clusters

#: When more than this share of the items of a survey is not identified (separated from
#: the rest, :func:`_separated_items`), the whole survey's intervals are refused (as
#: ``not_identified`` where the ridge removal heads into the flat direction); up to it, only
#: those items lose their two-sided intervals. A stated choice, not a measurement: the
#: others' scores are then located by the identified items, which should be most (at
#: ε = 1 with 50 comparisons per item, tests/benchmarks/bench_items.py sets aside about a
#: tenth: the single items and the small top and bottom sets winning or losing all).
MAX_UNIDENTIFIED_SHARE = 0.25

#: Below this many identified items not one item is set aside (a survey of a few items
#: is refused whole, as the small-sample coverage of tests/stats/test_inference.py needs).
MIN_ITEMS_SET_ASIDE = 20


def _separated_items(
    theta: NDArray, data, component: NDArray, cuts: bool = True
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(wins_all, loses_all): the items that win (lose) every debiased comparison with the
    rest, alone or as part of the smaller side of a top-t cut in θ̂'s order within their
    component (the cuts :func:`_separated` checks). Along such a cut the unpenalized
    objective has no minimizer: the data bound the score difference from one side only.
    Without ``cuts``, single items only (a single item's surplus would otherwise carry every
    top set containing it)."""
    i, j, n, s = data.i, data.j, data.n.astype(float), data.s
    m = theta.size
    wins = np.bincount(i, s, m) + np.bincount(j, n - s, m)
    total = np.bincount(i, n, m) + np.bincount(j, n, m)
    seen = total > 0
    wins_all = seen & (wins >= total)
    loses_all = seen & (wins <= 0)
    if not cuts:
        return wins_all, loses_all
    order = np.lexsort((np.arange(m), -theta, component))
    position = np.empty(m, dtype=np.int64)
    position[order] = np.arange(m)
    pi, pj = position[i], position[j]
    top_wins = np.where(pi < pj, s, n - s)
    lo, hi = np.minimum(pi, pj), np.maximum(pi, pj)
    cross_n = np.cumsum(np.bincount(lo, n, m) - np.bincount(hi, n, m))
    cross_w = np.cumsum(np.bincount(lo, top_wins, m) - np.bincount(hi, top_wins, m))
    comp_sorted = component[order]
    starts = np.searchsorted(comp_sorted, comp_sorted, side="left")
    ends = np.searchsorted(comp_sorted, comp_sorted, side="right")
    for t in np.flatnonzero((cross_n > 1e-9) & ((cross_w <= 0) | (cross_w >= cross_n))):
        top_side = t + 1 - starts[t] <= ends[t] - t - 1  # the top set is the smaller side
        top_wins_all = cross_w[t] >= cross_n[t]
        side = order[starts[t] : t + 1] if top_side else order[t + 1 : ends[t]]
        if top_side == top_wins_all:
            wins_all[side] = True
        else:
            loses_all[side] = True
    both = wins_all & loses_all  # on two separated cuts at once: bounded from neither side
    return wins_all & ~both, loses_all & ~both


def _without_items(fit: BTLFit, clusters: Clusters | None, keep: NDArray[np.bool_]):
    """The fit of the pairs between kept items only (the others left isolated), warm-started
    from θ̂, and those pairs' comparisons grouped by respondent."""
    d = fit.fit_data
    pk = keep[d.i] & keep[d.j]
    sub = fit_btl(
        fit.theta.size,
        d.i[pk],
        d.j[pk],
        d.n[pk],
        d.s[pk],
        fit.lam,
        v=d.v[pk],
        s2=None if d.s2 is None else d.s2[pk],
        estimator=fit.estimator,
        theta0=np.where(keep, fit.theta, 0.0),
    )
    if clusters is None:
        return sub, None
    c = clusters
    rk = keep[c.i] & keep[c.j]
    _, codes = np.unique(c.cluster[rk], return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    return sub, Clusters(c.n_items, c.i[rk], c.j[rk], c.z[rk], c.v[rk], codes, int(codes.max(initial=-1)) + 1)


@dataclass(frozen=True, eq=False)
class _SetAside:
    """Items whose scores the data bound from one side only, with their comparisons
    (padded per item) for the score bound of :meth:`Uncertainty.at`."""

    wins_all: NDArray[np.bool_]
    loses_all: NDArray[np.bool_]
    items: NDArray[np.int64]  # the set-aside items
    opponent: NDArray[np.int64]  # (items, width): the opponent of each comparison pair, −1 padding
    n: NDArray[np.float64]  # comparisons of the pair (0 padding)
    wins: NDArray[np.float64]  # the item's debiased wins in the pair
    v: NDArray[np.float64]  # privacy variance of the pair's comparisons
    kappa: NDArray[np.float64]  # per item: most of its comparisons made by one respondent


def _set_aside(fit: BTLFit, clusters: Clusters | None, wins_all, loses_all) -> _SetAside:
    d = fit.fit_data
    m = fit.theta.size
    items = np.flatnonzero(wins_all | loses_all)
    rows: list[tuple] = []
    for u in items:
        a, b = d.i == u, d.j == u
        opp = np.concatenate((d.j[a], d.i[b]))
        won = np.concatenate((d.s[a], d.n[b] - d.s[b]))
        rows.append((opp, np.concatenate((d.n[a], d.n[b])), won, np.concatenate((d.v[a], d.v[b]))))
    width = max((r[0].size for r in rows), default=0)
    shape = (items.size, max(width, 1))
    opponent = np.full(shape, -1, dtype=np.int64)
    n, wins, v = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for k, (opp, nn, won, vv) in enumerate(rows):
        opponent[k, : opp.size], n[k, : opp.size], wins[k, : opp.size], v[k, : opp.size] = opp, nn, won, vv
    kappa = np.ones(items.size)
    if clusters is not None and items.size:
        c = clusters
        flag = np.zeros(m, dtype=bool)
        flag[items] = True
        for side in (c.i, c.j):
            r = flag[side]
            counts = np.bincount(c.cluster[r] * m + side[r], minlength=c.n_clusters * m)
            per = counts.reshape(c.n_clusters, m).max(axis=0) if c.n_clusters else np.zeros(m)
            kappa = np.maximum(kappa, per[items])
        # An item in both columns of one respondent's rows: the counts add up.
        both = np.bincount(
            np.concatenate(
                (c.cluster[flag[c.i]] * m + c.i[flag[c.i]], c.cluster[flag[c.j]] * m + c.j[flag[c.j]])
            ),
            minlength=c.n_clusters * m,
        )
        if c.n_clusters:
            kappa = np.maximum(kappa, both.reshape(c.n_clusters, m).max(axis=0)[items])
    return _SetAside(wins_all, loses_all, items, opponent, n, wins, v, kappa)


def _score_bound(aside: _SetAside, theta: NDArray, opponent_at: NDArray, quantile: float) -> NDArray:
    """Per set-aside item, the one-sided score bound at one-sided normal ``quantile``: for an
    item that wins everything, the smallest t with (W − Σ n σ(t − a_j)) / sd(t) ≤ quantile,
    W its debiased wins and a_j its opponents' ``opponent_at`` (their interval ends on the
    conservative side); sd²(t) = Σ κ n σ'(t − a_j) + v (Lemma 2's variance, κ the most
    comparisons of the item by one respondent: Cauchy–Schwarz within a respondent). For
    one that loses everything, the largest t with (Σ n σ(t − a_j) − W) / sd(t) ≤ quantile.
    Each bound is moved to contain θ̂ (the reported score)."""
    k = aside.items.size
    if k == 0:
        return np.zeros(0)
    valid = aside.opponent >= 0
    a = np.where(valid, opponent_at[np.where(valid, aside.opponent, 0)], 0.0)
    top = aside.wins_all[aside.items]
    sign = np.where(top, 1.0, -1.0)[:, None]
    w_total = aside.wins.sum(axis=1)
    point = theta[aside.items]

    def stat(t: NDArray) -> NDArray:
        s = expit(t[:, None] - a)
        expected = (aside.n * s).sum(axis=1)
        var = (aside.kappa[:, None] * aside.n * s * (1.0 - s) + aside.v).sum(axis=1)
        return np.where(top, w_total - expected, expected - w_total) / np.sqrt(np.maximum(var, 1e-300))

    # Bisection between the point (where the statistic must be small enough to move) and a
    # point far on the bounded side, where it is not.
    near = point.copy()
    far = point - sign[:, 0] * 1.0
    for _ in range(60):  # widen until rejected (the statistic grows without bound there)
        reject = stat(far) > quantile
        if reject.all():
            break
        far = np.where(reject, far, point + 2.0 * (far - point))
    inside = stat(near) <= quantile
    for _ in range(60):
        mid = 0.5 * (near + far)
        ok = stat(mid) <= quantile
        near = np.where(ok, mid, near)
        far = np.where(ok, far, mid)
    bound = np.where(inside, near, point)
    return np.where(top, np.minimum(bound, point), np.maximum(bound, point))


@dataclass(frozen=True, eq=False)
class _Core:
    """The level-free part of one covariance of :class:`Uncertainty`."""

    method: str
    df: float | None
    estimate: NDArray[np.float64]
    cov: NDArray[np.float64]
    corrections: dict
    unsafe: NDArray[np.bool_]
    bias: NDArray[np.float64]
