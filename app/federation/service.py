"""Federated rounds: sites aggregate their rankings without pooling them (Borda / Lehmer FRA).

The server side of the protocol of docs/federated.md §1 and §5 (secure aggregation after
Bonawitz et al., without dropout recovery): an admin opens a round (:func:`open_round`),
each site registers an X25519 public key (:func:`register_key`), derives its pairwise
masks and uploads its masked message (:func:`contribute`), and the last one completes the
round (:func:`_complete`). This code only ever handles masked vectors and their sum (a
test traces every local variable of this path). Threat model: an honest-but-curious
server and sites; the server is trusted to relay public keys faithfully (sites can
compare key fingerprints out of band); with L = 2 each site can read the other's message.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import re
from typing import TypeVar

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..core.auth import hash_secret, new_secret
from ..core.db.models import FederatedRound, RoundSite, Survey, new_id, utcnow
from ..core.db.session import begin_write
from ..core.errors import Conflict, Invalid, NotFound, invalid_from
from ..stats.federated import FederatedScheme, secure_sum
from ..stats.fra import lehmer_low_bits
from ..surveys.items import survey_items
from ..surveys.policy import MAX_EPSILON, MIN_EPSILON
from .results import RoundOut, RoundPrivacy, RoundSiteOut, SitePeer, SiteView

__all__ = [
    "PROTOCOL",
    "cancel_round",
    "contribute",
    "get_round",
    "list_rounds",
    "open_round",
    "privacy_summary",
    "published_result",
    "register_key",
    "round_view",
    "scheme_of",
    "site_view",
]

log = logging.getLogger("privrank.federation")

#: Names the key agreement, seed derivation and mask expansion (see app.cli.site).
PROTOCOL = "privrank-fra-v1: X25519, HKDF-SHA256 (salt = round id), SHAKE-256 masks mod 2^b"
_ROUND_ID = re.compile(r"rnd_[a-z2-7]{16}")
_SITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def scheme_of(parameters: dict) -> FederatedScheme:
    """The message scheme a round's public parameters define (the sites derive the same)."""
    return FederatedScheme.from_parameters(parameters)


def open_round(
    session: Session,
    survey: Survey,
    method: str,
    sites: list[str],
    phi: float,
    max_rankings: int,
    failure_probability: float,
    created_by: str,
    allow_two_sites: bool = False,
) -> tuple[FederatedRound, list[RoundSite], dict[str, str]]:
    """Open a round; returns it, its sites and each site's credential (shown once)."""
    if survey.kind != "ranking":
        raise Conflict("federated rounds aggregate rankings: open them on a ranking survey")
    if survey.status != "open":
        raise Conflict("the survey is closed")
    names = [s.strip() for s in sites]
    if len(names) < 2:
        raise Invalid("a round needs at least two sites")
    if any(not _SITE_NAME.fullmatch(n) for n in names):
        raise Invalid("site names are 1 to 100 letters, digits or ._- (starting with a letter or digit)")
    if len(set(names)) != len(names):
        raise Invalid("site names must be unique")
    if len(names) == 2 and not allow_two_sites:
        raise Invalid(
            "with two sites each can subtract its own message from the published aggregate and learn the "
            "other's; add a third site, or set allow_two_sites to accept that"
        )
    items = survey_items(session, survey.id)
    m = len(items)
    low_bits = None
    try:
        if method == "lehmer":
            low_bits = lehmer_low_bits(m, phi, max_rankings, failure_probability)
        scheme = FederatedScheme(method, m, len(names), phi, low_bits)
    except ValueError as exc:
        raise invalid_from(exc) from None
    parameters = {
        "protocol": PROTOCOL,
        "method": method,
        "n_items": m,
        "n_sites": len(names),
        "phi": phi,
        "items": [{"id": it.id, "label": it.label, "position": it.position} for it in items],
        "sites": names,
        "message_length": scheme.length,
        "max_entry_bits": int(scheme.bits.max()),
    }
    if method == "lehmer":
        parameters.update(
            {
                "low_bits": low_bits,
                "exact_histogram": scheme.exact_histogram,
                "max_rankings": max_rankings,
                "failure_probability": failure_probability,
            }
        )
    begin_write(session)
    rnd = FederatedRound(
        id=new_id("rnd"),
        survey_id=survey.id,
        method=method,
        status="open",
        n_sites=len(names),
        parameters=parameters,
        created_by=created_by,
    )
    session.add(rnd)
    session.flush()
    tokens: dict[str, str] = {}
    rows = []
    for k, name in enumerate(names):
        secret = new_secret()
        row = RoundSite(
            id=new_id("sit"), round_id=rnd.id, name=name, position=k, token_hash=hash_secret(secret)
        )
        rows.append(row)
        tokens[name] = f"{row.id}.{secret}"
    session.add_all(rows)
    session.commit()
    log.info("survey %s: opened federated round %s (%s, %d sites)", survey.id, rnd.id, method, len(names))
    return rnd, rows, tokens


#: How the published order treats exact ties, stated in every round's result.
TIE_BREAK = {
    "borda": (
        "items with equal aggregates are tied: they share a rank (competition ranking) and are "
        "listed in 'ties'; within a tied group the published order was drawn uniformly at random "
        "(generator seeded with SHA-256 of the round id, independent of the data) and carries no "
        "information"
    ),
    "lehmer": (
        "the decoded consensus is a permutation, so no items are tied; where the plurality of a "
        "Lehmer coordinate was tied (the items in 'random_coordinates'), the value was drawn "
        "uniformly at random among the tied values (generator seeded with SHA-256 of the round id, "
        "independent of the data)"
    ),
}


def published_result(method: str, result: dict | None) -> dict | None:
    """A round's stored result as the API shows it. Rounds completed before ties were
    published (and before the Borda field was renamed) are brought to the current form:
    ``mean_quantized_position`` becomes ``mean_site_quantized_position``, and Borda ties and
    shared ranks are recomputed from the stored aggregate."""
    if result is None or "tie_break" in result:
        return result
    out = dict(result)
    items = [dict(it) for it in result.get("items", [])]
    for it in items:
        if "mean_quantized_position" in it:
            it["mean_site_quantized_position"] = it.pop("mean_quantized_position")
    if method == "borda" and all("mean_site_quantized_position" in it for it in items):
        # Items are stored in published order (ascending S/L); equal values are exact ties.
        values = [float(it["mean_site_quantized_position"]) for it in items]
        groups: list[list[str]] = []
        for k, it in enumerate(items):
            it["rank"] = 1 + sum(v < values[k] for v in values)
            if k and values[k] == values[k - 1]:
                groups[-1].append(it["item_id"])
            else:
                groups.append([it["item_id"]])
        out["ties"] = [g for g in groups if len(g) >= 2]
    else:
        out["ties"] = []
    out["items"] = items
    out["tie_break"] = TIE_BREAK.get(method, TIE_BREAK["borda"])
    return out


def _sites(session: Session, round_id: str) -> list[RoundSite]:
    return list(
        session.scalars(select(RoundSite).where(RoundSite.round_id == round_id).order_by(RoundSite.position))
    )


def get_round(session: Session, survey_id: str, round_id: str) -> FederatedRound:
    rnd = session.get(FederatedRound, round_id) if _ROUND_ID.fullmatch(round_id) else None
    if rnd is None or rnd.survey_id != survey_id:
        raise NotFound(f"no round {round_id!r} in this survey")
    return rnd


def list_rounds(
    session: Session, survey_id: str, limit: int = 20, offset: int = 0
) -> tuple[list[FederatedRound], int]:
    """A page of the survey's rounds, newest first, and how many there are."""
    total = session.scalar(
        select(func.count()).select_from(FederatedRound).where(FederatedRound.survey_id == survey_id)
    )
    rows = session.scalars(
        select(FederatedRound)
        .where(FederatedRound.survey_id == survey_id)
        .order_by(FederatedRound.created_at.desc(), FederatedRound.id)
        .limit(limit)
        .offset(offset)
    )
    return list(rows), int(total or 0)


def round_view(session: Session, rnd: FederatedRound, tokens: dict[str, str] | None = None) -> RoundOut:
    """The round as the admin sees it; ``tokens`` (the sites' credentials) only when it opens."""
    sites = _sites(session, rnd.id)
    return RoundOut(
        id=rnd.id,
        survey_id=rnd.survey_id,
        method=rnd.method,
        status=rnd.status,
        parameters=rnd.parameters,
        sites=[
            RoundSiteOut(
                name=s.name,
                position=s.position,
                joined=s.public_key is not None,
                contributed=s.contributed_at is not None,
                privatization=s.privatization,
                epsilon=s.epsilon,
                token=None if tokens is None else tokens[s.name],
            )
            for s in sites
        ],
        privacy=privacy_summary(rnd, sites),
        result=published_result(rnd.method, rnd.result),
        created_at=rnd.created_at,
        ended_at=rnd.ended_at,
    )


def _names(names: list[str]) -> str:
    return ("site " if len(names) == 1 else "sites ") + ", ".join(names)


def privacy_summary(rnd: FederatedRound, sites: list[RoundSite]) -> RoundPrivacy:
    """What the sites declared about privatizing their rankings, summed up for the round.

    A site declares with its contribution whether it replaced each local ranking by a
    Mallows copy at ε (``privrank site contribute --epsilon``) or sent its rankings as
    they are. The server cannot check the claim (it sees only masked messages), and the
    statement says so."""
    m = int(rnd.parameters.get("n_items", 0))
    waiting = [s.name for s in sites if s.contributed_at is None]
    unknown = [s.name for s in sites if s.contributed_at is not None and s.privatization is None]
    mallows = [s for s in sites if s.privatization == "mallows" and s.epsilon is not None]
    plain = [s.name for s in sites if s.privatization == "none"]
    eps_max = max((float(s.epsilon) for s in mallows if s.epsilon is not None), default=None)
    if len(waiting) == len(sites):
        return RoundPrivacy(
            all_privatized=False,
            epsilon_max=None,
            statement="no site has contributed yet; each site declares with its contribution whether it "
            "privatized its local rankings (privrank site contribute --epsilon)",
        )
    per_site = ", ".join(f"{s.name} ε = {float(s.epsilon or 0):g}" for s in mallows)
    parts = []
    if not waiting and not plain and not unknown and eps_max is not None:
        parts.append(
            f"every site's rankings were privatized with the Mallows mechanism at ε ≤ {eps_max:g}"
            + (f" ({per_site})" if len({s.epsilon for s in mallows}) > 1 else "")
            + f" (ε-ranking DP per local ranking: moving one item in one person's ranking changes the "
            f"probability of any published result by at most a factor e^ε; against an arbitrary change of "
            f"that ranking the bound is εm/2 = {eps_max * m / 2:g} with m = {m} items)"
        )
    else:
        if mallows:
            parts.append(
                f"{_names([s.name for s in mallows])} privatized with the Mallows mechanism ({per_site})"
            )
        if plain:
            parts.append(
                f"the rankings of {_names(plain)} were not privatized: the published result is not "
                "differentially private with respect to them (secure aggregation only hides each site's "
                "message from the server; the sum is computed from the rankings exactly)"
            )
        if unknown:
            parts.append(
                f"{_names(unknown)} contributed before sites declared their privatization: not known"
            )
        if waiting:
            parts.append(f"not declared yet (no contribution): {', '.join(waiting)}")
    statement = "; ".join(parts) + (
        ". These are the sites' own declarations: the server sees only masked messages and cannot verify them"
    )
    return RoundPrivacy(
        all_privatized=not waiting and not plain and not unknown, epsilon_max=eps_max, statement=statement
    )


def cancel_round(session: Session, survey_id: str, round_id: str) -> FederatedRound:
    """Cancel an open round (a site dropped out, say); its masked messages are deleted."""
    begin_write(session)
    rnd = get_round(session, survey_id, round_id)
    session.refresh(rnd, with_for_update=True)
    if rnd.status != "open":
        raise Conflict(f"the round is already {rnd.status}")
    rnd.status = "cancelled"
    rnd.ended_at = utcnow()
    for site in _sites(session, rnd.id):
        site.masked = None
    session.commit()
    log.info("federated round %s cancelled", rnd.id)
    return rnd


# -- the site's side of the API ------------------------------------------------------------


_Row = TypeVar("_Row", FederatedRound, RoundSite)


def _still_there(row: _Row | None, what: str) -> _Row:
    """A row an authenticated site's credential names, read again: its round and the site
    itself exist as long as the credential does (no endpoint deletes them)."""
    if row is None:
        raise NotFound(f"the {what} no longer exists")
    return row


def site_view(session: Session, site: RoundSite) -> SiteView:
    """The round as one site sees it: its peers' public keys, the status and the result."""
    rnd = _still_there(session.get(FederatedRound, site.round_id), "round")
    peers = _sites(session, rnd.id)
    return SiteView(
        round_id=rnd.id,
        survey_id=rnd.survey_id,
        site=site.name,
        position=site.position,
        status=rnd.status,
        parameters=rnd.parameters,
        peers=[
            SitePeer(
                name=p.name,
                position=p.position,
                public_key=p.public_key,
                contributed=p.contributed_at is not None,
                privatization=p.privatization,
                epsilon=p.epsilon,
            )
            for p in peers
        ],
        privacy=privacy_summary(rnd, peers),
        ready=all(p.public_key is not None for p in peers),
        contributed=site.contributed_at is not None,
        result=published_result(rnd.method, rnd.result),
    )


def _lock_round(
    session: Session, site: RoundSite, allow_complete: bool = False
) -> tuple[FederatedRound, RoundSite]:
    rnd = _still_there(
        session.get(FederatedRound, site.round_id, with_for_update=True, populate_existing=True), "round"
    )
    me = _still_there(session.get(RoundSite, site.id, populate_existing=True), "site")
    if rnd.status != "open" and not (allow_complete and rnd.status == "complete" and me.contributed_at):
        raise Conflict(f"the round is {rnd.status}")
    return rnd, me


def _usable_x25519(raw: bytes) -> bool:
    """False for the small-order points (all-zero shared secret with any private key)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

    try:
        X25519PrivateKey.generate().exchange(X25519PublicKey.from_public_bytes(raw))
    except ValueError:
        return False
    return True


def register_key(session: Session, site: RoundSite, public_key: str) -> bool:
    """Record the site's X25519 public key; True when newly set. The same key again is a no-op;
    a different one is refused (peers may already have derived their masks from the first).
    The server stores and relays the public keys only; it never holds a private key or a
    shared secret."""
    try:
        raw = base64.urlsafe_b64decode(public_key + "=" * (-len(public_key) % 4))
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != 32 or not _usable_x25519(raw):
        raise Invalid("public_key must be a 32-byte X25519 key in base64url (not of small order)")
    canonical = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    begin_write(session)
    _, me = _lock_round(session, site)
    if me.public_key is not None:
        session.rollback()
        if me.public_key == canonical:
            return False
        raise Conflict("this site already registered a different public key")
    me.public_key = canonical
    me.joined_at = utcnow()
    session.commit()
    return True


def _pack(masked: np.ndarray) -> bytes:
    return np.asarray(masked, dtype="<u8").tobytes()


def _unpack(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype="<u8")


def _check_declaration(privatization: str, epsilon: float | None) -> None:
    if privatization == "mallows":
        if epsilon is None or not math.isfinite(epsilon) or epsilon <= 0:
            raise Invalid("privatization 'mallows' needs its epsilon: a positive finite number")
        # The bounds of any survey's ε: at ε = 1e300 the copy is the ranking itself, yet the round
        # would be 'all privatized' with a bound εm/2 that overflowed to inf.
        if not MIN_EPSILON <= epsilon <= MAX_EPSILON:
            raise Invalid(
                f"privatization 'mallows' needs an epsilon in [{MIN_EPSILON:g}, {MAX_EPSILON:g}] "
                "(the bounds of a survey's epsilon)"
            )
    elif privatization == "none":
        if epsilon is not None:
            raise Invalid("privatization 'none' takes no epsilon (the rankings were not privatized)")
    else:
        raise Invalid("privatization must be 'mallows' (with epsilon) or 'none'")


def contribute(
    session: Session, site: RoundSite, masked: list[int], privatization: str, epsilon: float | None = None
) -> tuple[SiteView, bool]:
    """Store the site's masked message and its declaration (``privatization``: "mallows" at
    ``epsilon``, or "none"); the last message completes the round.

    Returns the site's view and whether the message is new (False: the same message with
    the same declaration was already stored — a retry)."""
    _check_declaration(privatization, epsilon)
    begin_write(session)
    rnd, me = _lock_round(session, site, allow_complete=True)  # a retry after the end is answered
    peers = _sites(session, rnd.id)
    waiting = [p.name for p in peers if p.public_key is None]
    if waiting:
        raise Conflict(f"not every site has joined yet (waiting for {', '.join(waiting)})")
    scheme = scheme_of(rnd.parameters)
    bits = scheme.bits
    if len(masked) != bits.size:
        raise Invalid(f"masked must have {bits.size} entries (this round's message length)")
    if max(masked) >= 1 << 63 or np.any(np.asarray(masked, dtype=np.uint64) >> bits.astype(np.uint64)):
        raise Invalid("every masked entry k must be below 2^b_k (this round's layout)")
    packed = _pack(np.asarray(masked, dtype=np.uint64))
    digest = hashlib.sha256(packed).hexdigest()
    if me.contributed_at is not None:
        session.rollback()
        if me.masked_sha256 != digest:
            raise Conflict("this site already contributed a different message")
        if (me.privatization, me.epsilon) != (privatization, epsilon):
            said = {"none": "'none'", "mallows": f"'mallows' at ε = {me.epsilon or 0:g}"}.get(
                me.privatization or "", "nothing (a contribution made before sites declared)"
            )
            raise Conflict(f"this site already contributed this message, declaring privatization {said}")
        return site_view(session, me), False
    me.masked = packed
    me.masked_sha256 = digest
    me.privatization = privatization
    me.epsilon = epsilon
    me.contributed_at = utcnow()
    session.flush()
    done = [p for p in peers if p.id == me.id or p.contributed_at is not None]
    if len(done) == len(peers):
        messages: list[bytes] = []
        for p in peers:
            message = packed if p.id == me.id else p.masked
            if message is None:  # pragma: no cover - set with contributed_at, cleared only at the end
                raise RuntimeError(f"federated round {rnd.id}: site {p.name} contributed no message")
            messages.append(message)
        _complete(rnd, scheme, messages, peers)
        rnd.result = {**(rnd.result or {}), "privacy": privacy_summary(rnd, peers).model_dump()}
    session.commit()
    log.info("federated round %s: site %s contributed", rnd.id, me.name)
    return site_view(session, me), True


def _complete(
    rnd: FederatedRound, scheme: FederatedScheme, masked: list[bytes], peers: list[RoundSite]
) -> None:
    """Sum the masked messages (the masks cancel), decode, publish, and forget the messages.

    Runs when the last masked message arrives: the server adds them mod 2^{b_k}, decodes
    the consensus, publishes it and deletes the masked messages. A site that never
    contributes leaves the round open; an admin can cancel it."""
    total = secure_sum([_unpack(x) for x in masked], scheme.bits)
    seed = int.from_bytes(hashlib.sha256(f"tie-break:{rnd.id}".encode()).digest()[:16], "little")
    out = scheme.consensus(total, np.random.default_rng(seed))
    items = rnd.parameters["items"]
    order = [int(x) for x in out["order"]]
    result: dict = {
        "order": [items[x]["id"] for x in order],
        "items": [],
        "aggregate": [int(v) for v in total],
        "ties": [[items[x]["id"] for x in group] for group in out["ties"]],
        "tie_break": TIE_BREAK[scheme.method],
    }
    for x in order:
        row = {"item_id": items[x]["id"], "label": items[x]["label"], "rank": int(out["rank"][x])}
        if scheme.method == "borda":
            row["mean_site_quantized_position"] = float(out["mean_site_quantized_position"][x])
        else:
            row["lehmer_code"] = int(out["lehmer_code"][x])
        result["items"].append(row)
    if scheme.method == "lehmer":
        result["random_coordinates"] = [items[x]["id"] for x in out["random_coordinates"]]
    rnd.result = result
    rnd.status = "complete"
    rnd.ended_at = utcnow()
    for p in peers:
        p.masked = None
