"""The rules every uncertainty summary must obey, whatever the sample size.

Shared by the library tests (on :class:`Confidence`/:class:`RankConfidence`) and
the API tests (on the JSON of ``GET …/ranking`` and ``GET …/pairwise``):

1. each item's score lies inside its own interval;
2. its rank lies inside its rank intervals (marginal and simultaneous);
3. one centre: the interval centres follow the scores' order, and P(top-K) never
   favours a lower-ranked item over a higher-ranked one (non-increasing along the
   ranking, exactly: no Monte Carlo slack);
4. the win-probability matrix agrees in direction with the scores;
5. certain top-K members are in the top-K, and tiers list the items in rank order.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.stats import competition_ranks


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
    same = conf.component[:, None] == conf.component[None, :]
    higher = same & (theta[:, None] > theta[None, :])
    centre = conf.estimate
    assert not np.any(higher & (centre[:, None] < centre[None, :])), "the centre reverses the scores' order"
    if k is not None and ranks.p_top_k is not None:
        p = ranks.p_top_k
        assert not np.any(higher & (p[:, None] < p[None, :])), "p_top_k favours a lower-ranked item"
        assert p.sum() == pytest.approx(k)
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
        # P(top-K) never favours a lower-ranked item (rounded to 6 decimals in the JSON).
        for a, b in itertools.pairwise(items):
            if a["rank"] < b["rank"]:
                assert b["p_top_k"] <= a["p_top_k"] + 1e-6, (a, b)
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
