"""An installed copy is a working service from any directory.

The pages (``static/``) and the migrations (``migrations/``) sit at the top of the
repository; a regular install (``pip install .``) carries them inside the package, so it
serves the dashboard and migrates a new database with no source tree around, and an
editable install finds them in the source tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
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
    assert (target / "app" / "migrations" / "versions").is_dir()
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
            p.relative_to(ROOT / "static")
            for p in (ROOT / "static").rglob("*.*")
            if "__pycache__" not in p.parts
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


def test_the_wheel_lists_every_package_of_the_code():
    """pyproject.toml names the packages (the pages and migrations are mapped into the
    package): a package added under app/ and not listed there would be missing from a
    regular install."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    code = sorted(
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "app").rglob("__init__.py")
    )
    mapped = {
        name
        for name in setup["packages"]
        if any(name == top or name.startswith(top + ".") for top in setup["package-dir"])
    }
    assert sorted(set(setup["packages"]) - mapped) == code
    assert setup["package-dir"] == {"app.static": "static", "app.migrations": "migrations"}
    assert (ROOT / "migrations" / "versions").is_dir() and (ROOT / "static" / "index.html").is_file()


def test_an_editable_install_finds_the_pages_and_migrations_from_anywhere(tmp_path):
    """The suite's own environment is the editable install the README sets up: from a
    directory outside the source tree, the code finds the top-level pages and migrations."""
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import app, app.main, app.core.db.migrate; "
            "print(app.__file__); print(app.main.static_dir()); print(app.core.db.migrate.migrations_dir())",
        ],
        env={
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PRIVRANK_STATIC_DIR", "PRIVRANK_MIGRATIONS_DIR")
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where == [str(ROOT / "app" / "__init__.py"), str(ROOT / "static"), str(ROOT / "migrations")]
