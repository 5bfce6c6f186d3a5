"""The code's import graph has no cycle, imports inside functions included: among all the
modules of app/, across the domains as well as inside each package (which the
import-linter contracts in pyproject.toml check)."""

from __future__ import annotations

import grimp


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in import order), or None. Iterative: the
    graph is deep."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if root in state:
            continue
        path = [root]
        todo = [iter(sorted(graph[root]))]
        state[root] = 1
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                todo.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                todo.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_modules_import_each_other_without_a_cycle():
    built = grimp.build_graph("app")
    graph = {
        m: {t for t in built.find_modules_directly_imported_by(m) if t.startswith("app.")}
        for m in built.modules
        if m.startswith("app.")
    }
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the graph was read
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"b"}}) is None
