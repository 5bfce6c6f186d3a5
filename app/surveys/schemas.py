"""Surveys and their items: create, update, list, the public view and the coverage matrix."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ..core.limits import MAX_ITEMS
from ..core.schemas import Label, StrictModel, Text
from ..goals.service import CERTIFICATE_CHOICE, CERTIFICATES, Estimand
from ..privacy.results import BudgetPolicy, PrivacySummary

# -- surveys -------------------------------------------------------------------


#: Item labels in other languages: {language code: [label or null, …]}, aligned with the items.
ItemTranslations = dict[Annotated[str, Field(max_length=16)], list[Label | None]]


class PrivacyIn(StrictModel):
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
        None, description="Local: largest ε (default max(2, default); at most 30)."
    )
    respondent_budget: Annotated[float, Field(gt=0)] | Literal["unlimited"] | None = Field(
        None,
        description="Local: cap on a respondent's total ε over all answers (basic composition). Absent or "
        "null: the default — 5 for pairwise surveys (422 if epsilon_max is above it: choose a cap), "
        'epsilon_max for ranking surveys (one ranking each). "unlimited": no cap, as an explicit choice '
        "that the survey's privacy summary shows.",
    )
    total_budget: float | None = Field(
        None, description="Central: the total ε all releases together may spend (person-level)."
    )
    max_comparisons_per_respondent: int | None = Field(
        None,
        description="Central: the most comparisons one respondent may contribute (the contribution bound of "
        "individual DP).",
    )
    accounting: Literal["pure", "zcdp"] | None = Field(
        None,
        description="Central: how releases are charged. pure (default): the sum of their ε, and "
        "total_budget is a pure ε. zcdp: the sum of their ρ (zero-concentrated DP; noisy counts may use "
        "discrete Gaussian noise), and total_budget is the ε of an (ε, δ) guarantee at delta. Changeable "
        "(PATCH) until the first release.",
    )
    delta: float | None = Field(
        None,
        description="Central, zcdp accounting: the δ of the (ε, δ) the budget is stated in, in [1e-20, 1e-6] "
        "(default 1e-10, below one over the world's population).",
    )


class PrivacyUpdate(StrictModel):
    accounting: Literal["pure", "zcdp"] | None = Field(
        None, description="Central: pure or zcdp accounting; 409 accounting_locked after the first release."
    )
    delta: float | None = Field(None, description="Central, zcdp: the δ the budget is stated at.")


def _certificate(value: object) -> object:
    """A certificate the admin chose, or a 422 naming the two estimands."""
    if value not in CERTIFICATES:
        raise ValueError(CERTIFICATE_CHOICE)
    return value


#: ``borda`` or ``pairwise``: each certifies its own estimand (docs/uncertainty.md §9).
Certificate = Annotated[Literal["borda", "pairwise"], BeforeValidator(_certificate)]


class GoalIn(StrictModel):
    top_k: int | None = Field(None, ge=1, description="Certify the top-K set (K between 1 and m − 1).")
    full_ranking: bool = Field(False, description="Certify the whole order instead.")
    level: float = Field(
        0.95, description="Probability that what is certified is right, under continuous monitoring."
    )
    close_when_met: bool = Field(False, description="Close the survey the moment the goal is met.")
    certificate: Certificate = Field(
        "borda",
        description="What the goal certifies, fixed at creation. borda (the default): the Borda top-K or "
        "ranking — the items with the highest chance of being preferred to an item drawn at random "
        "(one confidence sequence per item). pairwise: the majority top-K or ranking — items each "
        "preferred by a majority to every item outside (or after) them, which may not exist when "
        "preferences cycle (one sequence per pair; adaptive assignment, at most 300 items). The two "
        "agree under the BTL model and can differ otherwise (a polarized population).",
    )


class SurveyCreate(StrictModel):
    title: Text = Field(min_length=1, max_length=500)
    kind: Literal["pairwise", "ranking"] = "pairwise"
    items: list[Label] = Field(min_length=2, max_length=MAX_ITEMS, description="Item labels, unique.")
    privacy: PrivacyIn = Field(default_factory=PrivacyIn)
    assignment: Literal["balanced", "adaptive"] = Field(
        "balanced",
        description="How GET …/pairs picks pairs (local pairwise surveys): balanced (least-answered first) "
        "or "
        "adaptive (the pairs touching the items still in doubt; needs a goal).",
    )
    goal: GoalIn | None = Field(
        None, description="Local pairwise surveys: what to certify (the top-K set or the whole ranking)."
    )
    suggestions: SuggestionSettings | None = Field(
        None, description="Pairwise surveys: let respondents propose items (null: they may not)."
    )
    public_results: bool = Field(
        False,
        description="Publish the ranking and its uncertainty at /r/{id} (GET /v1/surveys/{id}/results), "
        "for everyone. Central surveys publish only their latest release there.",
    )
    results_on_finish: bool = Field(
        False, description="End the respondent page with the current results (needs public_results)."
    )
    language: str = Field(
        "en",
        max_length=16,
        description="The respondents' default language: en, es, de or fr (a respondent's ?lang= and "
        "Accept-Language come first).",
    )
    item_translations: ItemTranslations | None = Field(
        None,
        description='The item labels in other languages: {"es": ["Vivienda", …]}, one label per item in '
        "the order of items (null where there is none).",
    )
    embed_origins: list[Text] | None = Field(
        None,
        max_length=20,
        description="Sites that may show the respondent and results pages in a frame: serialized origins "
        "such as https://www.example.org (or https://*.example.org), at most 20.",
    )

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
                    "title": "Which three projects should we fund first?",
                    "items": ["Library", "Bike lanes", "Pool", "Park", "Clinic", "Market"],
                    "privacy": {"model": "local", "epsilon_default": 2.0},
                    "assignment": "adaptive",
                    "goal": {"top_k": 3, "level": 0.95, "close_when_met": True},
                },
                {
                    "title": "Internal priorities (trusted operator)",
                    "kind": "pairwise",
                    "items": ["Hiring", "Tooling", "Training"],
                    "privacy": {"model": "central", "total_budget": 5.0, "max_comparisons_per_respondent": 3},
                },
                {
                    "title": "Weekly priorities (trusted operator, zCDP accounting)",
                    "kind": "pairwise",
                    "items": ["Hiring", "Tooling", "Training"],
                    "privacy": {
                        "model": "central",
                        "total_budget": 10.0,
                        "max_comparisons_per_respondent": 3,
                        "accounting": "zcdp",
                        "delta": 1e-10,
                    },
                },
            ]
        },
    )


class SuggestionSettings(StrictModel):
    enabled: bool = Field(True, strict=True, description="Respondents may propose items.")
    per_respondent: int = Field(3, strict=True, description="Suggestions one respondent may make (1 … 20).")
    moderation: Literal["before", "after"] = Field(
        "before",
        description="before: a moderator approves each suggestion before it is served. after: a "
        "suggestion is live at once; moderators hide what should not stay.",
    )
    flag_threshold: int = Field(
        3,
        strict=True,
        description="Distinct respondents' flags that send a suggested item back to review (1 … 100).",
    )
    batch: int = Field(
        5,
        strict=True,
        description="Suggestions and flags are held until this many different respondents have sent one, "
        "then published together in random order with one time to the hour, so that none can be told "
        "apart from the others of its batch (2 … 50).",
    )
    per_hour: int = Field(
        100,
        strict=True,
        description="Suggestions the survey accepts from all its respondents per clock hour "
        "(batch … 10,000); past it a suggestion is refused with 429 until the next hour.",
    )
    max_total: int = Field(
        1000,
        strict=True,
        description="Suggestions the survey accepts in all, rejected ones not counted (batch … 10,000); past "
        "it a suggestion is refused with 409 (code suggestions_full).",
    )


class SurveyUpdate(StrictModel):
    status: Literal["open", "closed"] | None = None
    title: Text | None = Field(None, min_length=1, max_length=500)
    suggestions: SuggestionSettings | None = Field(
        None, description="Participants' suggestions; null turns them off (absent: unchanged)."
    )
    public_results: bool | None = Field(None, description="Publish the results at /r/{id}.")
    results_on_finish: bool | None = Field(
        None, description="End the respondent page with the current results (needs public_results)."
    )
    language: str | None = Field(
        None, max_length=16, description="The respondents' default language: en, es, de or fr."
    )

    embed_origins: list[Text] | None = Field(
        None,
        max_length=20,
        description="The sites that may frame the survey's pages (replaces the list); null or []: none.",
    )
    privacy: PrivacyUpdate | None = Field(
        None,
        description="Central surveys, before their first release: the accounting (pure or zcdp) and its δ "
        "(absent: unchanged).",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"status": "closed"}, {"privacy": {"accounting": "zcdp", "delta": 1e-10}}]
        },
    )


class ItemsAdd(StrictModel):
    items: list[Label] = Field(min_length=1, max_length=MAX_ITEMS, description="Labels of the new items.")
    item_translations: ItemTranslations | None = Field(
        None, description="The new items' labels in other languages, aligned with items (as on create)."
    )

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"items": ["Libraries"]}]})


class ItemOut(BaseModel):
    id: str
    label: str
    position: int = Field(description="0-based order of the item in the survey.")
    source: Literal["seed", "added", "suggested"] = Field(
        "seed", description="seed: given at creation; added: by an admin later; suggested: a participant's."
    )
    status: Literal["live", "hidden", "review", "archived"] = Field(
        "live",
        description="live: served; hidden: by a moderator; review: flagged past the threshold, withheld "
        "until a moderator decides; archived: retired by a moderator, not served, not counted toward the "
        "item limits and left out of the rankings (its answers stay).",
    )
    flags: int = Field(0, description="Distinct respondents' flags since it was last reviewed.")
    added_at: datetime | None = Field(None, description="When the item joined the survey.")
    approved_at: datetime | None = Field(None, description="Suggested items: when they were approved.")
    translations: dict[str, str] | None = Field(
        None, description="The label in other languages, {code: label} (respondents get theirs); null: none."
    )


def _absent(value: object) -> bool:
    return value is None


class PrivacyOut(BaseModel):
    model: str
    epsilon_default: float | None
    epsilon_min: float | None
    epsilon_max: float | None
    respondent_budget: float | None = Field(
        description="Local: the cap on a respondent's total ε; null: none."
    )
    respondent_budget_policy: BudgetPolicy | None = Field(
        None,
        description="Local: capped; unlimited (the admin opted out of a cap); unset (stored without a cap or "
        "an opt-out: no cap applies). Central: null.",
    )
    flip_probability_default: float | None = Field(description="Local: 1/(1+e^ε) at epsilon_default.")
    total_budget: float | None = None
    max_comparisons_per_respondent: int | None = None
    accounting: str | None = Field(
        None,
        description="Central: pure (the budget sums ε) or zcdp (it sums ρ, shown as (ε, δ)); absent for "
        "local surveys.",
        exclude_if=_absent,
    )
    delta: float | None = Field(
        None, description="Central, zcdp: the δ of the budget's (ε, δ); absent otherwise.", exclude_if=_absent
    )
    summary: PrivacySummary | None = Field(
        None,
        description="The numbers of the privacy summary the dashboard and respondent page show in words.",
    )


class GoalSpecOut(BaseModel):
    top_k: int | None = Field(description="The top-K set to certify; null: the whole ranking.")
    full_ranking: bool
    level: float
    close_when_met: bool
    certificate: str = Field("borda", description="The certificate in use: borda or pairwise.")
    estimand: Estimand = Field(
        "borda_top_k",
        description="What is certified: borda_top_k, borda_ranking (Borda scores: the chance of being "
        "preferred to an item drawn at random), majority_top_k or majority_ranking (majorities pair "
        "by pair).",
    )
    estimand_text: str = Field("", description="The estimand in a sentence.")


class GoalOut(GoalSpecOut):
    met: bool = Field(description="Whether the goal holds at its level (once met, it stays met).")
    items: list[str] | None = Field(
        description="When met: the certified top-K item ids, or every item id in the certified order, best "
        "first; null before."
    )
    answers_used: int = Field(description="Answers stored since the goal's count (re)started.")
    counted_answers: int = Field(
        description="Samples the certificate used: borda, answer-item samples (an answer counts for up to "
        "two items); pairwise, answers (each counts once, for its pair)."
    )
    resolved: int = Field(description="Items already certain (in or out of the top-K, or placed).")
    n_items: int
    unreachable: bool = Field(
        False,
        description="Pairwise goals: the certified majorities show that no majority top-K (or majority "
        "ranking) exists — preferences cycle — so the goal can never be met and no more pairs are needed.",
    )


class SurveyFields(BaseModel):
    id: str
    title: str
    kind: str
    status: str
    privacy: PrivacyOut
    assignment: str = Field(description="balanced or adaptive.")
    suggestions: SuggestionSettings | None = Field(None, description="Participants' suggestions, if on.")
    public_results: bool = Field(False, description="Results published at /r/{id}.")
    results_on_finish: bool = Field(False, description="The respondent page ends with the results.")
    language: str = Field("en", description="The respondents' default language.")
    embed_origins: list[str] = Field(
        default_factory=list, description="The sites that may frame the respondent and results pages."
    )
    created_at: datetime
    updated_at: datetime


class SurveyOut(SurveyFields):
    items: list[ItemOut]
    goal: GoalOut | None = Field(None, description="The goal and where it stands; null without one.")
    undecided: int | None = Field(
        0,
        description="“Can't decide” answers so far: a survey-level count, with nothing stored about the "
        "pairs or the respondents. Central surveys: for admins and analysts (an exact count, as "
        "respondents and comparisons); null for moderators.",
    )
    pending_suggestions: int = Field(0, description="Suggestions waiting for a moderator.")
    respondents: int | None = Field(
        None,
        description="Central surveys: how many respondents registered (an exact count, for the operator: "
        "admins and analysts; no release spends budget on it); null for local surveys and for moderators.",
    )
    comparisons: int | None = Field(
        None,
        description="Central surveys: how many comparisons (true answers) are stored, for admins and "
        "analysts; null for local surveys and for moderators.",
    )

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
                        "respondent_budget_policy": "capped",
                        "flip_probability_default": 0.2689,
                    },
                    "assignment": "adaptive",
                    "goal": {
                        "top_k": 1,
                        "full_ranking": False,
                        "level": 0.95,
                        "close_when_met": True,
                        "certificate": "borda",
                        "estimand": "borda_top_k",
                        "estimand_text": "The Borda top 1, certified at 95%: the item with the highest "
                        "chance of being preferred to an item drawn at random from the others.",
                        "met": False,
                        "items": None,
                        "answers_used": 412,
                        "counted_answers": 790,
                        "resolved": 0,
                        "n_items": 2,
                        "unreachable": False,
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


class SurveySummary(SurveyFields):
    """A survey in the list: everything but its items, which ``GET /v1/surveys/{id}`` gives."""

    n_items: int = Field(description="How many items the survey has.")
    goal: GoalSpecOut | None = Field(None, description="The goal (where it stands: GET /v1/surveys/{id}).")
    pending_suggestions: int = Field(0, description="Suggestions waiting for a moderator.")


class SurveyList(BaseModel):
    surveys: list[SurveySummary]
    total: int


# -- respondent page and dashboard helpers ---------------------------------------------------


class PublicSuggestions(BaseModel):
    enabled: bool
    per_respondent: int
    moderation: Literal["before", "after"]
    batch: int = Field(description="Suggestions are published together with those of this many respondents.")


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
    respondent_budget_policy: BudgetPolicy | None = Field(
        None, description="Local: capped, unlimited (the admin opted out) or unset (no cap applies)."
    )
    max_comparisons_per_respondent: int | None
    privacy_summary: PrivacySummary | None = Field(
        None,
        description="The numbers of the survey's privacy summary (the respondent page says it in words).",
    )
    goal_met: bool | None = Field(
        None, description="Goal surveys: whether the goal is met (the survey needs no more answers)."
    )
    suggestions: PublicSuggestions | None = Field(None, description="Whether respondents may suggest items.")
    public_results: bool = Field(False, description="Results are published at /r/{id}.")
    results_on_finish: bool = Field(False, description="The respondent page ends with the results.")
    language: str = Field(
        "en",
        description="The language chosen for this request: ?lang=, then Accept-Language, then the survey's "
        "default (only languages with a catalog).",
    )
    languages: list[str] = Field(default_factory=list, description="The languages the respondent page has.")

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
