"""The string literals of a JavaScript source, with what precedes each: enough of a tokenizer
(comments, regular-expression literals, template literals with nested ${…}) for the catalog
tests to tell a word shown to users from an id, a class name or a URL."""

from __future__ import annotations

from dataclasses import dataclass

#: Tokens after which a "/" starts a regular-expression literal rather than a division.
_REGEX_AFTER = set("(,=:[!&|?{};") | {""}


@dataclass(frozen=True)
class Literal:
    """A string literal's text (a template's ${…} parts left out), its line, and the code
    before and after it (whitespace collapsed; 200 and 20 characters)."""

    text: str
    line: int
    before: str
    after: str


def literals(source: str) -> list[Literal]:
    comments: list[tuple[int, int]] = []
    _code(source, 0, [], stop_at_brace=False, comments=comments)
    # The code around a literal is read without comments (their words are nobody's context).
    for start, end in comments:
        source = source[:start] + " " * (end - start) + source[end:]
    found: list[Literal] = []
    _code(source, 0, found, stop_at_brace=False)
    return found


def _before(source: str, start: int) -> str:
    return " ".join(source[max(0, start - 600) : start].split())[-200:]


def _after(source: str, end: int) -> str:
    return " ".join(source[end : end + 40].split())[:20]


def _code(
    src: str, i: int, found: list[Literal], stop_at_brace: bool, comments: list[tuple[int, int]] | None = None
) -> int:
    """Scans code from `i`; returns the index after the "}" that closes it when
    `stop_at_brace` (a template's ${…}), else the source's end."""
    depth = 0
    last = ""  # the last significant character
    while i < len(src):
        c = src[i]
        if src.startswith("//", i):
            end = src.find("\n", i)
            end = len(src) if end < 0 else end
            if comments is not None:
                comments.append((i, end))
            i = end
            continue
        if src.startswith("/*", i):
            end = src.index("*/", i + 2) + 2
            if comments is not None:
                comments.append((i, end))
            i = end
            continue
        if c in "\"'":
            j = i + 1
            while src[j] != c:
                j += 2 if src[j] == "\\" else 1
            line = src.count("\n", 0, i) + 1
            found.append(Literal(src[i + 1 : j], line, _before(src, i), _after(src, j + 1)))
            i, last = j + 1, c
            continue
        if c == "`":
            i = _template(src, i, found, comments)
            last = "`"
            continue
        if c == "/" and last in _REGEX_AFTER:
            j, in_class = i + 1, False
            while src[j] != "/" or in_class:
                if src[j] == "\\":
                    j += 1
                elif src[j] == "[":
                    in_class = True
                elif src[j] == "]":
                    in_class = False
                j += 1
            i, last = j + 1, "/"
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            if stop_at_brace and depth == 0:
                return i + 1
            depth -= 1
        if not c.isspace():
            last = c
        i += 1
    return i


def _template(src: str, i: int, found: list[Literal], comments: list[tuple[int, int]] | None) -> int:
    start, j, text = i, i + 1, []
    while src[j] != "`":
        if src[j] == "\\":
            text.append(src[j : j + 2])
            j += 2
        elif src.startswith("${", j):
            j = _code(src, j + 2, found, stop_at_brace=True, comments=comments)
        else:
            text.append(src[j])
            j += 1
    line = src.count("\n", 0, start) + 1
    found.append(Literal("".join(text), line, _before(src, start), _after(src, j + 1)))
    return j + 1
