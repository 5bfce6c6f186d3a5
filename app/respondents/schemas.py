"""Respondents: registration, their account, pairs, ranking questions, the answers' receipts."""

from __future__ import annotations

from itertools import chain, repeat
from operator import add, itemgetter
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)

from ..core.limits import MAX_BATCH_CEILING, MAX_RANKING_ITEMS
from ..core.schemas import ItemId, StrictModel, Text
from ..privacy.results import Receipt
from . import ingestion

# -- respondents ---------------------------------------------------------------


class RespondentCreate(StrictModel):
    epsilon: float | None = Field(
        None, description="The respondent's own ε within the survey's bounds; default: the survey's."
    )
    external_id: Text | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Integration keys only (403 for anyone else): the caller's own id of the person. "
        "The same id in the same survey is the same respondent, returned with a new token (the old one "
        "stops working). Compared exactly; only a keyed digest of it is stored.",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"epsilon": 1.5}, {}, {"external_id": "user-8841"}]},
    )


class RespondentCreated(BaseModel):
    respondent_id: str
    token: str = Field(description="Bearer token for this respondent's calls; shown once.")
    epsilon: float | None = Field(description="Local: the respondent's ε. Central: null.")
    flip_probability: float | None = Field(
        description="Local: chance that each answer is reported flipped, 1/(1+e^ε). Central: null."
    )
    budget_remaining: float | None
    comparisons_remaining: int | None = Field(
        None, description="Central: answers this respondent may still give."
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "respondent_id": "rsp_q2x7v9k3m1b5c8d4",
                    "token": "rsp_q2x7v9k3m1b5c8d4.Yx3…",
                    "epsilon": 1.5,
                    "flip_probability": 0.1824,
                    "budget_remaining": 20.0,
                }
            ]
        }
    )


class RespondentStatus(BaseModel):
    respondent_id: str
    survey_id: str
    epsilon: float | None
    comparisons: int
    epsilon_total: float | None = Field(
        description="Local: privacy spent so far, the sum of ε over stored answers. Central: null."
    )
    budget_remaining: float | None
    comparisons_remaining: int | None = None
    ranked: bool | None = Field(None, description="Ranking surveys: whether the respondent has submitted.")
    receipt: Receipt | None = Field(
        None,
        description="The privacy receipt: each stored answer (which pair, or the ranking) with its mechanism "
        "and ε, the total under basic composition, what remains, and the guess bounds e^ε/(1+e^ε).",
    )

    # -- pairs and responses ---------------------------------------------------------

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "respondent_id": "rsp_q2x7v9k3m1b5c8d4",
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "epsilon": 1.5,
                    "comparisons": 3,
                    "epsilon_total": 4.5,
                    "budget_remaining": 15.5,
                }
            ]
        }
    )


class PairOut(BaseModel):
    a: str
    b: str
    a_label: str
    b_label: str
    ticket: str | None = Field(
        None,
        description="Goal surveys: send it back with the answer, so that the answer counts towards the goal "
        "(null: this answer will not count for it).",
    )
    undecided_ticket: str = Field(
        description="“Can't decide” on this pair: send it to POST …/undecided (it names no pair; one pass "
        "per pair served to you counts)."
    )


class UndecidedIn(StrictModel):
    ticket: str = Field(
        max_length=64, description="The undecided_ticket of a pair GET …/pairs served to you."
    )


class PairsOut(BaseModel):
    pairs: list[PairOut]
    reason: Literal["closed", "budget_spent", "answer_limit", "all_answered", "not_needed"] | None = Field(
        None,
        description="Why fewer pairs than asked for were served (null: as many as asked): the survey is "
        "closed, the respondent's privacy budget or answer limit is reached, every pair is answered, or "
        "(goal surveys) the respondent has answered about every item still in doubt.",
    )
    message: str | None = Field(None, description="The same in a sentence for the respondent.")

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "pairs": [
                        {
                            "a": "itm_u7x2k9q4m3c8d1ze",
                            "b": "itm_p2w8c4r7n5t1y6qa",
                            "a_label": "Housing",
                            "b_label": "Transit",
                            "undecided_ticket": "Qm9x6c1v3S8dNw2pA7yT0g.f4Lr9KzW2bH6uJ1nE5sXcQ",
                        }
                    ]
                }
            ]
        }
    )


class ComparisonIn(StrictModel):
    a: Text = ItemId
    b: Text = ItemId
    winner: Text = Field(min_length=1, max_length=40, description="a or b: the item preferred (or reported).")
    ticket: str | None = Field(
        None, max_length=100, description="The pair's ticket from GET …/pairs (goal surveys), if it had one."
    )


#: The fields of a comparison without a ticket, in :class:`app.respondents.ingestion.ComparisonIn`'s order.
_PLAIN_FIELDS = itemgetter("a", "b", "winner")
#: The length bounds of :class:`ComparisonIn`'s three strings (``ItemId`` and ``winner``).
_PLAIN_LENGTH = (1, 40)


def _plain_comparisons(value: Any) -> list[ingestion.ComparisonIn] | None:
    """``value`` as :class:`ComparisonIn` would validate it, when every comparison is the
    plain kind — an object of exactly ``a``, ``b`` and ``winner``, each a string of 1 to 40
    printable characters — and there are 1 to ``MAX_BATCH_CEILING`` of
    them; None for any other value, which the model then validates (and refuses, with
    its errors). Column-wise checks instead of a model per comparison: validating a batch
    of answers cost more than storing it (benchmark: tests/benchmarks/bench_service.py,
    row 2)."""
    if type(value) is not list or not 1 <= len(value) <= MAX_BATCH_CEILING:
        return None
    if set(map(type, value)) != {dict} or set(map(len, value)) != {3}:
        return None
    try:
        triples = list(map(_PLAIN_FIELDS, value))
    except KeyError:
        return None
    strings = list(chain.from_iterable(triples))
    if set(map(type, strings)) != {str}:
        return None
    lengths = set(map(len, strings))
    low, high = _PLAIN_LENGTH
    # Printable text has no control character (the converse need not hold: then the model decides).
    if min(lengths) < low or max(lengths) > high or not "".join(strings).isprintable():
        return None
    # (a, b, winner) + (None,): the tuple of ComparisonIn(a, b, winner), ticket None.
    return list(map(tuple.__new__, repeat(ingestion.ComparisonIn), map(add, triples, repeat((None,)))))


def _comparisons(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    plain = _plain_comparisons(value)
    return handler(value) if plain is None else plain


class ResponsesIn(StrictModel):
    privatized: bool = Field(
        description="false: the server randomizes the answers with the respondent's ε on arrival; "
        "true: the client already did, with the declared epsilon."
    )
    epsilon: float | None = Field(None, description="Required when privatized is true.")
    #: Plain comparisons (most batches) are checked column-wise (:func:`_plain_comparisons`),
    #: into :class:`app.respondents.ingestion.ComparisonIn`; any other value is a list of
    #: :class:`ComparisonIn`, or refused with its errors.
    comparisons: Annotated[list[ComparisonIn] | None, WrapValidator(_comparisons)] = Field(
        None,
        min_length=1,
        max_length=MAX_BATCH_CEILING,
        description="Pairwise surveys: the answers (at most PRIVRANK_MAX_BATCH, 1,000 by default).",
    )
    ranking: list[Text] | None = Field(
        None,
        min_length=1,
        max_length=MAX_RANKING_ITEMS,
        description="Ranking surveys: item ids, best first. With privatized=false it may list only the "
        "top items (the server puts the rest below, in uniformly random order, then applies the Mallows "
        "mechanism); with privatized=true it is the full synthetic ranking made on the device.",
    )

    @model_validator(mode="after")
    def _one_kind(self):
        if (self.comparisons is None) == (self.ranking is None):
            raise ValueError("send either comparisons (pairwise surveys) or ranking (ranking surveys)")
        return self

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"privatized": False, "comparisons": [{"a": "itm_a", "b": "itm_b", "winner": "itm_a"}]},
                {
                    "privatized": True,
                    "epsilon": 1.0,
                    "comparisons": [{"a": "itm_a", "b": "itm_c", "winner": "itm_c"}],
                },
                {"privatized": False, "ranking": ["itm_c", "itm_a"]},
                {"privatized": True, "epsilon": 2.0, "ranking": ["itm_b", "itm_c", "itm_a"]},
            ]
        },
    )


class ResponsesOut(BaseModel):
    accepted: int
    epsilon_spent: float | None = Field(
        description="Local: privacy spent by this request, Σ ε over its answers."
    )
    epsilon_total: float | None = Field(description="Local: the respondent's total spent so far.")
    budget_remaining: float | None
    comparisons_remaining: int | None = Field(
        None, description="Central: answers this respondent may still give."
    )

    # -- analysis ----------------------------------------------------------------------

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"accepted": 2, "epsilon_spent": 3.0, "epsilon_total": 4.5, "budget_remaining": 15.5}
            ]
        }
    )


# -- ranking surveys -------------------------------------------------------------
