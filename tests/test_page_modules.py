"""The pages' ES modules (static/*.js) import one another without a cycle, and every module
they import exists: a cycle makes what a module sees at load time depend on which page
loaded first."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.graphs import find_cycle

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "static"
#: ``import … from "/static/x.js"`` (static imports; every module imports by absolute path).
IMPORT = re.compile(r'^import\s[^;]*?from\s+"/static/([\w./-]+\.js)";', re.M | re.S)


def _graph() -> dict[str, set[str]]:
    return {p.name: set(IMPORT.findall(p.read_text(encoding="utf-8"))) for p in sorted(STATIC.glob("*.js"))}


def test_the_page_modules_import_each_other_without_a_cycle():
    graph = _graph()
    assert len(graph) > 20 and sum(map(len, graph.values())) > 50  # the pattern reads the imports
    missing = sorted({m for deps in graph.values() for m in deps} - set(graph))
    assert missing == []
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])
