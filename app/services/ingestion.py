"""Private ingestion of pairwise answers (local model; ARCHITECTURE.md).

Each comparison is randomized before it is stored: either the server flips it on
arrival with the respondent's ε (OS CSPRNG, :func:`app.stats.privatize`), or the
client already did and declares its ε. The true answer exists only in memory
for the duration of the request; it is never stored, logged, or put in an error
message (errors name the comparison's position and its pair, never its winner).

A batch is all-or-nothing: the budget update, the comparisons, the pending batch
for aggregation and the idempotency record commit together or not at all.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..db.models import Comparison, IdempotencyRecord, PendingBatch, Respondent, Survey, new_id
from ..db.session import begin_write
from ..stats import privatize
from .aggregation import encode_batch
from .errors import Conflict, Invalid
from .respondents import budget_remaining, check_epsilon
from .surveys import survey_items

__all__ = ["ComparisonIn", "IngestResult", "import_comparisons", "submit_responses"]

log = logging.getLogger("privrank.ingestion")

#: Floating-point slack when comparing a sum of ε with the budget.
BUDGET_SLACK = 1e-9
#: Rows per pending batch written by an import (keeps each payload under ~1.7 MB).
IMPORT_CHUNK = 100_000


@dataclass(frozen=True)
class ComparisonIn:
    a: str
    b: str
    winner: str


@dataclass(frozen=True)
class IngestResult:
    status_code: int
    body: dict
    replayed: bool = False


def _fingerprint(privatized: bool, epsilon: float | None, comparisons: Sequence[ComparisonIn]) -> str:
    # The request's shape only — never its answers, which a hash would not
    # protect (there are only two possible winners per pair).
    shape = {"privatized": privatized, "epsilon": epsilon, "pairs": [[c.a, c.b] for c in comparisons]}
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


def _check_open_pairwise(survey: Survey) -> None:
    if survey.status != "open":
        raise Conflict("the survey is closed")
    if survey.kind != "pairwise":
        raise Conflict("this survey asks for rankings, not pairwise comparisons")
    if survey.privacy_model != "local":  # pragma: no cover - central surveys cannot be created yet
        raise Conflict("this survey does not use the local privacy model")


def _canonical(
    comparisons: Sequence[ComparisonIn],
    positions: dict[str, int],
    where=lambda k: f"comparisons[{k}]",
    fields: tuple[str, str, str] = ("a", "b", "winner"),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item positions (i < j) and y = 1 when item i won; Invalid on bad content.

    ``where(k)`` names the k-th comparison and ``fields`` its three fields in
    error messages. The winner is never quoted back.
    """
    n = len(comparisons)
    i = np.empty(n, dtype=np.int64)
    j = np.empty(n, dtype=np.int64)
    y = np.empty(n, dtype=np.int8)
    fa, fb, fw = fields
    for k, c in enumerate(comparisons):
        pa = positions.get(c.a)
        pb = positions.get(c.b)
        if pa is None:
            raise Invalid(f"{where(k)}: {fa} is not an item of this survey ({c.a!r})")
        if pb is None:
            raise Invalid(f"{where(k)}: {fb} is not an item of this survey ({c.b!r})")
        if pa == pb:
            raise Invalid(f"{where(k)}: {fa} and {fb} must be two different items")
        if c.winner == c.a:
            w = pa
        elif c.winner == c.b:
            w = pb
        else:
            raise Invalid(f"{where(k)}: {fw} must be one of its two items")
        i[k], j[k] = min(pa, pb), max(pa, pb)
        y[k] = 1 if w == i[k] else 0
    return i, j, y


def _first_repeat(keys: np.ndarray) -> int | None:
    """Index of the first element equal to an earlier one, or None."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    repeats = np.flatnonzero(first[inverse] != np.arange(keys.size))
    return int(repeats[0]) if repeats.size else None


def _replay(session: Session, respondent_id: str, key: str, fingerprint: str) -> IngestResult | None:
    record = session.get(IdempotencyRecord, (respondent_id, key))
    if record is None:
        return None
    if record.fingerprint != fingerprint:
        raise Conflict("this Idempotency-Key was already used for a different request")
    return IngestResult(record.status_code, dict(record.response), replayed=True)


def submit_responses(
    session: Session,
    survey: Survey,
    respondent: Respondent,
    comparisons: Sequence[ComparisonIn],
    privatized: bool,
    epsilon: float | None,
    idempotency_key: str | None = None,
    max_batch: int = 1000,
) -> IngestResult:
    """Validate, privatize (unless the client did) and store one batch of answers."""
    fingerprint = _fingerprint(privatized, epsilon, comparisons)
    if idempotency_key is not None:
        replay = _replay(session, respondent.id, idempotency_key, fingerprint)
        if replay is not None:
            return replay
    _check_open_pairwise(survey)
    if not 1 <= len(comparisons) <= max_batch:
        raise Invalid(f"send between 1 and {max_batch} comparisons per request")
    if privatized:
        if epsilon is None:
            raise Invalid("epsilon is required when privatized is true")
        eps = check_epsilon(survey, epsilon)
    else:
        if epsilon is not None and not math.isclose(epsilon, respondent.epsilon, rel_tol=1e-12):
            raise Invalid(
                "with privatized=false the server uses the respondent's registered epsilon; omit epsilon"
            )
        eps = respondent.epsilon
    items = survey_items(session, survey.id)
    positions = {item.id: item.position for item in items}
    i, j, y = _canonical(comparisons, positions)
    k = _first_repeat(i * len(items) + j)
    if k is not None:
        raise Conflict(
            f"comparisons[{k}] repeats a pair already in this request ({items[i[k]].id}, {items[j[k]].id})"
        )
    if privatized:
        y_tilde, source = y, "client"
    else:
        y_tilde, source = privatize(y, eps), "server"  # OS CSPRNG
    del y
    n = len(comparisons)
    cost = eps * n
    body: dict | None = None
    try:
        begin_write(session)
        # Lock the respondent's row first (conditional update): concurrent requests of
        # the same respondent then serialize, and the repeat check below sees theirs.
        spend = update(Respondent).where(Respondent.id == respondent.id)
        if survey.respondent_budget is not None:
            spend = spend.where(Respondent.epsilon_spent + cost <= survey.respondent_budget + BUDGET_SLACK)
        spent = session.execute(
            spend.values(
                epsilon_spent=Respondent.epsilon_spent + cost,
                n_comparisons=Respondent.n_comparisons + n,
            ).returning(Respondent.epsilon_spent)
        ).scalar_one_or_none()
        if spent is not None:
            spent = float(spent)  # SQLite may hand back an integral REAL as int
        if spent is None:
            left = budget_remaining(survey, session.get(Respondent, respondent.id, populate_existing=True))
            raise Conflict(f"over the privacy budget: this request costs epsilon {cost:g}, {left:g} remains")
        answered = set(
            map(
                tuple,
                session.execute(
                    select(Comparison.i, Comparison.j).where(Comparison.respondent_id == respondent.id)
                ),
            )
        )
        if answered:
            for k in range(n):
                if (int(i[k]), int(j[k])) in answered:
                    raise Conflict(
                        f"comparisons[{k}]: this respondent already answered the pair "
                        f"({items[i[k]].id}, {items[j[k]].id})"
                    )
        session.execute(
            insert(Comparison),
            [
                {
                    "survey_id": survey.id,
                    "respondent_id": respondent.id,
                    "i": int(a),
                    "j": int(b),
                    "y_tilde": int(t),
                    "epsilon": eps,
                    "source": source,
                }
                for a, b, t in zip(i, j, y_tilde, strict=True)
            ],
        )
        session.add(
            PendingBatch(survey_id=survey.id, n=n, payload=encode_batch(i, j, y_tilde, np.full(n, eps)))
        )
        remaining = None if survey.respondent_budget is None else max(0.0, survey.respondent_budget - spent)
        body = {"accepted": n, "epsilon_spent": cost, "epsilon_total": spent, "budget_remaining": remaining}
        if idempotency_key is not None:
            session.add(
                IdempotencyRecord(
                    respondent_id=respondent.id,
                    key=idempotency_key,
                    fingerprint=fingerprint,
                    status_code=201,
                    response=body,
                )
            )
        session.commit()
    except IntegrityError:
        session.rollback()
        # A concurrent request with the same Idempotency-Key won the race.
        if idempotency_key is not None:
            replay = _replay(session, respondent.id, idempotency_key, fingerprint)
            if replay is not None:
                return replay
        raise Conflict("a pair in this request was answered concurrently by the same respondent") from None
    except BaseException:
        session.rollback()
        raise
    log.info("survey %s: stored %d comparisons (%s-privatized)", survey.id, n, source)
    return IngestResult(201, body)


# -- bulk import ---------------------------------------------------------------

_REQUIRED = ("respondent", "item_a", "item_b", "winner", "epsilon")


def import_comparisons(
    session: Session, survey: Survey, csv_text: str, privatized: bool, max_rows: int = 1_000_000
) -> dict:
    """Import comparisons collected elsewhere, all or nothing.

    CSV columns ``respondent, item_a, item_b, winner, epsilon`` (others, such as the
    export's ``z`` and ``created_at``, are ignored), items given by id or label.
    ``privatized=True``: winners are already randomized with the row's ε;
    ``False``: the server randomizes each row with its ε (OS CSPRNG). Respondent
    pseudonyms become respondents of this survey (matched on later imports);
    every rule of the API applies: ε within bounds, one answer per respondent and
    pair, the respondent budget.
    """
    _check_open_pairwise(survey)
    reader = csv.DictReader(io.StringIO(csv_text))
    header = {name.strip().lower(): name for name in (reader.fieldnames or [])}
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise Invalid(f"CSV header lacks column(s) {missing}; need {list(_REQUIRED)}")
    items = survey_items(session, survey.id)
    lookup: dict[str, str] = {item.label: item.id for item in items}
    lookup.update({item.id: item.id for item in items})
    positions = {item.id: item.position for item in items}
    rows: list[ComparisonIn] = []
    refs: list[str] = []
    eps_list: list[float] = []
    for line, rec in enumerate(reader, start=2):
        if len(rows) >= max_rows:
            raise Invalid(f"at most {max_rows} rows per import")
        ref = (rec.get(header["respondent"]) or "").strip()
        if not ref or len(ref) > 200:
            raise Invalid(f"row {line}: respondent must be 1 to 200 characters")
        try:
            eps = float(rec.get(header["epsilon"]) or "nan")
        except ValueError:
            raise Invalid(f"row {line}: epsilon is not a number") from None
        try:
            check_epsilon(survey, eps)
        except Invalid as exc:
            raise Invalid(f"row {line}: {exc.detail}") from None
        a = (rec.get(header["item_a"]) or "").strip()
        b = (rec.get(header["item_b"]) or "").strip()
        winner = (rec.get(header["winner"]) or "").strip()
        rows.append(ComparisonIn(lookup.get(a, a), lookup.get(b, b), lookup.get(winner, winner)))
        refs.append(ref)
        eps_list.append(eps)
    if not rows:
        raise Invalid("the CSV has no data rows")
    # Data rows start on line 2 of the file; errors name the line.
    i, j, y = _canonical(
        rows, positions, where=lambda k: f"row {k + 2}", fields=("item_a", "item_b", "winner")
    )
    eps_arr = np.asarray(eps_list)
    ref_index = {ref: k for k, ref in enumerate(dict.fromkeys(refs))}
    who = np.fromiter((ref_index[r] for r in refs), dtype=np.int64, count=len(refs))
    m = len(items)
    k = _first_repeat((who * m + i) * m + j)
    if k is not None:
        raise Conflict(f"row {k + 2}: respondent {refs[k]!r} answers the same pair twice")
    y_tilde = y if privatized else privatize(y, eps_arr)
    del y
    cost = np.bincount(who, weights=eps_arr)
    try:
        begin_write(session)
        existing = {
            r.external_ref: r
            for r in session.scalars(
                select(Respondent).where(
                    Respondent.survey_id == survey.id, Respondent.external_ref.in_(list(ref_index))
                )
            )
        }
        respondent_ids = []
        created = 0
        for ref, k in ref_index.items():
            r = existing.get(ref)
            n_new = int(np.sum(who == k))
            spent_before = r.epsilon_spent if r is not None else 0.0
            if (
                survey.respondent_budget is not None
                and spent_before + cost[k] > survey.respondent_budget + BUDGET_SLACK
            ):
                raise Conflict(f"respondent {ref!r} would exceed the privacy budget")
            if r is None:
                first = int(np.flatnonzero(who == k)[0])
                r = Respondent(
                    id=new_id("rsp"),
                    survey_id=survey.id,
                    token_hash=None,
                    epsilon=eps_list[first],
                    epsilon_spent=float(cost[k]),
                    n_comparisons=n_new,
                    external_ref=ref,
                )
                session.add(r)
                created += 1
            else:
                r.epsilon_spent = spent_before + float(cost[k])
                r.n_comparisons += n_new
            respondent_ids.append(r.id)
        session.flush()
        if existing:
            known = [r.id for r in existing.values()]
            answered = set(
                map(
                    tuple,
                    session.execute(
                        select(Comparison.respondent_id, Comparison.i, Comparison.j).where(
                            Comparison.respondent_id.in_(known)
                        )
                    ),
                )
            )
            for k in range(len(rows)):
                if (respondent_ids[who[k]], int(i[k]), int(j[k])) in answered:
                    raise Conflict(f"row {k + 2}: respondent {refs[k]!r} already answered this pair")
        session.execute(
            insert(Comparison),
            [
                {
                    "survey_id": survey.id,
                    "respondent_id": respondent_ids[w],
                    "i": int(a),
                    "j": int(b),
                    "y_tilde": int(t),
                    "epsilon": float(e),
                    "source": "import",
                }
                for w, a, b, t, e in zip(who, i, j, y_tilde, eps_arr, strict=True)
            ],
        )
        for start in range(0, len(rows), IMPORT_CHUNK):
            sl = slice(start, start + IMPORT_CHUNK)
            session.add(
                PendingBatch(
                    survey_id=survey.id,
                    n=len(rows[sl]),
                    payload=encode_batch(i[sl], j[sl], y_tilde[sl], eps_arr[sl]),
                )
            )
        session.commit()
    except BaseException:
        session.rollback()
        raise
    log.info("survey %s: imported %d comparisons", survey.id, len(rows))
    return {"imported": len(rows), "respondents_created": created, "respondents": len(ref_index)}
