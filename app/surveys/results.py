"""How evenly a survey's pairs have been compared."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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
