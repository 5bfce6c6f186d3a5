"""Item labels and their translations: the stored form of a label, and the checks that
keep every item distinct from the others in every language (docs/how-to/languages.md).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping

from sqlalchemy import null, select
from sqlalchemy.orm import Session

from ..core.db.models import Item
from ..core.errors import Invalid
from .languages import check_language, check_translations

__all__ = [
    "check_shown_labels",
    "clean_label",
    "item_translations",
    "normalize_label",
    "set_translations",
    "shown_as_translation",
    "translations_taken",
]


def normalize_label(label: str) -> str:
    """The stored form of an item label, and the form it is looked up in: Unicode NFC, stripped.

    Two labels that differ only by normalization ("é" as one code point or as "e" plus a
    combining accent) look the same to everyone, so they are one label. Case is kept and
    counts ("US" and "us" may be different items): a respondent sees the difference.
    """
    return unicodedata.normalize("NFC", label).strip()


def clean_label(label: str) -> str:
    """One label (or a translation of one), normalized and checked: not empty, at most 500 characters."""
    cleaned = normalize_label(label)
    if not cleaned:
        raise Invalid("item labels must not be empty")
    if len(cleaned) > 500:
        raise Invalid("item labels must be at most 500 characters")
    return cleaned


def _clean_labels(labels: list[str]) -> list[str]:
    cleaned = [clean_label(label) for label in labels]
    seen: set[str] = set()
    dupes = []
    for label in cleaned:
        if label in seen:
            dupes.append(label)
        seen.add(label)
    if dupes:
        raise Invalid(f"item labels must be unique; repeated: {sorted(set(dupes))}")
    return cleaned


def item_translations(
    by_language: Mapping[str, list[str | None]] | None, n: int, taken: Mapping[str, set[str]] | None = None
) -> list[dict[str, str] | None]:
    """Per-item translations from ``{code: [label or None, …]}`` aligned with ``n`` new items,
    checked: supported languages, lists as long as the items, labels checked as labels are and
    distinct within a language (also from ``taken``, the survey's translations there already)."""
    out: list[dict[str, str]] = [{} for _ in range(n)]
    for code, labels in (by_language or {}).items():
        check_language(code)
        if len(labels) != n:
            raise Invalid(
                f"item_translations[{code!r}] has {len(labels)} labels for {n} items: give one per item "
                "(null where there is none)"
            )
        seen = set((taken or {}).get(code, ()))
        for k, label in enumerate(labels):
            if label is None:
                continue
            cleaned = clean_label(label)
            if cleaned in seen:
                raise Invalid(
                    f"item translations must be unique within a language; repeated in {code!r}: {cleaned!r}"
                )
            seen.add(cleaned)
            out[k][code] = cleaned
    return [t or None for t in out]


def translations_taken(
    session: Session, survey_id: str, except_item: str | None = None
) -> dict[str, set[str]]:
    """The survey's item translations per language (but ``except_item``'s): what a new one must not repeat."""
    taken: dict[str, set[str]] = {}
    for item_id, translations in session.execute(
        select(Item.id, Item.translations).where(Item.survey_id == survey_id, Item.translations.is_not(None))
    ):
        if item_id != except_item:
            for code, label in (translations or {}).items():
                taken.setdefault(code, set()).add(label)
    return taken


def set_translations(session: Session, survey_id: str, item: Item, translations: Mapping | None) -> None:
    """Replace ``item``'s translations (None or {}: none) inside the caller's write transaction."""
    checked = check_translations(translations, clean_label)
    taken = translations_taken(session, survey_id, except_item=item.id)
    for code, label in (checked or {}).items():
        if label in taken.get(code, ()):
            raise Invalid(
                f"item translations must be unique within a language; {code!r} already has {label!r}"
            )
    item.translations = checked or null()  # SQL NULL, as for items created without translations
    session.flush()
    check_shown_labels(session, survey_id)


def shown_as_translation(session: Session, survey_id: str, label: str) -> bool:
    """Whether some item shows ``label`` in a language (a translation equal to it): a new item
    with that label and no translations would look like it there (:func:`check_shown_labels`
    would refuse it)."""
    key = normalize_label(label)
    rows = session.scalars(
        select(Item.translations).where(Item.survey_id == survey_id, Item.translations.is_not(None))
    )
    return any(
        normalize_label(shown) == key
        for translations in rows
        if translations
        for shown in translations.values()
    )


def check_shown_labels(session: Session, survey_id: str) -> None:
    """Invalid when respondents in some language would see two items alike: an item shows its
    translation there, else its label, so a translation must not be another item's label where
    that item has no translation of its own. Inside the caller's write transaction, after its
    changes are flushed; reads nothing more when no item has translations."""
    rows = session.execute(
        select(Item.id, Item.translations).where(Item.survey_id == survey_id, Item.translations.is_not(None))
    )
    translated = {item_id: translations for item_id, translations in rows if translations}
    if not translated:
        return
    by_label = {
        normalize_label(label): item_id
        for item_id, label in session.execute(select(Item.id, Item.label).where(Item.survey_id == survey_id))
    }
    for item_id, translations in translated.items():
        for code, label in translations.items():
            other = by_label.get(normalize_label(label))
            if other is not None and other != item_id and code not in translated.get(other, {}):
                raise Invalid(
                    f"items must look different in every language; in {code!r} two items would show "
                    f"{label!r} (another item's label, untranslated there): translate that item too, "
                    "or choose another"
                )
