"""Full rankings: permutations, the Mallows mechanism of ε-ranking DP, and rank aggregation.

Xu, Sun & Cheng, *Ranking Differential Privacy* (2023; docs/mechanisms.md §3) for the
mechanism; Sima, Rana & Milenkovic (docs/federated.md §2–4) for Borda and Lehmer-code
aggregation; Kemeny for the maximum-likelihood consensus. An **ordering** lists items
best → worst, a **position vector** gives each item's 0-based position (docs/README.md
§2); functions take one ranking as a 1-d array or a batch as a 2-d array, one per row.
``rng=None`` draws from the OS CSPRNG (:mod:`app.stats.entropy`); seeded generators are
for simulations and tests. Tie-breaking in the aggregators is not privacy-relevant and
takes any generator (the service seeds it from the data version: reproducible consensus).

The package's modules: :mod:`.permutations`, :mod:`.mallows` (the mechanism) and
:mod:`.aggregation` (Borda, Lehmer, Kemeny).
"""

from __future__ import annotations

from .aggregation import (
    KEMENY_EXACT_MAX_ITEMS,
    KemenyResult,
    RankingStats,
    borda_aggregate,
    borda_scores,
    kemeny_aggregate,
    kemeny_consensus,
    kemeny_objective,
    lehmer_aggregate,
    pairwise_counts,
    ranking_stats,
)
from .mallows import (
    adjacent_flip_probability,
    expected_concordant_pairs,
    laplace_expected_concordant_pairs,
    laplace_rank_privatize,
    mallows_dispersion,
    mallows_log_normalizer,
    mallows_log_pmf,
    mallows_privatize,
    mallows_sample,
    stage_moments,
    stage_pmf,
)
from .permutations import (
    complete_ranking,
    insertion_decode,
    kendall_distance,
    lehmer_code,
    lehmer_decode,
    orders_from_positions,
    positions_from_orders,
    random_permutation,
    validate_orders,
)

__all__ = [
    "KEMENY_EXACT_MAX_ITEMS",
    "KemenyResult",
    "RankingStats",
    "adjacent_flip_probability",
    "borda_aggregate",
    "borda_scores",
    "complete_ranking",
    "expected_concordant_pairs",
    "insertion_decode",
    "kemeny_aggregate",
    "kemeny_consensus",
    "kemeny_objective",
    "kendall_distance",
    "laplace_expected_concordant_pairs",
    "laplace_rank_privatize",
    "lehmer_aggregate",
    "lehmer_code",
    "lehmer_decode",
    "mallows_dispersion",
    "mallows_log_normalizer",
    "mallows_log_pmf",
    "mallows_privatize",
    "mallows_sample",
    "orders_from_positions",
    "pairwise_counts",
    "positions_from_orders",
    "random_permutation",
    "ranking_stats",
    "stage_moments",
    "stage_pmf",
    "validate_orders",
]
