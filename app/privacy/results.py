"""A survey's privacy settings in numbers (the plain-words summary is built from them) and a
respondent's privacy receipt (docs/privacy.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: How a local survey caps each respondent's total ε: a finite cap, the admin's explicit
#: opt-out, or stored with neither (no cap applies).
BudgetPolicy = Literal["capped", "unlimited", "unset"]


class PrivacySummary(BaseModel):
    """The numbers behind a survey's privacy summary, the same for the dashboard and the
    respondent page (each writes its sentences from them, in its language).

    ``guess_bound`` values are e^ε/(1+e^ε): the highest share of correct guesses anyone who
    sees everything stored (or, central model, everything released) can reach about one
    yes-or-no fact the ε protects, against 50% for a coin toss."""

    model: Literal["local", "central"]
    kind: Literal["pairwise", "ranking"]
    items: int = Field(description="How many items the survey has now.")
    # -- local model -------------------------------------------------------------------
    epsilon_default: float | None = None
    epsilon_min: float | None = None
    epsilon_max: float | None = None
    guess_bound_default: float | None = Field(
        None, description="Local: the bound for one answer at the default ε (a ranking: moving one item)."
    )
    guess_bound_max: float | None = Field(None, description="Local: the bound for one answer at epsilon_max.")
    budget_policy: BudgetPolicy | None = Field(
        None,
        description="Local: capped (a finite cap on each respondent's total ε), unlimited (the admin opted "
        "out) or unset (stored without a cap or an opt-out: no cap applies).",
    )
    respondent_budget: float | None = Field(None, description="Local: the cap on a respondent's total ε.")
    guess_bound_budget: float | None = Field(
        None,
        description="Local, capped: the bound for any one fact about all of a respondent's answers together "
        "once the whole budget is spent (basic composition).",
    )
    pairs: int | None = Field(None, description="Pairwise: how many pairs there are, m(m−1)/2.")
    answers_at_default: int | None = Field(
        None,
        description="Pairwise: how many pairs a respondent at the default ε may answer (budget and pairs).",
    )
    swap_probability_default: float | None = Field(
        None, description="Ranking: the chance that two adjacent items appear swapped at the default ε."
    )
    epsilon_whole_ranking_default: float | None = Field(
        None, description="Ranking: the guarantee between any two rankings at the default ε, εm/2."
    )
    guess_bound_whole_ranking_default: float | None = Field(
        None, description="Ranking: the bound for any fact about the whole ranking at the default ε."
    )
    # -- central model -----------------------------------------------------------------
    accounting: Literal["pure", "zcdp"] | None = Field(
        None,
        description="Central: how releases add up; pure: pure ε-DP, the ε of releases summed (basic "
        "composition) against total_budget; zcdp: their ρ summed, the whole at most "
        "(total_budget, delta)-DP.",
    )
    total_budget: float | None = Field(None, description="Central: the ε all releases together may spend.")
    delta: float | None = Field(None, description="Central, zcdp: the δ of the (ε, δ) guarantee.")
    guess_bound_total: float | None = Field(
        None,
        description="Central: the bound for any one fact about one respondent's answers once all releases "
        "are made (individual-level ε of the whole budget; zcdp: (e^ε + δ)/(1 + e^ε), Kairouz, Oh & "
        "Viswanath 2015).",
    )
    suggestion_batch: int | None = Field(
        None,
        description="Surveys taking suggestions: suggestions and reports are published in batches from this "
        "many respondents, so that none can be told apart from the others of its batch.",
    )
    max_comparisons_per_respondent: int | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model": "local",
                    "kind": "pairwise",
                    "items": 6,
                    "epsilon_default": 1.0,
                    "epsilon_min": 0.1,
                    "epsilon_max": 2.0,
                    "guess_bound_default": 0.7311,
                    "guess_bound_max": 0.8808,
                    "budget_policy": "capped",
                    "respondent_budget": 5.0,
                    "guess_bound_budget": 0.9933,
                    "pairs": 15,
                    "answers_at_default": 5,
                }
            ]
        }
    )


class ReceiptAnswer(BaseModel):
    """One stored answer of the respondent, described by what it already knows: which pair
    it answered (or that it gave its ranking), never the stored (randomized) answer."""

    kind: Literal["pair", "ranking"]
    items: list[str] = Field(
        description="pair: the two item ids, in the survey's order; ranking: empty (the ranking covered "
        "every item, see n_items)."
    )
    labels: list[str] = Field(description="pair: the two labels, in the respondent's language.")
    n_items: int = Field(description="How many items the answer is about: 2 for a pair, m for a ranking.")
    mechanism: Literal["randomized_response", "mallows", "none"] = Field(
        description="randomized_response: flipped with probability 1/(1+e^ε) (ε-LDP); mallows: replaced by a "
        "Mallows copy (ε-ranking DP); none: a central survey's true answer (protected by the releases)."
    )
    randomized_on: Literal["device", "server", "import", "none"] = Field(
        description="Where the randomization happened: the respondent's device, the server on arrival, "
        "before an import, or none (central)."
    )
    epsilon: float | None = Field(description="The answer's ε (null: central).")
    guess_bound: float | None = Field(
        description="e^ε/(1+e^ε): the highest share of correct guesses of this answer from its stored record "
        "(a ranking: between it and the same ranking with one item moved)."
    )
    flip_probability: float | None = Field(None, description="Pairs: 1/(1+e^ε).")
    swap_probability: float | None = Field(None, description="Ranking: 1/(1+e^{ε/(m−1)}) for adjacent items.")
    epsilon_whole_ranking: float | None = Field(None, description="Ranking: εm/2, between any two rankings.")
    guess_bound_whole_ranking: float | None = Field(
        None, description="Ranking: e^{εm/2}/(1+e^{εm/2}), for any fact about the whole ranking."
    )


class Receipt(BaseModel):
    """Everything the respondent's stored answers cost in privacy, and what it means."""

    model: Literal["local", "central"]
    answers: list[ReceiptAnswer] = Field(description="The answers, in the order given (a page of them).")
    answers_total: int = Field(description="How many answers the respondent has stored.")
    offset: int = Field(description="How many answers the page skipped.")
    epsilon_total: float | None = Field(
        description="Local: Σε over every stored answer (basic composition). Central: null."
    )
    guess_bound_total: float | None = Field(
        description="Local: e^Σε/(1+e^Σε), the bound for any one fact about all the answers together — "
        "one answer included, when answers are related. Central: the same at the ε spent by releases so far."
    )
    budget_policy: BudgetPolicy | None = None
    respondent_budget: float | None = Field(description="Local: the cap on the total (null: none).")
    budget_remaining: float | None = Field(
        description="Local: respondent_budget − epsilon_total (null: no cap)."
    )
    guess_bound_budget: float | None = Field(
        description="Local: the bound once the whole budget is spent (null: no cap)."
    )
    comparisons_remaining: int | None = Field(None, description="Central: answers it may still give.")
    release_budget: float | None = Field(None, description="Central: the ε all releases together may spend.")
    release_epsilon_spent: float | None = Field(
        None,
        description="Central: the ε releases have spent so far (each protects every respondent's answers).",
    )
