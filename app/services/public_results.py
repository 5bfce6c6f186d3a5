"""Results for participants: what the public page ``/r/{id}`` shows, when a survey opts in.

Local-model surveys publish the ranking with its 95% score intervals. That is safe to
publish to anyone: it is computed from randomized answers only, so it is
post-processing of data that is already differentially private, and releasing it costs
no privacy. Ranking surveys publish the Borda consensus of their synthetic rankings, for
the same reason. Central-model surveys hold true answers, so their page shows only the
latest differentially private release (nothing before the first one): publishing it
again spends nothing.

Anyone may call it, so its cost is bounded apart from the analysts' work
(:class:`PublicSnapshots`): a survey's results are computed at most once per
:data:`PUBLIC_SECONDS` per process (later calls get that snapshot, ``as_of`` saying
when it was made; a call while it is being recomputed gets the previous one), on one
turn of work of their own — never one of the turns the analysts' requests use.

Items withheld by moderators (hidden, or back in review) are left out, and ranks count
only the items shown; archived items are not part of the ranking at all (nor of the count
of items withheld). The intervals are each item's own score interval, which does not
depend on which other items are shown; rank intervals, which do, are not published.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import Item, Release, Survey, utcnow
from .analysis import ranking
from .deadline import Deadline
from .errors import Conflict, NotFound
from .ranking_surveys import consensus
from .results.participation import PublicResults, ReleaseRef, ResultItem

__all__ = ["PUBLIC_SECONDS", "PublicSnapshots", "public_results"]

#: How long a survey's public results are served from one computation (seconds).
PUBLIC_SECONDS = 60.0
#: Surveys whose snapshot a process keeps (least recently computed dropped first).
PUBLIC_SURVEYS = 64


class PublicSnapshots:
    """The public results per survey, recomputed at most once per ``seconds``.

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
    """The public results of a survey that publishes them (else NotFound, as if it had no page)."""
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
    hidden_note = (
        f" {withheld} item{'s' if withheld != 1 else ''} hidden by the moderators or waiting for their "
        f"review {'are' if withheld != 1 else 'is'} not shown; ranks count the items shown."
        if withheld
        else ""
    )
    if survey.privacy_model == "central":
        return _central(session, survey, shown, base, hidden_note)
    if survey.kind == "ranking":
        try:
            agreed = consensus(session, survey, consensus_cache, "borda", None, None, 0.95, deadline=deadline)
        except Conflict:  # no rankings yet
            return PublicResults(**base, respondents=0, comparisons=0, items=[], note="No rankings yet.")
        ordered = [c for c in agreed.items if c.item_id in shown]
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
            note="Items in the order of their mean position in everyone's rankings (each ranking was "
            "randomized on the respondent's device or on arrival, so no one's answer can be read from it); "
            "the interval is the Borda score's 95% interval." + hidden_note,
        )
    out = ranking(
        session, survey, fit_cache, "debiased_mle", None, None, 0.95, "sandwich", "cluster", deadline=deadline
    )
    ranked = [r for r in out.items if r.item_id in shown]
    note = (
        "Each score is an item's estimated appeal (Bradley–Terry model): a gap of 1 between two items means "
        "about 2.7 : 1 odds that a respondent prefers the higher one. The bar is the 95% interval; items "
        "whose intervals overlap a lot may be in either order. Every answer was randomized before it was "
        "stored, so these results say nothing certain about any one person."
    )
    if not out.uncertainty.available:
        note += f" No intervals yet: {out.uncertainty.message or 'there are not enough answers'}"
    young = [r for r in ranked if shown[r.item_id].source != "seed"]
    if young:
        note += " Items added during the survey have fewer answers, so wider intervals."
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
        note=note + hidden_note,
    )


def _delta_text(release: Release, survey: Survey) -> str:
    """ ", δ = …" for a zCDP (discrete Gaussian) release, whose ε holds at the survey's δ."""
    return "" if release.rho is None or survey.delta is None else f", δ = {survey.delta:g}"


def _central(session: Session, survey: Survey, shown: dict[str, Item], base: dict, hidden_note: str):
    release = session.scalars(
        select(Release).where(Release.survey_id == survey.id).order_by(Release.created_at.desc()).limit(1)
    ).first()
    if release is None:
        return PublicResults(
            **base,
            items=[],
            note="Nothing is published yet: this survey's answers leave the service only as differentially "
            "private releases, and there has been none.",
        )
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
        note=f"The latest differentially private release ({release.method.replace('_', ' ')}, ε = "
        f"{release.epsilon:g}{_delta_text(release, survey)}): noise was added so that no one's answers can "
        "be inferred. Later answers appear with the next release." + hidden_note,
    )
