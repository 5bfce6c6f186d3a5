"""The diagnostics of a ranking: the privacy regime, the comparison graph, the spend.

Where the survey's ε sits relative to the paper's dividing line (:func:`privacy_regime`),
the algebraic connectivity of the comparison graph (once per fit), and the distribution
of the respondents' total ε and numbers of comparisons (docs/estimator.md §7,
"Theory: rates and the dividing line"; docs/tutorials/read-a-ranking.md).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..core.cache import nbytes
from ..core.db.models import Respondent, Survey
from ..core.deadline import Deadline
from ..stats.clusters import ClusterMoments
from ..stats.inference import MAX_ITEMS_COVARIANCE
from ..stats.pairs import PairStats
from ..stats.theory import dividing_line_epsilon
from .fits import FitCache, _Connectivity, _Entry
from .results import PrivacyRegime

__all__ = ["GRAPH_DENSE_ITEMS", "privacy_regime"]


def privacy_regime(n_items: int, n_comparisons: int, g: float) -> PrivacyRegime:
    """Where the survey's ε sits relative to the consistency dividing line.

    Corollaries 1–2: with m items and n_pair comparisons per pair (the paper's L),
    ε ≍ 1/√(m·n_pair) is the line below which estimates stop improving with more respondents, and
    ε ≳ log(m·n_pair)/√(m·n_pair) guarantees consistency. In incomplete designs n_pair is the mean
    number of comparisons per pair; ε is the effective level whose coth²(ε/2)
    equals G(ε).
    """
    n_pairs = n_items * (n_items - 1) // 2
    if n_comparisons == 0 or n_pairs == 0:
        return PrivacyRegime(verdict="no data", explanation="No comparisons yet.")
    per_pair = n_comparisons / n_pairs
    eps_eff = 2.0 * math.atanh(1.0 / math.sqrt(g)) if g > 1.0 else math.inf
    line = dividing_line_epsilon(n_items, per_pair)
    mL = n_items * per_pair
    consistent = math.log(mL) / math.sqrt(mL) if mL > 1 else math.inf
    if eps_eff >= consistent:
        verdict: Literal["above", "near", "below"] = "above"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) is above the consistency "
            f"threshold log(m·n_pair)/√(m·n_pair) ≈ {consistent:.2g} of the paper's Corollary 1 "
            f"(m = {n_items} items, n_pair ≈ {per_pair:.3g} comparisons per pair): more respondents keep "
            "sharpening the ranking."
        )
    elif eps_eff > line:
        verdict = "near"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) lies between the dividing line "
            f"1/√(m·n_pair) ≈ {line:.2g} (n_pair ≈ {per_pair:.3g} comparisons per pair) and the "
            f"consistency threshold ≈ {consistent:.2g}: estimates improve only slowly as respondents are "
            "added; a larger ε would help more than more respondents."
        )
    else:
        verdict = "below"
        words = (
            f"The respondents' privacy level (effective ε ≈ {eps_eff:.3g}) is at or below the dividing line "
            f"1/√(m·n_pair) ≈ {line:.2g} (Corollary 2; n_pair ≈ {per_pair:.3g} comparisons per pair): "
            "the privacy noise dominates and more respondents will not make the ranking reliable; raise ε."
        )
    return PrivacyRegime(
        verdict=verdict,
        explanation=words,
        effective_epsilon=eps_eff,
        dividing_line_epsilon=line,
        consistency_epsilon=consistent,
        comparisons_per_pair=per_pair,
    )


def _graph(stats: PairStats) -> _Connectivity:
    """Algebraic connectivity of the comparison graph (edge weights n_ij), and of its
    normalized Laplacian D^{-1/2} L D^{-1/2} (scale-free, in [0, 2]; near 0: a bottleneck).

    Both are second-smallest eigenvalues of sparse matrices (0 for a disconnected graph):
    Lanczos (ARPACK's ``eigsh``, the smallest algebraic pair) on the sparse Laplacian, with
    the dense eigenvalue problem for small graphs or where Lanczos does not converge."""
    m = stats.n_items
    if m > MAX_ITEMS_COVARIANCE or stats.n_pairs == 0:
        return _Connectivity(None, None)
    if m < 2:
        return _Connectivity(0.0, 0.0)
    w = stats.n.astype(float)
    adj = scipy.sparse.coo_matrix((w, (stats.i, stats.j)), shape=(m, m)).tocsr()
    adj = adj + adj.T
    n_comp, _ = scipy.sparse.csgraph.connected_components(adj, directed=False)
    if n_comp > 1:
        return _Connectivity(0.0, 0.0)
    deg = np.asarray(adj.sum(axis=1)).ravel()
    lap = scipy.sparse.diags(deg) - adj
    inv = 1.0 / np.sqrt(deg)
    norm = scipy.sparse.diags(inv) @ lap @ scipy.sparse.diags(inv)
    return _Connectivity(_second_smallest(lap), _second_smallest(norm))


def _second_smallest(lap) -> float:
    """The second-smallest eigenvalue of a connected graph's (sparse) Laplacian, ≥ 0."""
    m = lap.shape[0]
    if m > GRAPH_DENSE_ITEMS:
        try:
            vals = scipy.sparse.linalg.eigsh(lap, k=2, which="SA", tol=1e-10, return_eigenvectors=False)
            return float(max(np.sort(vals)[1], 0.0))
        except scipy.sparse.linalg.ArpackError:
            pass
    return float(max(np.linalg.eigvalsh(lap.toarray())[1], 0.0))


#: Up to this many items the graph diagnostics use the dense eigenvalue problem.
GRAPH_DENSE_ITEMS = 200


def _entry_graph(cache: FitCache, entry: _Entry, deadline: Deadline) -> _Connectivity:
    """:func:`_graph` of the entry's statistics, computed once per fit (two sparse
    eigenvalue problems)."""
    if entry.graph is None:
        deadline.check()
        with cache.work.hold(deadline):
            if entry.graph is None:  # another request may have computed it while this one waited
                entry.graph = _graph(entry.stats)
                cache.grew(entry)
    return entry.graph


def _spend(
    session: Session, survey: Survey, cache: FitCache, moments: ClusterMoments | None = None
) -> tuple[dict, dict]:
    """The distribution of respondents' total ε, and of their numbers of comparisons:
    from the answer log's sums where the survey has one (``moments``: those the intervals
    used, else read; every answer's ε is what its respondent spent on it; kept per number of
    answers), otherwise from the respondents' rows."""
    if moments is None and survey.privacy_model == "local":
        logged = cache.log.read(session, survey.id)
        moments = None if logged is None else logged[1]
    if moments is None:
        rows = session.execute(
            select(Respondent.epsilon_spent, Respondent.n_comparisons).where(
                Respondent.survey_id == survey.id, Respondent.n_comparisons > 0
            )
        ).all()
        return _spend_summary(
            np.array([r[0] for r in rows], dtype=float), np.array([r[1] for r in rows], dtype=float)
        )
    key = ("spend", survey.id, moments.n_rows)
    found = cache.lru.get(key)
    if found is None:
        found = _spend_summary(moments.spent, moments.sizes.astype(float))
        cache.lru.put(key, found, nbytes(found))
    return found


def _spend_summary(values: np.ndarray, counts: np.ndarray) -> tuple[dict, dict]:
    """:func:`_spend` of the respondents' total ε and numbers of comparisons."""
    if counts.size == 0:
        return {"respondents": 0}, {"respondents": 0}
    c = np.quantile(counts, [0.0, 0.5, 1.0])
    per_respondent = {
        "respondents": int(counts.size),
        "mean": float(counts.mean()),
        "min": int(c[0]),
        "median": float(c[1]),
        "max": int(c[2]),
    }
    q = np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])
    spend = {
        "respondents": int(values.size),
        "mean": float(values.mean()),
        "min": float(q[0]),
        "p25": float(q[1]),
        "median": float(q[2]),
        "p75": float(q[3]),
        "max": float(q[4]),
    }
    return spend, per_respondent
