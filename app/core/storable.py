"""Text the database cannot store is refused before any handler runs.

PostgreSQL's ``text`` cannot hold NUL (U+0000), and a lone surrogate (U+D800–U+DFFF,
which JSON can spell as ``"\\ud800"``) has no UTF-8 encoding, so either one in a value
that reaches a query makes the driver fail (a 500). Neither is ever meaningful in an id,
a label or a parameter, so :func:`storable_input`, a dependency of every route
(:func:`app.main.create_app`), refuses them wherever a client can put a string, and
non-finite JSON numbers too (its docstring gives the answers).
"""

from __future__ import annotations

import email.message
import math
import re
from typing import Any

from fastapi import Request

from .errors import Invalid, NotFound

__all__ = ["UNSTORABLE", "storable_input", "unstorable"]

#: NUL and the surrogate code points (which only a lone surrogate leaves in a Python str).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: Object keys shown in an error's location: the shape of a field name. Any other key is
#: shown as ``<key>`` (a key a client made up could carry an answer).
_FIELD_NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}")

_WHAT = "must not contain NUL or unpaired surrogate characters"
_NOT_TEXT = f"strings {_WHAT}"
_NOT_FINITE = "numbers must be finite (NaN and Infinity are not JSON)"


def unstorable(value: str) -> bool:
    """Whether ``value`` holds a character no database text column can store."""
    return UNSTORABLE.search(value) is not None


def _first_unstorable(value: Any, where: tuple) -> tuple[tuple, str] | None:
    """The location, in document order (an object's keys before its values), of the
    first string or object key in ``value`` that cannot be stored, or of its first number
    that is not finite, with what is wrong with it; None when there is none. Iterative: a
    deeply nested body does not exhaust the stack."""
    stack: list[tuple[Any, tuple]] = [(value, where)]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, str):
            if unstorable(node):
                return loc, _NOT_TEXT
        elif isinstance(node, float):
            if not math.isfinite(node):
                return loc, _NOT_FINITE
        elif isinstance(node, dict):
            children = []
            for key, child in node.items():
                if unstorable(key):
                    return (*loc, "<key>"), _NOT_TEXT
                children.append((child, (*loc, key if _FIELD_NAME.fullmatch(key) else "<key>")))
            stack.extend(reversed(children))  # popped in document order
        elif isinstance(node, list):
            stack.extend((node[k], (*loc, k)) for k in range(len(node) - 1, -1, -1))
    return None


def _strings_storable(raw: bytes) -> bool:
    """Whether no string (value or key) that ``json.loads(raw)`` gives can hold NUL or a
    lone surrogate, judged from the bytes alone: True only when they have no NUL byte and
    no ``\\u`` escape. A JSON text that ``json.loads`` reads has ASCII punctuation, which
    in UTF-16 or UTF-32 takes a NUL byte: without one the body was read as UTF-8, whose
    decoder refuses encoded surrogates; a JSON string holds no raw control character
    (``json.loads`` is strict). So NUL and surrogates could only come from ``\\u`` escapes."""
    return b"\x00" not in raw and b"\\u" not in raw


def _numbers_finite(value: Any) -> bool:
    """Whether every number in ``value`` (a parsed JSON body) is finite: the walk of
    :func:`_first_unstorable` without its strings and locations."""
    stack = [value]
    pop, push, finite = stack.pop, stack.extend, math.isfinite
    while stack:
        node = pop()
        kind = type(node)
        if kind is dict:
            push(node.values())
        elif kind is list:
            push(node)
        elif kind is float and not finite(node):
            return False
    return True


def _maybe_json(request: Request) -> bool:
    """Whether FastAPI may read this request's body as JSON: an ``application/json`` or
    ``application/*+json`` content type, or none (which FastAPI reads as JSON unless its
    strict content type is on)."""
    value = request.headers.get("content-type")
    if not value:
        return True
    message = email.message.Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


async def storable_input(request: Request) -> None:
    """Refuse a path parameter, query parameter or JSON body string that holds NUL or a
    lone surrogate, and a JSON body's number that is not finite.

    * a path parameter: 404 (no resource has such a name);
    * a query parameter (name or value): 422;
    * a JSON body (any string, object key or value, at any depth): 422 with the location
      of the first one, in the shape of every other validation error.

    A JSON body's ``NaN``, ``Infinity`` and ``-Infinity`` (Python's parser reads them;
    they are not JSON, RFC 8259 §6, and PostgreSQL's ``jsonb`` cannot hold them) are
    refused the same way: no number a client sends reaches a computation or a stored
    job unless finite. Nothing of the offending value is repeated in the answer
    (docs/service.md, "Hostile input"). The body's check costs a walk over every value, which in
    a batch of answers costs more than validating it; so a body whose bytes cannot spell
    an unstorable string (:func:`_strings_storable`) has only its numbers looked at, and
    the walk that names the first offender runs only when there is one."""
    if any(unstorable(v) for v in request.path_params.values() if isinstance(v, str)):
        raise NotFound("not found")
    for name, value in request.query_params.multi_items():
        if unstorable(name) or unstorable(value):
            # In the shape of a validation error (app.core.http_errors), as every 422 of a query.
            shown = name if _FIELD_NAME.fullmatch(name) else "<parameter>"
            raise Invalid([{"loc": ["query", shown], "msg": _NOT_TEXT, "type": "string_unstorable"}])
    route = request.scope.get("route")
    if getattr(route, "body_field", None) is None or not _maybe_json(request):
        return
    try:
        body = await request.json()  # parsed once: FastAPI has read it already, and kept it
    except ValueError:
        return  # not JSON: the route's own validation says so
    if _strings_storable(await request.body()) and _numbers_finite(body):
        return
    found = _first_unstorable(body, ("body",))
    if found is not None:
        loc, what = found
        # In the shape of a validation error (app.core.http_errors).
        kind = "string_unstorable" if what is _NOT_TEXT else "finite_number"
        raise Invalid([{"loc": list(loc), "msg": what, "type": kind}])
