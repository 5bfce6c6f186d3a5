"""Request and response bodies of the REST API (the OpenAPI contract)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..limits import MAX_BATCH_CEILING, MAX_ITEMS, MAX_LABEL, MAX_RANKING_ITEMS

#: C0 control characters and DEL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _printable(value: str) -> str:
    # Control characters (NUL above all) are never meaningful in labels, titles or ids,
    # and PostgreSQL text cannot hold NUL: refuse them up front with a 422. (A regular
    # expression: this runs three times per comparison of every batch.)
    if _CONTROL.search(value):
        raise ValueError("control characters are not allowed")
    return value


Text = Annotated[str, AfterValidator(_printable)]


def _not_blank(value):
    if isinstance(value, str) and not value.strip():
        raise ValueError("item labels must not be empty")
    return value


#: A label: printable, with at least one character that is not white space.
Label = Annotated[
    str,
    BeforeValidator(_not_blank),
    Field(min_length=1, max_length=MAX_LABEL, pattern=r"\S"),
    AfterValidator(_printable),
]

ItemId = Field(min_length=1, max_length=40, examples=["itm_u7x2k9q4m3c8d1ze"])


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- surveys -------------------------------------------------------------------


class PrivacyIn(_Model):
    model: Literal["local", "central"] = Field(
        "local",
        description="local: every answer is randomized before it is stored. central: true answers are stored "
        "(the operator is trusted) and results leave only as differentially private releases.",
    )
    epsilon_default: float | None = Field(
        None, description="Local: ε given to respondents who do not choose one (default 1)."
    )
    epsilon_min: float | None = Field(
        None,
        description="Local: smallest ε a respondent may choose (default min(0.1, default); at least 0.001).",
    )
    epsilon_max: float | None = Field(
        None, description="Local: largest ε (default max(5, default); at most 30)."
    )
    respondent_budget: float | None = Field(
        None, gt=0, description="Local: cap on a respondent's total ε over all answers (basic composition)."
    )
    total_budget: float | None = Field(
        None, description="Central: the total ε all releases together may spend (person-level)."
    )
    max_comparisons_per_respondent: int | None = Field(
        None, description="Central: the most comparisons one respondent may contribute (L of individual DP)."
    )


class SurveyCreate(_Model):
    title: Text = Field(min_length=1, max_length=500)
    kind: Literal["pairwise", "ranking"] = "pairwise"
    items: list[Label] = Field(min_length=2, max_length=MAX_ITEMS, description="Item labels, unique.")
    privacy: PrivacyIn = Field(default_factory=PrivacyIn)

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "title": "Which policy matters most?",
                    "kind": "pairwise",
                    "items": ["Housing", "Transit", "Parks", "Schools"],
                    "privacy": {
                        "model": "local",
                        "epsilon_default": 1.0,
                        "epsilon_min": 0.5,
                        "epsilon_max": 3.0,
                        "respondent_budget": 20.0,
                    },
                },
                {
                    "title": "Internal priorities (trusted operator)",
                    "kind": "pairwise",
                    "items": ["Hiring", "Tooling", "Training"],
                    "privacy": {"model": "central", "total_budget": 5.0, "max_comparisons_per_respondent": 3},
                },
            ]
        },
    )


class SurveyUpdate(_Model):
    status: Literal["open", "closed"] | None = None
    title: Text | None = Field(None, min_length=1, max_length=500)

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"status": "closed"}]})


class ItemsAdd(_Model):
    items: list[Label] = Field(min_length=1, max_length=MAX_ITEMS, description="Labels of the new items.")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"items": ["Libraries"]}]})


class ItemOut(BaseModel):
    id: str
    label: str
    position: int = Field(description="0-based order of the item in the survey.")


class PrivacyOut(BaseModel):
    model: str
    epsilon_default: float | None
    epsilon_min: float | None
    epsilon_max: float | None
    respondent_budget: float | None
    flip_probability_default: float | None = Field(description="Local: 1/(1+e^ε) at epsilon_default.")
    total_budget: float | None = None
    max_comparisons_per_respondent: int | None = None


class _SurveyFields(BaseModel):
    id: str
    title: str
    kind: str
    status: str
    privacy: PrivacyOut
    created_at: datetime
    updated_at: datetime


class SurveyOut(_SurveyFields):
    items: list[ItemOut]

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "srv_k3j9x2mqa7b4c5d6",
                    "title": "Which policy matters most?",
                    "kind": "pairwise",
                    "status": "open",
                    "privacy": {
                        "model": "local",
                        "epsilon_default": 1.0,
                        "epsilon_min": 0.5,
                        "epsilon_max": 3.0,
                        "respondent_budget": 20.0,
                        "flip_probability_default": 0.2689,
                    },
                    "items": [
                        {"id": "itm_u7x2k9q4m3c8d1ze", "label": "Housing", "position": 0},
                        {"id": "itm_p2w8c4r7n5t1y6qa", "label": "Transit", "position": 1},
                    ],
                    "created_at": "2026-11-21T10:00:00Z",
                    "updated_at": "2026-11-21T10:00:00Z",
                }
            ]
        }
    )


class SurveySummary(_SurveyFields):
    """A survey in the list: everything but its items, which ``GET /v1/surveys/{id}`` gives."""

    n_items: int = Field(description="How many items the survey has.")


class SurveyList(BaseModel):
    surveys: list[SurveySummary]
    total: int


# -- respondents ---------------------------------------------------------------


class RespondentCreate(_Model):
    epsilon: float | None = Field(
        None, description="The respondent's own ε within the survey's bounds; default: the survey's."
    )

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"epsilon": 1.5}, {}]})


class RespondentCreated(BaseModel):
    respondent_id: str
    token: str = Field(description="Bearer token for this respondent's calls; shown once.")
    epsilon: float | None = Field(description="Local: the respondent's ε. Central: null.")
    flip_probability: float | None = Field(
        description="Local: chance that each answer is reported flipped, 1/(1+e^ε). Central: null."
    )
    budget_remaining: float | None
    comparisons_remaining: int | None = Field(
        None, description="Central: answers this respondent may still give."
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "respondent_id": "rsp_q2x7v9k3m1b5c8d4",
                    "token": "rsp_q2x7v9k3m1b5c8d4.Yx3…",
                    "epsilon": 1.5,
                    "flip_probability": 0.1824,
                    "budget_remaining": 20.0,
                }
            ]
        }
    )


class RespondentStatus(BaseModel):
    respondent_id: str
    survey_id: str
    epsilon: float | None
    comparisons: int
    epsilon_total: float | None = Field(
        description="Local: privacy spent so far, the sum of ε over stored answers. Central: null."
    )
    budget_remaining: float | None
    comparisons_remaining: int | None = None
    ranked: bool | None = Field(None, description="Ranking surveys: whether the respondent has submitted.")

    # -- pairs and responses ---------------------------------------------------------

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "respondent_id": "rsp_q2x7v9k3m1b5c8d4",
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "epsilon": 1.5,
                    "comparisons": 3,
                    "epsilon_total": 4.5,
                    "budget_remaining": 15.5,
                }
            ]
        }
    )


class PairOut(BaseModel):
    a: str
    b: str
    a_label: str
    b_label: str


class PairsOut(BaseModel):
    pairs: list[PairOut]

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "pairs": [
                        {
                            "a": "itm_u7x2k9q4m3c8d1ze",
                            "b": "itm_p2w8c4r7n5t1y6qa",
                            "a_label": "Housing",
                            "b_label": "Transit",
                        }
                    ]
                }
            ]
        }
    )


class ComparisonIn(_Model):
    a: Text = ItemId
    b: Text = ItemId
    winner: Text = Field(min_length=1, max_length=40, description="a or b: the item preferred (or reported).")


class ResponsesIn(_Model):
    privatized: bool = Field(
        description="false: the server randomizes the answers with the respondent's ε on arrival; "
        "true: the client already did, with the declared epsilon."
    )
    epsilon: float | None = Field(None, description="Required when privatized is true.")
    comparisons: list[ComparisonIn] | None = Field(
        None,
        min_length=1,
        max_length=MAX_BATCH_CEILING,
        description="Pairwise surveys: the answers (at most PRIVRANK_MAX_BATCH, 1,000 by default).",
    )
    ranking: list[Text] | None = Field(
        None,
        min_length=1,
        max_length=MAX_RANKING_ITEMS,
        description="Ranking surveys: item ids, best first. With privatized=false it may list only the "
        "top items (the server puts the rest below, in uniformly random order, then applies the Mallows "
        "mechanism); with privatized=true it is the full synthetic ranking made on the device.",
    )

    @model_validator(mode="after")
    def _one_kind(self):
        if (self.comparisons is None) == (self.ranking is None):
            raise ValueError("send either comparisons (pairwise surveys) or ranking (ranking surveys)")
        return self

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"privatized": False, "comparisons": [{"a": "itm_a", "b": "itm_b", "winner": "itm_a"}]},
                {
                    "privatized": True,
                    "epsilon": 1.0,
                    "comparisons": [{"a": "itm_a", "b": "itm_c", "winner": "itm_c"}],
                },
                {"privatized": False, "ranking": ["itm_c", "itm_a"]},
                {"privatized": True, "epsilon": 2.0, "ranking": ["itm_b", "itm_c", "itm_a"]},
            ]
        },
    )


class ResponsesOut(BaseModel):
    accepted: int
    epsilon_spent: float | None = Field(
        description="Local: privacy spent by this request, Σ ε over its answers."
    )
    epsilon_total: float | None = Field(description="Local: the respondent's total spent so far.")
    budget_remaining: float | None
    comparisons_remaining: int | None = Field(
        None, description="Central: answers this respondent may still give."
    )

    # -- analysis ----------------------------------------------------------------------

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"accepted": 2, "epsilon_spent": 3.0, "epsilon_total": 4.5, "budget_remaining": 15.5}
            ]
        }
    )


class RankedItem(BaseModel):
    item_id: str
    label: str
    position: int
    score: float = Field(description="θ̂ of the BTL model; scores sum to 0 (per connected component).")
    rank: int = Field(description="1 = most preferred; tied scores share the best rank of their group.")
    comparisons: int = Field(description="Stored comparisons involving the item.")
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
    privacy_regime: dict = Field(
        description="Where ε sits relative to the dividing line ε ≍ 1/√(mL) of Corollaries 1–2, in words."
    )
    ties: bool
    top_k_boundary_tied: bool | None
    data_version: int

    model_config = ConfigDict(populate_by_name=True)


class UncertaintyInfo(BaseModel):
    available: bool
    method: str | None = Field(
        description="cluster (cluster-robust sandwich, respondents as clusters), cluster_bound (few "
        "respondents: a worst-case bound on within-respondent correlation), cluster_bootstrap "
        "(respondents resampled), sandwich (model-based, comparisons independent) or bootstrap "
        "(parametric)."
    )
    covariance: str | None = Field(None, description="The covariance asked for: cluster (default) or model.")
    level: float
    reason: str | None = Field(
        description="Why intervals are missing, when they are: no_comparisons, too_few_respondents, "
        "not_identified, unstable_correction, too_many_items, not_requested."
    )
    message: str | None = Field(None, description="The same in a plain sentence.")
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


class RankingOut(BaseModel):
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


class PairwiseOut(BaseModel):
    survey_id: str
    method: str
    level: float
    items: list[dict]
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

    # -- planner -------------------------------------------------------------------------


class EstimateOut(BaseModel):
    mean: float
    se: float = Field(description="Monte Carlo standard error of the mean.")


class PlanBody(BaseModel):
    n_items: int
    n_respondents: int
    pairs_per_respondent: int
    k: int
    epsilon: list[float]
    epsilon_weights: list[float]
    replications: int
    linf_error: EstimateOut = Field(description="Expected ‖θ̂ − θ*‖∞.")
    l2_error: EstimateOut = Field(description="Expected ‖θ̂ − θ*‖₂/√m.")
    kendall_error: EstimateOut = Field(description="Expected fraction of item pairs ordered wrongly.")
    p_exact_top_k: EstimateOut = Field(
        description="Probability that the estimated top-K set is exactly right."
    )
    comparisons_per_pair: float
    respondent_epsilon_total: list[float] = Field(
        description="Each respondent's total ε (pairs × ε) per ε value."
    )
    G: float
    H: float
    dividing_line_epsilon: float
    scores: str = Field(description="The true-score model simulated.")
    assumption: str = Field(description="What the prediction assumes, in words.")


class PlanOut(BaseModel):
    solve: str
    target: float | None
    solution: float | None = Field(description="Respondents or ε found (null when out of reach).")
    reached: bool
    plan: PlanBody = Field(description="The prediction (at the solution when solving).")

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "solve": "none",
                    "target": None,
                    "solution": None,
                    "reached": True,
                    "plan": {
                        "n_items": 10,
                        "n_respondents": 200,
                        "pairs_per_respondent": 10,
                        "k": 3,
                        "epsilon": [1.0],
                        "epsilon_weights": [1.0],
                        "replications": 200,
                        "linf_error": {"mean": 0.6, "se": 0.013},
                        "l2_error": {"mean": 0.31, "se": 0.006},
                        "kendall_error": {"mean": 0.073, "se": 0.003},
                        "p_exact_top_k": {"mean": 0.67, "se": 0.033},
                        "comparisons_per_pair": 44.4,
                        "respondent_epsilon_total": [10.0],
                        "G": 4.68,
                        "H": 2.16,
                        "dividing_line_epsilon": 0.047,
                        "scores": "uniform on (−2, 2)",
                        "assumption": "Assumes the items' true scores are drawn at random between −2 and 2 …",
                    },
                }
            ]
        }
    )


class SurveyPlanBody(BaseModel):
    n_items: int
    k: int
    level: float
    current_respondents: int
    current_comparisons: int
    added_respondents: int
    added_comparisons: int = Field(description="Comparisons the added respondents answer (mean).")
    replications: int
    tau: float = Field(description="Respondent random-effect scale simulated.")
    p_certified: EstimateOut = Field(
        description="Probability that the survey's own simultaneous intervals certify the top-K."
    )
    p_certified_correct: EstimateOut = Field(description="… and that the certified set is the true top-K.")
    p_exact_top_k: EstimateOut = Field(description="Probability that the estimated top-K set is right.")
    certified_items: EstimateOut = Field(description="Expected number of top-K items certified (0 … K).")
    p_refused: EstimateOut = Field(description="Probability that intervals are refused (not enough data).")
    assumption: str = Field(description="What the prediction assumes, in words.")


class SurveyPlanItem(BaseModel):
    item_id: str
    label: str
    score: float = Field(description="The score taken as true (current fit or pilot).")


class SurveyPlanOut(BaseModel):
    survey_id: str
    k: int
    level: float
    target: float | None = Field(description="The probability solved for (null with respondents=).")
    solution: int | None = Field(
        description="Fewest added respondents reaching target (null when out of reach), or the size asked."
    )
    reached: bool | None = Field(description="Whether target was reached (null with respondents=).")
    search_limit: Literal["max_respondents", "work"] | None = Field(
        description="Why the search stopped short of the target: max_respondents tried, or the bound on "
        "one request's work (then ask with fewer replications or a given respondents=)."
    )
    scores: Literal["fit", "pilot"]
    items: list[SurveyPlanItem]
    tau: float
    tau_source: Literal["estimated", "query"]
    tau_estimate: float | None = Field(description="τ estimated from the answers (null without answers).")
    tau_interval: list[float] | None = Field(description="Its interval at the confidence level.")
    plan: SurveyPlanBody
    data_version: int


# -- releases (central model) ----------------------------------------------------------


class ReleaseCreate(_Model):
    method: Literal["perturbed_mle", "noisy_counts"] = Field(
        description="perturbed_mle: objective-perturbed BTL MLE (scores); noisy_counts: win counts plus "
        "Laplace noise (better for top-K)."
    )
    unit: Literal["edge", "individual"] = Field(
        description="What is protected: one comparison (edge) or everything one respondent answered "
        "(individual)."
    )
    epsilon: float = Field(ge=0.001, le=20, description="The release's ε in its unit, in [0.001, 20].")
    k: int | None = Field(None, ge=1, description="Size of the top-K set to report.")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"method": "noisy_counts", "unit": "individual", "epsilon": 1.0, "k": 2}]
        },
    )


class ReleasedScore(BaseModel):
    item_id: str
    label: str
    rank: int
    score: float = Field(description="perturbed_mle: the private score (centred over all items).")

    model_config = ConfigDict(extra="forbid")


class ReleasedWins(BaseModel):
    item_id: str
    label: str
    rank: int
    noisy_wins: int = Field(description="noisy_counts: comparisons won plus discrete Laplace noise.")

    model_config = ConfigDict(extra="forbid")


class ReleaseResult(BaseModel):
    items: list[ReleasedScore] | list[ReleasedWins]
    top_k: list[str] | None = Field(description="The k best item ids (null when no k was asked).")


class Budget(BaseModel):
    total: float
    spent: float
    remaining: float


class _ReleaseFields(BaseModel):
    id: str
    survey_id: str
    method: str
    unit: str
    epsilon: float
    cost: float = Field(description="Charged to the survey's budget: ε (individual) or L·ε (edge).")
    k: int | None
    created_at: datetime
    parameters: dict = Field(description="Noise scales and other mechanism parameters (all public).")


class ReleaseOut(_ReleaseFields):
    result: ReleaseResult
    budget: Budget | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "rel_a1b2c3d4e5f6g7h8",
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "method": "noisy_counts",
                    "unit": "individual",
                    "epsilon": 1.0,
                    "cost": 1.0,
                    "k": 1,
                    "created_at": "2026-11-21T10:00:00Z",
                    "parameters": {"scale": 6.0, "sensitivity_l1": 6.0, "noise": "discrete Laplace"},
                    "result": {
                        "items": [
                            {"item_id": "itm_a", "label": "Tooling", "rank": 1, "noisy_wins": 131},
                            {"item_id": "itm_b", "label": "Hiring", "rank": 2, "noisy_wins": 97},
                        ],
                        "top_k": ["itm_a"],
                    },
                    "budget": {"total": 5.0, "spent": 1.0, "remaining": 4.0},
                }
            ]
        }
    )


class ReleaseSummary(_ReleaseFields):
    """A release in the ledger: its first items only (the whole result: ``GET …/releases/{id}``)."""

    top: list[ReleasedScore] | list[ReleasedWins] = Field(
        description="The release's first 10 items in its order (rank 1 first)."
    )


class ReleaseList(BaseModel):
    releases: list[ReleaseSummary] = Field(description="This page of the ledger, newest first.")
    total: int = Field(description="How many releases the survey has.")
    budget: Budget


# -- keys ---------------------------------------------------------------------------


class KeyCreate(_Model):
    label: Text | None = Field(None, max_length=200)
    role: Literal["analyst"] = "analyst"

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"label": "data team"}]})


class WhoAmI(BaseModel):
    role: Literal["admin", "analyst", "respondent", "site"]
    survey_id: str | None = Field(None, description="A respondent's survey.")

    model_config = ConfigDict(json_schema_extra={"examples": [{"role": "analyst", "survey_id": None}]})


class KeyOut(BaseModel):
    id: str
    role: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


class KeyList(BaseModel):
    keys: list[KeyOut] = Field(description="This page of keys, newest first.")
    total: int = Field(description="How many keys there are (revoked ones included).")


class KeyCreated(KeyOut):
    key: str = Field(description="The bearer key; shown once, only its hash is stored.")

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "key_a1b2c3d4e5f6g7h8",
                    "role": "analyst",
                    "label": "data team",
                    "created_at": "2026-11-21T10:00:00Z",
                    "revoked_at": None,
                    "key": "key_a1b2c3d4e5f6g7h8.Qm9…",
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


class ErrorOut(BaseModel):
    detail: str | list | dict


class Health(BaseModel):
    status: str
    database: str | None = None


# -- ranking surveys -------------------------------------------------------------


class QuestionItem(BaseModel):
    id: str
    label: str


class QuestionOut(BaseModel):
    survey_id: str
    kind: Literal["ranking"]
    status: str
    items: list[QuestionItem] = Field(description="The items to rank, in a fresh random order.")
    answered: bool = Field(description="Whether this respondent already submitted its (one) ranking.")
    epsilon: float
    mallows_b: float = Field(description="Weight per pair of the Mallows mechanism, ε/(m−1).")
    adjacent_swap_probability: float = Field(
        description="Chance that two items adjacent in the given ranking appear swapped, 1/(1+e^{ε/(m−1)})."
    )
    epsilon_whole_ranking: float = Field(
        description="ε protects rankings that differ by moving one item; between two arbitrary rankings "
        "the guarantee is εm/2."
    )
    budget_remaining: float | None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "kind": "ranking",
                    "status": "open",
                    "items": [
                        {"id": "itm_p2w8c4r7n5t1y6qa", "label": "Transit"},
                        {"id": "itm_u7x2k9q4m3c8d1ze", "label": "Housing"},
                    ],
                    "answered": False,
                    "epsilon": 2.0,
                    "mallows_b": 2.0,
                    "adjacent_swap_probability": 0.1192,
                    "epsilon_whole_ranking": 2.0,
                    "budget_remaining": None,
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


class ConsensusOut(BaseModel):
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


# -- federated rounds ------------------------------------------------------------

SiteName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]


class RoundCreate(_Model):
    method: Literal["borda", "lehmer"] = Field(
        description="borda: Borda FRA (Algorithm 2); lehmer: Lehmer FRA (Algorithm 3)."
    )
    sites: list[SiteName] = Field(
        min_length=2, max_length=100, description="The participating sites' names (unique)."
    )
    phi: float = Field(
        0.6,
        gt=0,
        le=0.95,
        description="Public Mallows dispersion φ: Borda's quantization centroids, Lehmer's number of low "
        "bits (Lehmer needs φ + φ² < 1 + φ^N, about φ ≤ 0.618). The paper uses 0.6 on real data.",
    )
    max_rankings: int = Field(
        1_000_000,
        ge=1,
        le=10**12,
        description="Lehmer: public upper bound M on the total number of rankings.",
    )
    failure_probability: float = Field(
        0.01, gt=0, lt=1, description="Lehmer: ε of eq. (5), the allowed failure probability."
    )
    allow_two_sites: bool = Field(
        False,
        description="A round of two sites must say so: each site can subtract its own message from the "
        "published aggregate and so learns the other's.",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"method": "borda", "sites": ["north", "south", "east"], "phi": 0.6}]
        },
    )


class RoundSiteOut(BaseModel):
    name: str
    position: int
    joined: bool = Field(description="The site registered its public key.")
    contributed: bool
    token: str | None = Field(None, description="The site's credential: shown once, when the round opens.")


class RoundOut(BaseModel):
    id: str
    survey_id: str
    method: str
    status: Literal["open", "complete", "cancelled"]
    parameters: dict = Field(description="The public parameters every site uses (items, φ, layout).")
    sites: list[RoundSiteOut]
    result: dict | None = Field(description="When complete: the consensus ordering and the aggregate.")
    created_at: datetime
    ended_at: datetime | None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "rnd_a2b3c4d5e6f7g2h3",
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "method": "borda",
                    "status": "open",
                    "parameters": {"method": "borda", "n_items": 3, "n_sites": 2, "phi": 0.6},
                    "sites": [
                        {
                            "name": "north",
                            "position": 0,
                            "joined": False,
                            "contributed": False,
                            "token": "sit_a2b3c4d5e6f7g2h3.Xy…",
                        },
                        {
                            "name": "south",
                            "position": 1,
                            "joined": False,
                            "contributed": False,
                            "token": "sit_h3g2f7e6d5c4b3a2.Qz…",
                        },
                    ],
                    "result": None,
                    "created_at": "2026-11-21T10:00:00Z",
                    "ended_at": None,
                }
            ]
        }
    )


class RoundList(BaseModel):
    rounds: list[RoundOut] = Field(description="This page of rounds, newest first.")
    total: int = Field(description="How many rounds the survey has.")


class SitePeer(BaseModel):
    name: str
    position: int
    public_key: str | None
    contributed: bool


class SiteView(BaseModel):
    round_id: str
    survey_id: str
    site: str
    position: int
    status: Literal["open", "complete", "cancelled"]
    parameters: dict
    peers: list[SitePeer] = Field(description="Every site of the round, with its public key once joined.")
    ready: bool = Field(description="Every site has joined: contributions are accepted.")
    contributed: bool
    result: dict | None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "round_id": "rnd_a2b3c4d5e6f7g2h3",
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "site": "north",
                    "position": 0,
                    "status": "open",
                    "parameters": {"method": "borda", "n_items": 3, "n_sites": 2, "phi": 0.6},
                    "peers": [
                        {"name": "north", "position": 0, "public_key": "q83v…", "contributed": False},
                        {"name": "south", "position": 1, "public_key": None, "contributed": False},
                    ],
                    "ready": False,
                    "contributed": False,
                    "result": None,
                }
            ]
        }
    )


class SiteKeyIn(_Model):
    public_key: str = Field(
        min_length=43, max_length=44, description="The site's X25519 public key, base64url (32 bytes)."
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"public_key": "q83vEjVL0m6ZpTz1yqXlG9rE2wV4a1hB8cDf3kLmN0o"}]},
    )


class ContributionIn(_Model):
    masked: list[Annotated[int, Field(ge=0)]] = Field(
        min_length=1,
        max_length=1_000_000,
        description="The masked message: entry k is (y_k + z_k) mod 2^{b_k}, with the layout and widths b_k "
        "that the round's public parameters define (app.stats.federated.FederatedScheme).",
    )

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"masked": [91, 7, 412]}]})


# -- respondent page and dashboard helpers ---------------------------------------------------


class PublicSurveyOut(BaseModel):
    id: str
    title: str
    kind: str
    status: str
    n_items: int
    privacy_model: str
    epsilon_default: float | None
    epsilon_min: float | None
    epsilon_max: float | None
    respondent_budget: float | None
    max_comparisons_per_respondent: int | None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "srv_k3j9x2mqa7b4c5d6",
                    "title": "Which policy matters most?",
                    "kind": "pairwise",
                    "status": "open",
                    "n_items": 4,
                    "privacy_model": "local",
                    "epsilon_default": 1.0,
                    "epsilon_min": 0.5,
                    "epsilon_max": 3.0,
                    "respondent_budget": 10.0,
                    "max_comparisons_per_respondent": None,
                }
            ]
        }
    )


class CoverageItem(BaseModel):
    item_id: str
    label: str


class CoverageOut(BaseModel):
    survey_id: str
    items: list[CoverageItem]
    counts: list[list[int | None]] = Field(description="Comparisons per pair; null on the diagonal.")
    pairs_observed: int
    pairs_total: int

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "items": [
                        {"item_id": "itm_u7x2k9q4m3c8d1ze", "label": "Housing"},
                        {"item_id": "itm_p2w8c4r7n5t1y6qa", "label": "Transit"},
                    ],
                    "counts": [[None, 12], [12, None]],
                    "pairs_observed": 1,
                    "pairs_total": 1,
                }
            ]
        }
    )
