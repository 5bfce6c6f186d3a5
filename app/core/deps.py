"""Request-scoped dependencies: the database session and the caller.

FastAPI runs a plain function in a worker thread and a coroutine on the event loop;
each thread hand-off costs a request more than a role check or making a session does
(benchmark: tests/benchmarks/bench_service.py, row 2). So what does no database I/O is
a coroutine, and a request needs one hand-off for its caller and one for its handler.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import anyio
import anyio.to_thread
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from . import auth
from .config import Settings
from .db.models import Respondent, RoundSite, Survey
from .errors import Forbidden, Unauthorized
from .lookup import get_survey
from .ratelimit import RateLimiter, TooManyRequests, client_address

__all__ = [
    "AdminDep",
    "IntegrationDep",
    "ModeratorDep",
    "PrincipalDep",
    "ReaderDep",
    "RespondentDep",
    "SessionDep",
    "SettingsDep",
    "SiteDep",
    "admin",
    "bearer_token",
    "get_session",
    "get_settings",
    "integration",
    "moderator",
    "principal",
    "reader",
    "respondent_of_survey",
    "site",
    "viewer",
]

_bearer = HTTPBearer(
    auto_error=False,
    description="Admin, analyst, moderator or integration key, a respondent token, or a federated "
    "site's credential.",
)


async def get_settings(request: Request) -> Settings:
    """The service's settings (a coroutine: FastAPI runs a plain function in a worker
    thread, a hand-off that cost more than reading an attribute)."""
    return request.app.state.settings


async def get_session(request: Request) -> AsyncIterator[Session]:
    """The request's session. Making one touches no database; closing one that holds a
    connection (an open transaction) rolls it back over the network, in a worker thread."""
    session = request.app.state.session_factory()
    try:
        yield session
    finally:
        if session.in_transaction():
            # Its own limiter, as FastAPI exits a dependency: closing never waits for a
            # free thread of the shared pool (which running handlers may all hold).
            await anyio.to_thread.run_sync(session.close, limiter=anyio.CapacityLimiter(1))
        else:
            session.close()


#: A configured ``PRIVRANK_ADMIN_KEY`` at least this long is honoured from an address that
#: is over its failed-authentication limit; a shorter one could be guessed, so it is not.
STRONG_ADMIN_KEY = 20


def principal(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),
    session: Session = Depends(get_session),
) -> auth.Principal:
    """The caller. Failed authentications are rate-limited per client address, not
    valid ones: a credential is always checked, and a valid one is served even when
    others failed from the same address (a NAT, a proxy) — every server-issued
    credential carries 256 random bits, so the limit is not what stops guessing
    them. A failure over the limit gets 429 instead of 401. The one exception is a
    configured admin key shorter than :data:`STRONG_ADMIN_KEY` characters: from an
    address over the limit it is refused (429) like a failure, so that it cannot be
    guessed at full speed."""
    return _caller(request, credentials, session)


def _caller(
    request: Request, credentials: HTTPAuthorizationCredentials | None, session: Session
) -> auth.Principal:
    """:func:`principal`'s work, for the dependencies that need the caller and more
    database reads in the same worker thread. A caller found is kept for the request,
    so that two dependencies naming it authenticate it once (a failure ends the request)."""
    known = getattr(request.state, "caller", None)
    if known is not None:
        return known
    if credentials is None or not credentials.credentials:
        raise Unauthorized("missing bearer credentials")
    limiter: RateLimiter = request.app.state.rate_limiter
    client = client_address(request)
    admin_key = request.app.state.settings.admin_key
    who = auth.authenticate(session, credentials.credentials, admin_key)
    weak = (
        who is not None
        and who.role == auth.ADMIN
        and who.key_id is None  # the configured key, not a key the service issued
        and len(admin_key or "") < STRONG_ADMIN_KEY
    )
    if who is not None and not weak:
        request.state.caller = who
        return who
    if who is None:
        wait = limiter.take("auth_failures", client)
    else:
        wait = limiter.retry_after("auth_failures", client)
    if wait is not None:
        raise TooManyRequests("too many failed authentications from this address; retry later", wait)
    if who is None:
        raise Unauthorized("invalid credentials")
    request.state.caller = who
    return who


async def admin(who: auth.Principal = Depends(principal)) -> auth.Principal:
    if who.role != auth.ADMIN:
        raise Forbidden("this call needs an admin key")
    return who


async def reader(who: auth.Principal = Depends(principal)) -> auth.Principal:
    """Admins and analysts."""
    if who.role not in (auth.ADMIN, auth.ANALYST):
        raise Forbidden("this call needs an admin or analyst key")
    return who


async def moderator(who: auth.Principal = Depends(principal)) -> auth.Principal:
    """Admins and moderators."""
    if who.role not in (auth.ADMIN, auth.MODERATOR):
        raise Forbidden("this call needs an admin or moderator key")
    return who


async def viewer(who: auth.Principal = Depends(principal)) -> auth.Principal:
    """Admins, analysts and moderators: the survey list and a survey's settings and items."""
    if who.role not in (auth.ADMIN, auth.ANALYST, auth.MODERATOR):
        raise Forbidden("this call needs an admin, analyst or moderator key")
    return who


def integration(request: Request, session: Session = Depends(get_session)) -> auth.Principal | None:
    """The calling integration key, or None for every other caller. For calls that need no
    credentials (registering a respondent): any other credential, valid or not, is
    ignored: it is neither checked against the failure limit nor refused.
    (The header is read directly, not through the bearer scheme, so that the OpenAPI
    document does not make credentials required there.)"""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith("key_"):
        return None
    who = auth.authenticate(session, token, None)
    return who if who is not None and who.role == auth.INTEGRATION else None


def respondent_of_survey(
    survey_id: str,
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),
    session: Session = Depends(get_session),
) -> tuple[Survey, Respondent]:
    """The survey and the calling respondent, who must belong to it (one worker thread
    for the caller and the survey)."""
    who = _caller(request, credentials, session)
    if who.role != auth.RESPONDENT:
        raise Forbidden("this call needs a respondent token")
    if who.survey_id != survey_id:
        raise Forbidden("this respondent token belongs to another survey")
    return get_survey(session, survey_id), auth.respondent_of(session, who)


def bearer_token(request: Request) -> str:
    """The caller's bearer token (already authenticated): a respondent's is the key of its
    slots, flags and passes, which the database does not hold."""
    return request.headers.get("authorization", "").partition(" ")[2].strip()


def site(who: auth.Principal = Depends(principal), session: Session = Depends(get_session)) -> RoundSite:
    """The calling federated site (its credential names exactly one site of one round)."""
    if who.role != auth.SITE:
        raise Forbidden("this call needs a federated site's credential")
    return auth.site_of(session, who)


# -- the dependencies as annotated types (what a router's signature names) ----------

#: The request's database session (one pooled connection, closed after the response).
SessionDep = Annotated[Session, Depends(get_session)]
#: The service's settings.
SettingsDep = Annotated[Settings, Depends(get_settings)]
#: Whoever the credentials stand for (any valid credential).
PrincipalDep = Annotated[auth.Principal, Depends(principal)]
#: An admin.
AdminDep = Annotated[auth.Principal, Depends(admin)]
#: An admin or an analyst.
ReaderDep = Annotated[auth.Principal, Depends(reader)]

ViewerDep = Annotated[auth.Principal, Depends(viewer)]
#: An admin or a moderator.
ModeratorDep = Annotated[auth.Principal, Depends(moderator)]
#: The survey of the path and the calling respondent, who belongs to it.
RespondentDep = Annotated[tuple[Survey, Respondent], Depends(respondent_of_survey)]
#: The calling integration key, or None (anyone else: the call needs no credentials).
IntegrationDep = Annotated[auth.Principal | None, Depends(integration)]
#: The calling federated site.
SiteDep = Annotated[RoundSite, Depends(site)]
