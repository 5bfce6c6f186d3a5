"""The README's curl walkthrough runs as written against a live server.

The README shows docs/walkthrough.sh verbatim (its five-minute tour), as does the first
tutorial of the documentation site (tests/test_docs_site.py runs the tutorials' Python).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.live import LiveServer

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "walkthrough.sh"


def test_readme_shows_the_walkthrough_verbatim():
    readme = (ROOT / "README.md").read_text()
    assert SCRIPT.read_text().strip() in readme


@pytest.mark.slow
def test_walkthrough_runs_against_a_live_server(tmp_path):
    if shutil.which("curl") is None:
        if os.environ.get("CI"):
            pytest.fail("curl is required in CI")
        pytest.skip("curl is not installed")
    server = LiveServer({"DATABASE_URL": f"sqlite:///{tmp_path}/w.db", "PRIVRANK_ADMIN_KEY": "change-me"})
    try:
        done = subprocess.run(
            ["bash", "-e", str(SCRIPT)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={"API": server.base, "PATH": "/usr/bin:/bin"},
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("w.db"))
    assert left == []  # the walkthrough leaves no files behind
    out = done.stdout
    assert '"accepted":3' in out and '"accepted":1' in out  # both batches stored
    assert '"method": "debiased_mle"' in out and '"top_k"' in out
    assert "respondent,item_a,item_b,winner,epsilon,z,created_at" in out
    assert out.count("\nrsp_") == 4  # four comparisons exported
    assert out.strip().endswith("closed")
