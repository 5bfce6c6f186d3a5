"""Browser tests: Playwright (Python) driving Debian's Chromium, headless, against a live server.

Chromium comes from the system (Debian's ``chromium-headless-shell``, which ``.ci/run``
installs, or ``chromium``; ``PRIVRANK_CHROMIUM`` names another) — never from a download
by the test tool. In CI a missing browser fails the
run; on a developer machine without it the browser tests are skipped.

One server for all the tests of a process (an xdist worker, or the whole run with
``-n0``): ``server``. Every test therefore works on surveys it created itself and never
assumes an empty database: it finds its survey by id (``#/survey/{id}``, a link's
``href``), not by a title another test may use too. Tests that need other server
settings (environment variables) share a server of their own with the tests needing
the same settings (e.g. ``job_server`` in test_jobs.py).

Randomness. Every browser context starts with ``crypto.getRandomValues`` — where
privrank.js draws every random bit — replaced by a generator seeded by the test's id
and the context's number (``tests.helpers.browser.seeded_random_script``), so what a
page randomizes is the same on every run; ``random_values_calls(page)`` says how often
the page called it. The live server draws from the OS CSPRNG (no test can seed it): a
test whose assertion depends on what the server draws says how, and with what
probability, it can fail by chance.

Screenshots (``shots``) are taken only when ``PRIVRANK_SCREENSHOT_DIR`` is set (the
README's and the docs' images are made with ``PRIVRANK_SCREENSHOT_DIR=docs/img pytest tests/browser``).
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx2
import pytest

from tests.helpers.browser import (
    ADMIN,
    ADMIN_KEY,
    CHROMIUM_ARGS,
    FAILED_LOAD,
    ITEMS,
    chromium_path,
    seeded_random_script,
    signed_in_script,
)
from tests.helpers.live import LiveServer


@pytest.fixture(scope="session")
def browser():
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is required in CI (Debian's chromium-headless-shell; .ci/run installs it)")
        pytest.skip("Chromium is not installed (apt-get install chromium-headless-shell)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The server every test of this process shares (its own SQLite database)."""
    path = tmp_path_factory.mktemp("browser-server") / "browser.db"
    srv = LiveServer({"DATABASE_URL": f"sqlite:///{path}", "PRIVRANK_ADMIN_KEY": ADMIN_KEY})
    yield srv
    srv.stop()


class Shots:
    """``shots(target, "name.png", full_page=…)``: a screenshot of a page or locator into
    ``PRIVRANK_SCREENSHOT_DIR``; nothing when it is unset (the pictures cost time and
    nobody looks at them)."""

    def __init__(self, directory: str | None) -> None:
        self.dir = Path(directory) if directory else None
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)

    def __call__(self, target, name: str, **options) -> None:
        if self.dir is not None:
            target.screenshot(path=str(self.dir / name), **options)


@pytest.fixture
def shots() -> Shots:
    return Shots(os.environ.get("PRIVRANK_SCREENSHOT_DIR"))


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
def contexts(browser, request):
    """``contexts(**options)``: a fresh browser context (``browser.new_context`` options)
    whose ``crypto.getRandomValues`` is seeded by the test's id and the context's number;
    closed after the test."""
    made = []

    def make(**options):
        ctx = browser.new_context(**options)
        ctx.add_init_script(seeded_random_script(f"{request.node.nodeid}#{len(made)}"))
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        ctx.close()


@pytest.fixture
def new_page(contexts, console, dialogs):
    """Pages in fresh contexts (own sessionStorage), watched for console errors; confirm()
    dialogs are accepted and recorded in ``dialogs``. ``new_page(signed_in=base)``: a
    page whose first visit to the dashboard at ``base`` is already signed in as the admin
    (``tests.helpers.browser.sign_in`` sends the form)."""

    def make(width: int = 1280, height: int = 900, signed_in: str | None = None):
        ctx = contexts(viewport={"width": width, "height": height})
        if signed_in:
            ctx.add_init_script(signed_in_script(signed_in))
        page = ctx.new_page()
        console.watch(page)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
        return page

    return make


@pytest.fixture
def survey_page(server, new_page):
    """``survey_page(survey_id, **size)``: a new page of the dashboard, signed in as the
    admin, showing the survey."""

    def open_survey(survey_id: str, **size):
        page = new_page(signed_in=server.base, **size)
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
def api(server):
    """An HTTP client of the server: one kept-alive connection for a test's many requests
    (no credentials of its own: admin requests pass ``headers=ADMIN``)."""
    with httpx2.Client(base_url=server.base, timeout=60) as client:
        yield client


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
