"""The ``privrank`` command (docs/reference/cli.md): :func:`main` parses the command line
(:mod:`.parser`) and hands each command to its module.

``serve``, ``migrate``, ``admin-key`` and ``worker`` run in :mod:`.service`, ``plan`` in
:mod:`.plan`; the arguments of ``simulate``, ``site`` and ``export`` are checked here,
and the work is done by :mod:`.simulate`, :mod:`.site` and :mod:`.exporter`.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from .parser import build_parser

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("migrate", "serve", "admin-key"):
        from .service import database_command

        return database_command(args)
    if args.command == "worker":
        from .service import worker_command

        return worker_command(args)
    if args.command == "plan":
        from .plan import plan_command

        return plan_command(args)
    if args.command == "site":
        return _site(args)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "export":
        return _export(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _simulate(args) -> int:
    from . import simulate

    if args.replications is not None and args.replications < 2:
        print("privrank simulate: --replications must be at least 2", file=sys.stderr)
        return 2
    reps = 10 if args.quick else args.replications
    simulate.run(
        args.scenario or simulate.available(), reps, args.seed, None if args.no_figures else args.out
    )
    return 0


def _site(args) -> int:
    import json
    import os

    from .site import SiteError, contribute

    token = args.token or os.environ.get("PRIVRANK_SITE_TOKEN")
    if not token:
        print(
            "privrank site: give the site's credential with --token or PRIVRANK_SITE_TOKEN", file=sys.stderr
        )
        return 2
    try:
        if args.site_command == "status":
            from .site import SiteClient, status_lines

            view = SiteClient(args.server, token).call("GET", "/v1/site")
            if args.json:
                print(json.dumps(view, indent=2, ensure_ascii=False))
            else:
                print("\n".join(status_lines(view)))
            return 0
        if args.epsilon is not None:
            from ..surveys.policy import MAX_EPSILON, MIN_EPSILON

            if not (0 < args.epsilon < math.inf and MIN_EPSILON <= args.epsilon <= MAX_EPSILON):
                print(
                    f"privrank site: --epsilon must be a positive finite number in [{MIN_EPSILON:g}, "
                    f"{MAX_EPSILON:g}] (the bounds of a survey's epsilon; the server refuses others)",
                    file=sys.stderr,
                )
                return 2
        return contribute(
            args.server, token, args.rankings, args.format, args.state, args.wait, epsilon=args.epsilon
        )
    except SiteError as exc:
        print(f"privrank site: {exc}", file=sys.stderr)
        return 1


def _export(args) -> int:
    import os

    from .exporter import ExportError, export_survey

    key = args.key or os.environ.get("PRIVRANK_API_KEY")
    if not key:
        print("privrank export: give an admin or analyst key (--key or PRIVRANK_API_KEY)", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else Path(f"privrank-export-{args.survey}")
    try:
        written = export_survey(args.server, key, args.survey, out, args.format, args.force)
    except ExportError as exc:
        print(f"privrank export: {exc}", file=sys.stderr)
        return exc.status
    except OSError as exc:
        print(f"privrank export: cannot write into {out}: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


def run() -> int:
    """Console-script entry point: like :func:`main`, quiet when stdout closes early."""
    try:
        return main()
    except BrokenPipeError:  # e.g. `privrank simulate | head`
        sys.stderr.close()
        return 0
