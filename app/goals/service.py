"""Goals, adaptive assignment and the certified stop of a local survey (docs/uncertainty.md §9).

A local pairwise survey may have a goal: its top-K set, or its whole ranking, certified
at a level (``{"top_k": 3, "level": 0.95}``), by the Borda certificate
(:mod:`app.stats.adaptive`) or the pairwise one (:mod:`app.stats.pairwise_goal`,
:class:`PairGoalState`), chosen at creation (:func:`resolve_goal`; each certifies its own
estimand, :func:`estimand_text`). Only answers with a server-drawn ticket count
(:func:`make_ticket`); resolved items still appear as opponents, so the comparison graph
stays connected. docs/uncertainty.md §9, "In the service", describes tickets, serving,
the state kept in ``survey_stats.goal_state`` and why choosing pairs costs no privacy.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
import zlib
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..core.db.models import Survey, SurveyStats, utcnow
from ..core.errors import Invalid
from ..stats.adaptive import RHO_ANSWERS, BordaSequences, GoalStatus, goal_status
from ..stats.pair_sequences import MAX_ITEMS as PAIRWISE_MAX_ITEMS
from ..stats.pair_sequences import PairSequences
from ..stats.pairwise_goal import PairwiseGoalStatus, pairwise_goal_status, restored_status

__all__ = [
    "CERTIFICATES",
    "CERTIFICATE_CHOICE",
    "ESTIMANDS",
    "MAX_LEVEL",
    "MIN_LEVEL",
    "PAIRWISE_MAX_ITEMS",
    "Estimand",
    "GoalSpec",
    "GoalState",
    "PairGoalState",
    "estimand_text",
    "fold_goal",
    "goal_met",
    "goal_report",
    "load_state",
    "make_ticket",
    "read_ticket",
    "resolve_goal",
]

#: The levels a goal may ask for. Below ½ a "certified" set is more likely wrong than
#: right; above 0.9999 the answers needed grow without practical use.
MIN_LEVEL = 0.5
MAX_LEVEL = 0.9999

#: Bits of a ticket's flags: the answer counts for the pair's first (lower-position)
#: item, its second, or both (Borda certificate); for the pair (pairwise certificate).
COUNT_I, COUNT_J, COUNT_PAIR = 1, 2, 4

CERTIFICATES = ("borda", "pairwise")

#: What a goal certifies: one of :data:`ESTIMANDS`' values.
Estimand = Literal["borda_top_k", "borda_ranking", "majority_top_k", "majority_ranking"]

#: What each certificate certifies, for a top-K goal and for the whole ranking
#: (docs/uncertainty.md §9).
ESTIMANDS: dict[tuple[str, bool], Estimand] = {
    ("borda", False): "borda_top_k",
    ("borda", True): "borda_ranking",
    ("pairwise", False): "majority_top_k",
    ("pairwise", True): "majority_ranking",
}

#: The 422 for a certificate that is not one of :data:`CERTIFICATES`.
CERTIFICATE_CHOICE = (
    "certificate must be 'borda' or 'pairwise', which certify different things: 'borda' the "
    "Borda top-K or ranking (the items with the highest chance of beating an item drawn at random), "
    "'pairwise' the majority top-K or ranking (every member beats every other item by a majority; it "
    "may not exist when preferences cycle); they agree under BTL and can differ otherwise, so "
    "choose the one that answers your question"
)


@dataclass(frozen=True)
class GoalSpec:
    """A survey's goal: the top ``top_k`` set (None: the whole ranking) at ``level``,
    certified by ``certificate`` (``borda`` or ``pairwise``)."""

    top_k: int | None
    level: float
    close_when_met: bool = False
    certificate: str = "borda"

    @classmethod
    def of(cls, survey: Survey) -> GoalSpec | None:
        return cls.from_json(survey.goal)

    @classmethod
    def from_json(cls, g: dict | None) -> GoalSpec | None:
        if not g:
            return None
        # Goals stored before the pairwise certificate existed have no "certificate": Borda.
        return cls(
            g.get("top_k"),
            float(g["level"]),
            bool(g.get("close_when_met", False)),
            str(g.get("certificate", "borda")),
        )

    @property
    def estimand(self) -> str:
        """What the goal certifies: ``borda_top_k``, ``borda_ranking``,
        ``majority_top_k`` or ``majority_ranking``."""
        return ESTIMANDS[self.certificate, self.top_k is None]

    def as_json(self) -> dict:
        return {
            "top_k": self.top_k,
            "level": self.level,
            "close_when_met": self.close_when_met,
            "certificate": self.certificate,
        }


def estimand_text(goal: GoalSpec) -> str:
    """The goal's estimand in a sentence, for its status."""
    level, k = f"{100 * goal.level:g}%", goal.top_k
    if goal.certificate == "pairwise":
        if k is None:
            return (
                f"The majority ranking, certified at {level}: the order in which every item is "
                "preferred to every item after it by a majority of the population. When "
                "preferences cycle there is none, and the goal is never met."
            )
        who = "an item" if k == 1 else f"{k} items each"
        return (
            f"The majority top {k}, certified at {level}: {who} preferred by a majority of the "
            "population to each other item. When preferences cycle across that boundary there is "
            "no such set, and the goal is never met."
        )
    if k is None:
        return (
            f"The Borda ranking, certified at {level}: the items in order of their chance of being "
            "preferred to an item drawn at random from the others."
        )
    who = "the item" if k == 1 else f"the {k} items"
    return (
        f"The Borda top {k}, certified at {level}: {who} with the highest chance of being "
        "preferred to an item drawn at random from the others."
    )


def resolve_goal(
    assignment: str,
    top_k: int | None,
    full_ranking: bool,
    level: float,
    close_when_met: bool,
    has_goal: bool,
    kind: str,
    model: str,
    n_items: int,
    certificate: str = "borda",
) -> GoalSpec | None:
    """Check a new survey's assignment and goal; the goal (None without one), with the
    certificate the admin chose (:data:`CERTIFICATES`: each certifies its own estimand)."""
    if assignment not in ("balanced", "adaptive"):
        raise Invalid("assignment must be 'balanced' or 'adaptive'")
    if model == "central" and (assignment != "balanced" or has_goal):
        raise Invalid(
            "central-model surveys serve uniformly random pairs (which pairs were answered is protected "
            "there): adaptive assignment and goals are for local surveys"
        )
    if kind != "pairwise" and (assignment != "balanced" or has_goal):
        raise Invalid("adaptive assignment and goals are for pairwise surveys")
    if not has_goal:
        if assignment == "adaptive":
            raise Invalid('adaptive assignment steers towards a goal: give one, e.g. {"top_k": 3}')
        return None
    if (top_k is None) == (not full_ranking):
        raise Invalid('a goal is either {"top_k": K} or {"full_ranking": true}, not both or neither')
    if top_k is not None and not 1 <= top_k < n_items:
        raise Invalid(f"goal.top_k must be between 1 and the number of items − 1 ({n_items - 1})")
    if not MIN_LEVEL <= level <= MAX_LEVEL:
        raise Invalid(f"goal.level must be in [{MIN_LEVEL:g}, {MAX_LEVEL:g}]")
    if certificate not in CERTIFICATES:
        raise Invalid(f"goal.{CERTIFICATE_CHOICE}")
    if certificate == "pairwise":
        if assignment != "adaptive":
            raise Invalid(
                "the pairwise certificate serves the pairs across the estimated boundary: it needs "
                "assignment 'adaptive' (balanced assignment certifies with 'borda')"
            )
        if n_items > PAIRWISE_MAX_ITEMS:
            raise Invalid(
                f"the pairwise certificate takes at most {PAIRWISE_MAX_ITEMS} items (its state is one "
                "sequence per pair): use 'borda'"
            )
    return GoalSpec(top_k, float(level), bool(close_when_met), certificate)


def new_ticket_key() -> str:
    return secrets.token_hex(32)


# -- tickets ------------------------------------------------------------------------


def _mac(key: str, survey_id: str, respondent_id: str, i: int, j: int, m: int, flags: int) -> str:
    msg = f"{survey_id}:{respondent_id}:{i}:{j}:{m}:{flags}".encode()
    digest = hmac.new(bytes.fromhex(key), msg, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def make_ticket(key: str, survey_id: str, respondent_id: str, i: int, j: int, m: int, flags: int) -> str:
    """The ticket of the pair (i < j, positions) served to a respondent with m items.

    An HMAC (the survey's own key, never returned) of the survey, the respondent, the
    pair, the number of items and ``flags``: which of the pair's items the answer is to
    count for (:data:`COUNT_I`, :data:`COUNT_J`), or the pair itself (:data:`COUNT_PAIR`,
    pairwise certificate). The decision is made when the pair is drawn — before the
    answer exists, as the martingale argument requires. A served pair counts for an item
    when the item is still in doubt (*active*) and the respondent has not answered any
    pair with that item yet: then nothing about the respondent's earlier pairs restricts
    the opponent, which is uniform over the other m − 1 items, and each item's sequence
    holds at most one answer per respondent (one answer per person per item keeps an
    item's samples independent across people). The check is made again when the answer
    is stored, under the respondent's row lock: a flag for an item the respondent
    answered about in the meantime is dropped, as is a flag that two answers of one
    request both carry. An answer without a valid ticket (imports, pairs a client chose
    itself) is stored and used by every analysis but not counted by the certificate; a
    ticket that does not match its pair is refused (422).
    """
    return f"{m}.{flags}.{_mac(key, survey_id, respondent_id, i, j, m, flags)}"


def read_ticket(
    key: str | None, survey_id: str, respondent_id: str, i: int, j: int, ticket: str
) -> tuple[int, int] | None:
    """(m, flags) of a valid ticket for the pair; None when it does not vouch for it."""
    if key is None:
        return None
    parts = ticket.split(".")
    if len(parts) != 3 or not parts[0].isdigit() or parts[1] not in ("1", "2", "3", "4"):
        return None
    m, flags = int(parts[0]), int(parts[1])
    if not hmac.compare_digest(parts[2], _mac(key, survey_id, respondent_id, i, j, m, flags)):
        return None
    return m, flags


# -- state ------------------------------------------------------------------------

_STATE = struct.Struct("<4sIQQ?")


@dataclass
class _SequenceState:
    """What both certificates' states share: the sequences' running sums and the
    intersected bounds, at one data version, packed as a header (magic, m, answers,
    counted, met) and five compressed float arrays (the sums, the counts, the bounds)."""

    _MAGIC: ClassVar[bytes]

    seqs: Any
    status: Any
    #: Answers folded since the state (re)started, and those the certificate counted.
    answers: int
    counted: int

    @property
    def n_items(self) -> int:
        return int(self.seqs.n_items)

    @staticmethod
    def _sequences(m: int) -> Any:
        raise NotImplementedError

    @staticmethod
    def _status(seqs: Any, goal: GoalSpec, bounds: tuple[NDArray, NDArray] | None) -> Any:
        """The status of ``seqs`` for the goal, its bounds intersected with ``bounds``."""
        raise NotImplementedError

    def _bounds(self) -> tuple[NDArray, NDArray]:
        raise NotImplementedError

    def _check(self, goal: GoalSpec) -> Any:
        """The goal checked again, the bounds intersected with the current status's."""
        raise NotImplementedError

    def _derived(self) -> bytes:
        """What the status derives at a cost, stored after the arrays (none by default)."""
        return b""

    @classmethod
    def _accepts(cls, magic: bytes) -> bool:
        """Whether a stored state with this magic is one of this class's formats."""
        return magic == cls._MAGIC

    @classmethod
    def _restore(cls, seqs: Any, goal: GoalSpec, bounds: tuple[NDArray, NDArray], derived: bytes) -> Any:
        """The stored status: from the bounds (and what :meth:`_derived` stored)."""
        if derived:
            raise ValueError("corrupt goal state")
        return cls._status(seqs, goal, bounds)

    def _add(self, i: NDArray, j: NDArray, z: NDArray, eps: NDArray, flags: NDArray, live: NDArray) -> int:
        """Add the answers the tickets count (``live``: issued for this m); how many counted."""
        raise NotImplementedError

    @classmethod
    def start(cls, m: int, goal: GoalSpec) -> Self:
        seqs = cls._sequences(m)
        return cls(seqs, cls._status(seqs, goal, None), 0, 0)

    def fold(
        self, goal: GoalSpec, i: NDArray, j: NDArray, z: NDArray, eps: NDArray, flags: NDArray, live: NDArray
    ) -> None:
        """Add a fold's answers and check the goal again (the bounds intersected with the last)."""
        self.counted += self._add(i, j, z, eps, flags, live)
        self.answers += int(i.size)
        self.status = self._check(goal)

    def pack(self) -> bytes:
        s = self.seqs
        body = b"".join(
            np.asarray(a, dtype="<f8").tobytes() for a in (s.weighted, s.weight, s.answers, *self._bounds())
        )
        body += self._derived()
        head = _STATE.pack(self._MAGIC, s.n_items, self.answers, self.counted, self.status.met)
        return head + zlib.compress(body, 1)

    @classmethod
    def unpack(cls, payload: bytes, goal: GoalSpec) -> Self:
        # The header's "met" (for goal_met) is what the stored bounds give again below.
        magic, m, answers, counted, _met = _STATE.unpack_from(payload)
        if not cls._accepts(magic):
            raise ValueError("corrupt goal state")
        body = zlib.decompress(payload[_STATE.size :])
        seqs = cls._sequences(m)
        size = seqs.weight.size
        if len(body) < 40 * size:
            raise ValueError("corrupt goal state")
        arr = np.frombuffer(body[: 40 * size], "<f8").reshape(5, size)
        seqs.weighted, seqs.weight = arr[0].copy(), arr[1].copy()
        seqs.answers = arr[2].astype(np.int64)
        status = cls._restore(seqs, goal, (arr[3].copy(), arr[4].copy()), body[40 * size :])
        return cls(seqs, status, answers, counted)


@dataclass
class GoalState(_SequenceState):
    """A Borda-certificate goal's state: one sequence per item (:mod:`app.stats.adaptive`)."""

    _MAGIC = b"PRG1"

    seqs: BordaSequences
    status: GoalStatus

    @staticmethod
    def _sequences(m: int) -> BordaSequences:
        return BordaSequences(m)

    @staticmethod
    def _status(seqs: BordaSequences, goal: GoalSpec, bounds: tuple[NDArray, NDArray] | None) -> GoalStatus:
        previous = None
        if bounds is not None:  # a status holding only the bounds: goal_status's ``previous``
            e = np.zeros(0, dtype=np.int64)
            lower, upper = bounds
            previous = GoalStatus(
                False,
                e,
                np.ones(lower.size, bool),
                lower,
                lower,
                upper,
                e,
                goal.level,
                RHO_ANSWERS,
                goal.top_k,
                e,
            )
        return goal_status(seqs, goal.level, goal.top_k, previous=previous)

    def _bounds(self) -> tuple[NDArray, NDArray]:
        return self.status.lower, self.status.upper

    def _check(self, goal: GoalSpec) -> GoalStatus:
        return goal_status(self.seqs, goal.level, goal.top_k, previous=self.status)

    def _add(self, i: NDArray, j: NDArray, z: NDArray, eps: NDArray, flags: NDArray, live: NDArray) -> int:
        ci = live & ((flags & COUNT_I) != 0)
        cj = live & ((flags & COUNT_J) != 0)
        if ci.any() or cj.any():
            self.seqs.add(i, j, z, eps, ci, cj)
        return int(ci.sum() + cj.sum())


@dataclass
class PairGoalState(_SequenceState):
    """A pairwise-certificate goal's state (:mod:`app.stats.pairwise_goal`, without
    transitive closure): the pairs' sums, their intersected bounds and the BTL fit that
    orders the drawer's guess (an answer counts once, for its pair). A state with magic
    ``PRP1`` also holds a transitively closed relation after the fit; it is read by its
    bounds and fit alone, and the relation rebuilt from the bounds without closure.

    One confidence sequence per *pair*: an answer counts for its pair whichever pair the
    data chose, so the pairs can follow the estimated boundary. A respondent's counted
    pairs are on disjoint items it had not answered about (checked again when the answer
    is stored, as for :func:`make_ticket`'s flags), pairs are drawn by
    :func:`~app.stats.pairwise_goal.draw_pairwise_respondent` from the cached status, and
    the relation is never closed transitively: a set is certified only when each member
    certainly beats each non-member directly, valid for any population. Adaptive
    assignment only, at most :data:`~app.stats.pair_sequences.MAX_ITEMS` items."""

    _MAGIC = b"PRP2"
    #: The magic of states holding the fit and the transitively closed relation.
    _CLOSED_MAGIC = b"PRP1"

    seqs: PairSequences
    status: PairwiseGoalStatus

    @staticmethod
    def _sequences(m: int) -> PairSequences:
        return PairSequences(m)

    @staticmethod
    def _status(
        seqs: PairSequences, goal: GoalSpec, bounds: tuple[NDArray, NDArray] | None
    ) -> PairwiseGoalStatus:
        previous = None
        if bounds is not None:  # a status holding only the bounds: pairwise_goal_status's ``previous``
            e, f, m = np.zeros(0, dtype=np.int64), np.zeros(0), seqs.n_items
            previous = PairwiseGoalStatus(
                False, e, np.ones(m, bool), f, f, f, e, goal.level, RHO_ANSWERS, goal.top_k, e,
                pair_lower=bounds[0], pair_upper=bounds[1],
            )  # fmt: skip
        return pairwise_goal_status(seqs, goal.level, goal.top_k, previous=previous)

    def _bounds(self) -> tuple[NDArray, NDArray]:
        return self.status.pair_lower, self.status.pair_upper

    def _check(self, goal: GoalSpec) -> PairwiseGoalStatus:
        # The previous status whole: its fit starts the new one (a few iterations).
        return pairwise_goal_status(self.seqs, goal.level, goal.top_k, previous=self.status)

    def _derived(self) -> bytes:
        # The fit, so that reading the state per request does not fit again.
        return np.asarray(self.status.estimate, dtype="<f8").tobytes()

    @classmethod
    def _accepts(cls, magic: bytes) -> bool:
        return magic in (cls._MAGIC, cls._CLOSED_MAGIC)

    @classmethod
    def _restore(
        cls, seqs: PairSequences, goal: GoalSpec, bounds: tuple[NDArray, NDArray], derived: bytes
    ) -> PairwiseGoalStatus:
        m = seqs.n_items
        if not derived:  # a state without its fit: compute it
            return cls._status(seqs, goal, bounds)
        # The fit, then (PRP1 states) a closed relation, which is skipped.
        if len(derived) not in (8 * m, 8 * m + (m * m + 7) // 8):
            raise ValueError("corrupt goal state")
        score = np.frombuffer(derived[: 8 * m], "<f8").copy()
        return restored_status(seqs, goal.level, goal.top_k, bounds[0], bounds[1], score)

    def _add(self, i: NDArray, j: NDArray, z: NDArray, eps: NDArray, flags: NDArray, live: NDArray) -> int:
        cp = live & ((flags & COUNT_PAIR) != 0)
        if cp.any():
            self.seqs.add(i[cp], j[cp], z[cp], eps[cp])
        return int(cp.sum())


def load_state(payload: bytes | None, goal: GoalSpec, m: int) -> GoalState | PairGoalState:
    """The stored state, or a fresh one when there is none or it was for another m."""
    kind = PairGoalState if goal.certificate == "pairwise" else GoalState
    if payload is not None:
        state = kind.unpack(payload, goal)
        if state.n_items == m:
            return state
    return kind.start(m, goal)


def fold_goal(
    session: Session,
    survey_id: str,
    goal: GoalSpec,
    stats: SurveyStats,
    m: int,
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    z: NDArray[np.float64],
    eps: NDArray[np.float64],
    flags: NDArray[np.uint8],
    ticket_m: NDArray[np.int64],
) -> None:
    """Add a fold's debiased answers ``z`` to the goal state of a survey with ``m`` items
    (the caller holds the fold lock and commits), and close the survey when the goal is
    first met and it asks for that. Answers whose tickets were issued for another
    number of items count for nothing."""
    state = load_state(stats.goal_state, goal, m)
    met_before = state.status.met
    state.fold(goal, i, j, z, eps, flags, ticket_m == m)
    stats.goal_state = state.pack()
    if state.status.met and not met_before and goal.close_when_met:
        session.execute(
            update(Survey)
            .where(Survey.id == survey_id, Survey.status == "open")
            .values(status="closed", updated_at=utcnow())
        )


@dataclass(frozen=True)
class GoalReport:
    """Where a survey's goal stands (``GET /v1/surveys/{id}``)."""

    goal: GoalSpec
    met: bool
    #: Positions, best first: the certified top-K, or the certified order (when met).
    certified: list[int]
    answers: int
    counted: int
    resolved: int
    n_items: int
    #: Pairwise goals: the certified majorities show there is no majority top-K (or ranking).
    unreachable: bool = False


def goal_report(session: Session, survey: Survey, m: int, cache=None) -> GoalReport | None:
    """The goal's standing from the folded state (fold first for a fresh one); None
    without a goal. ``cache``: a :class:`~app.analysis.fits.FitCache` keeping the
    decoded state per data version."""
    goal = GoalSpec.of(survey)
    if goal is None:
        return None
    state = current_state(session, survey.id, goal, m, cache)
    status = state.status
    resolved = m - int(status.active.sum())
    certified = status.order.tolist() if status.met and goal.top_k is None else status.certified.tolist()
    unreachable = bool(getattr(status, "unreachable", False))
    return GoalReport(goal, status.met, certified, state.answers, state.counted, resolved, m, unreachable)


def current_state(
    session: Session, survey_id: str, goal: GoalSpec, m: int, cache=None, version: int | None = None
) -> GoalState | PairGoalState:
    """The folded state (cached per data version — ``version`` when the caller read it —
    and number of items when ``cache``)."""
    if cache is not None:
        if version is None:
            version = session.scalar(select(SurveyStats.version).where(SurveyStats.survey_id == survey_id))
        found = cache.lru.get(("goal", survey_id, version, m))
        if found is not None:
            return found
    payload = session.scalar(select(SurveyStats.goal_state).where(SurveyStats.survey_id == survey_id))
    state = load_state(payload, goal, m)  # at ``version`` or later: never older than its key
    if cache is not None:
        size = 64 * m + 2000 if isinstance(state, GoalState) else 50 * m * m + 2000  # pairs: m² bools too
        cache.lru.put(("goal", survey_id, version, m), state, size)
    return state


def goal_met(session: Session, survey: Survey) -> bool:
    """Whether the goal was met at the last fold (reads the state's header only, except
    for a ``PRP1`` pairwise state, whose "met" flag rests on transitive closure: that
    one is checked again from its bounds)."""
    payload = session.scalar(select(SurveyStats.goal_state).where(SurveyStats.survey_id == survey.id))
    if payload is None:
        return False
    magic, _m, _answers, _counted, met = _STATE.unpack_from(payload)
    goal = GoalSpec.of(survey)
    if magic == PairGoalState._CLOSED_MAGIC and goal is not None:
        return bool(PairGoalState.unpack(payload, goal).status.met)
    return bool(met)
