"""The planners: before a survey runs and from where it stands."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..goals.service import Estimand


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
    score_model: Literal["pilot", "even", "uniform"] = Field(
        "uniform",
        description="The true-score model as a code, for clients that word `assumption` themselves: "
        "pilot (the scores given), even (`gap` apart) or uniform (drawn between −`spread` and `spread`).",
    )
    spread: float | None = Field(None, description="With score_model uniform: the scores' range.")
    gap: float | None = Field(None, description="With score_model even: the gap between neighbours.")


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


class StrategyPlanOut(BaseModel):
    answers_mean: float = Field(description="Mean answers until the goal was met (or the cap).")
    answers_se: float | None = Field(description="Monte Carlo standard error of that mean.")
    respondents_mean: float = Field(description="Mean respondents those answers came from.")
    met: int = Field(description="Simulated surveys that met the goal within max_answers.")
    false_certifications: int = Field(description="Simulated surveys whose certified set or order was wrong.")


class GoalPlanOut(BaseModel):
    certificate: Literal["borda", "pairwise"] = Field(
        description="The adaptive design's certificate (balanced assignment is Borda-certified)."
    )
    estimand: Estimand = Field(
        description="What the adaptive design's certificate certifies (the simulated BTL scores make the "
        "Borda and majority estimands the same set or order, so false_certifications compares with it)."
    )
    n_items: int
    top_k: int | None = Field(description="The top-K goal; null: the whole ranking.")
    level: float
    epsilon: float
    pairs_per_respondent: int
    replications: int
    max_answers: int
    adaptive: StrategyPlanOut
    balanced: StrategyPlanOut
    saving: float | None = Field(
        description="Balanced answers / adaptive answers (null unless every simulated survey met the goal)."
    )
    saving_reason: str | None = Field(
        None,
        description="Why saving is null, in words (null when there is a saving): how many simulated "
        "surveys of each strategy met the goal within max_answers.",
    )
    scores: str = Field(description="The true scores simulated.")
    assumption: str = Field(description="What the prediction assumes, in words.")
