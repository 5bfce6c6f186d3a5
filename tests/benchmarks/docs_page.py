"""Write a benchmark's figures into docs/benchmarks.md, between its block's markers.

The page holds one generated block per benchmark run that writes it::

    <!-- BEGIN generated: bench_scale -->
    …
    <!-- END generated: bench_scale -->

``write_block`` replaces what lies between a block's markers with a table of the run's
rows and a line naming the command, the date and the machine (cores, architecture,
Python), and leaves the rest of the page as it is. Benchmarks call it with
``--write-docs``; a ``--quick`` run never writes (its sizes are a smoke test's).
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _verdict(target: object, ok: bool | None) -> str:
    if ok is None or str(target) in ("reference", "reported", "—"):
        return ""
    return "met" if ok else "**missed**"


def render(rows: Iterable[Sequence], command: str, notes: Sequence[str] = ()) -> str:
    """A block's Markdown: the rows (name, figure, target, verdict: True, False or None) and
    where they come from."""
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    lines = [
        f"Written by `{command}` on {when} ({machine}).",
        "",
        "| case | measured | target | verdict |",
        "|---|---|---|---|",
    ]
    for name, figure, target, ok in rows:
        lines.append(f"| {_cell(name)} | {_cell(figure)} | {_cell(target)} | {_verdict(target, ok)} |")
    for note in notes:
        lines += ["", note]
    return "\n".join(lines)


def command_line(module: str, argv: Sequence[str] | None) -> str:
    """How the run was started: ``python -m <module> <its arguments>``."""
    return " ".join(["python -m", module, *(sys.argv[1:] if argv is None else argv)])


def write_block(
    name: str, rows: Iterable[Sequence], command: str, notes: Sequence[str] = (), page: Path = PAGE
) -> None:
    """Replace block ``name`` of the page with these rows (KeyError: the page has no such block)."""
    text = page.read_text(encoding="utf-8")
    begin, end = f"<!-- BEGIN generated: {name} -->", f"<!-- END generated: {name} -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise KeyError(f"{page} has no block {name!r}")
    block = f"{begin}\n{render(rows, command, notes)}\n{end}"
    page.write_text(pattern.sub(lambda _: block, text, count=1), encoding="utf-8")
    print(f"figures written to {page} ({name})")
