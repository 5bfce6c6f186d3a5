"""Suite-wide configuration. Helpers live in ``tests.helpers``.

Markers (registered in pyproject.toml) let a developer run the suite in pieces: the
directories mark their own tests (``browser``, ``postgres``, ``faults``, ``fuzz``),
and tests that take more than ~10 s are listed in :data:`SLOW` (kept here, in one
place, from the durations pytest prints at the end of every run). The fast loop:

    .venv/bin/pytest -m "not slow and not browser and not postgres and not faults and not fuzz"
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent
_BY_DIRECTORY = {"browser": "browser", "postgres": "postgres", "faults": "faults"}

#: Tests (by node id, without parameters) that take more than ~10 s on 2 cores.
SLOW: set[str] = set()


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        path = Path(item.path)
        # Doctest items (app/stats/*.py) are collected too: only tests/ has marks by place.
        parts = path.relative_to(_HERE).parts if path.is_relative_to(_HERE) else ()
        if parts and parts[0] in _BY_DIRECTORY:
            item.add_marker(_BY_DIRECTORY[parts[0]])
        if parts and parts[-1] == "test_fuzz.py":
            item.add_marker(pytest.mark.fuzz)
        if item.nodeid.split("[", 1)[0] in SLOW:
            item.add_marker(pytest.mark.slow)
