"""The public results page's answer (:mod:`app.participation.public_results`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

__all__ = ["NotePart", "PublicResults", "ReleaseRef", "ResultItem"]


class ResultItem(BaseModel):
    rank: int = Field(description="1 = most preferred, among the items shown.")
    item_id: str
    label: str
    score: float | None = Field(None, description="θ̂ of the BTL model (pairwise), or null.")
    ci: list[float] | None = Field(None, description="95% interval for the score (null: not available).")
    mean_position: float | None = Field(None, description="Ranking surveys: mean position (1 = first).")
    comparisons: int | None = Field(None, description="Answers involving the item (pairwise, local).")
    added_at: datetime | None = Field(None, description="When the item joined the survey.")
    source: str = Field("seed", description="seed, added or suggested.")


class ReleaseRef(BaseModel):
    id: str
    created_at: datetime
    epsilon: float
    method: str


class NotePart(BaseModel):
    """One sentence of the note, for a page to say in its reader's language: the message
    ``results.note.<code>`` of the results catalogs (static/i18n/results.<lang>.json;
    ``withheld`` has ``.one`` and ``.other`` forms, chosen by ``n``) with ``params`` filled in."""

    code: str = Field(description="The sentence's name in the results catalogs, after results.note.")
    params: dict[str, float | int | str] = Field(
        default_factory=dict, description="Its placeholders' values (numbers unformatted)."
    )


class PublicResults(BaseModel):
    survey_id: str
    title: str
    kind: str
    privacy_model: str
    as_of: datetime = Field(description="When these results were computed.")
    respondents: int | None = None
    comparisons: int | None = Field(None, description="Answers (pairwise) or rankings behind the results.")
    items: list[ResultItem]
    withheld: int = Field(0, description="Items not shown: hidden by moderators or under review.")
    release: ReleaseRef | None = Field(None, description="Central surveys: the release shown.")
    note: str = Field(description="How to read the results, in plain words (English): `notes` joined.")
    notes: list[NotePart] = Field(
        default_factory=list,
        description="The note's sentences by name, for pages that show it in another language.",
    )
    language: str = Field(
        "en",
        description="The language of the labels: ?lang=, then Accept-Language, then the survey's default "
        "(labels without a translation in it stay as they are).",
    )
