"""Browser tests: Playwright (Python) driving Debian's Chromium, headless, against a live server.

Chromium comes from the system (``/usr/bin/chromium``; ``.ci/run`` installs Debian's
package) — never from a download by the test tool. In CI a missing browser fails the
run; on a developer machine without it the browser tests are skipped.

Screenshots go to ``PRIVRANK_SCREENSHOT_DIR`` when set (the README's images are made
with ``PRIVRANK_SCREENSHOT_DIR=docs/img pytest tests/browser``), else to a temp dir.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.browser import ADMIN_KEY, CHROMIUM_ARGS, FAILED_LOAD, chromium_path
from tests.helpers.live import LiveServer


@pytest.fixture(scope="session")
def browser():
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is required in CI (Debian package 'chromium'; .ci/run installs it)")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def server(tmp_path):
    srv = LiveServer({"DATABASE_URL": f"sqlite:///{tmp_path}/browser.db", "PRIVRANK_ADMIN_KEY": ADMIN_KEY})
    yield srv
    srv.stop()


@pytest.fixture
def shots(tmp_path) -> Path:
    target = os.environ.get("PRIVRANK_SCREENSHOT_DIR")
    out = Path(target) if target else tmp_path / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out


class Console:
    """Every console error and uncaught exception of the pages a test opened."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.allowed: set[int] = set()

    def allow(self, status: int) -> None:
        self.allowed.add(status)

    def watch(self, page) -> None:
        page.on("console", lambda msg: self._console(msg))
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))

    def _console(self, msg) -> None:
        if msg.type not in ("error", "warning"):
            return
        m = FAILED_LOAD.search(msg.text)
        if m and int(m.group(1)) in self.allowed:
            return
        self.errors.append(f"{msg.type}: {msg.text}")


@pytest.fixture
def console():
    c = Console()
    yield c
    assert not c.errors, f"console errors: {c.errors}"


@pytest.fixture
def dialogs() -> list[str]:
    """The messages of every confirm() the pages asked (each is accepted)."""
    return []


@pytest.fixture
def new_page(browser, console, dialogs):
    """Pages in fresh contexts (own sessionStorage), watched for console errors; confirm()
    dialogs are accepted and recorded in ``dialogs``."""
    contexts = []

    def make(width: int = 1280, height: int = 900):
        ctx = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(ctx)
        page = ctx.new_page()
        console.watch(page)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
        return page

    yield make
    for ctx in contexts:
        ctx.close()
