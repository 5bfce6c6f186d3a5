"""``privrank serve``, ``migrate``, ``admin-key rotate`` and ``worker``: the service itself.

Each reads DATABASE_URL's database (docs/reference/cli.md); an unusable database is one
line naming it, not a traceback (:func:`database_command`).
"""

from __future__ import annotations

import sys

__all__ = ["dashboard_url", "database_command", "worker_command"]


def database_command(args) -> int:
    """``privrank migrate``, ``serve`` and ``admin-key``, run against DATABASE_URL."""
    from sqlalchemy.exc import ArgumentError, OperationalError

    from ..core.config import get_settings

    try:
        if args.command == "admin-key":
            return _rotate_admin_key(args)
        return _migrate() if args.command == "migrate" else _serve(args)
    except (OperationalError, ArgumentError) as exc:
        return _database_unusable(get_settings().database_url, exc)


def _prepare_database(migrate: bool = True) -> None:
    from ..core.auth import ensure_admin_key
    from ..core.config import get_settings
    from ..core.db.migrate import upgrade
    from ..core.db.session import make_engine, make_session_factory

    settings = get_settings()
    if migrate:
        upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            key = ensure_admin_key(session, settings.admin_key)
    finally:
        engine.dispose()
    if key is not None:
        print(
            "privrank: no PRIVRANK_ADMIN_KEY set, so an admin key was generated. It is shown "
            f"only this once (only its hash is stored):\n\n    {key}\n",
            flush=True,
        )
    _retire_generated_admin_key()


def _retire_generated_admin_key() -> None:
    """With PRIVRANK_ADMIN_KEY configured, revoke the admin key generated on first start
    (one line when one was revoked)."""
    from ..core.config import get_settings
    from ..core.db.session import make_engine, make_session_factory
    from ..keys.service import revoke_generated_admin_keys

    settings = get_settings()
    if not settings.admin_key:
        return
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            revoked = revoke_generated_admin_keys(session, settings.admin_key)
    finally:
        engine.dispose()
    if revoked:
        print(
            "privrank: PRIVRANK_ADMIN_KEY is set, so the admin key generated on first start "
            f"({', '.join(revoked)}) was revoked",
            flush=True,
        )


def _rotate_admin_key(args) -> int:
    """``privrank admin-key rotate``: a new admin key, printed once; the others revoked."""
    from ..core.config import get_settings
    from ..core.db.session import make_engine, make_session_factory
    from ..keys.service import ROTATED_LABEL, rotate_admin_key

    settings = get_settings()
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            key_id, plaintext, revoked = rotate_admin_key(session, args.label or ROTATED_LABEL)
    finally:
        engine.dispose()
    print(
        f"privrank: new admin key {key_id}. It is shown only this once (only its hash is stored):"
        f"\n\n    {plaintext}\n",
        flush=True,
    )
    if revoked:
        print(f"privrank: revoked {len(revoked)} other admin key(s): {', '.join(revoked)}")
    else:
        print("privrank: there was no other admin key in the database to revoke")
    if settings.admin_key:
        print("privrank: PRIVRANK_ADMIN_KEY (environment) is not affected")
    return 0


def _database_unusable(url: str, exc: Exception) -> int:
    """One line naming DATABASE_URL (password hidden) and the driver's reason, instead of
    a traceback, when the database cannot be reached or the URL is malformed."""
    from sqlalchemy.engine import make_url

    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:  # a URL too malformed to parse: say so without echoing it
        shown = "(unparseable)"
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    reason = lines[0] if lines else type(exc).__name__
    print(f"privrank: cannot use the database at DATABASE_URL={shown}: {reason}", file=sys.stderr)
    return 1


def worker_command(args) -> int:
    import logging

    from ..core.config import get_settings
    from ..jobs.service import run_worker
    from ..main import LOG_FORMAT

    settings = get_settings()
    logging.basicConfig(level=settings.log_level.upper(), format=LOG_FORMAT)
    if not settings.redis_url:
        print(
            "privrank: the worker needs REDIS_URL (and API instances PRIVRANK_JOB_QUEUE=rq)", file=sys.stderr
        )
        return 2
    run_worker(settings.redis_url, burst=args.burst)
    return 0


def _migrate() -> int:
    from ..core.config import get_settings
    from ..core.db.migrate import upgrade

    upgrade(get_settings().database_url)
    print("privrank: database is at the latest schema")
    _retire_generated_admin_key()
    return 0


def dashboard_url(host: str, port: int) -> str:
    """The dashboard's address for a server bound to ``host``: on a wildcard (every interface)
    it is reached as localhost on this machine; an IPv6 address is bracketed."""
    if host in ("", "0.0.0.0", "::"):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def _serve(args) -> int:
    import logging

    import uvicorn

    from ..core.config import get_settings
    from ..main import LOG_FORMAT

    logging.basicConfig(level=get_settings().log_level.upper(), format=LOG_FORMAT)
    if get_settings().log_level != "debug":
        # Alembic announces every plugin and step at INFO: quiet unless debugging.
        logging.getLogger("alembic").setLevel(logging.WARNING)
    _prepare_database(migrate=not args.no_migrate)
    print(
        f"privrank: the dashboard is at {dashboard_url(args.host, args.port)}",
        flush=True,
    )
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=get_settings().log_level,
        access_log=get_settings().access_log,
        # Client addresses (rate limits) come from X-Forwarded-For only when the
        # operator names the proxies to trust; uvicorn's own default trusts 127.0.0.1.
        proxy_headers=bool(get_settings().forwarded_allow_ips),
        forwarded_allow_ips=get_settings().forwarded_allow_ips or None,
    )
    return 0
