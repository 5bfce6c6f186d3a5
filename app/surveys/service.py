"""Surveys and their items."""

from __future__ import annotations

import math
import sys
import threading
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from sqlalchemy import ScalarSelect, delete, func, null, select
from sqlalchemy.orm import Session

from ..core.cache import OBJECT_BYTES, ByteLRU
from ..core.db.models import HeldContribution, Item, Ranking, Survey, SurveyStats, new_id, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid
from ..core.limits import MAX_ITEMS, MAX_ITEMS_STORED, MAX_RANKING_ITEMS
from ..core.lookup import get_survey
from ..goals.service import PAIRWISE_MAX_ITEMS as PAIRWISE_GOAL_MAX_ITEMS
from ..goals.service import new_ticket_key, resolve_goal
from ..stats.accounting import DEFAULT_DELTA
from .embedding import clean_origins
from .languages import DEFAULT_LANGUAGE, check_language, check_translations

__all__ = [
    "BATCH_DEFAULT",
    "DEFAULT_EPSILON",
    "DEFAULT_EPSILON_MAX",
    "DEFAULT_EPSILON_MIN",
    "DEFAULT_RESPONDENT_BUDGET",
    "MAX_DELTA",
    "MAX_EPSILON",
    "MAX_ITEMS",
    "MAX_RANKING_ITEMS",
    "MAX_TOTAL_BUDGET",
    "MIN_DELTA",
    "MIN_EPSILON",
    "UNLIMITED",
    "UNSET",
    "ItemIndex",
    "LocalPolicy",
    "PrivacyPolicy",
    "active_item_count",
    "active_items",
    "add_items",
    "append_items",
    "archived_positions",
    "budget_policy",
    "central_limits",
    "clean_label",
    "create_survey",
    "current_item_index",
    "get_survey",
    "item_count",
    "item_count_of",
    "item_index",
    "item_translations",
    "known_item_index",
    "list_surveys",
    "local_epsilons",
    "normalize_label",
    "require_local",
    "require_pairwise",
    "resolve_accounting",
    "resolve_suggestions",
    "survey_items",
    "update_survey",
]

#: ε above this is not privacy (the flip probability e^{-30} ≈ 1e-13).
MAX_EPSILON = 30.0
#: ε below this carries no usable information (the flip probability is within
#: 0.00025 of a coin toss); it also keeps every stored ε far above the
#: statistics core's numerical floor.
MIN_EPSILON = 0.001
#: The defaults of a local survey's privacy (docs/privacy.md, "Privacy by default").
#: ε of one answer when neither the survey nor the respondent chooses: an observer of the
#: stored answer guesses the true one right at most e/(1+e) = 73% of the time.
DEFAULT_EPSILON = 1.0
#: Smallest ε a respondent may choose (below the default).
DEFAULT_EPSILON_MIN = 0.1
#: Largest ε a respondent may choose (above the default): 88% at most for one answer.
DEFAULT_EPSILON_MAX = 2.0
#: A pairwise survey's cap on each respondent's total ε (basic composition) when the admin
#: gives none: five answers at the default ε. A ranking survey's default cap is its
#: epsilon_max (one ranking per respondent). ``"unlimited"`` opts out, explicitly.
DEFAULT_RESPONDENT_BUDGET = 5.0
#: The value of ``respondent_budget`` that opts a survey out of a per-respondent cap.
UNLIMITED = "unlimited"
# MAX_ITEMS and MAX_RANKING_ITEMS (app.core.limits): a ranking survey is short because a
# person ranks the whole list, the Mallows mechanism's per-pair privacy weakens as
# ε/(m−1), and its folded statistics are O(m²).


@dataclass(frozen=True)
class PrivacyPolicy:
    model: str = "local"
    epsilon_default: float | None = None
    epsilon_min: float | None = None
    epsilon_max: float | None = None
    #: A cap (a number), ``"unlimited"`` (the explicit opt-out), or None: the default cap.
    respondent_budget: float | str | None = None
    total_budget: float | None = None
    max_comparisons_per_respondent: int | None = None
    #: Central: "pure" (default) or "zcdp" (docs/mechanisms.md §2.6), and zCDP's δ.
    accounting: str | None = None
    delta: float | None = None


#: Largest total budget a central survey may hold, and largest cap on a respondent's total ε
#: (beyond it the guarantee protects nothing: a guess right with probability 1 − e⁻¹⁰⁰).
MAX_TOTAL_BUDGET = 100.0


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


#: The δ range a zCDP survey may state its (ε, δ) at: δ must be far below 1/population.
MIN_DELTA = 1e-20
MAX_DELTA = 1e-6


def resolve_accounting(accounting: str | None, delta: float | None) -> tuple[str, float | None]:
    """A central survey's ``(accounting, delta)``, checked: "pure" takes no δ; "zcdp" takes
    δ in [:data:`MIN_DELTA`, :data:`MAX_DELTA`], by default
    :data:`~app.stats.accounting.DEFAULT_DELTA` (docs/mechanisms.md §2.6)."""
    accounting = accounting or "pure"
    if accounting not in ("pure", "zcdp"):
        raise Invalid("privacy.accounting must be 'pure' or 'zcdp'")
    if accounting == "pure":
        if delta is not None:
            raise Invalid("privacy.delta belongs to zcdp accounting (pure ε-DP has δ = 0)")
        return "pure", None
    if delta is None:
        return "zcdp", DEFAULT_DELTA
    if not (math.isfinite(delta) and MIN_DELTA <= delta <= MAX_DELTA):
        raise Invalid(
            f"privacy.delta must be in [{MIN_DELTA:g}, {MAX_DELTA:g}]: far below one over the number of "
            "people the survey could reach"
        )
    return "zcdp", float(delta)


def _resolve_central(p: PrivacyPolicy, n_items: int) -> tuple[float, int]:
    if any(v is not None for v in (p.epsilon_default, p.epsilon_min, p.epsilon_max, p.respondent_budget)):
        raise Invalid(
            "central surveys take total_budget and max_comparisons_per_respondent; the epsilon bounds "
            "and respondent_budget belong to local surveys"
        )
    budget, cap = p.total_budget, p.max_comparisons_per_respondent
    if budget is None or not (math.isfinite(budget) and 0 < budget <= MAX_TOTAL_BUDGET):
        raise Invalid(
            f"privacy.total_budget must be a number in (0, {MAX_TOTAL_BUDGET:g}] for a central survey"
        )
    n_pairs = n_items * (n_items - 1) // 2
    if cap is None or not 1 <= cap <= n_pairs:
        raise Invalid(
            f"privacy.max_comparisons_per_respondent must be between 1 and the number of pairs ({n_pairs})"
        )
    return float(budget), int(cap)


@dataclass(frozen=True)
class LocalPolicy:
    """A local survey's resolved privacy settings, as stored."""

    epsilon_default: float
    epsilon_min: float
    epsilon_max: float
    #: The cap on a respondent's total ε; None only with ``unlimited``.
    respondent_budget: float | None
    #: The admin opted out of a cap (``"respondent_budget": "unlimited"``).
    unlimited: bool


def _resolve_policy(p: PrivacyPolicy, kind: str) -> LocalPolicy:
    """A local survey's settings with the defaults filled in (docs/privacy.md, "Privacy by
    default"): ε 1 in [0.1, 2]; a finite cap on each respondent's total ε unless the admin
    sends ``"respondent_budget": "unlimited"``."""
    if p.model != "local":
        raise Invalid("privacy.model must be 'local' or 'central'")
    if p.total_budget is not None or p.max_comparisons_per_respondent is not None:
        raise Invalid("total_budget and max_comparisons_per_respondent belong to central surveys")
    if p.accounting is not None or p.delta is not None:
        raise Invalid(
            "accounting and delta belong to central surveys (a local survey's answers are randomized)"
        )
    default = DEFAULT_EPSILON if p.epsilon_default is None else p.epsilon_default
    lo = p.epsilon_min if p.epsilon_min is not None else min(DEFAULT_EPSILON_MIN, default)
    hi = p.epsilon_max if p.epsilon_max is not None else max(DEFAULT_EPSILON_MAX, default)
    for name, value in (("epsilon_default", default), ("epsilon_min", lo), ("epsilon_max", hi)):
        if not (math.isfinite(value) and MIN_EPSILON <= value <= MAX_EPSILON):
            raise Invalid(f"privacy.{name} must be a number in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]")
    if not lo <= default <= hi:
        raise Invalid("privacy bounds must satisfy epsilon_min <= epsilon_default <= epsilon_max")
    budget = p.respondent_budget
    if budget == UNLIMITED:
        return LocalPolicy(default, lo, hi, None, unlimited=True)
    if isinstance(budget, str):
        raise Invalid(f"privacy.respondent_budget must be a number or {UNLIMITED!r}")
    if budget is None:
        if kind == "ranking":
            budget = hi  # one ranking per respondent: the cap is the largest ε it may have
        elif hi > DEFAULT_RESPONDENT_BUDGET:
            raise Invalid(
                f"privacy.epsilon_max {hi:g} is above the default respondent budget "
                f"{DEFAULT_RESPONDENT_BUDGET:g}: give privacy.respondent_budget (a total ε per respondent), "
                f"or {UNLIMITED!r} to allow each respondent to spend without limit"
            )
        else:
            budget = DEFAULT_RESPONDENT_BUDGET
    if not (math.isfinite(budget) and lo <= budget <= MAX_TOTAL_BUDGET):
        raise Invalid(
            f"privacy.respondent_budget must be a number from epsilon_min to {MAX_TOTAL_BUDGET:g}, or "
            f"{UNLIMITED!r} for no cap (absent or null: the default, {DEFAULT_RESPONDENT_BUDGET:g} for "
            "pairwise surveys)"
        )
    return LocalPolicy(default, lo, hi, float(budget), unlimited=False)


def budget_policy(survey: Survey) -> str | None:
    """How a local survey caps each respondent's total ε: ``"capped"`` (a finite cap),
    ``"unlimited"`` (the admin opted out) or ``"unset"`` (stored without a cap and without an
    opt-out: no cap applies; such surveys keep their settings). None for central surveys."""
    if survey.privacy_model != "local":
        return None
    if survey.respondent_budget is not None:
        return "capped"
    return "unlimited" if survey.respondent_budget_unlimited else "unset"


def create_survey(
    session: Session,
    title: str,
    kind: str,
    labels: list[str],
    policy: PrivacyPolicy,
    assignment: str = "balanced",
    goal: dict | None = None,
    suggestions: dict | None = None,
    public_results: bool = False,
    results_on_finish: bool = False,
    language: str = DEFAULT_LANGUAGE,
    translations: Mapping[str, list[str | None]] | None = None,
    embed_origins: list[str] | None = None,
) -> Survey:
    """A new open survey. ``goal``: ``{"top_k": K | None, "full_ranking": bool, "level": float,
    "close_when_met": bool, "certificate": "borda" | "pairwise"}`` (checked by
    :func:`app.goals.service.resolve_goal`).
    ``language``: the respondents' default language; ``translations``: ``{code: [label or
    None, …]}`` aligned with ``labels`` (:func:`item_translations`)."""
    title = title.strip()
    if not title:
        raise Invalid("title must not be empty")
    if kind not in ("pairwise", "ranking"):
        raise Invalid("kind must be 'pairwise' or 'ranking'")
    cleaned = _clean_labels(labels)
    if not 2 <= len(cleaned) <= MAX_ITEMS:
        raise Invalid(f"a survey needs between 2 and {MAX_ITEMS} items")
    if kind == "ranking" and len(cleaned) > MAX_RANKING_ITEMS:
        raise Invalid(f"a ranking survey holds at most {MAX_RANKING_ITEMS} items")
    fields: dict[str, str | float | int | bool | None]
    if policy.model == "central":
        if kind != "pairwise":
            raise Invalid("central-model surveys are pairwise")
        total, cap = _resolve_central(policy, len(cleaned))
        accounting, delta = resolve_accounting(policy.accounting, policy.delta)
        fields = {"total_budget": total, "max_comparisons": cap, "accounting": accounting, "delta": delta}
    else:
        local = _resolve_policy(policy, kind)
        fields = {
            "epsilon_default": local.epsilon_default,
            "epsilon_min": local.epsilon_min,
            "epsilon_max": local.epsilon_max,
            "respondent_budget": local.respondent_budget,
            "respondent_budget_unlimited": local.unlimited,
        }
    g = goal or {}
    spec = resolve_goal(
        assignment,
        g.get("top_k"),
        bool(g.get("full_ranking", False)),
        float(g.get("level", 0.95)),
        bool(g.get("close_when_met", False)),
        goal is not None,
        kind,
        policy.model,
        len(cleaned),
        str(g.get("certificate") or "borda"),
    )
    suggestion_settings = resolve_suggestions(suggestions, kind)
    if suggestion_settings and suggestion_settings["enabled"] and goal is not None:
        raise Invalid(_NO_SUGGESTIONS_WITH_GOAL)
    _check_results(public_results, results_on_finish)
    origins = clean_origins(embed_origins)  # app.surveys.embedding
    check_language(language)
    per_item = item_translations(translations, len(cleaned))
    begin_write(session)
    survey = Survey(
        id=new_id("srv"),
        title=title,
        kind=kind,
        status="open",
        privacy_model=policy.model,
        assignment=assignment,
        goal=None if spec is None else spec.as_json(),
        ticket_key=None if spec is None else new_ticket_key(),
        suggestions=suggestion_settings,
        public_results=public_results,
        results_on_finish=results_on_finish,
        embed_origins=origins,
        language=language,
        **fields,
    )
    session.add(survey)
    # item_counts starts empty (not NULL, which means "before the counts existed": a survey
    # migrated with answers gets them from pair_stats at its first fold).
    session.add(SurveyStats(survey_id=survey.id, version=0, n_comparisons=0, item_counts=b""))
    session.flush()
    session.add_all(
        # SQL NULL, not JSON null, where there are none: "translations IS NOT NULL" finds the others.
        Item(
            id=new_id("itm"), survey_id=survey.id, position=k, label=label, translations=per_item[k] or null()
        )
        for k, label in enumerate(cleaned)
    )
    if any(per_item):
        session.flush()
        check_shown_labels(session, survey.id)
    session.commit()
    return survey


def list_surveys(session: Session, limit: int = 100, offset: int = 0) -> tuple[list[tuple[Survey, int]], int]:
    """A page of surveys, newest first, each with its number of items; and how many
    surveys there are. Two queries whatever the page's size, and no item is loaded:
    positions are 0 … m−1, so m is the largest position + 1, one seek on the
    (survey_id, position) index per survey."""
    total = session.scalar(select(func.count()).select_from(Survey)) or 0
    n_items = item_count_of(Survey.id).correlate(Survey)
    rows = session.execute(
        select(Survey, n_items).order_by(Survey.created_at.desc(), Survey.id).limit(limit).offset(offset)
    ).all()
    return [(survey, int(n)) for survey, n in rows], int(total)


def survey_items(session: Session, survey_id: str) -> list[Item]:
    return list(session.scalars(select(Item).where(Item.survey_id == survey_id).order_by(Item.position)))


@dataclass(frozen=True, eq=False)
class ItemIndex:
    """A survey's items as plain immutable values: ids and labels by position, and each
    id's position.

    Unlike ORM ``Item`` rows, which belong to the session that loaded them (a rollback
    expires them; touching them later loads through that session, from whatever thread),
    an index may be shared between requests and threads, e.g. in a per-process cache.
    """

    ids: tuple[str, ...]
    labels: tuple[str, ...]
    positions: Mapping[str, int]
    #: Positions of the items that joined after the survey's creation (source "added" or
    #: "suggested"): the candidates for catch-up (app.respondents.assignment).
    late: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """Approximate memory held: the strings, and per item its tuple and mapping slots."""
        strings = sum(sys.getsizeof(x) for x in self.ids) + sum(sys.getsizeof(x) for x in self.labels)
        return strings + 120 * len(self.ids) + 3 * OBJECT_BYTES


def item_index(session: Session, survey_id: str) -> ItemIndex:
    """The survey's items as an :class:`ItemIndex` (one query; no ORM objects)."""
    rows = session.execute(
        select(Item.id, Item.position, Item.label, Item.source)
        .where(Item.survey_id == survey_id)
        .order_by(Item.position)
    ).all()
    if any(row.position != k for k, row in enumerate(rows)):  # pragma: no cover - positions are 0..m-1
        raise RuntimeError(f"survey {survey_id}: item positions are not 0..m-1")
    return ItemIndex(
        ids=tuple(row.id for row in rows),
        labels=tuple(row.label for row in rows),
        positions=MappingProxyType({row.id: row.position for row in rows}),
        late=tuple(row.position for row in rows if row.source != "seed"),
    )


def item_count_of(survey_id) -> ScalarSelect[int]:
    """How many items the survey holds, as a scalar subquery: positions are 0 … m−1, so m
    is the largest position + 1 — one seek on the (survey_id, position) index, where a
    ``COUNT`` reads every entry."""
    return (
        select(func.coalesce(func.max(Item.position) + 1, 0))
        .where(Item.survey_id == survey_id)
        .scalar_subquery()
    )


def item_count(session: Session, survey_id: str) -> int:
    """How many items the survey holds (one index seek; no rows loaded)."""
    return int(session.scalar(select(item_count_of(survey_id))) or 0)


def archived_positions(survey: Survey) -> tuple[int, ...]:
    """Positions of the survey's archived items, sorted."""
    return tuple(sorted(survey.archived or ()))


def active_item_count(session: Session, survey: Survey, n: int | None = None) -> int:
    """The items that count toward :data:`MAX_ITEMS`: all but the archived (``n``: the
    survey's item count, when the caller has it)."""
    return (item_count(session, survey.id) if n is None else n) - len(survey.archived or ())


def active_items(session: Session, survey: Survey) -> list[Item]:
    """The survey's items in position order, archived ones left out: the items a ranking
    ranks."""
    archived = set(survey.archived or ())
    return [it for it in survey_items(session, survey.id) if it.position not in archived]


#: Memory of the per-process item index cache (ids and labels of recently used surveys).
ITEM_CACHE_BYTES = 64 * 2**20


class _ItemIndexCache:
    """Items per survey as plain values, per process, within a byte budget (least
    recently used evicted first).

    Items are only ever appended and keep their id and position, so an index stays
    valid as far as it goes; its item count is its version. A caller says when a
    cached index is fresh enough for it; otherwise the survey's items are read again,
    and the cache keeps the index with the most items."""

    def __init__(self, max_bytes: int = ITEM_CACHE_BYTES) -> None:
        self.lru = ByteLRU(max_bytes)
        self._lock = threading.Lock()

    def get(self, session: Session, survey_id: str, fresh: Callable[[ItemIndex], bool]) -> ItemIndex:
        cached = self.lru.get(survey_id)
        if cached is not None and fresh(cached):
            return cached
        index = item_index(session, survey_id)
        with self._lock:
            current = self.lru.get(survey_id)
            if current is None or len(index) >= len(current):
                self.lru.put(survey_id, index, index.nbytes)
        return index


_ITEM_INDEXES = _ItemIndexCache()


def known_item_index(session: Session, survey_id: str, ids: Callable[[ItemIndex], bool]) -> ItemIndex:
    """The survey's items, from the process's cache when ``ids(index)`` holds for the
    cached index (e.g. it knows every item a request names), else read again."""
    return _ITEM_INDEXES.get(session, survey_id, ids)


def current_item_index(session: Session, survey_id: str, n: int | None = None) -> ItemIndex:
    """The survey's items now: the cached index when it has as many items as the survey
    (``n``, or one index seek), else read again. O(m) only when items were added."""
    if n is None:
        n = item_count(session, survey_id)
    return _ITEM_INDEXES.get(session, survey_id, lambda index: len(index) >= n)


#: Most suggestions one respondent may make in a survey (the survey sets its own limit up to it).
MAX_PER_RESPONDENT = 20
#: Largest flag threshold a survey may set.
MAX_FLAG_THRESHOLD = 100
#: Suggestions (and flags) are published in batches from this many different respondents
#: by default: an author is then one of five, as likely as any other (docs/how-to/moderate.md,
#: "Who suggested what cannot be told").
BATCH_DEFAULT = 5
#: The smallest and largest batch a survey may set.
BATCH_MIN, BATCH_MAX = 2, 50
#: Suggestions a survey accepts from all its respondents per clock hour, by default and at
#: most (docs/how-to/moderate.md, "Limits on suggestions").
PER_HOUR_DEFAULT, PER_HOUR_MAX = 100, 10_000
#: Suggestions a survey accepts in all (rejected ones do not count), by default; at most
#: MAX_ITEMS.
MAX_TOTAL_DEFAULT = 1_000


def resolve_suggestions(raw: dict | None, kind: str) -> dict | None:
    """The stored form of a survey's ``suggestions`` settings (None: off), checked."""
    if raw is None:
        return None
    enabled = bool(raw.get("enabled", True))
    per = raw.get("per_respondent", 3)
    moderation = raw.get("moderation", "before")
    threshold = raw.get("flag_threshold", 3)
    batch = raw.get("batch", BATCH_DEFAULT)
    per_hour = raw.get("per_hour", PER_HOUR_DEFAULT)
    max_total = raw.get("max_total", MAX_TOTAL_DEFAULT)
    if enabled and kind != "pairwise":
        raise Invalid("suggestions are for pairwise surveys (a ranking survey's items are fixed)")
    if not isinstance(per, int) or not 1 <= per <= MAX_PER_RESPONDENT:
        raise Invalid(f"suggestions.per_respondent must be an integer in [1, {MAX_PER_RESPONDENT}]")
    if moderation not in ("before", "after"):
        raise Invalid("suggestions.moderation must be 'before' or 'after'")
    if not isinstance(threshold, int) or not 1 <= threshold <= MAX_FLAG_THRESHOLD:
        raise Invalid(f"suggestions.flag_threshold must be an integer in [1, {MAX_FLAG_THRESHOLD}]")
    if not isinstance(batch, int) or isinstance(batch, bool) or not BATCH_MIN <= batch <= BATCH_MAX:
        raise Invalid(f"suggestions.batch must be an integer in [{BATCH_MIN}, {BATCH_MAX}]")
    # A batch is published whole, so each limit must leave room for one.
    if not isinstance(per_hour, int) or isinstance(per_hour, bool) or not batch <= per_hour <= PER_HOUR_MAX:
        raise Invalid(f"suggestions.per_hour must be an integer in [batch ({batch}), {PER_HOUR_MAX}]")
    if not isinstance(max_total, int) or isinstance(max_total, bool) or not batch <= max_total <= MAX_ITEMS:
        raise Invalid(f"suggestions.max_total must be an integer in [batch ({batch}), {MAX_ITEMS}]")
    return {
        "enabled": enabled,
        "per_respondent": per,
        "moderation": moderation,
        "flag_threshold": threshold,
        "batch": batch,
        "per_hour": per_hour,
        "max_total": max_total,
    }


_NO_SUGGESTIONS_WITH_GOAL = (
    "a survey with a goal does not take suggestions: its certificate draws each pair's partner from all "
    "the items, so items could not be hidden (admins may still add items)"
)


def _check_results(public_results: bool, results_on_finish: bool) -> None:
    if results_on_finish and not public_results:
        raise Invalid("results_on_finish shows the public results: it needs public_results")


#: "Leave unchanged" for :func:`update_survey`'s ``suggestions`` (None turns them off).
UNSET: dict = {}


def _set_accounting(session: Session, survey: Survey, accounting: str | None, delta: float | None) -> None:
    """Change a central survey's accounting (and δ) inside the caller's write transaction,
    which holds the survey's row lock: a release stores under the same lock, so no release
    is charged in one accounting and the survey's later ones in another. A survey with a
    release keeps its accounting (409 ``accounting_locked``); asking for what it has is
    no change."""
    from ..core.db.models import Release

    if survey.privacy_model != "central":
        raise Invalid(
            "accounting and delta belong to central surveys (a local survey's answers are randomized)"
        )
    wanted = accounting or survey.accounting
    if delta is None and wanted == survey.accounting:
        delta = survey.delta
    new = resolve_accounting(wanted, delta)
    if new == (survey.accounting, survey.delta):
        return
    if session.scalar(select(Release.id).where(Release.survey_id == survey.id).limit(1)) is not None:
        raise Conflict(
            f"this survey has made releases under {survey.accounting} accounting; its accounting and δ are "
            "fixed at its first release (create a new survey to account otherwise)",
            code="accounting_locked",
        )
    survey.accounting, survey.delta = new


def update_survey(
    session: Session,
    survey_id: str,
    status: str | None,
    title: str | None,
    suggestions: dict | None = UNSET,
    public_results: bool | None = None,
    results_on_finish: bool | None = None,
    language: str | None = None,
    embed_origins: list[str] | dict | None = UNSET,
    accounting: str | None = None,
    delta: float | None = None,
) -> Survey:
    """Change a survey's status, title, suggestions settings (None: off), results
    settings, default language or (central surveys, before their first release) privacy
    accounting and δ; arguments left at their defaults are unchanged."""
    if language is not None:
        check_language(language)
    # embed_origins: the sites that may frame its pages (None or []: none; UNSET: unchanged).
    new_origins = embed_origins is not UNSET
    origins = clean_origins(embed_origins) if new_origins else None  # type: ignore[arg-type]
    begin_write(session)
    survey = get_survey(session, survey_id, lock=True)
    if accounting is not None or delta is not None:
        _set_accounting(session, survey, accounting, delta)
    if new_origins:
        survey.embed_origins = origins
    if suggestions is not UNSET:
        survey.suggestions = resolve_suggestions(suggestions, survey.kind)
        if survey.suggestions and survey.suggestions["enabled"] and survey.goal:
            raise Invalid(_NO_SUGGESTIONS_WITH_GOAL)
    public = survey.public_results if public_results is None else public_results
    on_finish = survey.results_on_finish if results_on_finish is None else results_on_finish
    _check_results(public, on_finish)
    survey.public_results, survey.results_on_finish = public, on_finish
    if status is not None:
        if status not in ("open", "closed"):
            raise Invalid("status must be 'open' or 'closed'")
        survey.status = status
    if survey.status == "closed" or not (survey.suggestions and survey.suggestions.get("enabled")):
        # Held suggestions and flags are never published now: discarded, not kept unread.
        session.execute(delete(HeldContribution).where(HeldContribution.survey_id == survey.id))
    if title is not None:
        if not title.strip():
            raise Invalid("title must not be empty")
        survey.title = title.strip()
    if language is not None:
        survey.language = language
    survey.updated_at = utcnow()
    session.commit()
    return survey


def add_items(
    session: Session,
    survey_id: str,
    labels: list[str],
    translations: Mapping[str, list[str | None]] | None = None,
) -> list[Item]:
    """Append items to an open survey; positions continue after the last one.
    ``translations``: ``{code: [label or None, …]}`` aligned with ``labels``."""
    cleaned = _clean_labels(labels)
    if not cleaned:
        raise Invalid("give at least one item")
    item_translations(translations, len(cleaned))  # checked before any write
    begin_write(session)
    survey = get_survey(session, survey_id, lock=True)  # serializes position numbering
    if survey.status != "open":
        raise Conflict("items can only be added to an open survey")
    _check_pairwise_room(session, survey, len(cleaned))
    per_item = (
        item_translations(translations, len(cleaned), translations_taken(session, survey_id))
        if translations
        else None
    )
    new = append_items(session, survey, cleaned, source="added", translations=per_item)
    session.commit()
    return new


def _check_pairwise_room(session: Session, survey: Survey, adding: int) -> None:
    """422 when ``adding`` items would take a pairwise-certificate goal survey beyond the
    certificate's :data:`~app.stats.pairwise_goal.MAX_ITEMS` (its state is one sequence
    per pair); the goal, fixed at creation, does not change certificate."""
    if not survey.goal or survey.goal.get("certificate") != "pairwise":
        return
    total = item_count(session, survey.id) + adding
    if total > PAIRWISE_GOAL_MAX_ITEMS:
        raise Invalid(
            "this survey's goal uses the pairwise certificate, which takes at most "
            f"{PAIRWISE_GOAL_MAX_ITEMS} items: adding {adding} would make {total}"
        )


def append_items(
    session: Session,
    survey: Survey,
    cleaned: list[str],
    source: str,
    approved_at: datetime | None = None,
    created_at: datetime | None = None,
    touch: bool = True,
    translations: list[dict[str, str] | None] | None = None,
) -> list[Item]:
    """Append items with normalized, distinct ``cleaned`` labels to ``survey``, which the
    caller has locked (:func:`get_survey` with ``lock``) inside its write transaction;
    the caller commits. ``source``: "added" (an admin) or "suggested" (a participant).
    ``created_at`` (default now) and ``touch`` (bump the survey's ``updated_at``) let a
    respondent's suggestion leave no exact time behind. The labels come from the process's
    item index, so no item rows are read unless items were added meanwhile. ``translations``:
    each new item's {code: label}, aligned with ``cleaned`` (None: none)."""
    survey_id = survey.id
    n = item_count(session, survey_id)
    index = current_item_index(session, survey_id, n)  # plain cached values: no rows read
    taken = {normalize_label(label) for label in index.labels}  # rows stored before labels were NFC
    clash = sorted(set(cleaned) & taken)
    if clash:
        raise Invalid(f"item labels must be unique; already in the survey: {clash}")
    if active_item_count(session, survey, n) + len(cleaned) > MAX_ITEMS:
        raise Invalid(f"a survey holds at most {MAX_ITEMS} items (archived items not counted)")
    if n + len(cleaned) > MAX_ITEMS_STORED:
        raise Invalid(f"a survey stores at most {MAX_ITEMS_STORED} items, archived ones included")
    if survey.kind == "ranking":
        if n + len(cleaned) > MAX_RANKING_ITEMS:
            raise Invalid(f"a ranking survey holds at most {MAX_RANKING_ITEMS} items")
        if session.scalar(select(Ranking.id).where(Ranking.survey_id == survey_id).limit(1)) is not None:
            raise Conflict(
                "this ranking survey already has rankings of its current items; items cannot be added "
                "(create a new survey)"
            )
    new = [
        Item(
            id=new_id("itm"),
            survey_id=survey_id,
            position=n + k,
            label=label,
            source=source,
            approved_at=approved_at,
            created_at=created_at or utcnow(),
            translations=(translations[k] if translations else None) or null(),
        )
        for k, label in enumerate(cleaned)
    ]
    session.add_all(new)
    if touch:
        survey.updated_at = utcnow()
    session.flush()
    check_shown_labels(session, survey_id)  # a new label may be what another item shows in a language
    return new


def local_epsilons(survey: Survey) -> tuple[float, float, float]:
    """``(epsilon_min, epsilon_default, epsilon_max)`` of a local-model survey, which always
    has them (``ck_surveys_privacy``); the caller has checked the privacy model."""
    lo, default, hi = survey.epsilon_min, survey.epsilon_default, survey.epsilon_max
    if lo is None or default is None or hi is None:
        raise RuntimeError(f"survey {survey.id} has no epsilon bounds: not a local-model survey")
    return lo, default, hi


def central_limits(survey: Survey) -> tuple[float, int]:
    """``(total_budget, max_comparisons)`` of a central-model survey, which always has them
    (``ck_surveys_privacy``); the caller has checked the privacy model."""
    total, cap = survey.total_budget, survey.max_comparisons
    if total is None or cap is None:
        raise RuntimeError(f"survey {survey.id} has no total budget: not a central-model survey")
    return total, cap


def require_pairwise(survey: Survey) -> None:
    """Refuse pairwise-only endpoints for ranking surveys (409)."""
    if survey.kind != "pairwise":
        raise Conflict(
            f"this survey collects rankings: see GET /v1/surveys/{survey.id}/ranking"
            f"?method=borda|lehmer|kemeny|btl and GET /v1/surveys/{survey.id}/rankings.csv"
        )


def require_local(survey: Survey) -> None:
    """Refuse direct access to a central-model survey's answers or statistics (409)."""
    if survey.privacy_model == "central":
        raise Conflict(
            "this survey uses the central privacy model: its answers are true answers, so results leave the "
            f"service only as differentially private releases (POST /v1/surveys/{survey.id}/releases)"
        )
