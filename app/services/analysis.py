"""Rankings from the folded statistics, with a fit cache keyed by the data version."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..db.models import Respondent, Survey
from ..stats import BTLFit, competition_ranks, fit_debiased_mle_stats, fit_naive_mle_stats
from ..stats.metrics import tie_groups
from .aggregation import fold_pending, read_snapshot
from .errors import Invalid
from .surveys import survey_items

__all__ = ["METHODS", "FitCache", "ranking"]

METHODS = {"debiased_mle": fit_debiased_mle_stats, "naive_mle": fit_naive_mle_stats}


@dataclass
class _Entry:
    fit: BTLFit
    item_counts: np.ndarray
    n_pairs: int
    g: float
    h: float


class FitCache:
    """Fits per (survey, method, λ, items, data version), and the latest θ̂ per
    (survey, method, λ) to warm-start the next fit when new answers arrive.

    Per process; each worker keeps its own (the API is stateless otherwise).
    """

    def __init__(self, size: int = 256) -> None:
        self._fits: OrderedDict[tuple, _Entry] = OrderedDict()
        self._warm: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple) -> _Entry | None:
        with self._lock:
            entry = self._fits.get(key)
            if entry is not None:
                self._fits.move_to_end(key)
            return entry

    def put(self, key: tuple, entry: _Entry) -> None:
        with self._lock:
            self._fits[key] = entry
            self._fits.move_to_end(key)
            self._warm[key[:3]] = entry.fit.theta
            self._warm.move_to_end(key[:3])
            for store in (self._fits, self._warm):
                while len(store) > self._size:
                    store.popitem(last=False)

    def warm_start(self, key: tuple, n_items: int) -> np.ndarray | None:
        with self._lock:
            theta = self._warm.get(key[:3])
        if theta is None:
            return None
        if theta.size < n_items:  # items were added since: they start at 0
            theta = np.concatenate((theta, np.zeros(n_items - theta.size)))
        return theta[:n_items]


def ranking(
    session: Session,
    survey: Survey,
    cache: FitCache,
    method: str = "debiased_mle",
    lam: float | None = None,
    k: int | None = None,
) -> dict:
    """The ``GET …/ranking`` answer: items by rank, top-K, and diagnostics."""
    if method not in METHODS:
        raise Invalid(f"method must be one of {sorted(METHODS)}")
    if lam is not None and not (math.isfinite(lam) and 0 < lam <= 1e9):
        raise Invalid("lambda must be a number in (0, 1e9]")
    fold_pending(session, survey.id, wait=True)
    items = survey_items(session, survey.id)
    m = len(items)
    if k is not None and not 1 <= k <= m:
        raise Invalid(f"k must be between 1 and the number of items ({m})")
    base_key = (survey.id, method, lam, m)
    snap = read_snapshot(session, survey.id, m, need_stats=lambda v: cache.get((*base_key, v)) is None)
    key = (*base_key, snap.version)
    entry = cache.get(key)
    if entry is None:
        assert snap.stats is not None
        stats = snap.stats
        fit = METHODS[method](stats, lam, theta0=cache.warm_start(key, m))
        entry = _Entry(fit, stats.item_counts(), stats.n_pairs, stats.G, stats.H)
        cache.put(key, entry)
    fit = entry.fit
    theta = fit.theta
    ranks = competition_ranks(theta)
    # Rank order; items tied in score keep the survey's order.
    order = np.lexsort((np.arange(m), ranks))
    respondents = session.scalar(
        select(func.count())
        .select_from(Respondent)
        .where(Respondent.survey_id == survey.id, Respondent.n_comparisons > 0)
    )
    groups = tie_groups(theta)
    out_items = [
        {
            "item_id": items[x].id,
            "label": items[x].label,
            "position": items[x].position,
            "score": float(theta[x]),
            "rank": int(ranks[x]),
            "comparisons": int(entry.item_counts[x]),
        }
        for x in order
    ]
    top_k = None
    boundary_tied = None
    if k is not None:
        top_k = [items[x].id for x in order[:k]]
        boundary_tied = bool(k < m and groups[order[k - 1]] == groups[order[k]])
    components = None
    if not fit.connected:
        components = [
            [items[x].id for x in np.flatnonzero(fit.component == c)] for c in range(fit.n_components)
        ]
    eps_min = snap.epsilon_min
    diagnostics = {
        "respondents": int(respondents or 0),
        "comparisons": int(fit.n_comparisons),
        "pairs_observed": int(entry.n_pairs),
        "pairs_total": m * (m - 1) // 2,
        "connected": bool(fit.connected),
        "n_components": int(fit.n_components),
        "components": components,
        "lambda": float(fit.lam),
        "lambda_source": "query" if lam is not None else "default: G(epsilon)",
        "iterations": int(fit.iterations),
        "converged": bool(fit.converged),
        "gradient_norm": float(fit.gradient_norm),
        "solver": fit.solver,
        "G": float(entry.g),
        "H": float(entry.h) if eps_min is not None else None,
        "epsilon_min": eps_min,
        "ties": bool(np.unique(groups).size < m),
        "top_k_boundary_tied": boundary_tied,
        "data_version": int(snap.version),
    }
    return {
        "survey_id": survey.id,
        "method": method,
        "items": out_items,
        "top_k": top_k,
        "diagnostics": diagnostics,
    }
