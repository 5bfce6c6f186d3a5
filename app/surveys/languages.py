"""The respondents' languages: which catalogs exist, which one a request gets, and item labels in it.

The respondent and results pages' text comes from message catalogs
(``static/i18n/respond.<code>.json``, ``results.<code>.json``), one per code in
:data:`LANGUAGES`. A request gets, in this order: the page's ``?lang=`` when it names a
catalog; else the best ``Accept-Language`` entry that does (q-values honoured, a region
ignored: ``es-MX`` is ``es``); else the survey's own ``language``; else English.

An item's label may carry translations (``items.translations``, {code: label}): outputs for
respondents give the label in the chosen language when there is one, else the label itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..core.db.models import Item
from ..core.errors import Invalid

__all__ = [
    "DEFAULT_LANGUAGE",
    "LANGUAGES",
    "accepted",
    "check_language",
    "check_translations",
    "choose_language",
    "label_in",
    "translations_of",
]

#: The languages with a respondent catalog, in the order the page lists them.
LANGUAGES: tuple[str, ...] = ("en", "es", "de", "fr")
#: The language of last resort (the catalogs' reference).
DEFAULT_LANGUAGE = "en"

#: One Accept-Language entry: a range ("fr", "fr-CA", "*") and an optional q-value.
_RANGE = re.compile(
    r"\s*([A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*|\*)\s*(?:;\s*q\s*=\s*([0-9.]{1,6})\s*)?$", re.IGNORECASE
)


def _primary(tag: str) -> str:
    """The primary subtag of a language tag, lower case: "es-MX" → "es"."""
    return tag.split("-", 1)[0].strip().lower()


def accepted(header: str | None) -> list[str]:
    """The supported languages an ``Accept-Language`` header asks for, most wanted first.

    Entries are ordered by q-value (default 1; entries with q = 0, or that do not parse, are
    left out), ties in the header's order; each is matched by its primary subtag. ``*``
    matches nothing here: it leaves the choice to the survey's default."""
    if not header:
        return []
    ranked: list[tuple[float, int, str]] = []
    for k, part in enumerate(header[:1000].split(",")):
        m = _RANGE.match(part)
        if m is None:
            continue
        try:
            q = 1.0 if m.group(2) is None else float(m.group(2))
        except ValueError:
            continue
        if not 0 < q <= 1:
            continue
        ranked.append((-q, k, _primary(m.group(1))))
    out: list[str] = []
    for _, _, code in sorted(ranked):
        if code in LANGUAGES and code not in out:
            out.append(code)
    return out


def choose_language(query: str | None, header: str | None, default: str | None) -> str:
    """The language a respondent-facing request gets: ``?lang=`` (when it names a catalog,
    region ignored), then ``Accept-Language``, then the survey's ``default``, then English."""
    if query:
        code = _primary(query[:35])
        if code in LANGUAGES:
            return code
    for code in accepted(header):
        return code
    if default in LANGUAGES:
        return default
    return DEFAULT_LANGUAGE


def check_language(code: str) -> str:
    """A survey's default language, checked: one of :data:`LANGUAGES` (else 422)."""
    if code not in LANGUAGES:
        raise Invalid(f"language must be one of {', '.join(LANGUAGES)}; got {code!r}")
    return code


def check_translations(
    translations: Mapping[str, str | None] | None, clean: Callable[[str], str]
) -> dict | None:
    """An item's translations, checked: supported languages only, each label checked and
    normalized by ``clean`` as labels are (None entries left out); None when there are none."""
    out: dict[str, str] = {}
    for code, label in (translations or {}).items():
        check_language(code)
        if label is not None:
            out[code] = clean(label)
    return out or None


def translations_of(session: Session, item_ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """The translations of the given items that have any: {item id: {code: label}} (one query)."""
    ids = list(dict.fromkeys(item_ids))
    if not ids:
        return {}
    rows = session.execute(
        select(Item.id, Item.translations).where(Item.id.in_(ids), Item.translations.is_not(None))
    ).all()
    return {row.id: dict(row.translations) for row in rows if row.translations}


def label_in(label: str, translations: dict[str, str] | None, language: str) -> str:
    """The label in ``language`` when it has a translation there, else the label itself."""
    return (translations or {}).get(language) or label
