"""Uncertainty of the debiased MLE: standard errors, intervals, rank intervals and top-K
probabilities under privacy noise, with respondents as the independent unit.

The model-based sandwich is docs/uncertainty.md §2; respondents as clusters (CR1, CR2
with Bell–McCaffrey degrees of freedom, the worst-case bound, the floor) §3; the
bias-corrected, order-restricted centre §4; refusals and items set aside §5; rank
intervals, top-K probabilities and their cost (:func:`uncertainty` once per fit,
:meth:`Uncertainty.at`, :func:`rank_draws`, :func:`rank_at`, :func:`with_k`) §6; the
bootstraps §7; references §10. Coverage is measured by
``python -m tests.benchmarks.bench_coverage`` and ``bench_small_sample``.

The package's modules: :mod:`.sandwich` (the cluster-robust meat), :mod:`.intervals`
(intervals from a covariance, refusals), :mod:`.set_aside` (items not identified),
:mod:`.uncertainty` (the covariance of a fit, :func:`confidence`), :mod:`.bootstrap`,
:mod:`.ranks` (rank intervals, top-K probabilities) and :mod:`.critical` (their critical values).
"""

from __future__ import annotations

from ..laplacian import MAX_ITEMS_COVARIANCE, laplacian, laplacian_pinv
from .bootstrap import bootstrap_confidence, cluster_bootstrap_confidence
from .intervals import MIN_CLUSTERS, REASONS, Confidence, IntervalsUnavailable, confidence_from_cov
from .ranks import RankConfidence, RankDraws, rank_at, rank_confidence, rank_draws, rank_summaries, with_k
from .sandwich import Clusters, ClusterSource
from .uncertainty import Uncertainty, confidence, uncertainty

__all__ = [
    "MAX_ITEMS_COVARIANCE",
    "MIN_CLUSTERS",
    "REASONS",
    "ClusterSource",
    "Clusters",
    "Confidence",
    "IntervalsUnavailable",
    "RankConfidence",
    "RankDraws",
    "Uncertainty",
    "bootstrap_confidence",
    "cluster_bootstrap_confidence",
    "confidence",
    "confidence_from_cov",
    "laplacian",
    "laplacian_pinv",
    "rank_at",
    "rank_confidence",
    "rank_draws",
    "rank_summaries",
    "uncertainty",
    "with_k",
]
