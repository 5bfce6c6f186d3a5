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

import httpx2
import pytest

from tests.helpers.browser import ADMIN, ADMIN_KEY, CHROMIUM_ARGS, FAILED_LOAD, ITEMS, chromium_path, sign_in
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


@pytest.fixture
def survey_page(server, new_page):
    """``survey_page(survey_id)``: a new page signed in to the dashboard as the admin,
    showing the survey."""

    def open_survey(survey_id: str):
        page = new_page()
        sign_in(page, server.base)
        page.goto(f"{server.base}/#/survey/{survey_id}")
        return page

    return open_survey


@pytest.fixture
def sign_in_as(server, new_page):
    """``sign_in_as(role, label)``: a new page on which the dashboard's sign-in form was sent
    with a new key of ``role`` (``tests.helpers.browser.sign_in`` signs the admin in)."""

    def submit(role: str, label: str):
        r = httpx2.post(f"{server.base}/v1/keys", json={"label": label, "role": role}, headers=ADMIN)
        page = new_page()
        page.goto(server.base + "/")
        page.get_by_label("API key").fill(r.json()["key"])
        page.get_by_role("button", name="Sign in").click()
        return page

    return submit


@pytest.fixture
def central_survey(server) -> dict:
    """A central-model survey of ITEMS (total budget 2, at most 3 comparisons a respondent)."""
    return httpx2.post(
        f"{server.base}/v1/surveys",
        json={
            "title": "Trusted",
            "items": ITEMS,
            "privacy": {"model": "central", "total_budget": 2.0, "max_comparisons_per_respondent": 3},
        },
        headers=ADMIN,
    ).json()
