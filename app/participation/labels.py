"""A suggestion's text: what a label may hold, when two are one item, which are near.

:func:`clean_label` refuses what cannot be shown safely; :func:`same_key` says when two
labels are the same item (exact duplicates are merged); :func:`similar_labels` points
near ones out to moderators, as hints only (docs/how-to/moderate.md).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from sqlalchemy.orm import Session

from ..core.db.models import Item
from ..core.errors import Invalid
from ..surveys.items import current_item_index
from ..surveys.labels import normalize_label

__all__ = [
    "COMMON_TRIGRAM",
    "LABEL_MAX",
    "SIMILAR_FROM",
    "SIMILAR_SHOWN",
    "Similar",
    "clean_label",
    "fold_text",
    "same_item",
    "same_key",
    "similar_labels",
]

#: Longest suggestion (characters): an item label a respondent can read in a pair.
LABEL_MAX = 200
#: Similarity from which a label is shown to moderators as a near-duplicate.
SIMILAR_FROM = 0.5
#: Trigrams shared by more labels than this are skipped when looking for near-duplicates
#: ("the", " a "…): they say little, and hostile labels made of them would make a listing
#: compare everything with everything.
COMMON_TRIGRAM = 500
#: Near-duplicates listed per suggestion.
SIMILAR_SHOWN = 3


#: Characters that reorder or hide text (bidirectional overrides and isolates) and C1 controls.
_HOSTILE = re.compile("[\u202a-\u202e\u2066-\u2069\u0080-\u009f]")
#: Most combining marks on one character (beyond it, text spills over its neighbours).
_MAX_MARKS = 4


def _visible(c: str) -> bool:
    """Whether a character shows something: not a space, format character (zero-width,
    BOM), combining mark or one of the blank letters (Hangul fillers, blank braille)."""
    if c in "\u3164\u115f\u1160\uffa0\u2800":
        return False
    return unicodedata.category(c) not in ("Zs", "Zl", "Zp", "Cf", "Cc", "Mn", "Me", "Mc")


def clean_label(label: str) -> str:
    cleaned = normalize_label(label)
    if not cleaned:
        raise Invalid("a suggestion must not be empty")
    if len(cleaned) > LABEL_MAX:
        raise Invalid(f"a suggestion must be at most {LABEL_MAX} characters")
    if _HOSTILE.search(cleaned):
        raise Invalid("a suggestion must not contain text-direction overrides or control characters")
    if not any(_visible(c) for c in cleaned):
        raise Invalid("a suggestion must contain visible characters")
    run = 0
    for c in cleaned:
        run = run + 1 if unicodedata.combining(c) else 0
        if run > _MAX_MARKS:
            raise Invalid(f"a suggestion must not stack more than {_MAX_MARKS} accents on one letter")
    return cleaned


_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")


def fold_text(label: str) -> str:
    """The form two labels are compared in for hints: compatibility-normalized, accents
    and punctuation removed, case folded, spaces collapsed ("Bike lanes!" ≡ "bike  lanes").
    A label with nothing left (emoji, punctuation only) keeps its :func:`same_key` form,
    so that two such labels are not "the same" by both folding to nothing."""
    text = unicodedata.normalize("NFKD", label)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = _SPACE.sub(" ", _PUNCT.sub(" ", text.casefold())).strip()
    return text or same_key(label)


def _trigrams(folded: str) -> set[str]:
    padded = f"  {folded} "
    return {padded[k : k + 3] for k in range(len(padded) - 2)}


@dataclass(frozen=True)
class Similar:
    label: str
    similarity: float
    same_text: bool
    item_id: str | None = None
    suggestion_id: str | None = None


def similar_labels(
    labels: list[str], against: list[tuple[str, str | None, str | None]]
) -> list[list[Similar]]:
    """For each of ``labels``, the entries of ``against`` — ``(label, item_id,
    suggestion_id)`` — most like it, best first: the same folded text (similarity 1),
    or a Dice coefficient of character trigrams of at least :data:`SIMILAR_FROM`. One
    inverted index of trigrams, so the work is the postings the labels' trigrams hit, not
    len(labels) × len(against) comparisons."""
    folded = [fold_text(a[0]) for a in against]
    grams = [_trigrams(f) for f in folded]
    index: dict[str, list[int]] = {}
    for k, g in enumerate(grams):
        for t in g:
            index.setdefault(t, []).append(k)
    by_text: dict[str, list[int]] = {}
    for k, f in enumerate(folded):
        by_text.setdefault(f, []).append(k)
    out = []
    for label in labels:
        f = fold_text(label)
        g = _trigrams(f)
        shared: Counter[int] = Counter()
        for t in g:
            posting = index.get(t, ())
            if len(posting) <= COMMON_TRIGRAM:
                shared.update(posting)
        for k in by_text.get(f, ()):  # the same folded text, whatever its trigrams
            shared.setdefault(k, 0)
        found = []
        for k, n in shared.items():
            same = folded[k] == f
            dice = 1.0 if same else 2 * n / (len(g) + len(grams[k]))
            if dice >= SIMILAR_FROM:
                text, item_id, suggestion_id = against[k]
                found.append(Similar(text, round(dice, 3), same, item_id, suggestion_id))
        found.sort(key=lambda s: (-s.similarity, s.label))
        out.append(found[:SIMILAR_SHOWN])
    return out


def same_key(label: str) -> str:
    """The form in which two labels count as the same item: NFC, case folded, white space
    collapsed ("Night  buses" ≡ "night buses"; "C#" ≠ "C++")."""
    return _SPACE.sub(" ", unicodedata.normalize("NFC", label).casefold()).strip()


def same_item(session: Session, survey_id: str, text: str) -> Item | None:
    """The item whose label is the same text (:func:`same_key`), if any: from the process's
    item index (plain values, read again only when items were added), so O(1) reads."""
    index = current_item_index(session, survey_id)
    key = same_key(text)
    for k, label in enumerate(index.labels):
        if same_key(label) == key:
            return session.get(Item, index.ids[k])
    return None
