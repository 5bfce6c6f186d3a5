"""Federated rounds managed from the dashboard; a central survey's counts; an integration key's sign-in."""

from __future__ import annotations

import httpx2
import numpy as np
from playwright.sync_api import expect

from app.cli.site import masked_message, new_private_key, public_key
from tests.helpers.browser import ADMIN, ITEMS


class _Site:
    """A site run by the test through the HTTP API (as ``privrank site contribute`` does)."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.h, self.private = base, {"Authorization": f"Bearer {token}"}, new_private_key()

    def join(self) -> None:
        r = httpx2.put(
            f"{self.base}/v1/site/key", json={"public_key": public_key(self.private)}, headers=self.h
        )
        assert r.status_code == 200, r.text

    def contribute(self, declaration: dict) -> None:
        view = httpx2.get(f"{self.base}/v1/site", headers=self.h).json()
        orders = np.array([[1, 3, 0, 2], [1, 0, 3, 2]])  # Transit first
        body = {"masked": masked_message(view, self.private, orders), **declaration}
        r = httpx2.post(f"{self.base}/v1/site/contribution", json=body, headers=self.h)
        assert r.status_code == 201, r.text


def test_rounds_are_opened_watched_and_cancelled_from_the_dashboard(
    server, survey_page, sign_in_as, console, dialogs, shots
):
    console.allow(409)  # the consensus of a survey without rankings yet
    s = httpx2.post(
        f"{server.base}/v1/surveys", json={"title": "Fed", "kind": "ranking", "items": ITEMS}, headers=ADMIN
    ).json()
    admin = survey_page(s["id"])
    expect(admin.locator("#no-rounds")).to_be_visible()
    admin.get_by_text("Open a federated round").click()
    admin.get_by_label("Sites, one per line").fill("schools-a\nschools-b\nclinic-c")
    admin.get_by_role("button", name="Open round").click()

    # The credentials, once, with the command each site runs.
    creds = admin.locator("#round-credentials")
    expect(creds).to_contain_text("Shown only now")
    expect(creds.locator(".site-token")).to_have_count(3)
    tokens = {
        box.get_attribute("data-site"): box.locator(".site-token").input_value()
        for box in creds.locator(".site-credential").all()
    }
    assert list(tokens) == ["schools-a", "schools-b", "clinic-c"]
    assert all(t.startswith("sit_") for t in tokens.values())
    command = creds.locator(".site-command").first.input_value()
    assert "privrank site contribute" in command and tokens["schools-a"] in command
    assert f"--server {server.base}" in command
    expect(creds.get_by_role("button", name="Copy credential of clinic-c")).to_be_visible()
    shots(creds, "dashboard-round-credentials.png")
    card = admin.locator("article.round").first
    rid = card.get_attribute("id").removeprefix("round-")
    expect(card).to_contain_text(
        "Waiting for: schools-a, schools-b, clinic-c (no key registered yet: schools-a, schools-b, clinic-c)."
    )
    admin.get_by_role("button", name="I have given every site its credential").click()
    expect(creds).to_have_count(0)
    assert tokens["schools-a"] not in admin.content()

    # Two sites contribute, declaring what they did; the dashboard names the one it waits for.
    sites = {name: _Site(server.base, t) for name, t in tokens.items()}
    for site in sites.values():
        site.join()
    sites["schools-a"].contribute({"privatization": "mallows", "epsilon": 1.0})
    sites["schools-b"].contribute({"privatization": "none"})
    admin.get_by_role("button", name="Refresh").click()
    card = admin.locator("article.round").first
    expect(card.locator(".waiting")).to_have_text("Waiting for: clinic-c.")
    expect(card.locator("tbody tr").nth(0)).to_contain_text("Mallows, ε = 1")
    expect(card.locator("tbody tr").nth(1)).to_contain_text("not privatized")
    expect(card.locator("tbody tr").nth(2)).to_contain_text("not declared yet")
    expect(card.locator(".round-privacy")).to_contain_text(
        "the rankings of site schools-b were not privatized"
    )
    expect(card.locator(".round-privacy")).to_contain_text("cannot verify them")
    shots(admin.locator("#rounds"), "dashboard-rounds.png")

    sites["clinic-c"].contribute({"privatization": "mallows", "epsilon": 2.0})
    other = httpx2.post(
        f"{server.base}/v1/surveys/{s['id']}/rounds",
        json={"method": "lehmer", "sites": ["x", "y", "z"], "phi": 0.5},
        headers=ADMIN,
    ).json()
    admin.get_by_role("button", name="Refresh").click()
    done = admin.locator(f"#round-{rid}")
    expect(done.locator(".round-consensus")).to_contain_text("Consensus (best first): Transit")
    expect(done.locator(".waiting")).to_have_count(0)
    assert done.get_by_role("button", name="Cancel round").count() == 0

    # Analysts read the rounds: no form to open one, no button to cancel one.
    analyst = sign_in_as("analyst", "a")
    expect(analyst.get_by_role("heading", name="Surveys")).to_be_visible()
    analyst.goto(f"{server.base}/#/survey/{s['id']}")
    expect(analyst.locator(f"#round-{other['id']}")).to_contain_text("Waiting for: x, y, z")
    assert analyst.locator("#open-round").count() == 0
    assert analyst.get_by_role("button", name="Cancel round").count() == 0

    # Cancelling the other round asks first.
    pending = admin.locator(f"#round-{other['id']}")
    pending.get_by_role("button", name="Cancel round").click()
    expect(pending.locator(".badge")).to_have_text("cancelled")
    expect(pending).to_contain_text("Cancelled: no consensus was published.")
    assert dialogs and other["id"] in dialogs[-1] and "no consensus is published" in dialogs[-1]
    assert (
        httpx2.get(f"{server.base}/v1/surveys/{s['id']}/rounds/{other['id']}", headers=ADMIN).json()["status"]
        == "cancelled"
    )


def test_a_central_survey_shows_its_counts_and_an_integration_key_is_told_why_not(
    server, central_survey, survey_page, sign_in_as
):
    s = central_survey
    a, b, c, _ = (it["id"] for it in s["items"])
    tokens = [
        httpx2.post(f"{server.base}/v1/surveys/{s['id']}/respondents", json={}).json()["token"] for _ in "12"
    ]
    r = httpx2.post(
        f"{server.base}/v1/surveys/{s['id']}/responses",
        json={
            "privatized": False,
            "comparisons": [{"a": a, "b": b, "winner": a}, {"a": a, "b": c, "winner": c}],
        },
        headers={"Authorization": f"Bearer {tokens[0]}"},
    )
    assert r.status_code in (200, 201), r.text
    admin = survey_page(s["id"])
    expect(admin.locator("#stat-respondents")).to_have_text("2")
    expect(admin.locator("#stat-comparisons")).to_have_text("2")

    page = sign_in_as("integration", "intranet")
    expect(page.locator("#signin-msg")).to_contain_text("This is an integration key: it may only register")
    expect(page.get_by_label("API key")).to_be_visible()  # still the sign-in form, nothing broken
