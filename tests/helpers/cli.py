"""``privrank …`` in the test's own process: :func:`app.cli.main` with the given
arguments, environment and working directory, its output captured.

The same code as the console script, without starting a new interpreter (and importing
the service) for every call. The console script itself is run as a process by
``tests/test_install.py`` and ``tests/test_cli_simulate.py``; tests that need several
commands at once (the sites of a federated round) start processes of their own.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from unittest import mock


@dataclass
class Ran:
    """What a command returned and printed (the fields of ``subprocess.CompletedProcess``)."""

    returncode: int
    stdout: str
    stderr: str


def privrank(
    *args: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = (), cwd: str | Path | None = None
) -> Ran:
    """Run ``privrank *args`` with ``env`` added to the environment and ``unset`` removed
    from it, in ``cwd``; argparse's exit (usage errors) is an exit status like any other."""
    from app.cli import main
    from app.core.config import get_settings

    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, env or {}))
        for name in unset:
            os.environ.pop(name, None)
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        get_settings.cache_clear()  # the settings are read from this environment
        stack.callback(get_settings.cache_clear)
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return Ran(code, out.getvalue(), err.getvalue())
