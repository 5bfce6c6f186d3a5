"""Embedding a survey in other sites: the origins allowed to frame its pages.

A survey's ``embed_origins`` become the ``frame-ancestors`` of its respondent page
(``/s/{id}``) and public results page (``/r/{id}``): ``'self'`` and those origins. Each
is checked to be one serialized origin, or one with a leading wildcard label, that no
header or policy could read as more than one source or as any site; wildcards over
hosts whose subdomains belong to different owners (public suffixes, hosts with public
suffixes below them, :data:`SHARED_HOSTS`) are refused (:func:`clean_origin` gives the
rules).
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from publicsuffixlist import PSLFILE, PublicSuffixList
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..core.db.models import Survey
from ..core.errors import Invalid

__all__ = ["MAX_EMBED_ORIGINS", "SHARED_HOSTS", "EmbedOrigins", "clean_origins", "frame_ancestors"]

#: Most origins one survey may list.
MAX_EMBED_ORIGINS = 20
#: Longest origin accepted (a 253-character host, a wildcard, a scheme and a port fit).
MAX_ORIGIN_LENGTH = 300

_SHAPE = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<host>[^:/]*)(?::(?P<port>[^/]*))?/?")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Characters that have a meaning in a header or a policy (or are never in an origin).
_FORBIDDEN = re.compile(r"[\s;,'\"\\<>`@?#%]")
#: Shape of a survey id (:func:`~app.core.db.models.new_id`): anything else is no survey.
_SURVEY_ID = re.compile(r"srv_[a-z2-7]{16}")
#: The IDNA deviation characters: IDNA 2003 (Python's ``idna`` codec) maps them to other
#: letters or drops them, browsers (UTS 46, nontransitional) encode them as they are.
_DEVIATIONS = re.compile("[\u00df\u03c2\u200c\u200d]")
_FORM = "a serialized origin: scheme://host or scheme://host:port (http or https), no path"


#: Hosts that give each of their users a subdomain (a blog, a newsletter) but are not on
#: the Public Suffix List: a wildcard over one of them is a wildcard over every user's site.
SHARED_HOSTS = frozenset({"wordpress.com", "tumblr.com", "substack.com"})


@functools.cache
def _public_suffixes() -> PublicSuffixList:
    """The Public Suffix List bundled with ``publicsuffixlist`` (read once, offline)."""
    return PublicSuffixList()


@functools.cache
def _above_public_suffixes() -> frozenset[str]:
    """Names of two labels or more with a public suffix strictly below them, by the
    bundled list (both sections): ``amazonaws.com`` for ``s3.amazonaws.com``, and for
    a wildcard rule such as ``*.compute.amazonaws.com`` also ``compute.amazonaws.com``
    itself. An exception rule (``!www.ck``) names a registrable domain, not a suffix."""
    found: set[str] = set()
    with open(PSLFILE, encoding="utf-8") as rules:
        for line in rules:
            rule = line.strip().split(" ")[0].lower()
            if not rule or rule.startswith(("//", "!")):
                continue
            if rule.startswith("*."):
                rule = rule[2:]
                found.add(rule)
            labels = (rule if rule.isascii() else rule.encode("idna").decode("ascii")).split(".")
            found.update(".".join(labels[k:]) for k in range(1, len(labels) - 1))
    return frozenset(name for name in found if "." in name)


def _shared(name: str) -> bool:
    """Whether subdomains of ``name`` (ASCII, lowercase) may belong to different owners:
    it is a public suffix, has one below it, or is one of :data:`SHARED_HOSTS`."""
    return _public_suffixes().is_public(name) or name in _above_public_suffixes() or name in SHARED_HOSTS


def _host(raw: str, origin: str) -> str:
    wildcard = raw.startswith("*.")
    name = raw[2:] if wildcard else raw
    if "*" in name:
        raise Invalid(
            f"embed origin {origin!r}: a wildcard may only be the first label (https://*.example.org)"
        )
    if not name.isascii():
        if _DEVIATIONS.search(name):
            # Python's codec (IDNA 2003) maps these away (faß.de to fass.de, another site) where
            # browsers keep them (xn--fa-hia.de): the policy would name a site not meant.
            raise Invalid(
                f"embed origin {origin!r}: give this host in its punycode form (xn--…); "
                "it has a letter (ß, ς) or joiner that browsers and IDNA 2003 encode differently"
            )
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            raise Invalid(
                f"embed origin {origin!r}: the host is not a valid internationalized name"
            ) from None
    name = name.lower()
    if name.endswith("."):
        name = name[:-1]
    if _IPV4.fullmatch(name):
        if wildcard or any(int(part) > 255 for part in name.split(".")):
            raise Invalid(f"embed origin {origin!r}: not a valid IPv4 address")
        return name
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise Invalid(f"embed origin {origin!r}: the host is not a valid domain name")
    if labels[-1].isdigit():
        raise Invalid(f"embed origin {origin!r}: the host is not a valid domain name")
    if wildcard and (len(labels) < 2 or _shared(name)):
        # is_public is also true of a name under no known top-level domain (*.localhost).
        raise Invalid(
            f"embed origin {origin!r}: a wildcard needs a domain of one owner under it "
            f"(https://*.example.org), not {name}, whose subdomains belong to different owners "
            "(a public suffix or a shared host): list the exact origins instead"
        )
    return f"*.{name}" if wildcard else name


def clean_origin(origin: str) -> str:
    """``origin`` in its serialized form (lowercase scheme and host, punycode, no default
    port, no trailing slash), or :class:`~app.core.errors.Invalid` saying why not.

    Origins are written into a response header, so each must be exactly a serialized
    origin (``scheme://host[:port]``, lowercase, punycode) or one with a leading wildcard
    label (``https://*.example.org``): nothing a header or a policy could read as more
    than one source (no spaces, semicolons, commas or quotes), and no keyword (``*``,
    ``'none'``, ``'self'``) nor scheme-only source (``data:``, ``https:``) that would let
    any site in. A wildcard over a host whose subdomains belong to different owners
    would let in sites of every owner, and is refused too: over a public suffix
    (``https://*.co.uk``, ``https://*.github.io``: names anyone can register under, by the
    Public Suffix List, its ICANN and private sections), over a host with public
    suffixes below it (``https://*.amazonaws.com``: ``s3.amazonaws.com``,
    ``*.compute.amazonaws.com`` … are on the list's private section, so its subdomains
    are customers' buckets and servers), and over the few hosts that give every user a
    subdomain without being on the list (:data:`SHARED_HOSTS`: ``https://*.wordpress.com``
    is every WordPress.com blog)."""
    if not isinstance(origin, str) or not origin:
        raise Invalid("embed origins must be non-empty strings")
    if len(origin) > MAX_ORIGIN_LENGTH:
        raise Invalid(f"an embed origin is at most {MAX_ORIGIN_LENGTH} characters")
    if _FORBIDDEN.search(origin) or any(ord(c) < 32 or ord(c) == 127 for c in origin):
        raise Invalid(
            f"embed origin {origin!r}: must be {_FORM}; no spaces, quotes, semicolons, commas, "
            "user names, queries or fragments"
        )
    scheme, sep, rest = origin.partition("://")
    m = _SHAPE.fullmatch(f"{scheme.lower()}{sep}{rest}")
    if m is None:
        raise Invalid(f"embed origin {origin!r}: must be {_FORM} (not a keyword such as * or 'self')")
    scheme = m["scheme"]
    if scheme not in _DEFAULT_PORTS:
        raise Invalid(f"embed origin {origin!r}: the scheme must be http or https")
    host = _host(m["host"], origin)
    port = m["port"]
    if port is not None:
        # isascii first: isdigit() is true of digits int() does not read (², ①).
        if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise Invalid(f"embed origin {origin!r}: the port must be a number between 1 and 65535")
        if int(port) == _DEFAULT_PORTS[scheme]:
            port = None
    return f"{scheme}://{host}" + (f":{int(port)}" if port is not None else "")


def clean_origins(origins: list[str] | None) -> list[str] | None:
    """The stored form of a survey's ``embed_origins``: each :func:`clean_origin`, repeats
    dropped, in the order given; None for none (an empty list clears them too)."""
    if not origins:
        return None
    if len(origins) > MAX_EMBED_ORIGINS:
        raise Invalid(f"a survey allows at most {MAX_EMBED_ORIGINS} embed origins")
    out: list[str] = []
    for origin in origins:
        cleaned = clean_origin(origin)
        if cleaned not in out:
            out.append(cleaned)
    return out


def frame_ancestors(origins: list[str] | None) -> str:
    """The ``frame-ancestors`` directive for a page framed only by ``origins`` (and the
    service itself); ``'none'`` without any."""
    if not origins:
        return "frame-ancestors 'none'"
    return "frame-ancestors 'self' " + " ".join(origins)


def _is_clean(origin: str) -> bool:
    """Whether a stored origin is still in its checked form (a header gets nothing else)."""
    try:
        return clean_origin(origin) == origin
    except Invalid:
        return False


class EmbedOrigins:
    """Each survey's embed origins, per process, kept for ``ttl`` seconds: every load of a
    respondent page asks for them, and a page does not need the row read again each time.

    A change through this process is seen at once (:meth:`forget`); through another worker
    process, within ``ttl`` seconds. Unknown surveys are remembered as having none."""

    def __init__(
        self,
        session_factory: Callable[[], Session],
        ttl: float = 5.0,
        max_entries: int = 10_000,
    ) -> None:
        self.session_factory = session_factory
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, tuple[str, ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, survey_id: str) -> tuple[str, ...]:
        """The survey's origins (none for an unknown survey or a path that is no survey id)."""
        if not _SURVEY_ID.fullmatch(survey_id):
            return ()
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(survey_id)
            if hit is not None and now - hit[0] < self.ttl:
                return hit[1]
        with self.session_factory() as session:
            stored = session.scalar(select(Survey.embed_origins).where(Survey.id == survey_id))
        origins = tuple(o for o in stored or () if isinstance(o, str) and _is_clean(o))
        with self._lock:
            self._entries[survey_id] = (now, origins)
            self._entries.move_to_end(survey_id)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return origins

    def forget(self, survey_id: str) -> None:
        with self._lock:
            self._entries.pop(survey_id, None)
