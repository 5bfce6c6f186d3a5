"""Participatory surveys: suggestions and their moderation, flags, and the public results."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.schemas import ItemId, Label, StrictModel, Text
from .results import PublicResults, ReleaseRef, ResultItem

__all__ = [
    "ItemStatusIn",
    "PublicResults",
    "ReleaseRef",
    "ResultItem",
    "SimilarOut",
    "SuggestionApprove",
    "SuggestionEdit",
    "SuggestionIn",
    "SuggestionList",
    "SuggestionMerge",
    "SuggestionOut",
    "SuggestionReceived",
    "SuggestionReject",
]


class SuggestionIn(StrictModel):
    label: Label = Field(description="The proposed item (at most 200 characters).")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"label": "Night buses"}]})


class SuggestionReceived(BaseModel):
    received: bool = True
    remaining: int = Field(description="Suggestions the respondent may still make here.")
    batch: int = Field(
        description="It is published together with the suggestions of this many respondents, in random "
        "order, once they have arrived."
    )


class SimilarOut(BaseModel):
    label: str
    similarity: float = Field(description="1 for the same text; else the Dice coefficient of trigrams.")
    same_text: bool = Field(description="The same text once case, accents, punctuation, spaces are folded.")
    item_id: str | None = Field(None, description="The similar item, if it is one.")
    suggestion_id: str | None = Field(None, description="The similar pending suggestion, if it is one.")


class SuggestionOut(BaseModel):
    id: str
    label: str
    status: Literal["pending", "approved", "rejected", "merged"]
    received_at: datetime = Field(description="When it arrived, rounded down to the hour.")
    reason: str | None = Field(None, description="Why it was rejected.")
    item_id: str | None = Field(None, description="The item it became (approved) or was merged into.")
    decided_at: datetime | None = None
    similar: list[SimilarOut] = Field(
        default_factory=list, description="Near-duplicates among the items and pending suggestions."
    )


class SuggestionList(BaseModel):
    suggestions: list[SuggestionOut]
    total: int
    held: int = Field(
        description="Suggestions held until their batch is complete (not listed: nobody reads them before)."
    )
    held_respondents: int = Field(description="The different respondents who sent the held suggestions.")
    batch: int = Field(description="Respondents whose suggestions are published together.")


class SuggestionEdit(StrictModel):
    label: Label


class SuggestionApprove(StrictModel):
    label: Label | None = Field(None, description="The item's text, if edited.")


class SuggestionReject(StrictModel):
    reason: Text = Field(min_length=1, max_length=500)


class SuggestionMerge(StrictModel):
    item_id: str = ItemId


class ItemStatusIn(StrictModel):
    status: Literal["live", "hidden", "archived"] | None = Field(
        None, description="live, hidden or archived (absent: unchanged)."
    )
    translations: dict[Annotated[str, Field(max_length=16)], Label] | None = Field(
        None,
        description="Admins: the label in other languages, {code: label}, replacing the item's (null or {}: "
        "none; absent: unchanged).",
    )
