"""The federated site's client: ``privrank site contribute`` (docs/federated.md §1, §5).

A site holds rankings of a ranking survey's items that never leave it. :func:`contribute`
reads the round's public parameters, maps and completes its rankings, agrees a pairwise
seed with every other site (X25519, HKDF-SHA256), and uploads only its Borda or Lehmer
message masked with the pairwise masks. The server sees public keys and masked
messages; the masks cancel only in the sum over all sites. Optionally (``--epsilon``)
each local ranking is first replaced by a Mallows synthetic ranking (ε-ranking DP), so
that even the published consensus is a function of privatized data.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import sys
import time
import unicodedata
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ..core.keyed_http import RedirectRefused, open_keyed
from ..stats.federated import FederatedScheme, mask_message, pairwise_mask
from ..stats.preflib import read_preflib
from ..stats.rankings import complete_ranking, mallows_privatize

__all__ = [
    "SiteClient",
    "SiteError",
    "consensus_lines",
    "contribute",
    "declaration",
    "derive_seed",
    "fingerprint",
    "load_rankings",
    "masked_message",
    "status_lines",
]

HKDF_INFO = b"privrank fra mask seed v1"


class SiteError(Exception):
    """A failure to report to the site's operator (exit status 1)."""


@dataclass(frozen=True)
class _Item:
    id: str
    label: str
    position: int


def _items(parameters: dict) -> list[_Item]:
    return [_Item(it["id"], it["label"], int(it["position"])) for it in parameters["items"]]


def _resolver(items: list[_Item]):
    """Names to positions; labels compare in Unicode NFC (as the service stores them), so a
    file that spells "é" as "e" + a combining accent still finds its item."""
    by_key = {unicodedata.normalize("NFC", it.label).strip(): it.position for it in items}
    by_key.update({it.id: it.position for it in items})

    def resolve(name: str) -> int | None:
        return by_key.get(unicodedata.normalize("NFC", name).strip())

    return resolve


def load_rankings(
    path: str | Path, parameters: dict, fmt: str | None = None, rng: np.random.Generator | None = None
) -> NDArray[np.int64]:
    """The site's rankings as orderings of the survey's item positions, one row per voter.

    ``.soc``/``.soi`` (PrefLib): alternatives are matched to the survey's items by
    name (label or id). CSV: a header with a ``ranking`` column — item labels or ids
    best first, separated by ``>`` (as in the service's rankings.csv) — and an
    optional ``count`` column. Partial rankings are completed at random (OS CSPRNG
    unless ``rng``); a file naming an item the survey lacks is refused.
    """
    p = Path(path)
    kind = (fmt or p.suffix.lstrip(".")).lower()
    items = _items(parameters)
    m = len(items)
    resolve = _resolver(items)
    partial: list[tuple[list[int], int]] = []
    if kind in ("soc", "soi"):
        try:
            ballots = read_preflib(p)
        except (OSError, ValueError) as exc:
            raise SiteError(f"{p}: {exc}") from None
        mapping = [resolve(name) for name in ballots.names]
        unknown = [name for name, pos in zip(ballots.names, mapping, strict=True) if pos is None]
        if unknown:
            raise SiteError(
                f"{p}: alternatives not among the survey's items (match labels or ids): {unknown[:5]}"
            )
        partial = [
            ([mapping[a] for a in order], c) for order, c in zip(ballots.orders, ballots.counts, strict=True)
        ]
    elif kind == "csv":
        try:
            text = p.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise SiteError(f"{p}: {exc}") from None
        reader = csv.DictReader(io.StringIO(text))
        fields = {f.strip().lower(): f for f in reader.fieldnames or []}
        if "ranking" not in fields:
            raise SiteError(f"{p}: the CSV needs a 'ranking' column (items best first, separated by '>')")
        for rec in reader:
            names = [x for x in (rec.get(fields["ranking"]) or "").split(">") if x.strip()]
            pos = [resolve(x) for x in names]
            if not names or any(x is None for x in pos):
                raise SiteError(f"{p}, line {reader.line_num}: a ranking names no item or an unknown item")
            count = 1
            if "count" in fields:
                try:
                    count = int(rec.get(fields["count"]) or "1")
                except ValueError:
                    count = 0
                if count < 1:
                    raise SiteError(f"{p}, line {reader.line_num}: count must be a positive integer")
            partial.append((pos, count))
    else:
        raise SiteError(f"{p}: unknown format {kind!r} (use .soc, .soi or .csv, or --format)")
    if not partial:
        raise SiteError(f"{p}: no rankings")
    rows = []
    for pos, count in partial:
        if len(set(pos)) != len(pos):
            raise SiteError(f"{p}: a ranking lists an item twice")
        for _ in range(count):
            rows.append(complete_ranking(np.asarray(pos, dtype=np.int64), m, rng))
    return np.vstack(rows)


# -- keys and masks -------------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_private_key() -> bytes:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    return X25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def public_key(private: bytes) -> str:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = X25519PrivateKey.from_private_bytes(private)
    return _b64(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def fingerprint(public: str) -> str:
    """A short fingerprint of a public key, for comparing keys out of band."""
    digest = hashlib.sha256(_unb64(public)).hexdigest()[:20]
    return " ".join(digest[k : k + 4] for k in range(0, 20, 4))


def derive_seed(private: bytes, peer_public: str, round_id: str, site_a: str, site_b: str) -> bytes:
    """The 32-byte seed two sites share: HKDF-SHA256(X25519(own private, peer public)),
    salt = the round id, info binding both names (order-independent). A peer key of
    small order (an all-zero shared secret) raises SiteError."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    try:
        shared = X25519PrivateKey.from_private_bytes(private).exchange(
            X25519PublicKey.from_public_bytes(_unb64(peer_public))
        )
    except ValueError:
        raise SiteError(
            f"site {site_b!r} registered an invalid public key; ask the admin to cancel the round"
        ) from None
    names = "|".join(sorted((site_a, site_b))).encode()
    return HKDF(
        algorithm=hashes.SHA256(), length=32, salt=round_id.encode(), info=HKDF_INFO + b"|" + names
    ).derive(shared)


def masked_message(
    view: dict, private: bytes, orders: NDArray[np.int64], rng: np.random.Generator | None = None
) -> list[int]:
    """The site's message for ``orders``, masked with seeds shared with every peer."""
    params = view["parameters"]
    scheme = FederatedScheme.from_parameters(params)
    message = scheme.message(orders, rng)
    me = int(view["position"])
    seeds = {
        int(peer["position"]): derive_seed(
            private, peer["public_key"], view["round_id"], view["site"], peer["name"]
        )
        for peer in view["peers"]
        if int(peer["position"]) != me
    }
    return [int(v) for v in mask_message(message, pairwise_mask(me, seeds, scheme.bits), scheme.bits)]


# -- the HTTP side ------------------------------------------------------------------------------


class SiteClient:
    def __init__(self, server: str, token: str, timeout: float = 30.0) -> None:
        self.base = server.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with open_keyed(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                detail = json.loads(exc.read()).get("detail")
            except ValueError:
                detail = exc.reason
            raise SiteError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
        except RedirectRefused as exc:
            raise SiteError(f"{exc.reason} as --server") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise SiteError(f"cannot reach {self.base}: {exc}") from None


def _load_state(path: Path, round_id: str, site: str) -> dict:
    """The site's state for this round — its private key and, once computed, its masked
    message — created (mode 0600) on first use."""
    if path.exists():
        try:
            state = json.loads(path.read_text())
            _unb64(state["private_key"])
        except (ValueError, KeyError, TypeError):
            raise SiteError(f"{path} is not a privrank site state file (corrupt?)") from None
        if state.get("round_id") != round_id or state.get("site") != site:
            raise SiteError(f"{path} holds the key of another round or site")
        return state
    state = {"round_id": round_id, "site": site, "private_key": _b64(new_private_key())}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh)
    return state


def _save_state(path: Path, state: dict) -> None:
    """Replace the state file atomically, keeping mode 0600."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


WAITING = 3  # exit status: not every site has joined yet; run again later
#: Exit status: this site's message was already computed from another rankings file or ε;
#: the new input was not used (a round takes one message per site).
INPUT_IGNORED = 4


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a rankings file's bytes (recorded in the state file with the message)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 16), b""):
                h.update(block)
    except OSError as exc:
        raise SiteError(f"{path}: {exc}") from None
    return h.hexdigest()


def _privatization(epsilon: float | None) -> str:
    if epsilon is None:
        return (
            "local rankings used as they are (no --epsilon): the published consensus is not "
            "differentially private"
        )
    return f"each local ranking privatized with the Mallows mechanism at ε = {epsilon:g} (ε-ranking DP)"


def declaration(epsilon: float | None) -> dict:
    """What the site tells the server it did to its rankings, sent with its masked message
    (recorded and shown with the round; the server cannot verify it)."""
    if epsilon is None:
        return {"privatization": "none"}
    return {"privatization": "mallows", "epsilon": epsilon}


def _declared(peer: dict) -> str:
    if peer.get("privatization") == "mallows":
        return f"Mallows, ε = {peer['epsilon']:g}"
    if peer.get("privatization") == "none":
        return "not privatized"
    return "not declared yet"


def _input_changed(saved: dict, digest: str, epsilon: float | None) -> str | None:
    """Why this run's input differs from the one the saved message was computed from, or None
    (also None for state files written before inputs were recorded: nothing to compare)."""
    if "input_sha256" not in saved:
        return None
    reasons = []
    if saved["input_sha256"] != digest:
        reasons.append(f"a different file (sha256 {saved['input_sha256']}; this one is {digest})")
    if saved.get("epsilon") != epsilon:
        was = "no --epsilon" if saved.get("epsilon") is None else f"ε = {saved['epsilon']:g}"
        now = "no --epsilon" if epsilon is None else f"ε = {epsilon:g}"
        reasons.append(f"{was} (this run: {now})")
    return " and ".join(reasons) or None


def _check_view(view: dict) -> None:
    """The peers the server lists must be the round's public site list, in order (the
    order fixes the sign of every pairwise mask)."""
    names = view["parameters"]["sites"]
    peers = sorted(view["peers"], key=lambda p: int(p["position"]))
    if [p["name"] for p in peers] != names or [int(p["position"]) for p in peers] != list(range(len(names))):
        raise SiteError("the server's list of sites does not match the round's parameters")


def contribute(
    server: str,
    token: str,
    rankings_path: str | Path,
    fmt: str | None = None,
    state_path: str | Path | None = None,
    wait: float = 0.0,
    poll: float = 2.0,
    epsilon: float | None = None,
    say=print,
    warn=None,
) -> int:
    """The whole client flow. Returns an exit status: 0 contributed (or already,
    from the same file and ε), 3 still waiting for other sites to join (re-run later: the key
    is kept), 4 this site's message was already computed from a different file or ε (the new
    input is not sent; ``warn`` — stderr by default — says so), 1 failure.

    The state file records the SHA-256 of the rankings file and ε the message came from.

    The masked message is computed once and saved in the state file before it is sent;
    a re-run sends exactly the same bytes. (Recomputing would draw fresh randomness —
    partial-ranking completion, tie-breaks, ``--epsilon`` — under the same masks, and
    anyone who saw both uploads could subtract them.)

    The flow, given the credential an admin handed the site (``POST
    /v1/surveys/{id}/rounds``):

    1. read the round's public parameters (``GET /v1/site``);
    2. load the rankings file (PrefLib ``.soc``/``.soi``, or CSV), map the alternatives
       to the survey's items by label or id, and complete partial rankings (unranked
       items below, uniformly shuffled; OS CSPRNG);
    3. create an X25519 key pair (kept in the state file, mode 0600, so a re-run
       resumes) and register the public key (``PUT /v1/site/key``);
    4. wait until every site has joined, derive one 32-byte seed per peer — HKDF-SHA256
       over the X25519 shared secret, salted with the round id and bound to both site
       names — and expand the seeds into pairwise masks
       (:func:`app.stats.federated.pairwise_mask`);
    5. compute the Borda or Lehmer message locally, add the masks and upload only the
       masked message (``POST /v1/site/contribution``), declaring whether the rankings
       were privatized (``--epsilon``) — recorded and shown with the round.
    """
    if not server.startswith("https://") and not server.startswith(
        ("http://127.", "http://localhost", "http://[::1]")
    ):
        say(f"warning: {server} is not https; the credential and masked message travel unencrypted")
    client = SiteClient(server, token)
    view = client.call("GET", "/v1/site")
    round_id, site = view["round_id"], view["site"]
    if view["status"] == "cancelled":
        raise SiteError(f"round {round_id} was cancelled")
    if warn is None:

        def warn(text: str) -> None:
            print(text, file=sys.stderr, flush=True)

    state = Path(state_path) if state_path else Path(f".privrank-site-{round_id}-{site}.json")
    digest = file_sha256(rankings_path)
    if view["contributed"]:
        changed = (
            _input_changed(_load_state(state, round_id, site), digest, epsilon) if state.exists() else None
        )
        if changed:
            warn(
                f"warning: site {site} already contributed to round {round_id} from {changed}; "
                f"the new input {rankings_path} was NOT sent — a round takes one message per site"
            )
            return INPUT_IGNORED
        say(f"site {site} already contributed to round {round_id} ({view['status']})")
        if state.exists() and "input_sha256" in (recorded := _load_state(state, round_id, site)):
            say(f"site {site}: {_privatization(recorded.get('epsilon'))}")
        _report(view, say)
        return 0
    _check_view(view)
    saved = _load_state(state, round_id, site)
    private = _unb64(saved["private_key"])
    orders = None
    if "masked" not in saved:
        orders = load_rankings(rankings_path, view["parameters"], fmt)
        if epsilon is not None:
            orders = mallows_privatize(orders, epsilon)  # OS CSPRNG
    else:
        changed = _input_changed(saved, digest, epsilon)
        if changed:
            warn(
                f"warning: site {site}'s message for round {round_id} was already computed from {changed} "
                f"and saved in {state}; the new input {rankings_path} was NOT sent — a round takes one "
                "message per site (run again with the original file and ε to send the saved message)"
            )
            return INPUT_IGNORED
    mine = public_key(private)
    registered = next(p for p in view["peers"] if p["name"] == site)["public_key"]
    if registered is None:
        view = client.call("PUT", "/v1/site/key", {"public_key": mine})
    elif registered != mine:
        raise SiteError(
            f"site {site} registered a different public key; its private key (state file {state}) is lost, "
            "so the round must be cancelled and reopened"
        )
    say(f"site {site}: public key fingerprint {fingerprint(mine)}")
    deadline = time.monotonic() + max(0.0, wait)
    while not view["ready"]:
        if view["status"] != "open":
            raise SiteError(f"round {round_id} is {view['status']}")
        if time.monotonic() >= deadline:
            missing = [p["name"] for p in view["peers"] if p["public_key"] is None]
            say(f"waiting for sites to join round {round_id}: {', '.join(missing)}; run again later")
            return WAITING
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        view = client.call("GET", "/v1/site")
    if view["status"] != "open":
        raise SiteError(f"round {round_id} is {view['status']}")
    _check_view(view)
    for peer in view["peers"]:
        if peer["name"] != site:
            say(f"  peer {peer['name']}: key fingerprint {fingerprint(peer['public_key'])}")
    if orders is None:  # an earlier run saved its masked message (so no rankings were loaded)
        masked = [int(v) for v in saved["masked"]]
        say(f"site {site}: re-sending the masked message saved in {state}")
        if "input_sha256" in saved:
            say(f"site {site}: {_privatization(saved.get('epsilon'))}")
    else:
        masked = masked_message(view, private, orders)
        saved.update(
            {
                "masked": masked,
                "rankings": int(orders.shape[0]),
                "input_sha256": digest,
                "epsilon": epsilon,
            }
        )
        _save_state(state, saved)
        say(f"site {site}: {_privatization(epsilon)}")
    view = client.call("POST", "/v1/site/contribution", {"masked": masked, **declaration(epsilon)})
    say(
        f"site {site}: contributed {saved['rankings']} rankings to round {round_id} "
        f"(masked; {len(masked)} entries)"
    )
    _report(view, say)
    return 0


def consensus_lines(result: dict) -> list[str]:
    """A published round result for people: the consensus best first, tied items shown as a
    group ``{A = B}`` sharing one rank, and how ties were broken in the published order."""
    items = result["items"]
    by_id = {it["item_id"]: it for it in items}
    tied = {iid: k for k, group in enumerate(result.get("ties") or []) for iid in group}
    parts: list[str] = []
    shown: set[int] = set()
    for it in items:
        k = tied.get(it["item_id"])
        if k is None:
            parts.append(it["label"])
        elif k not in shown:
            shown.add(k)
            parts.append("{" + " = ".join(by_id[i]["label"] for i in result["ties"][k]) + "}")
    lines = ["consensus (best first): " + " > ".join(parts)]
    for it in items:
        extra = ""
        if "mean_site_quantized_position" in it:
            extra = f"  (mean over sites of the quantized position {it['mean_site_quantized_position']:g})"
        mark = " (tied)" if it["item_id"] in tied else ""
        lines.append(f"  {it['rank']:>3}. {it['label']}{mark}{extra}")
    if result.get("ties"):
        groups = "; ".join(" = ".join(by_id[i]["label"] for i in g) for g in result["ties"])
        lines.append(f"tied: {groups}")
    if result.get("random_coordinates"):
        labels = ", ".join(by_id[i]["label"] for i in result["random_coordinates"] if i in by_id)
        lines.append(f"Lehmer coordinates drawn at random among tied values: {labels}")
    if result.get("tie_break") and (result.get("ties") or result.get("random_coordinates")):
        lines.append(f"ties: {result['tie_break']}")  # only where something was tied
    return lines


def status_lines(view: dict) -> list[str]:
    """``privrank site status`` for people: the round, its method and status, which sites
    joined and contributed (and which are missing), and the consensus with its ties."""
    params = view.get("parameters") or {}
    peers = sorted(view["peers"], key=lambda p: int(p["position"]))
    method = str(params.get("method", "?"))
    lines = [
        f"round {view['round_id']} (survey {view['survey_id']}): {view['status']}",
        f"method: {method.capitalize()} FRA, {params.get('n_items', '?')} items, "
        f"{len(peers)} sites, φ = {params.get('phi', '?')}"
        + (f", {params['low_bits']} low bits" if params.get("low_bits") else ""),
        f"this site: {view['site']} ({'contributed' if view['contributed'] else 'not contributed yet'})",
    ]
    joined = [p["name"] for p in peers if p["public_key"]]
    contributed = [p["name"] for p in peers if p["contributed"]]
    missing_keys = [p["name"] for p in peers if not p["public_key"]]
    missing = [p["name"] for p in peers if not p["contributed"]]
    lines.append(
        f"joined: {len(joined)} of {len(peers)}"
        + (f" (missing: {', '.join(missing_keys)})" if missing_keys else "")
    )
    lines.append(
        f"contributed: {len(contributed)} of {len(peers)}"
        + (f" (missing: {', '.join(missing)})" if missing and view["status"] == "open" else "")
    )
    if any(p.get("privatization") for p in peers):
        lines.append("declared privatization: " + "; ".join(f"{p['name']} {_declared(p)}" for p in peers))
    if view.get("privacy"):
        lines.append(f"privacy: {view['privacy']['statement']}")
    if view.get("result"):
        lines += consensus_lines(view["result"])
    elif view["status"] == "cancelled":
        lines.append("the round was cancelled: no consensus was published")
    return lines


def _report(view: dict, say) -> None:
    if view.get("result"):
        lines = consensus_lines(view["result"])
        say("round complete; " + lines[0])
        for line in lines[1:]:
            say(line)
    else:
        left = [p["name"] for p in view["peers"] if not p["contributed"]]
        if left:
            say(f"round open; waiting for contributions from: {', '.join(left)}")
