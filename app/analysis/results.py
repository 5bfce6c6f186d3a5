"""Analyses: the ranking with its uncertainty, the pairwise matrix, ranking surveys' consensus, imports."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field


class RankedItem(BaseModel):
    item_id: str
    label: str
    position: int
    score: float = Field(description="θ̂ of the BTL model; scores sum to 0 (per connected component).")
    rank: int = Field(description="1 = most preferred; tied scores share the best rank of their group.")
    comparisons: int = Field(description="Stored comparisons involving the item.")
    added_at: datetime = Field(
        description="When the item joined the survey: an item added late has fewer comparisons, so a "
        "wider interval, than one that was there from the start."
    )
    se: float | None = Field(None, description="Standard error of the score (null: never compared).")
    ci: list[float] | None = Field(
        None,
        description="Confidence interval for the true score, centred on a bias-corrected estimate; it "
        "always contains `score`.",
    )
    rank_ci: list[int] | None = Field(
        None, description="Marginal interval [best, worst] for the item's rank; it always contains `rank`."
    )
    rank_ci_simultaneous: list[int] | None = Field(
        None, description="Rank interval holding jointly for all items at the confidence level."
    )
    p_top_k: float | None = Field(None, description="Probability of being in the top-K (given k; sum to k).")
    interval_reason: Literal["wins_all", "loses_all", "not_identified"] | None = Field(
        None,
        description="Why the item has no two-sided interval while the others have theirs (null: it "
        "has one, or no item has): wins_all — it (alone or with a few others) wins every comparison "
        "with the rest once the privacy noise is removed, so the data bound its score from below "
        "only (`score_bound`); loses_all — from above only; not_identified — compared only with "
        "such items. Its `se` and `ci` are null; docs/uncertainty.md §5.",
    )
    score_bound: float | None = Field(
        None,
        description="For wins_all, a lower bound of the true score; for loses_all, an upper bound "
        "(one-sided, at the confidence level; it contains `score`).",
    )


class PrivacyRegime(BaseModel):
    verdict: Literal["no data", "above", "near", "below"] = Field(
        description="above: ε is above the consistency threshold log(m·n_pair)/√(m·n_pair) (n_pair: "
        "comparisons per pair); near: between it and the dividing line 1/√(m·n_pair); "
        "below: at or under the line, where more respondents no longer help."
    )
    explanation: str = Field(description="The verdict in words, with the numbers.")
    effective_epsilon: float | None = Field(
        None, description="The ε whose coth²(ε/2) equals the survey's G(ε) (null without data)."
    )
    dividing_line_epsilon: float | None = Field(
        None, description="1/√(m·n_pair), n_pair the comparisons per pair (Corollary 2)."
    )
    consistency_epsilon: float | None = Field(None, description="log(m·n_pair)/√(m·n_pair) (Corollary 1).")
    comparisons_per_pair: float | None = Field(None, description="n_pair: mean comparisons per item pair.")


class Diagnostics(BaseModel):
    respondents: int = Field(description="Respondents with at least one stored comparison.")
    comparisons_per_respondent: dict = Field(
        description="How many comparisons each respondent gave: mean, min, median, max. One respondent's "
        "answers go together, so the respondents, not the comparisons, are the independent unit."
    )
    comparisons: int
    pairs_observed: int
    pairs_total: int
    connected: bool = Field(description="Whether every item is linked to every other through comparisons.")
    n_components: int
    components: list[list[str]] | None = Field(description="Item ids per component when not connected.")
    algebraic_connectivity: float | None = Field(
        description="Second-smallest eigenvalue of the comparison-count Laplacian (0: disconnected)."
    )
    algebraic_connectivity_normalized: float | None = Field(
        description="The same for the normalized Laplacian, in [0, 2]; values near 0 mean a bottleneck."
    )
    lambda_: float = Field(alias="lambda", serialization_alias="lambda")
    lambda_source: str
    iterations: int
    converged: bool
    gradient_norm: float
    solver: str
    G: float = Field(description="G(ε) of Theorem 1: mean of ((e^ε+1)/(e^ε−1))² over comparisons.")
    H: float | None = Field(description="H(ε) of Theorem 1: the largest (e^ε+1)/(e^ε−1).")
    epsilon_min: float | None
    respondent_epsilon_total: dict = Field(
        description="Distribution of respondents' total ε (sum over their answers): mean and quantiles."
    )
    privacy_regime: PrivacyRegime = Field(
        description="Where ε sits relative to the dividing line ε ≍ 1/√(m·n_pair) of Corollaries 1–2 "
        "(n_pair: comparisons per pair), in words."
    )
    ties: bool
    top_k_boundary_tied: bool | None
    data_version: int
    randomization_p_value: float | None = Field(
        None,
        description="How compatible the stored answers are with randomized response at their declared ε "
        "(Hoeffding's bound per pair, combined by Fisher's method; docs/uncertainty.md §5). Below 1e-6 the "
        "answers look unrandomized and intervals are refused (reason unrandomized_answers). Null on central "
        "surveys.",
    )

    model_config = ConfigDict(populate_by_name=True)


class UncertaintyInfo(BaseModel):
    available: bool
    method: str | None = Field(
        description="cluster (cluster-robust sandwich, respondents as clusters), cluster_cr2 (few "
        "respondents: the same with the CR2 small-sample correction and Bell–McCaffrey degrees of freedom), "
        "cluster_bound (few "
        "respondents: a worst-case bound on within-respondent correlation), cluster_bootstrap "
        "(respondents resampled), sandwich (model-based, comparisons independent) or bootstrap "
        "(parametric)."
    )
    covariance: str | None = Field(None, description="The covariance asked for: cluster (default) or model.")
    level: float
    reason: str | None = Field(
        description="Why intervals are missing, when they are: no_comparisons, too_few_respondents, "
        "not_identified, unstable_correction, too_many_items, unrandomized_answers (the answers agree more "
        "often than randomized response at their declared ε allows), not_requested."
    )
    message: str | None = Field(None, description="The same in a plain sentence.")
    reason_code: str | None = Field(
        None,
        description="Ranking surveys, whose `reason` is a sentence: the same as a code — "
        "no_standard_errors (lehmer, kemeny have none) or too_few_rankings (fewer than `min_rankings` "
        "rankings). Null elsewhere.",
    )
    min_rankings: int | None = Field(
        None, description="With reason_code too_few_rankings: the fewest rankings intervals are given for."
    )
    estimand: str | None = Field(None, description="What the intervals are for, in words.")
    n_clusters: int | None = Field(None, description="Respondents behind the covariance (cluster methods).")
    interval_critical_value: float | None = Field(
        None,
        description="Multiplier of `se` in `ci` (normal, or Student t with respondents − 1 degrees "
        "of freedom).",
    )
    critical_value: float | None = Field(description="Simultaneous critical value for score differences.")
    corrections: dict | None = Field(
        None,
        description="Bias corrections applied (ridge removal, second-order) and their size in "
        "standard errors.",
    )
    widened: int | None = Field(
        None,
        description="Intervals extended to contain their score (a correction moved the centre further than "
        "the half-width).",
    )


class _LabelledSets:
    """The label lists alongside the id lists ``top_k``, ``tied_groups`` and ``tiers``: the
    same sets, each id replaced by its item's ``label`` as ``items`` gives it. Computed when
    the answer is written, so that they always match the ids and the items."""

    items: list
    top_k: list[str] | None
    tied_groups: list[list[str]] | None
    tiers: list[list[str]] | None

    def _groups_labels(self, groups: list[list[str]] | None) -> list[list[str]] | None:
        """Each group's ids replaced by labels (one id → label map for all the groups)."""
        if groups is None:
            return None
        by_id = {it.item_id: it.label for it in self.items}
        return [[by_id[x] for x in g] for g in groups]

    @computed_field(description="The labels of top_k, in the same order.")  # type: ignore[prop-decorator]
    @property
    def top_k_labels(self) -> list[str] | None:
        labels = self._groups_labels(None if self.top_k is None else [self.top_k])
        return None if labels is None else labels[0]

    @computed_field(description="The labels of tied_groups, group for group.")  # type: ignore[prop-decorator]
    @property
    def tied_groups_labels(self) -> list[list[str]] | None:
        return self._groups_labels(self.tied_groups)

    @computed_field(description="The labels of tiers, tier for tier.")  # type: ignore[prop-decorator]
    @property
    def tiers_labels(self) -> list[list[str]] | None:
        return self._groups_labels(self.tiers)


class RankingOut(_LabelledSets, BaseModel):
    survey_id: str
    method: str
    items: list[RankedItem]
    top_k: list[str] | None = Field(description="The k best item ids (when k is given).")
    top_k_certain: list[str] | None = Field(
        description="Members of top_k that are in the top-K at the confidence level (jointly)."
    )
    tied_groups: list[list[str]] | None = Field(
        description="Statistically tied items: maximal runs, in rank order, of items no two of which differ "
        "significantly (jointly at the confidence level); groups may overlap."
    )
    tiers: list[list[str]] | None = Field(
        description="A partition of the items in rank order, split only where every item above is "
        "significantly better than every item below."
    )
    uncertainty: UncertaintyInfo
    diagnostics: Diagnostics


RankingOut.model_config["json_schema_extra"] = {
    "examples": [
        {
            "survey_id": "srv_k3j9x2mqa7b4c5d6",
            "method": "debiased_mle",
            "items": [
                {
                    "item_id": "itm_p2w8c4r7n5t1y6qa",
                    "label": "Transit",
                    "position": 1,
                    "score": 0.41,
                    "rank": 1,
                    "comparisons": 812,
                    "se": 0.08,
                    "ci": [0.27, 0.59],
                    "rank_ci": [1, 1],
                    "rank_ci_simultaneous": [1, 1],
                    "p_top_k": 1.0,
                },
                {
                    "item_id": "itm_u7x2k9q4m3c8d1ze",
                    "label": "Housing",
                    "position": 0,
                    "score": -0.41,
                    "rank": 2,
                    "comparisons": 812,
                    "se": 0.08,
                    "ci": [-0.59, -0.27],
                    "rank_ci": [2, 2],
                    "rank_ci_simultaneous": [2, 2],
                    "p_top_k": 0.0,
                },
            ],
            "top_k": ["itm_p2w8c4r7n5t1y6qa"],
            "top_k_certain": ["itm_p2w8c4r7n5t1y6qa"],
            "tied_groups": [["itm_p2w8c4r7n5t1y6qa"], ["itm_u7x2k9q4m3c8d1ze"]],
            "tiers": [["itm_p2w8c4r7n5t1y6qa"], ["itm_u7x2k9q4m3c8d1ze"]],
            "uncertainty": {
                "available": True,
                "method": "cluster",
                "covariance": "cluster",
                "level": 0.95,
                "reason": None,
                "message": None,
                "estimand": "the BTL scores of the population the respondents were drawn from; each "
                "respondent is one independent unit (cluster-robust sandwich over 406 respondents)",
                "n_clusters": 406,
                "interval_critical_value": 1.966,
                "critical_value": 1.96,
                "corrections": {
                    "ridge": True,
                    "second_order": True,
                    "ridge_max_se": 0.04,
                    "second_order_max_se": 0.01,
                },
                "widened": 0,
            },
            "diagnostics": {
                "respondents": 406,
                "comparisons_per_respondent": {
                    "respondents": 406,
                    "mean": 2.0,
                    "min": 1,
                    "median": 2.0,
                    "max": 3,
                },
                "comparisons": 812,
                "pairs_observed": 1,
                "pairs_total": 1,
                "connected": True,
                "n_components": 1,
                "components": None,
                "algebraic_connectivity": 1624.0,
                "algebraic_connectivity_normalized": 2.0,
                "lambda": 2.17,
                "lambda_source": "default: G(epsilon)",
                "iterations": 4,
                "converged": True,
                "gradient_norm": 3.1e-12,
                "solver": "dense",
                "G": 2.17,
                "H": 1.39,
                "epsilon_min": 1.0,
                "respondent_epsilon_total": {
                    "respondents": 406,
                    "mean": 2.0,
                    "min": 1.0,
                    "p25": 2.0,
                    "median": 2.0,
                    "p75": 2.0,
                    "max": 3.0,
                },
                "privacy_regime": {
                    "verdict": "above",
                    "effective_epsilon": 1.0,
                    "explanation": "The respondents' privacy level (effective ε ≈ 1) is above …",
                },
                "ties": False,
                "top_k_boundary_tied": False,
                "data_version": 57,
            },
        }
    ]
}


class PairwiseItem(BaseModel):
    item_id: str
    label: str


class PairwiseOut(BaseModel):
    survey_id: str
    method: str
    level: float
    items: list[PairwiseItem]
    probability: list[list[float | None]] = Field(description="P(row item beats column item).")
    lower: list[list[float | None]]
    upper: list[list[float | None]]
    available: bool = Field(description="Whether intervals are given (the estimates always are).")
    reason: str | None = Field(description="Why intervals are missing, when they are (as for the ranking).")
    message: str | None = Field(description="The same in a plain sentence.")
    method_intervals: str | None = Field(description="How the intervals were computed (as for the ranking).")
    data_version: int

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "method": "debiased_mle",
                    "level": 0.95,
                    "items": [
                        {"item_id": "itm_a", "label": "Transit"},
                        {"item_id": "itm_b", "label": "Housing"},
                    ],
                    "probability": [[None, 0.69], [0.31, None]],
                    "lower": [[None, 0.64], [0.27, None]],
                    "upper": [[None, 0.73], [0.36, None]],
                    "available": True,
                    "reason": None,
                    "message": None,
                    "method_intervals": "cluster",
                    "data_version": 57,
                }
            ]
        }
    )


class ConsensusItem(BaseModel):
    item_id: str
    label: str
    position: int
    rank: int = Field(description="Place in the consensus ordering, 1 = best (exact ties broken at random).")
    score: float | None = Field(
        description="borda: mean Borda points m − mean position; btl: θ̂ of the implied-pairs fit; "
        "lehmer, kemeny: null (they order without scores)."
    )
    mean_position: float = Field(description="Mean 1-based position in the stored (synthetic) rankings.")
    se: float | None = None
    ci: list[float] | None = None
    rank_ci: list[int] | None = None
    rank_ci_simultaneous: list[int] | None = None
    p_top_k: float | None = None


class ConsensusOut(_LabelledSets, BaseModel):
    survey_id: str
    method: Literal["borda", "lehmer", "kemeny", "btl"]
    items: list[ConsensusItem]
    order: list[str] = Field(description="The consensus ordering, best first.")
    top_k: list[str] | None
    top_k_certain: list[str] | None
    tied_groups: list[list[str]] | None
    tiers: list[list[str]] | None
    uncertainty: UncertaintyInfo
    diagnostics: dict = Field(
        description="rankings, items, data_version, epsilon_min, the Kendall objective of the consensus "
        "(total and mean distance to the stored rankings), and per method: kemeny's exactness certificate "
        "(lower_bound, optimality_gap, optimal_orders), borda's exact ties, btl's fit."
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "method": "kemeny",
                    "items": [
                        {
                            "item_id": "itm_p2w8c4r7n5t1y6qa",
                            "label": "Transit",
                            "position": 1,
                            "rank": 1,
                            "score": None,
                            "mean_position": 1.31,
                        },
                        {
                            "item_id": "itm_u7x2k9q4m3c8d1ze",
                            "label": "Housing",
                            "position": 0,
                            "rank": 2,
                            "score": None,
                            "mean_position": 1.69,
                        },
                    ],
                    "order": ["itm_p2w8c4r7n5t1y6qa", "itm_u7x2k9q4m3c8d1ze"],
                    "top_k": None,
                    "top_k_certain": None,
                    "tied_groups": None,
                    "tiers": None,
                    "uncertainty": {
                        "available": False,
                        "method": None,
                        "level": 0.95,
                        "reason": "the Kemeny consensus has no standard errors",
                        "reason_code": "no_standard_errors",
                        "critical_value": None,
                    },
                    "diagnostics": {
                        "rankings": 200,
                        "items": 2,
                        "data_version": 12,
                        "epsilon_min": 1.0,
                        "kendall_objective": 62,
                        "mean_kendall_distance": 0.31,
                        "exact": True,
                        "lower_bound": 62,
                        "optimality_gap": 0.0,
                        "optimal_orders": 1,
                    },
                }
            ]
        }
    )


class ImportOut(BaseModel):
    imported: int
    respondents: int
    respondents_created: int

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"imported": 1200, "respondents": 80, "respondents_created": 80}]}
    )
