"""The interactive API documentation, /docs (Swagger UI) and /redoc (ReDoc), from the copies
bundled in ``static/vendor`` (README there): no CDN, no web fonts, nothing fetched from
another host, so the documentation works offline and tells no third party who reads it.

Each page gets a Content-Security-Policy as tight as it works with: Swagger UI's one inline
script is allowed by its hash (no validator badge, which would call validator.swagger.io);
ReDoc runs as a module with its telemetry off and needs inline styles (its components inject
their own); both may connect only to this service. (The bundled ReDoc has one change: its
sidebar's Redocly logo is not fetched from cdn.redoc.ly; see ``static/vendor/README.md``.)
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse

__all__ = ["OAUTH2_REDIRECT", "router"]

router = APIRouter(include_in_schema=False)

SWAGGER_UI = "/static/vendor/swagger-ui"
REDOC = "/static/vendor/redoc"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)
_COMMON = (
    "default-src 'none'; img-src 'self' data:; font-src 'self'; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
)


def _hashes(html: str) -> str:
    """The CSP hash sources of the page's inline scripts."""
    return " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html)
    )


def _text(response: HTMLResponse) -> str:
    return bytes(response.body).decode()


def _page(html: str, policy: str) -> HTMLResponse:
    return HTMLResponse(html, headers={"Content-Security-Policy": policy})


_FAVICON = f"{SWAGGER_UI}/favicon-32x32.png"
#: The two pages by name: FastAPI's renderer, and the bundled assets the page loads.
_PAGES: dict[str, tuple[Callable[..., HTMLResponse], dict[str, Any]]] = {
    "Swagger UI": (
        get_swagger_ui_html,
        {
            "swagger_js_url": f"{SWAGGER_UI}/swagger-ui-bundle.js",
            "swagger_css_url": f"{SWAGGER_UI}/swagger-ui.css",
            "swagger_favicon_url": _FAVICON,
            "oauth2_redirect_url": OAUTH2_REDIRECT,
            # No validator badge: it would send the document's URL to validator.swagger.io.
            "swagger_ui_parameters": {"validatorUrl": None},
        },
    ),
    "ReDoc": (
        get_redoc_html,
        {
            "redoc_js_url": f"{REDOC}/redoc.standalone.js",
            "redoc_favicon_url": _FAVICON,
            "with_google_fonts": False,
        },
    ),
}


def _render(page: str, openapi_url: str, title: str) -> str:
    """``page`` (Swagger UI or ReDoc) as FastAPI renders it, over the OpenAPI document at
    ``openapi_url``, titled after the service."""
    render, assets = _PAGES[page]
    return _text(render(openapi_url=openapi_url, title=f"{title} - {page}", **assets))


def _policy(scripts: str, fonts: str = "'self'") -> str:
    """The Content-Security-Policy of a documentation page with these script and font sources;
    both pages need inline styles."""
    return f"script-src {scripts}; style-src 'self' 'unsafe-inline'; {_COMMON}".replace(
        "font-src 'self'", f"font-src {fonts}"
    )


@lru_cache(maxsize=4)
def _swagger_ui(openapi_url: str, title: str) -> tuple[str, str]:
    html = _render("Swagger UI", openapi_url, title)
    # Swagger UI sets style attributes in the markup it renders (e.g. the models' toggles).
    return html, _policy(f"'self' {_hashes(html)}")


@lru_cache(maxsize=4)
def _redoc(openapi_url: str, title: str) -> tuple[str, str]:
    html = _render("ReDoc", openapi_url, title)
    # ReDoc 3 is an ES module, and reports usage to its maker unless told not to.
    script, element = f'<script src="{REDOC}/redoc.standalone.js"> </script>', "<redoc spec-url="
    if html.count(script) != 1 or html.count(element) != 1:  # pragma: no cover - FastAPI changed its page
        raise RuntimeError("unexpected ReDoc page from FastAPI: cannot load the bundled ReDoc as a module")
    html = html.replace(script, f'<script type="module" src="{REDOC}/redoc.standalone.js"></script>')
    html = html.replace(element, '<redoc disable-telemetry="true" spec-url=')
    # Its components inject their own styles, and its stylesheet embeds a font as a data: URL.
    return html, _policy("'self'", fonts="'self' data:")


@lru_cache(maxsize=1)
def _oauth2_redirect() -> tuple[str, str]:
    html = _text(get_swagger_ui_oauth2_redirect_html())
    return html, f"script-src {_hashes(html)}; {_COMMON}"


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI over this service's OpenAPI document (bundled assets only)."""
    return _page(*_swagger_ui(request.app.openapi_url, request.app.title))


@router.get(OAUTH2_REDIRECT)
def swagger_ui_redirect() -> HTMLResponse:
    """Swagger UI's OAuth2 redirect page."""
    return _page(*_oauth2_redirect())


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    """ReDoc over this service's OpenAPI document (bundled assets only)."""
    return _page(*_redoc(request.app.openapi_url, request.app.title))
