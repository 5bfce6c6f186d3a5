"""The rules every uncertainty summary must obey, whatever the sample size.

Shared by the library tests (on :class:`Confidence`/:class:`RankConfidence`) and
the API tests (on the JSON of ``GET …/ranking`` and ``GET …/pairwise``):

1. each item's score lies inside its own interval;
2. its rank lies inside its rank intervals (marginal and simultaneous);
3. P(top-K) does not favour a lower-scored item over one significantly above it:
   if a is significantly above b, P(b in, a out) ≤ P(b above a in the draws), so
   p_top_k(b) − p_top_k(a) is at most the normal tail beyond the simultaneous
   critical value plus Monte Carlo error;
4. the win-probability matrix agrees in direction with the scores;
5. certain top-K members are in the top-K, and tiers list the items in rank order.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from app.stats import competition_ranks

#: Draws behind p_top_k (rank_confidence's default) and the slack their Monte Carlo
#: error needs at z = 4.5 for a difference of two proportions.
N_DRAWS = 4000
MC_SLACK = 4.5 * math.sqrt(2 * 0.25 / N_DRAWS)


def check_library(conf, ranks, k=None) -> None:
    theta = conf.theta
    ok = conf.identified
    assert np.all(conf.lower[ok] <= theta[ok]) and np.all(theta[ok] <= conf.upper[ok]), "score outside its ci"
    rank = competition_ranks(theta)
    for name, arr in (("rank_ci", ranks.rank_ci), ("rank_ci_simultaneous", ranks.rank_ci_simultaneous)):
        assert np.all(arr[:, 0] <= rank) and np.all(rank <= arr[:, 1]), f"rank outside its {name}"
    assert np.all(ranks.rank_ci_simultaneous[:, 0] <= ranks.rank_ci[:, 0])
    se = conf.difference_se()
    with np.errstate(invalid="ignore"):
        above = (conf.estimate[:, None] - conf.estimate[None, :]) > ranks.critical_value * se
    # A significant difference never contradicts the scores' order.
    assert not np.any(above & (theta[:, None] < theta[None, :])), "significant order reverses the scores"
    if k is not None and ranks.p_top_k is not None:
        p = ranks.p_top_k
        slack = float(ndtr(-ranks.critical_value)) + MC_SLACK
        a, b = np.nonzero(above)
        assert np.all(p[b] <= p[a] + slack), "p_top_k favours a significantly lower item"
        assert np.all(ranks.top_k_certain <= (rank <= k)), "a certain top-K member outside the top-K"
    pw, lo, hi = conf.win_probability()
    off = ~np.eye(theta.size, dtype=bool) & np.isfinite(pw)
    d = theta[:, None] - theta[None, :]
    assert np.all(np.sign(pw[off] - 0.5) == np.sign(np.round(d[off], 12))), "win probability direction"
    assert np.all((lo[off] <= pw[off]) & (pw[off] <= hi[off])), "win probability outside its interval"
    order = np.lexsort((np.arange(theta.size), rank))
    assert [x for t in ranks.tiers for x in t] == list(order), "tiers not in rank order"


def check_ranking_json(data: dict) -> None:
    """The same rules on a ``GET …/ranking`` answer."""
    items = data["items"]
    u = data["uncertainty"]
    if not u["available"]:
        assert u["reason"] and u["message"], "unavailable intervals need a reason and a sentence"
        assert all(it.get("ci") is None and it.get("rank_ci") is None for it in items)
        return
    assert u["reason"] is None
    for it in items:
        if it["ci"] is not None:
            assert it["ci"][0] <= it["score"] <= it["ci"][1], f"score outside ci: {it}"
        for name in ("rank_ci", "rank_ci_simultaneous"):
            lo, hi = it[name]
            assert lo <= it["rank"] <= hi, f"rank outside {name}: {it}"
    ranks = [it["rank"] for it in items]
    assert ranks == sorted(ranks)
    if data["top_k"] is not None and data["top_k_certain"] is not None:
        assert set(data["top_k_certain"]) <= set(data["top_k"])
    if items[0].get("p_top_k") is not None:
        slack = float(ndtr(-u["critical_value"])) + MC_SLACK
        # Disjoint simultaneous rank intervals mean "a significantly above b": some
        # item c is significantly below a and above b, or c is one of them, and
        # se(a − b) ≤ se(a − c) + se(c − b) carries the significance over.
        for a in items:
            for b in items:
                if a["rank_ci_simultaneous"][1] < b["rank_ci_simultaneous"][0]:
                    assert b["p_top_k"] <= a["p_top_k"] + slack, (a, b)
        assert sum(it["p_top_k"] for it in items) == pytest.approx(len(data["top_k"]))
    assert [x for t in data["tiers"] for x in t] == [it["item_id"] for it in items]


def check_pairwise_json(data: dict, scores: dict) -> None:
    """Win probabilities agree in direction with the ranking's scores and lie in their intervals."""
    ids = [it["item_id"] for it in data["items"]]
    for a, row in enumerate(data["probability"]):
        for b, p in enumerate(row):
            if a == b or p is None:
                continue
            d = scores[ids[a]] - scores[ids[b]]
            # Probabilities are rounded to 6 decimals: σ(d) − 1/2 ≈ d/4 rounds to 0 when
            # |d| < 2e-6, a near-tie whose direction the rounding cannot show.
            if abs(d) > 2e-6:
                assert (p - 0.5) * d > 0, (ids[a], ids[b], p, d)
            elif abs(d) > 1e-9:
                assert (p - 0.5) * d >= 0, (ids[a], ids[b], p, d)
            if data["available"]:
                assert data["lower"][a][b] <= p <= data["upper"][a][b]
