"""Browser-test helpers: the admin key of the test server, Chromium's path and flags,
signing in to the dashboard and answering as a respondent."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from playwright.sync_api import expect

ADMIN_KEY = "browser-admin-key"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Network-level messages Chromium logs for a non-2xx fetch; a test that expects such an
# answer says so with console.allow(status).
FAILED_LOAD = re.compile(r"Failed to load resource: the server responded with a status of (\d+)")


def chromium_path() -> str | None:
    path = os.environ.get("PRIVRANK_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return path if path and Path(path).exists() else None


ITEMS = ["Housing", "Transit", "Parks", "Schools"]
TRUTH = ["Transit", "Schools", "Housing", "Parks"]  # the respondents' true preference
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def sign_in(page, base: str) -> None:
    page.goto(base + "/")
    page.get_by_label("API key").fill(ADMIN_KEY)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Surveys")).to_be_visible()


def answer_pairs(page, link: str, n: int) -> None:
    """One respondent: open the page, start at the default ε, answer n pairs truthfully."""
    page.goto(f"{link}?n={n}")
    expect(page.get_by_role("heading", name="Your privacy")).to_be_visible()
    page.get_by_role("button", name="Start").click()
    for k in range(n):
        expect(page.locator("#progress-text")).to_have_text(f"Question {k + 1} of {n}")
        a = page.locator("#choice-a").inner_text()
        b = page.locator("#choice-b").inner_text()
        best = a if TRUTH.index(a) < TRUTH.index(b) else b
        page.get_by_role("button", name=best, exact=True).click()
    expect(page.locator("#thanks")).to_be_visible()
