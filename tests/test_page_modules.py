"""The pages' ES modules (static/*.js) import one another without a cycle, and every module
they import exists: a cycle makes what a module sees at load time depend on which page
loaded first."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "static"
#: ``import … from "/static/x.js"`` (static imports; every module imports by absolute path).
IMPORT = re.compile(r'^import\s[^;]*?from\s+"/static/([\w./-]+\.js)";', re.M | re.S)


def _graph() -> dict[str, set[str]]:
    return {p.name: set(IMPORT.findall(p.read_text(encoding="utf-8"))) for p in sorted(STATIC.glob("*.js"))}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in import order), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_page_modules_import_each_other_without_a_cycle():
    graph = _graph()
    assert len(graph) > 20 and sum(map(len, graph.values())) > 50  # the pattern reads the imports
    missing = sorted({m for deps in graph.values() for m in deps} - set(graph))
    assert missing == []
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a.js": {"b.js"}, "b.js": {"c.js"}, "c.js": {"a.js"}}) == ["a.js", "b.js", "c.js", "a.js"]
    assert _cycle({"a.js": {"b.js"}, "b.js": set()}) is None
