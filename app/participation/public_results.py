"""Results for participants: what the public page ``/r/{id}`` shows, when a survey opts in.

Local-model surveys publish the ranking with its 95% score intervals, ranking surveys
the Borda consensus of their synthetic rankings: both are computed from randomized
answers only, post-processing of differentially private data, so publishing them to
anyone costs no privacy. Central-model surveys hold true answers, so their page shows
only the latest differentially private release (nothing before the first one):
publishing it again spends nothing. A survey's results are computed at most once per
:data:`PUBLIC_SECONDS` per process on a turn of work of their own (:class:`PublicSnapshots`);
:func:`public_results` says which items and notes are shown.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from functools import cache

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..analysis.service import ranking
from ..core.db.models import Item, Release, Survey, utcnow
from ..core.deadline import Deadline
from ..core.errors import Conflict, NotFound
from ..core.shipped import shipped
from ..rankings.service import consensus
from .results import NotePart, PublicResults, ReleaseRef, ResultItem

__all__ = ["PUBLIC_SECONDS", "PublicSnapshots", "public_results"]

#: How long a survey's public results are served from one computation (seconds).
PUBLIC_SECONDS = 60.0
#: Surveys whose snapshot a process keeps (least recently computed dropped first).
PUBLIC_SURVEYS = 64


#: The results page's English catalog: the note's words (results.note.<code>).
ENGLISH_CATALOG = shipped("static") / "i18n" / "results.en.json"


@cache
def _english() -> dict[str, str]:
    return json.loads(ENGLISH_CATALOG.read_text(encoding="utf-8"))


def _fill(value: float | int | str) -> str:
    if isinstance(value, str):
        return value
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _filler(params: dict[str, float | int | str]) -> Callable[[re.Match[str]], str]:
    return lambda m: _fill(params[m.group(1)]) if m.group(1) in params else m.group(0)


def note_text(parts: list[NotePart]) -> str:
    """The note in English: each part's catalog message with its placeholders filled."""
    words = []
    for part in parts:
        key = f"results.note.{part.code}"
        if part.code == "withheld":
            key += ".one" if part.params.get("n") == 1 else ".other"
        words.append(_PLACEHOLDER.sub(_filler(part.params), _english()[key]))
    return " ".join(words)


def _noted(parts: list[NotePart], withheld: int) -> dict:
    if withheld:
        parts = [*parts, NotePart(code="withheld", params={"n": withheld})]
    return {"note": note_text(parts), "notes": parts}


class PublicSnapshots:
    """The public results per survey, recomputed at most once per ``seconds``.

    Anyone may call it, so its cost is bounded apart from the analysts' work: later calls
    get the snapshot (``as_of`` saying when it was made), and a call while it is being
    recomputed gets the previous one.

    ``fit_cache`` and ``consensus_cache`` share the process's analysis memory but hold
    their own turns of work (one), so that anonymous callers can never take the turns
    the analysts' requests need. A snapshot is keyed by the items withheld too: hiding an
    item takes it off the page at once. A central survey's page is its latest release,
    read each time (a new release shows at once)."""

    def __init__(self, fit_cache, consensus_cache, seconds: float = PUBLIC_SECONDS) -> None:
        self.fit_cache, self.consensus_cache, self.seconds = fit_cache, consensus_cache, seconds
        self._lock = threading.Lock()
        self._held: OrderedDict[tuple, tuple[float, PublicResults]] = OrderedDict()
        self._computing: set[tuple] = set()

    def get(self, session: Session, survey: Survey, deadline: Deadline | None = None) -> PublicResults:
        if not survey.public_results:
            raise NotFound(f"survey {survey.id!r} does not publish its results")
        if survey.privacy_model == "central":  # one row read: its latest release, at once
            return public_results(session, survey, self.fit_cache, self.consensus_cache, deadline)
        key = (survey.id, tuple(survey.withheld or ()))
        with self._lock:
            found = self._held.get(key)
            busy = key in self._computing
            if found is not None and (busy or time.monotonic() - found[0] < self.seconds):
                return found[1]
            self._computing.add(key)
        try:
            result = public_results(session, survey, self.fit_cache, self.consensus_cache, deadline)
            with self._lock:
                self._held[key] = (time.monotonic(), result)
                self._held.move_to_end(key)
                while len(self._held) > PUBLIC_SURVEYS:
                    self._held.popitem(last=False)
            return result
        finally:
            with self._lock:
                self._computing.discard(key)


def _items(session: Session, survey_id: str) -> dict[str, Item]:
    return {i.id: i for i in session.scalars(select(Item).where(Item.survey_id == survey_id))}


def public_results(
    session: Session, survey: Survey, fit_cache, consensus_cache, deadline: Deadline | None = None
) -> PublicResults:
    """The public results of a survey that publishes them (else NotFound, as if it had no page).

    Items withheld by moderators (hidden, or back in review) are left out, and ranks
    count only the items shown; archived items are not part of the ranking at all (nor
    of the count of items withheld). The note that says how to read them is for lay
    readers: sentences named by code (``notes``), whose words are the results catalogs'
    ``results.note.*`` messages (static/i18n), so that the page says them in its
    reader's language; ``note`` is the English text, from the English catalog. It never
    names API parameters. The intervals are each item's own score interval, which does
    not depend on which other items are shown; rank intervals, which do, are not
    published."""
    if not survey.public_results:
        raise NotFound(f"survey {survey.id!r} does not publish its results")
    items = {k: v for k, v in _items(session, survey.id).items() if v.status != "archived"}
    shown = {k: v for k, v in items.items() if v.status == "live"}
    withheld = len(items) - len(shown)
    base = {
        "survey_id": survey.id,
        "title": survey.title,
        "kind": survey.kind,
        "privacy_model": survey.privacy_model,
        "as_of": utcnow(),
        "withheld": withheld,
    }
    if survey.privacy_model == "central":
        return _central(session, survey, shown, base, withheld)
    if survey.kind == "ranking":
        try:
            agreed = consensus(session, survey, consensus_cache, "borda", None, None, 0.95, deadline=deadline)
        except Conflict:  # no rankings yet
            return PublicResults(
                **base,
                respondents=0,
                comparisons=0,
                items=[],
                **_noted([NotePart(code="ranking_none")], withheld),
            )
        ordered = [c for c in agreed.items if c.item_id in shown]
        intervals = bool(ordered) and all(c.ci is not None for c in ordered)
        return PublicResults(
            **base,
            respondents=int(agreed.diagnostics.get("rankings", 0)),
            comparisons=int(agreed.diagnostics.get("rankings", 0)),
            items=[
                ResultItem(
                    rank=k + 1,
                    item_id=c.item_id,
                    label=c.label,
                    score=c.score,
                    ci=c.ci,
                    mean_position=c.mean_position,
                    added_at=shown[c.item_id].created_at,
                    source=shown[c.item_id].source,
                )
                for k, c in enumerate(ordered)
            ],
            **_noted(
                [
                    NotePart(code="ranking"),
                    NotePart(code="ranking_intervals" if intervals else "no_intervals"),
                ],
                withheld,
            ),
        )
    out = ranking(
        session, survey, fit_cache, "debiased_mle", None, None, 0.95, "sandwich", "cluster", deadline=deadline
    )
    ranked = [r for r in out.items if r.item_id in shown]
    # Without intervals, a plain "not enough data yet": the analysts' reason (which may name
    # API options) stays on the analysts' ranking.
    intervals = out.uncertainty.available
    parts = [
        NotePart(code="pairwise"),
        NotePart(code="pairwise_intervals" if intervals else "no_intervals"),
        NotePart(code="randomized"),
    ]
    if any(shown[r.item_id].source != "seed" for r in ranked):
        parts.append(NotePart(code="added_later"))
    return PublicResults(
        **base,
        respondents=out.diagnostics.respondents,
        comparisons=out.diagnostics.comparisons,
        items=[
            ResultItem(
                rank=k + 1,
                item_id=r.item_id,
                label=r.label,
                score=r.score,
                ci=r.ci,
                comparisons=r.comparisons,
                added_at=r.added_at,
                source=shown[r.item_id].source,
            )
            for k, r in enumerate(ranked)
        ],
        **_noted(parts, withheld),
    )


def _delta_text(release: Release, survey: Survey) -> str:
    """ ", δ = …" for a zCDP (discrete Gaussian) release, whose ε holds at the survey's δ."""
    return "" if release.rho is None or survey.delta is None else f", δ = {survey.delta:g}"


def _central(session: Session, survey: Survey, shown: dict[str, Item], base: dict, withheld: int):
    release = session.scalars(
        select(Release).where(Release.survey_id == survey.id).order_by(Release.created_at.desc()).limit(1)
    ).first()
    if release is None:
        return PublicResults(**base, items=[], **_noted([NotePart(code="central_none")], withheld))
    entries = [e for e in release.result.get("items", []) if e["item_id"] in shown]
    entries.sort(key=lambda e: e["rank"])
    created: datetime = release.created_at
    return PublicResults(
        **base,
        items=[
            ResultItem(
                rank=k + 1,
                item_id=e["item_id"],
                label=e["label"],
                score=e.get("score"),
                added_at=shown[e["item_id"]].created_at,
                source=shown[e["item_id"]].source,
            )
            for k, e in enumerate(entries)
        ],
        release=ReleaseRef(id=release.id, created_at=created, epsilon=release.epsilon, method=release.method),
        **_noted(
            [
                NotePart(
                    code="central_release",
                    params={
                        "method": release.method.replace("_", " "),
                        "eps": release.epsilon,
                        "delta": _delta_text(release, survey),
                    },
                )
            ],
            withheld,
        ),
    )
