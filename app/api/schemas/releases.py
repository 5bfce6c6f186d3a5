"""Differentially private releases of central-model surveys and the ledger."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from .common import StrictModel

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
    epsilon: float = Field(ge=0.001, le=20, description="The release's ε in its unit, in [0.001, 20].")
    k: int | None = Field(None, ge=1, description="Size of the top-K set to report.")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"method": "noisy_counts", "unit": "individual", "epsilon": 1.0, "k": 2}]
        },
    )
