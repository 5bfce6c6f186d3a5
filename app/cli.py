"""The ``privrank`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="privrank", description="Privacy-preserving ranking surveys.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
