"""HTTP for the command-line clients that carry a key (``plan --survey``, ``export``, ``site``).

urllib follows a redirect with the request's headers — the ``Authorization`` header
among them — to any host, plain http included. These clients talk to one service whose
address the user gave, so they never follow a redirect: :func:`open_keyed` raises
:class:`RedirectRefused` (a :class:`urllib.error.URLError`, so the clients' "cannot reach"
handling reports it) naming where the server tried to send the request.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

__all__ = ["RedirectRefused", "open_keyed"]


class RedirectRefused(urllib.error.URLError):
    """The server answered with a redirect, which was not followed."""

    def __init__(self, method: str, url: str, code: int, target: str) -> None:
        path = urllib.parse.urlsplit(url).path
        super().__init__(
            f"{method} {path}: the server redirected ({code}) to {target}; not followed (the key "
            "would go with it): give the service's own address"
        )
        self.target = target


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise RedirectRefused(req.get_method(), req.full_url, code, newurl)


_OPENER = urllib.request.build_opener(_NoRedirects)


def open_keyed(request: urllib.request.Request, timeout: float):
    """``urlopen(request)`` that refuses redirects (:class:`RedirectRefused`)."""
    return _OPENER.open(request, timeout=timeout)
