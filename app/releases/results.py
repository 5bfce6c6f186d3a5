"""Differentially private releases of central-model surveys, and the ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def _is_none(value: object) -> bool:
    return value is None


def ZcdpOnly(description: str) -> Any:
    """A field of zCDP surveys only, left out of the answer when null: a pure-ε survey's
    releases and budget read exactly as they do where zCDP does not exist."""
    return Field(None, description=description, exclude_if=_is_none)


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
    noisy_wins: int = Field(
        description="noisy_counts: comparisons won plus discrete Laplace (ε) or discrete Gaussian (ρ) noise."
    )

    model_config = ConfigDict(extra="forbid")


class ReleaseResult(BaseModel):
    items: list[ReleasedScore] | list[ReleasedWins]
    top_k: list[str] | None = Field(description="The k best item ids (null when no k was asked).")


class Budget(BaseModel):
    total: float = Field(description="The survey's person-level ε (zcdp: the ε of an (ε, δ) at delta).")
    spent: float = Field(description="ε spent so far (zcdp: the ε at delta of the ρ spent).")
    remaining: float = Field(description="total − spent.")
    accounting: str | None = ZcdpOnly(description='zcdp surveys only: "zcdp".')
    delta: float | None = ZcdpOnly(description="zcdp surveys only: the δ of total and spent.")
    rho_total: float | None = ZcdpOnly(description="zcdp surveys only: the ρ total allows at delta.")
    rho_spent: float | None = ZcdpOnly(description="zcdp surveys only: the sum of the releases' ρ.")
    rho_remaining: float | None = ZcdpOnly(
        description="zcdp surveys only: the ρ the next releases may still spend together."
    )


class ReleaseFields(BaseModel):
    id: str
    survey_id: str
    method: str
    unit: str
    epsilon: float = Field(
        description="The release's ε in its unit (a ρ release: the ε of its (ε, δ) at the survey's delta)."
    )
    cost: float = Field(
        description="The person-level ε the release guarantees alone: ε (individual) or "
        "max_comparisons_per_respondent·ε (edge); a ρ release's at the survey's delta. "
        "What a pure survey's budget is charged."
    )
    rho: float | None = ZcdpOnly(description="zcdp releases only (discrete Gaussian): ρ in the unit.")
    cost_rho: float | None = ZcdpOnly(
        description="zcdp surveys only: the person-level ρ charged (ρ, or "
        "max_comparisons_per_respondent² · ρ for edge; ε²/2 for a pure-ε release)."
    )
    delta: float | None = ZcdpOnly(description="zcdp surveys only: the δ of epsilon, cost and budget_after.")
    cost_explanation: str = Field(description="Why the release costs what it does, in a sentence.")
    budget_after: float = Field(description="What remained of the survey's budget right after this release.")
    k: int | None
    created_at: datetime
    parameters: dict = Field(description="Noise scales and other mechanism parameters (all public).")


class ReleaseOut(ReleaseFields):
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


class ReleaseSummary(ReleaseFields):
    """A release in the ledger: its first items only (the whole result: ``GET …/releases/{id}``)."""

    top: list[ReleasedScore] | list[ReleasedWins] = Field(
        description="The release's first 10 items in its order (rank 1 first)."
    )


class ReleaseList(BaseModel):
    releases: list[ReleaseSummary] = Field(description="This page of the ledger, newest first.")
    total: int = Field(description="How many releases the survey has.")
    budget: Budget
