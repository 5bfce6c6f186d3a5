"""Analyst keys and who a credential stands for."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.schemas import StrictModel, Text

# -- keys ---------------------------------------------------------------------------


class KeyCreate(StrictModel):
    label: Text | None = Field(None, max_length=200)
    role: Literal["analyst", "moderator", "integration"] = Field(
        "analyst",
        description="analyst: reads surveys and results; moderator: curates suggestions and items; "
        "integration: registers respondents server-to-server (with external_id), nothing else.",
    )

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"label": "data team"}]})


class WhoAmI(BaseModel):
    role: Literal["admin", "analyst", "moderator", "integration", "respondent", "site"]
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
