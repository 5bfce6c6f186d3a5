"""The application factory."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import signal
import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.routing import Match, Mount
from threadpoolctl import threadpool_limits

from . import __version__
from .analysis import router as analysis
from .analysis.fits import FitCache
from .core import docs, health
from .core import http_errors as errors
from .core.admission import Admission, Slots, admitted
from .core.body_limit import BodyLimit
from .core.config import Settings, get_settings
from .core.db.session import make_engine, make_session_factory, pool_capacity
from .core.deadline import SHUTDOWN, WorkSlots
from .core.downloads import Downloads
from .core.http_errors import logged_path, where
from .core.ratelimit import RateLimiter
from .core.secrets import service_secret
from .core.shipped import shipped
from .core.storable import storable_input
from .federation import router as federation
from .jobs import router as jobs
from .jobs.execution import JobContext
from .jobs.service import LocalRunner, QueueRunner
from .keys import router as keys
from .participation import router as participation
from .participation.public_results import PublicSnapshots
from .planning import router as plan
from .rankings.service import ConsensusCache
from .releases import router as releases
from .respondents import router as respondents
from .respondents.service import ExternalIds
from .respondents.undecided import UndecidedTickets
from .surveys import router as surveys
from .surveys.embedding import EmbedOrigins, frame_ancestors

__all__ = ["create_app"]

#: Pages must never be framed by another site, nor leak their URL to others. (The respondent
#: and results pages of a survey with embed origins may be framed by those: see _framed.)
_PAGE_HEADERS = {"Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
#: The project's own pages load only their own scripts and styles (no inline code).
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
)

log = logging.getLogger("privrank.access")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

DESCRIPTION = """
privrank runs privacy-preserving ranking surveys. Respondents compare items two
at a time, or rank a short list; each answer is randomized with the respondent's
own ε before it is stored (local differential privacy: randomized response for
pairs, the Mallows mechanism for whole rankings), and analysts get the debiased
regularized MLE of the Bradley–Terry–Luce model (Xu, Sun & Cheng) or a consensus
ranking (Borda, Lehmer, Kemeny). Trusted operators can store true answers and
release only differentially private results; federated sites can aggregate
rankings they never pool.

Authentication: `Authorization: Bearer <key>` — an admin key, an analyst key
(`POST /v1/keys`), a respondent token (`POST /v1/surveys/{id}/respondents`), or
a federated site's credential (`POST /v1/surveys/{id}/rounds`).
Errors are JSON `{"detail": …}`; a rejected request stores nothing.
"""


_INTERNAL = json.dumps({"detail": "internal error"}).encode()


class _RedactAccessLog(logging.Filter):
    """The same for uvicorn's own access log (``PRIVRANK_ACCESS_LOG``), whose record
    arguments are (client, method, path, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], logged_path(args[2]), *args[3:])
        return True


class _HeadersAndLog:
    """Security headers on every response, the full ``Allow`` list on 405s, and one log
    line per request (method, path, status, duration: never bodies — answers — nor query
    strings nor the client's address). A plain ASGI middleware: Starlette's
    ``BaseHTTPMiddleware`` costs a task group and a stream per request and layer.

    An unexpected exception ends here: logged by type and place only, answered 500.
    It must not reach Starlette's outermost error middleware, which re-raises it to
    the server, whose traceback would print the exception's message — for a database
    error that is the driver's text, with PostgreSQL's DETAIL naming the row's values
    (a respondent and a pair)."""

    def __init__(self, app, allowed: _MethodIndex) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        path = scope["path"]
        status = 500

        started = False

        async def send_with_headers(message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                headers = MutableHeaders(scope=message)
                if status == 405:
                    # Starlette names only the first route that matched the path; list them all.
                    methods = self.allowed.methods(path)
                    if methods:
                        headers["Allow"] = ", ".join(methods)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                if headers.get("content-type", "").startswith("text/html"):
                    headers.setdefault("Referrer-Policy", "no-referrer")
                    # A page's own policy comes first (/docs, an embeddable survey page); X-Frame-Options
                    # only where no site may frame the page (it cannot name the sites that may).
                    policy = headers.setdefault("Content-Security-Policy", _CSP)
                    if "frame-ancestors 'none'" in policy:
                        headers.setdefault("X-Frame-Options", "DENY")
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception as exc:
            method = scope["method"]
            log.error(
                "unexpected %s during %s %s at %s", type(exc).__name__, method, logged_path(path), where(exc)
            )
            if not started:
                await send_with_headers(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(_INTERNAL)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": _INTERNAL})
        finally:
            elapsed = (time.perf_counter() - start) * 1e3
            log.info("%s %s %d %.1fms", scope["method"], logged_path(path), status, elapsed)


def _stop_long_work_on_signals() -> None:
    """SIGTERM / SIGINT also set :data:`~app.core.deadline.SHUTDOWN`, so that long
    computations stop at their next check instead of holding up the server's graceful
    shutdown (which waits for every request in flight). Chained before the server's
    own handlers; only possible from the main thread (not under the test client)."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)
        if getattr(previous, "_privrank_shutdown", False):
            continue

        def handler(number, frame, previous=previous) -> None:
            SHUTDOWN.set()
            if callable(previous):
                previous(number, frame)
            elif previous == signal.SIG_DFL and number == signal.SIGINT:
                raise KeyboardInterrupt

        handler._privrank_shutdown = True  # type: ignore[attr-defined]
        try:
            signal.signal(signum, handler)
        except ValueError:  # not the main thread
            return


@asynccontextmanager
async def _lifespan(_app: FastAPI):
    _stop_long_work_on_signals()
    _app.state.jobs.open()
    yield
    _app.state.jobs.close()  # jobs waiting here stay queued, for another process to take


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    if not logging.getLogger().handlers:
        # A worker process uvicorn spawned (--workers > 1) inherits no logging set-up from
        # `privrank serve`: without this its own log lines (privrank.*) would be dropped.
        logging.basicConfig(level=settings.log_level.upper(), format=LOG_FORMAT)
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactAccessLog) for f in access.filters):
        access.addFilter(_RedactAccessLog())
    # Requests run in a thread pool and workers are processes: one BLAS thread
    # each avoids oversubscribing the cores (and OpenBLAS's spinning threads).
    threadpool_limits(limits=1, user_api="blas")
    app = FastAPI(
        title="privrank",
        version=__version__,
        description=DESCRIPTION,
        lifespan=_lifespan,
        docs_url=None,  # /docs and /redoc: app.core.docs, from the bundled copies (no CDN)
        redoc_url=None,
        # NUL or a lone surrogate in a path, a query or a JSON body: 404 / 422 (app.core.storable).
        dependencies=[Depends(storable_input)],
        openapi_tags=[
            {"name": "surveys", "description": "Create and manage surveys (admin)."},
            {"name": "respondents", "description": "Register, fetch pairs, answer (survey frontends)."},
            {"name": "analysis", "description": "Rankings and the releasable data (analysts)."},
            {"name": "releases", "description": "Differentially private releases of central-model surveys."},
            {
                "name": "federated",
                "description": "Federated rounds: sites aggregate their rankings under secure aggregation.",
            },
            {"name": "planner", "description": "Predict a design's accuracy before the survey runs."},
            {"name": "keys", "description": "Analyst keys (admin)."},
            {"name": "health", "description": "Liveness and readiness probes."},
        ],
    )
    engine = make_engine(settings.database_url, settings.db_pool_size)
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.fit_cache = FitCache(settings.analysis_cache_mb * 2**20, settings.analysis_concurrency)
    # One memory budget and one set of turns for every analysis of the worker.
    app.state.consensus_cache = ConsensusCache(app.state.fit_cache.lru, app.state.fit_cache.work)
    app.state.downloads = Downloads(settings.max_downloads, settings.send_timeout)
    # Jobs share the analysis cache's memory but not its turns: a long job must not hold
    # a turn that the requests' fits need (PRIVRANK_JOB_THREADS turns of their own).
    job_cache = copy.copy(app.state.fit_cache)
    job_cache.work = WorkSlots(settings.job_threads)
    # The public results page is anonymous: its computations get one turn of their own.
    public_cache = copy.copy(app.state.fit_cache)
    public_cache.work = WorkSlots(1)
    app.state.public_results = PublicSnapshots(
        public_cache, ConsensusCache(app.state.fit_cache.lru, public_cache.work)
    )
    job_context = JobContext(app.state.session_factory, job_cache, settings.job_seconds)
    app.state.jobs = (
        QueueRunner(settings.redis_url, settings.job_seconds, settings.job_backlog)
        if settings.job_queue == "rq" and settings.redis_url
        else LocalRunner(job_context, settings.job_threads, settings.job_backlog)
    )
    app.state.rate_limiter = RateLimiter(
        {
            "register": settings.register_per_minute,
            "integration": settings.integration_per_minute,
            "auth_failures": settings.auth_failures_per_minute,
        },
        per_hour={"suggestions": settings.suggest_per_hour},
        redis_url=settings.redis_url,
        salt=lambda: service_secret(app.state.session_factory, "ratelimit"),
    )
    app.state.external_ids = ExternalIds(app.state.session_factory)
    app.state.undecided_tickets = UndecidedTickets(app.state.session_factory)
    app.state.embed_origins = EmbedOrigins(app.state.session_factory)

    if settings.cors_origin_list:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list,
            allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
            expose_headers=["Idempotent-Replayed"],
        )

    allowed = _MethodIndex(app)

    app.state.admission = Slots(admitted(pool_capacity(engine)))
    app.add_middleware(Admission, slots=app.state.admission, queue_limit=settings.max_queue)
    app.add_middleware(_HeadersAndLog, allowed=allowed)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes, import_limit=settings.max_import_bytes)
    errors.install(app)
    for module in (
        surveys,
        respondents,
        participation,
        analysis,
        releases,
        federation,
        plan,
        jobs,
        keys,
        health,
        docs,
    ):
        app.include_router(module.router)
    app.include_router(keys.whoami_router)
    pages = static_dir()

    # HEAD too (FastAPI's routes answer GET only): a HEAD fell through to the file server,
    # whose 404 said that the survey's page did not exist.
    @app.api_route("/s/{survey_id}", methods=["GET", "HEAD"], include_in_schema=False)
    def respondent_page(survey_id: str) -> FileResponse:
        """The respondent page; it reads the survey id from its own URL."""
        return FileResponse(pages / "respond.html", headers=_framed(app, survey_id))

    @app.api_route("/r/{survey_id}", methods=["GET", "HEAD"], include_in_schema=False)
    def results_page(survey_id: str) -> FileResponse:
        """The public results page (surveys that publish them); it reads the survey id from its URL."""
        return FileResponse(pages / "results.html", headers=_framed(app, survey_id))

    # Pages last: API routes take precedence over files. /static/… is the same
    # directory under the name survey frontends embed (e.g. /static/privrank.js).
    app.mount("/static", StaticFiles(directory=pages), name="assets")
    app.router.routes.append(_Pages("/", StaticFiles(directory=pages, html=True), name="pages"))
    return app


def _framed(app: FastAPI, survey_id: str) -> dict[str, str]:
    """The headers of a survey's respondent or results page: those of every page, unless the
    survey names sites that may embed it (``embed_origins``, read through a cache of a few
    seconds): then ``frame-ancestors`` lists them and there is no X-Frame-Options."""
    origins = app.state.embed_origins.get(survey_id)
    if not origins:
        return _PAGE_HEADERS
    return {
        "Referrer-Policy": "no-referrer",
        "Content-Security-Policy": _CSP.replace("frame-ancestors 'none'", frame_ancestors(list(origins))),
    }


class _MethodIndex:
    """The HTTP methods the OpenAPI document lists for each path (built on first use)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._index: list[tuple[re.Pattern, list[str]]] | None = None

    def methods(self, path: str) -> list[str]:
        if self._index is None:
            index = []
            for template, item in self.app.openapi()["paths"].items():
                pattern = re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)) + "$")
                verbs = sorted(m.upper() for m in item if m in ("get", "post", "put", "patch", "delete"))
                index.append((pattern, verbs))
            self._index = index
        out: set[str] = set()
        for pattern, verbs in self._index:
            if pattern.match(path):
                out.update(verbs)
        if "GET" in out:
            out.add("HEAD")
        return sorted(out)


class _Pages(Mount):
    """The pages at /, except under the API's prefixes: an unsupported method on an API
    path must get the router's 405 with the right ``Allow`` header, not the file
    server's (a mount at / would otherwise match every path fully)."""

    def matches(self, scope):
        if scope["type"] == "http" and scope["path"].startswith(_API_PREFIXES):
            return Match.NONE, {}
        return super().matches(scope)


_API_PREFIXES = ("/v1/", "/healthz", "/readyz", "/openapi.json", "/docs", "/redoc")


def static_dir() -> Path:
    """The pages' directory (:func:`app.core.shipped.shipped`), or ``PRIVRANK_STATIC_DIR``."""
    override = os.environ.get("PRIVRANK_STATIC_DIR")
    return Path(override) if override else shipped("static")
