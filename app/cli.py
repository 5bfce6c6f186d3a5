"""The ``privrank`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="privrank", description="Privacy-preserving ranking surveys.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="apply migrations and run the REST service",
        description="Apply database migrations, create an admin key on first start if "
        "PRIVRANK_ADMIN_KEY is unset (printed once), then serve the API with uvicorn. "
        "DATABASE_URL selects the database (default: SQLite file ./privrank.db).",
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port (default %(default)s)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default %(default)s)")
    serve.add_argument("--no-migrate", action="store_true", help="do not apply migrations first")

    sub.add_parser("migrate", help="apply database migrations (DATABASE_URL) and exit")

    sim = sub.add_parser(
        "simulate",
        help="reproduce the paper's simulation Scenarios I-V (tables and figures)",
        description="Reproduce Scenarios I-V of Xu, Sun & Cheng: one table per scenario on "
        "stdout and one PNG figure per scenario (cf. the paper's Figures 2-6).",
    )
    sim.add_argument(
        "--scenario",
        "-s",
        action="append",
        choices=["I", "II", "III", "IV", "V"],
        help="scenario to run (repeatable; default: all)",
    )
    size = sim.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true", help="10 replicates per cell instead of the paper's 50/100 (seconds)"
    )
    size.add_argument(
        "--replications",
        "-r",
        type=int,
        metavar="N",
        help="replicates per cell (default: the paper's, 50 or 100)",
    )
    sim.add_argument("--seed", type=int, default=20241121, help="master seed (default %(default)s)")
    sim.add_argument(
        "--out",
        type=Path,
        default=Path("simulation-results"),
        help="directory for the PNG figures (default %(default)s)",
    )
    sim.add_argument("--no-figures", action="store_true", help="print tables only")
    return parser


def _prepare_database(migrate: bool = True) -> None:
    from .config import get_settings
    from .db.migrate import upgrade
    from .db.session import make_engine, make_session_factory
    from .services.auth import ensure_admin_key

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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "migrate":
        from .config import get_settings
        from .db.migrate import upgrade

        upgrade(get_settings().database_url)
        print("privrank: database is at the latest schema")
        return 0
    if args.command == "serve":
        import logging

        import uvicorn

        from .config import get_settings

        logging.basicConfig(
            level=get_settings().log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        _prepare_database(migrate=not args.no_migrate)
        uvicorn.run(
            "app.main:create_app",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level=get_settings().log_level,
            access_log=False,
        )
        return 0
    if args.command == "simulate":
        from . import simulate

        if args.replications is not None and args.replications < 2:
            print("privrank simulate: --replications must be at least 2", file=sys.stderr)
            return 2
        reps = 10 if args.quick else args.replications
        simulate.run(
            args.scenario or simulate.available(), reps, args.seed, None if args.no_figures else args.out
        )
        return 0
    return 2  # pragma: no cover - argparse rejects unknown commands


def run() -> int:
    """Console-script entry point: like :func:`main`, quiet when stdout closes early."""
    try:
        return main()
    except BrokenPipeError:  # e.g. `privrank simulate | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
