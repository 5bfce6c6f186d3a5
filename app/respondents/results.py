"""A ranking survey's question to one respondent."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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
