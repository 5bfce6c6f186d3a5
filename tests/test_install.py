"""A regular install (``pip install .``, not editable) is a working service.

The pages and the migrations live inside the package, so an installed copy serves the
dashboard and migrates a new database from any directory, with no source tree around.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from tests.helpers.live import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_an_installed_copy_serves_and_migrates_from_anywhere(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(ROOT)],
        check=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert (target / "app" / "static" / "index.html").is_file()
    assert (target / "app" / "db" / "migrations" / "versions").is_dir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The installed copy first on the path, the dependencies from this environment.
    env = {
        **os.environ,
        "PYTHONPATH": str(target),
        "PRIVRANK_ADMIN_KEY": "k" * 32,
        "PRIVRANK_LOG_LEVEL": "warning",
    }
    env.pop("DATABASE_URL", None)  # the default: ./privrank.db in the working directory
    where = subprocess.run(
        [sys.executable, "-c", "import app; print(app.__file__)"],
        env=env,
        cwd=elsewhere,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert where.startswith(str(target)), where
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=env,
        cwd=elsewhere,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(150):
            try:
                if httpx2.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        page = httpx2.get(base + "/")
        assert page.status_code == 200 and "privrank" in page.text.lower()
        # Every file of the pages is shipped (a module the dashboard imports but the wheel
        # lacks would 404 in the browser).
        shipped = sorted(
            p.relative_to(ROOT / "app" / "static") for p in (ROOT / "app" / "static").rglob("*.*")
        )
        missing = [str(p) for p in shipped if httpx2.get(f"{base}/static/{p.as_posix()}").status_code != 200]
        assert len(shipped) > 10 and not missing, missing
        made = httpx2.post(
            base + "/v1/surveys",
            json={"title": "t", "items": ["a", "b"]},
            headers={"Authorization": "Bearer " + "k" * 32},
        )
        assert made.status_code == 201, made.text
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    assert (elsewhere / "privrank.db").is_file(), out  # migrated where it was started
