"""The names the README, the docs, the pages and the API's descriptions give quantities: each one its own.

A bare "L" stood for three things (respondents in the planner, comparisons per pair in the
privacy regime, a respondent's most comparisons in the central model); they are spelled out
(respondents, n_pair, c_max / max_comparisons_per_respondent). "The paper's L" may still be
named where the README maps the paper's notation to these.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.main import create_app

ROOT = Path(__file__).resolve().parents[1]
#: A lone capital L: not part of a word, a path or an option, and not "the paper's L" —
#: also in a product or a coefficient ("mL", "2L/ε").
BARE_L = re.compile(r"(?<![\w'’/.\-])(?<!paper's )(?:\d*[a-z]?)L(?![\w'’\[])")


def _bare(text: str) -> list[str]:
    return [text[max(0, m.start() - 40) : m.end() + 40] for m in BARE_L.finditer(text)]


#: The documentation pages that took over the README's text (the explanation pages
#: docs/*.md other than these follow the papers' notation and define their symbols).
DOCS_PAGES = [
    *sorted((ROOT / "docs").glob("*/*.md")),
    *(ROOT / "docs" / name for name in ("service.md", "studies.md", "benchmarks.md", "contributing.md")),
]


def test_the_readme_and_the_pages_spell_their_quantities_out():
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for path in DOCS_PAGES:
        texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    static = ROOT / "static"
    for path in [*static.glob("*.js"), *static.glob("*.html"), *(static / "i18n").glob("*.json")]:
        texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    found = {name: _bare(text) for name, text in texts.items() if _bare(text)}
    assert found == {}


def test_the_api_descriptions_spell_their_quantities_out(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/n.db")
    schema = json.dumps(create_app().openapi(), ensure_ascii=False)
    assert _bare(schema) == []


def test_the_cli_output_spells_its_quantities_out(capsys):
    from app.cli import main

    assert main(["plan", "-m", "6", "--respondents", "40", "-p", "5", "-e", "1", "-k", "2", "-r", "10"]) == 0
    assert main(["simulate", "-s", "II", "--replications", "2", "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert "dividing line 1/sqrt(items x comparisons per pair)" in out
    assert "ε ∝ 1/√(m·n_pair)" in out and "n_pair: the comparisons of each pair" in out
    assert _bare(out) == []


def test_the_privacy_regime_names_comparisons_per_pair():
    from app.analysis.diagnostics import privacy_regime

    for g in (1.1, 30.0, 3000.0):  # above, near and below the line
        words = privacy_regime(10, 4500, g).explanation
        assert "n_pair ≈ 100 comparisons per pair" in words and not _bare(words), words
