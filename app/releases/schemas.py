"""Differentially private releases of central-model surveys and the ledger."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from ..core.schemas import StrictModel

# -- releases (central model) ----------------------------------------------------------


class ReleaseCreate(StrictModel):
    method: Literal["perturbed_mle", "noisy_counts"] = Field(
        description="perturbed_mle: objective-perturbed BTL MLE (scores); noisy_counts: win counts plus "
        "Laplace noise (better for top-K)."
    )
    unit: Literal["edge", "individual"] = Field(
        description="What is protected: one comparison (edge) or everything one respondent answered "
        "(individual)."
    )
    epsilon: float | None = Field(
        None,
        ge=0.001,
        le=20,
        description="A pure ε-DP release: its ε in its unit, in [0.001, 20] (Laplace noise). Give epsilon or "
        "rho.",
    )
    rho: float | None = Field(
        None,
        ge=1e-7,
        le=200,
        description="Surveys with zcdp accounting, noisy_counts only: a ρ-zCDP release in its unit, in "
        "[1e-7, 200] (discrete Gaussian noise of standard deviation max_comparisons_per_respondent/√ρ, "
        "1/√ρ for edge). ρ = ε²/8 gives noise of the same variance as the ε release.",
    )
    k: int | None = Field(None, ge=1, description="Size of the top-K set to report.")

    @model_validator(mode="after")
    def _one_budget(self) -> ReleaseCreate:
        if (self.epsilon is None) == (self.rho is None):
            raise ValueError("give either epsilon (a pure ε-DP release) or rho (a zCDP release)")
        return self

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"method": "noisy_counts", "unit": "individual", "epsilon": 1.0, "k": 2},
                {"method": "noisy_counts", "unit": "individual", "rho": 0.125, "k": 2},
            ]
        },
    )
