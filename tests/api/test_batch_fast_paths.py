"""The fast paths of a batch of answers agree with the checks they stand in for.

A 500-comparison batch is checked column-wise (app.respondents.schemas,
app.respondents.ingestion) and its body's strings judged from its bytes (app.core.storable)
instead of value by value; each fast path either gives what the full check gives or
hands the value to it. Here every fast path meets random and hostile input (fixed seeds)
and is compared with the check it replaces, as that check is written.
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from pydantic import TypeAdapter

from app.core import idempotency
from app.core.errors import Invalid
from app.core.storable import _first_unstorable, _numbers_finite, _strings_storable, unstorable
from app.respondents import ingestion
from app.respondents.schemas import ComparisonIn, ResponsesIn, _plain_comparisons

#: Field values that are fine, and every way one can be refused (types, lengths, control
#: characters, a non-ASCII space, a lone surrogate, C1 control NEL).
_VALUES = (
    "itm_a",
    "itm_b",
    "Ünïcødé",
    "x" * 40,
    "x" * 41,
    "",
    "a\x00",
    "b\x1f",
    "c\x7f",
    "tab\t",
    "nbsp\u00a0",
    "\ud800",
    "nel\x85",
    5,
    1.5,
    None,
    True,
    ["itm_a"],
    {"a": "itm_a"},
)


def _random_comparisons(rng: random.Random) -> object:
    if rng.random() < 0.02:
        return rng.choice([{"a": "itm_a"}, "itm_a", None, 3])
    batch: list = []
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.05:
            batch.append(rng.choice([1, "s", None, []]))
            continue
        if rng.random() < 0.7:
            keys = ["a", "b", "winner"]
        else:
            keys = rng.sample(["a", "b", "winner", "ticket", "extra"], rng.randint(0, 5))
        batch.append(
            {k: rng.choice(_VALUES) if rng.random() < 0.3 else rng.choice(["itm_a", "itm_b"]) for k in keys}
        )
    return batch


def test_plain_comparisons_are_what_the_model_validates():
    model = TypeAdapter(list[ComparisonIn])
    rng = random.Random(20)
    taken = 0
    for _ in range(20_000):
        value = _random_comparisons(rng)
        plain = _plain_comparisons(value)
        if plain is None:
            continue  # the model decides
        taken += 1
        checked = model.validate_python(value)  # raises if the fast path took a bad value
        assert [(c.a, c.b, c.winner, c.ticket) for c in checked] == [tuple(c) for c in plain]
        assert all(type(c) is ingestion.ComparisonIn for c in plain)
    assert taken > 1_000  # the fast path is exercised, not only the fallback


def test_comparisons_the_fast_path_leaves_get_the_models_errors():
    body = {"privatized": False, "comparisons": [{"a": "x\x01", "b": "y", "winner": "y"}]}
    with pytest.raises(ValueError) as err:
        ResponsesIn.model_validate(body)
    (error,) = err.value.errors()
    assert error["loc"] == ("comparisons", 0, "a") and "control characters" in error["msg"]
    with_ticket = ResponsesIn.model_validate(
        {"privatized": False, "comparisons": [{"a": "x", "b": "y", "winner": "y", "ticket": "t"}]}
    )
    assert with_ticket.comparisons is not None and with_ticket.comparisons[0].ticket == "t"


def _random_body(rng: random.Random) -> bytes:
    pieces = ['"itm_a"', '"\\u0000"', '"\\ud800"', '"\\\\u0041"', '"\\n"', "1e999", "-1e5", "NaN", "2.5", "7"]
    items = ", ".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
    text = f'{{"k": [{items}], "{rng.choice(["a", "b"])}": {rng.choice(pieces)}}}'
    encoding = rng.choice(["utf-8", "utf-8", "utf-16", "utf-16-le", "utf-32", "utf-8-sig"])
    return text.encode(encoding)


def _strings(value: object):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_bytes_judged_storable_parse_to_storable_strings_and_the_walk_agrees():
    rng = random.Random(21)
    judged = 0
    for _ in range(5_000):
        raw = _random_body(rng)
        try:
            body = json.loads(raw)
        except ValueError:
            continue
        if _strings_storable(raw):
            judged += 1
            assert not any(unstorable(s) for s in _strings(body)), raw
        # Strings storable and numbers finite: exactly when the walk finds nothing.
        fast = _strings_storable(raw) and _numbers_finite(body)
        if fast:
            assert _first_unstorable(body, ("body",)) is None, raw
    assert judged > 500


def test_numbers_finite_is_the_walks_verdict_on_numbers():
    for value in ([1.0, {"x": [2, math.inf]}], {"a": -math.inf}, [math.nan], {"a": [1, 2.5, "NaN"]}, []):
        walked = _first_unstorable(value, ("body",))
        assert _numbers_finite(value) == (walked is None), value


def _canonical_as_a_loop(comparisons, positions):
    """The per-comparison check the column-wise one stands in for (its errors too)."""
    n = len(comparisons)
    i, j, y = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int8)
    for k, c in enumerate(comparisons):
        pa, pb = positions.get(c.a), positions.get(c.b)
        if pa is None:
            raise Invalid(f"comparisons[{k}]: a is not an item of this survey")
        if pb is None:
            raise Invalid(f"comparisons[{k}]: b is not an item of this survey")
        if pa == pb:
            raise Invalid(f"comparisons[{k}]: a and b must be two different items")
        if c.winner == c.a:
            w = pa
        elif c.winner == c.b:
            w = pb
        else:
            raise Invalid(f"comparisons[{k}]: winner must be one of its two items")
        i[k], j[k] = min(pa, pb), max(pa, pb)
        y[k] = 1 if w == i[k] else 0
    return i, j, y


def _outcome(check, comparisons, positions):
    try:
        return [(a.dtype, a.tolist()) for a in check(comparisons, positions)]
    except Invalid as exc:
        return exc.detail


def test_canonical_columns_and_errors_are_those_of_the_loop():
    ids = ["itm_a", "itm_b", "Ünï", 'q"uote', "itm_10", "itm_2", "\u2028"]
    positions = {x: k for k, x in enumerate(ids)}
    rng = random.Random(22)
    for _ in range(5_000):
        batch = []
        for _ in range(rng.randint(1, 6)):
            a, b = rng.choice([*ids, "gone"]), rng.choice([*ids, "gone"])
            batch.append(ingestion.ComparisonIn(a, b, rng.choice([a, b, a, b, "other"])))
        assert _outcome(ingestion.canonical, batch, positions) == _outcome(
            _canonical_as_a_loop, batch, positions
        ), batch


def test_the_idempotency_fingerprint_is_the_hash_of_the_sorted_pairs():
    """Retries that span a new release still match the record of their first copy."""
    ids = ["itm_a", "itm_b", "Ünï", 'q"uote', "itm_10", "itm_2", "\u2028"]
    rng = random.Random(23)
    for _ in range(500):
        batch = [ingestion.ComparisonIn(*rng.sample(ids, 2), "itm_a") for _ in range(rng.randint(1, 8))]
        for privatized, epsilon in ((False, None), (True, 1.5)):
            pairs = sorted(sorted((c.a, c.b)) for c in batch)
            expected = idempotency.fingerprint(privatized=privatized, epsilon=epsilon, pairs=pairs)
            assert ingestion._fingerprint(privatized, epsilon, batch) == expected
