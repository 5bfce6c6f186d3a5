"""Shared pieces of the bodies: validated text types, the strict request model, errors, health."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from .limits import MAX_LABEL

#: C0 control characters and DEL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _printable(value: str) -> str:
    # Control characters (NUL above all) are never meaningful in labels, titles or ids,
    # and PostgreSQL text cannot hold NUL: refuse them up front with a 422. (A regular
    # expression: this runs three times per comparison of every batch.)
    if _CONTROL.search(value):
        raise ValueError("control characters are not allowed")
    return value


Text = Annotated[str, AfterValidator(_printable)]


def _not_blank(value):
    if isinstance(value, str) and not value.strip():
        raise ValueError("item labels must not be empty")
    return value


#: A label: printable, with at least one character that is not white space.
Label = Annotated[
    str,
    BeforeValidator(_not_blank),
    Field(min_length=1, max_length=MAX_LABEL, pattern=r"\S"),
    AfterValidator(_printable),
]

ItemId = Field(min_length=1, max_length=40, examples=["itm_u7x2k9q4m3c8d1ze"])


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    detail: str | list | dict
    code: str | None = Field(
        None,
        description="Where a client acts on the refusal, its name: suggestion_limit, flag_limit, "
        "suggestions_off, survey_closed.",
    )


class Health(BaseModel):
    status: str
    database: str | None = None
