"""The documentation site (mkdocs.yml, docs/): its tutorials run as written, and the
references generated from the code at build time (docs/hooks/reference.py) cover it all.

`mkdocs build --strict` itself runs in CI (.ci/run), with the `docs` extra; these tests
need only the code and the pages.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field

from app.core.config import Settings

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
#: The tutorials' shell blocks, each run elsewhere: the service started as the README's
#: first set-up command starts it (tests/browser/test_first_hour.py) or with a known key
#: (tests/test_readme_walkthrough.py), and the walkthrough or one of its lines
#: (tests/test_readme_walkthrough.py, against a live server).
SHELL_BLOCKS_RUN_ELSEWHERE = {
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/privrank serve",
    "PRIVRANK_ADMIN_KEY=change-me .venv/bin/privrank serve",
    '--8<-- "docs/walkthrough.sh"',
    'curl -s "$API/v1/surveys/$SID/ranking?k=2" -H "$ANALYST" | python3 -m json.tool',
}


def _hook():
    spec = importlib.util.spec_from_file_location(
        "privrank_docs_hook", ROOT / "docs" / "hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def test_the_tutorials_are_there():
    assert [p.name for p in TUTORIALS] == ["first-survey.md", "library.md", "read-a-ranking.md"]


@pytest.mark.slow
@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.name)
def test_every_python_block_of_a_tutorial_runs_as_written(page):
    """Each ```python block runs on its own, from the repository's root."""
    blocks = _blocks(page, "python")
    if page.name == "first-survey.md":
        assert blocks == []  # its code is the shell walkthrough
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.name)
def test_every_shell_block_of_a_tutorial_is_run_by_a_test(page):
    for block in _blocks(page, "sh"):
        assert block.strip() in SHELL_BLOCKS_RUN_ELSEWHERE, block


def test_the_first_survey_shows_the_walkthrough_the_test_runs():
    text = (ROOT / "docs" / "tutorials" / "first-survey.md").read_text(encoding="utf-8")
    assert '```sh\n--8<-- "docs/walkthrough.sh"\n```' in text
    walkthrough = (ROOT / "docs" / "walkthrough.sh").read_text(encoding="utf-8").splitlines()
    for block in SHELL_BLOCKS_RUN_ELSEWHERE:
        if block.startswith("curl"):
            assert block in walkthrough  # a line of the walkthrough, shown on its own


def test_the_configuration_reference_lists_every_setting():
    hook = _hook()
    table = hook.settings_table()
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    assert hook.SETTINGS_MARKER in page
    rows = {row["field"]: row for row in hook.settings_rows(Settings)}
    assert set(rows) == set(Settings.model_fields)
    for name, field in Settings.model_fields.items():
        row = rows[name]
        assert row["env"] == field.validation_alias, name  # every setting names its variable
        assert f"| `{row['env']}` |" in table
        assert field.description and hook._cell(field.description) in table, name
    assert "| `DATABASE_URL` | `str` | `sqlite:///./privrank.db` |" in table


def test_a_setting_without_a_description_is_refused():
    class MoreSettings(Settings):
        undocumented_knob: int = Field(default=3, validation_alias="PRIVRANK_UNDOCUMENTED_KNOB")

    with pytest.raises(ValueError, match="undocumented_knob"):
        _hook().settings_table(MoreSettings)


def test_the_api_reference_lists_every_operation():
    hook = _hook()
    doc = hook.openapi_document()
    page = hook.openapi_markdown(doc)
    operations = [
        (method, path)
        for path, item in doc["paths"].items()
        for method in hook.HTTP_METHODS
        if method in item
    ]
    assert len(operations) > 40
    for method, path in operations:
        assert f"### `{method.upper()} {path}`" in page
    for name in doc["components"]["schemas"]:
        assert f"{{#{hook._schema_anchor(name)}}}" in page
    assert hook.OPENAPI_MARKER in (ROOT / "docs" / "reference" / "openapi.md").read_text(encoding="utf-8")


def test_the_command_reference_lists_every_command():
    from app.cli import build_parser

    page = _hook().cli_markdown()
    top = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert len(top.choices) >= 8
    for name in top.choices:
        assert f"## `privrank {name}`" in page
    assert "## `privrank site contribute`" in page and "## `privrank admin-key rotate`" in page
    assert "<!-- generated: cli -->" in (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")


def test_a_benchmark_writes_only_its_own_block(tmp_path):
    from tests.benchmarks.docs_page import PAGE, write_block

    page = tmp_path / "benchmarks.md"
    page.write_text(
        "# B\n\nkept\n\n<!-- BEGIN generated: one -->\nold\n<!-- END generated: one -->\n\n"
        "<!-- BEGIN generated: two -->\nother\n<!-- END generated: two -->\n"
    )
    rows = [("COPY", "9 rows/s", "reference", True), ("batches", "5 rows/s", "≥ 60%", False)]
    write_block("one", rows, "python -m tests.benchmarks.bench_x --write-docs", page=page)
    text = page.read_text()
    assert "old" not in text and "kept" in text and "other" in text
    assert "Written by `python -m tests.benchmarks.bench_x --write-docs` on " in text
    assert (
        "| COPY | 9 rows/s | reference |  |" in text and "| batches | 5 rows/s | ≥ 60% | **missed** |" in text
    )
    with pytest.raises(KeyError):
        write_block("three", rows, "python -m x", page=page)
    blocks = re.findall(r"<!-- BEGIN generated: (\w+) -->", PAGE.read_text(encoding="utf-8"))
    assert blocks == [
        "bench_service_ingestion",
        "bench_service",
        "bench_scale",
        "bench_stats",
        "bench_instances",
    ]
