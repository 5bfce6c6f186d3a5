"""Embedding in a real browser: the respondent page inside a frame on another site's page,
shown to the origins the survey allows and refused by Chromium to any other; and the API
documentation (/docs, /redoc) rendering with every request to another host blocked."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx2
from playwright.sync_api import expect

from tests.helpers.browser import ADMIN, ITEMS

#: The page Chromium shows in a frame whose navigation it refused (a frame-ancestors block).
BLOCKED_FRAME = "chrome-error://chromewebdata/"


@contextmanager
def parent_site(frame_src: str, snippet: str | None = None) -> Iterator[str]:
    """Another site (another origin: its own port) whose one page frames ``frame_src`` (or
    holds ``snippet``, e.g. the dashboard's)."""
    body = (
        snippet or f'<iframe id="survey" src="{frame_src}" title="Survey" width="600" height="700"></iframe>'
    )
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        f"<title>Our site</title></head><body><h1>Our site</h1>{body}</body></html>"
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _survey(server, origins: list[str]) -> str:
    body = {"title": "Which policy matters most?", "items": ITEMS, "embed_origins": origins}
    r = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _patch_origins(server, sid: str, origins: list[str]) -> None:
    r = httpx2.patch(f"{server.base}/v1/surveys/{sid}", json={"embed_origins": origins}, headers=ADMIN)
    assert r.status_code == 200, r.text


def test_the_survey_runs_inside_a_frame_on_an_allowed_site(server, new_page):
    # The site's origin (its port) is known once it runs: the survey lists it then.
    sid = _survey(server, ["https://unrelated.example"])
    with parent_site(f"{server.base}/s/{sid}?n=3") as site:
        _patch_origins(server, sid, [site])
        page = new_page()
        answers: list[int] = []
        page.on(
            "response",
            lambda r: (
                answers.append(r.status) if r.request.method == "POST" and "/responses" in r.url else None
            ),
        )
        page.goto(site + "/")
        frame = page.frame_locator("#survey")
        expect(frame.get_by_role("heading", name="Your privacy")).to_be_visible()
        frame.get_by_role("button", name="Start").click()
        expect(frame.locator("#progress-text")).to_have_text("Question 1 of 3")
        a = frame.locator("#choice-a").inner_text()
        b = frame.locator("#choice-b").inner_text()
        assert {a, b} <= set(ITEMS) and a != b
        frame.get_by_role("button", name=a, exact=True).click()
        expect(frame.locator("#progress-text")).to_have_text("Question 2 of 3")
        assert answers == [201], answers  # the answer was stored
        # The frame is privrank's page, and the parent page another origin.
        inner = next(f for f in page.frames if f.url.startswith(f"{server.base}/s/{sid}"))
        assert inner.evaluate("() => sessionStorage.length") > 0
        assert urlsplit(page.url).port != urlsplit(server.base).port


def test_another_site_is_refused_the_frame(server, new_page, console):
    sid = _survey(server, [])
    with parent_site(f"{server.base}/s/{sid}") as allowed, parent_site(f"{server.base}/s/{sid}") as other:
        _patch_origins(server, sid, [allowed])
        seen: list[str] = []
        page = new_page()
        page.on("response", lambda r: seen.append(r.url) if f"/s/{sid}" in r.url else None)
        page.goto(other + "/")
        expect(page.get_by_role("heading", name="Our site")).to_be_visible()
        frame = _wait_for_frame(page, BLOCKED_FRAME)
        # The frame's document is Chromium's error page, never privrank's: not its title, not
        # its heading, no question, none of its scripts.
        assert frame.title() != "privrank — survey"
        assert frame.evaluate(
            "() => !document.getElementById('survey-name') && !document.getElementById('choice-a')"
            " && !document.querySelector('script[src^=\\'/static/\\']')"
        )
        assert "Which policy matters most?" not in frame.evaluate("() => document.body.innerText")
        assert seen == [f"{server.base}/s/{sid}"]  # fetched, then refused by the browser
        # Chromium says why: the policy's frame-ancestors, which names only the allowed site.
        refusals = [e for e in console.errors if "frame-ancestors" in e]
        assert len(refusals) == 1, console.errors
        assert f"Framing '{server.base}/' violates" in refusals[0]
        assert f"\"frame-ancestors 'self' {allowed}\"" in refusals[0]
        console.errors.remove(refusals[0])
        # The same page from the allowed site shows the survey.
        page.goto(allowed + "/")
        expect(page.frame_locator("#survey").get_by_role("heading", name="Your privacy")).to_be_visible()


def _wait_for_frame(page, url: str, seconds: float = 5.0):
    """The page's frame once it is at ``url`` (polled every 20 ms)."""
    for _ in range(int(seconds / 0.02)):
        child = [f for f in page.frames if f is not page.main_frame]
        if child and child[0].url == url:
            return child[0]
        page.wait_for_timeout(20)
    raise AssertionError(f"the frame did not end at {url}: {[f.url for f in page.frames]}")


@contextmanager
def _offline(page, server) -> Iterator[list[str]]:
    """Every request to a host other than the test server is aborted and recorded."""
    host = urlsplit(server.base).netloc
    blocked: list[str] = []

    def route(r) -> None:
        if urlsplit(r.request.url).netloc == host:
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    yield blocked


def _operations(server) -> int:
    spec = httpx2.get(f"{server.base}/openapi.json").json()
    verbs = {"get", "put", "post", "delete", "patch", "head", "options"}
    return sum(1 for item in spec["paths"].values() for verb in item if verb in verbs)


def test_swagger_ui_renders_offline(server, new_page):
    page = new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    with _offline(page, server) as blocked:
        page.goto(f"{server.base}/docs")
        expect(page.locator(".opblock").first).to_be_visible(timeout=20_000)
        expect(page.locator(".opblock")).to_have_count(_operations(server))
        expect(
            page.locator(".opblock-summary-path", has_text="/v1/surveys/{survey_id}").first
        ).to_be_visible()
        assert blocked == []
    assert all(u.startswith(server.base) for u in requested), requested
    assert f"{server.base}/openapi.json" in requested


def test_redoc_renders_offline(server, new_page):
    page = new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    with _offline(page, server) as blocked:
        page.goto(f"{server.base}/redoc")
        expect(page.get_by_role("heading", name=re.compile(r"^privrank \("))).to_be_visible(timeout=20_000)
        expect(page.get_by_text("/v1/surveys/{survey_id}/respondents").first).to_be_visible()
        expect(page.get_by_text("Create and manage surveys (admin).").first).to_be_visible()
        page.wait_for_timeout(1000)  # anything sent after the first render (telemetry) would show
        assert blocked == []
    assert all(u.startswith(server.base) for u in requested), requested


def test_the_dashboard_edits_the_sites_and_gives_a_snippet_that_works(server, new_page, console):
    console.allow(422)  # the bad origin below
    sid = _survey(server, [])
    admin = new_page(signed_in=server.base)
    admin.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
    admin.goto(f"{server.base}/#/survey/{sid}")
    embed = admin.locator("#embed")
    expect(embed.get_by_role("heading", name="Embed")).to_be_visible()
    expect(admin.locator("#embed-origins")).to_contain_text("No site may embed this survey")
    snippet = admin.locator("#embed-iframe").input_value()
    assert snippet.startswith(f'<iframe src="{server.base}/s/{sid}"') and snippet.endswith("</iframe>")
    script = admin.locator("#embed-script").input_value()
    assert f'import {{ PrivrankClient }} from "{server.base}/static/privrank.js";' in script
    assert f'surveyId: "{sid}"' in script
    admin.locator("#embed-iframe-copy").click()
    expect(admin.locator("#embed-iframe-copied")).to_have_text("Copied.")
    assert admin.evaluate("() => navigator.clipboard.readText()") == snippet
    # A bad origin: the service's message, nothing saved.
    admin.get_by_label("Allowed sites (one origin a line)").fill("https://ok.example\n'self'")
    admin.get_by_role("button", name="Save sites").click()
    expect(admin.locator("#embed-error")).to_contain_text("'self'")
    assert httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()["embed_origins"] == []
    # The snippet, pasted into a page of a site the dashboard then allows, shows the survey.
    with parent_site("", snippet=snippet) as site:
        admin.get_by_label("Allowed sites (one origin a line)").fill(f"{site}\nHTTPS://Www.Example.ORG/")
        admin.get_by_role("button", name="Save sites").click()
        expect(admin.locator("#embed-origins li")).to_have_text([site, "https://www.example.org"])
        stored = httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()["embed_origins"]
        assert stored == [site, "https://www.example.org"]
        visitor = new_page()
        visitor.goto(site + "/")
        frame = visitor.frame_locator("iframe")
        expect(frame.get_by_role("heading", name="Your privacy")).to_be_visible()
        frame.get_by_role("button", name="Start").click()
        expect(frame.locator("#choice-a")).to_be_visible()
        assert frame.locator("#choice-a").inner_text() in ITEMS
