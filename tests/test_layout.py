"""The code's import graph has no cycle, imports inside functions included: among all the
modules of app/, across the domains as well as inside each package (which the
import-linter contracts in pyproject.toml check)."""

from __future__ import annotations

import grimp

from tests.helpers.graphs import find_cycle


def test_the_modules_import_each_other_without_a_cycle():
    built = grimp.build_graph("app")
    graph = {
        m: {t for t in built.find_modules_directly_imported_by(m) if t.startswith("app.")}
        for m in built.modules
        if m.startswith("app.")
    }
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the graph was read
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"b"}}) is None
