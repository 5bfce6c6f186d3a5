"""The first hour, as the README tells a newcomer: start the service on the SQLite default,
sign in to the dashboard with the admin key it prints, create a survey with a goal and
adaptive assignment, answer it on the respondent page, and hand out keys — an analyst's,
a moderator's and an integration's — from the dashboard, then revoke one. Nothing here
goes through curl: every step a newcomer takes is a click or a field in the browser.
"""

from __future__ import annotations

import re

import httpx2
import pytest
from playwright.sync_api import expect

from tests.helpers.browser import ADMIN, ITEMS, answer_pairs, sign_in
from tests.helpers.live import LiveServer

#: The line `privrank serve` prints the generated admin key on (as tests/test_cli_serve.py reads it).
KEY_LINE = re.compile(r"^\s+(key_[a-z0-9]+\.\S+)$", re.MULTILINE)
DASHBOARD_LINE = re.compile(r"the dashboard is at (http://\S+/)$", re.MULTILINE)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A service started as the README's first command starts it: no admin key in the
    environment, the default database file in its working directory."""
    srv = LiveServer({}, cwd=str(tmp_path_factory.mktemp("first-hour")))
    yield srv
    srv.stop()


def _sign_in_with(page, url: str, key: str) -> None:
    page.goto(url)
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()


def _mint(page, role: str, label: str) -> str:
    """Mints a key on the Keys view; its text, read from the field it is shown in once."""
    page.get_by_role("link", name="Keys").click()
    page.get_by_label("Role").select_option(role)
    page.get_by_label("Label").fill(label)
    page.get_by_role("button", name="Mint key").click()
    shown = page.locator("#minted-key")
    expect(shown).to_be_visible()
    # Announced in words through the live region; the panel itself is no alert, which a
    # screen reader would read aloud with the key in it.
    expect(page.locator("#status")).to_contain_text("key minted")
    assert page.locator("#minted").get_attribute("role") is None
    expect(page.locator("#minted-hint")).to_contain_text("only time the key is shown")
    expect(page.locator(f"#keys-table tr:has-text('{label}')")).to_contain_text("active")
    return shown.input_value()


def test_the_first_hour_in_the_dashboard(fresh, new_page, console, dialogs, shots):
    out = fresh.output()
    (admin_key,) = KEY_LINE.findall(out)
    (url,) = DASHBOARD_LINE.findall(out)
    assert url == f"{fresh.base}/"

    admin = new_page()
    _sign_in_with(admin, url, admin_key)
    expect(admin.get_by_role("heading", name="Surveys")).to_be_visible()
    expect(admin.get_by_text("No surveys yet.")).to_be_visible()

    # A survey with a goal: its top 2 certified at 90%, adaptive assignment, closing itself.
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("Which policy matters most?")
    admin.get_by_label("Items, one per line").fill("\n".join(ITEMS))
    admin.get_by_label("Certify the top K items").check()
    admin.get_by_label("K: how many top items").fill("2")
    admin.get_by_label("Level").select_option("0.9")
    admin.get_by_label("Close the survey as soon as the goal is met").check()
    admin.get_by_label("Adaptive: only pairs that touch items still in doubt").check()
    shots(admin.locator("#goal-fields"), "dashboard-new-goal.png")
    admin.get_by_role("button", name="Create survey").click()
    expect(admin.get_by_role("heading", name="Which policy matters most?")).to_be_visible()
    expect(admin.locator("#goal-state")).to_have_text("Not yet met")
    expect(admin.locator("#goal-box")).to_contain_text("the top 2, certified at the 90% level")
    expect(admin.locator("#goal-box")).to_contain_text("with adaptive assignment")
    link = admin.locator("#respondent-link").inner_text()
    sid = link.rsplit("/", 1)[1]
    stored = httpx2.get(f"{fresh.base}/v1/surveys/{sid}", headers={"Authorization": f"Bearer {admin_key}"})
    survey = stored.json()
    assert survey["assignment"] == "adaptive"
    g = survey["goal"]
    assert (g["top_k"], g["level"], g["close_when_met"], g["certificate"]) == (2, 0.9, True, "borda")

    # A respondent answers on the respondent page (randomized there).
    answer_pairs(new_page(), link, 2)
    admin.get_by_role("button", name="Refresh").click()
    expect(admin.locator("#stat-comparisons")).to_have_text("2")

    # Keys for the team, minted in the dashboard and shown once.
    analyst_key = _mint(admin, "analyst", "data team")
    expect(admin.locator("#minted-use")).to_contain_text("signs in to this dashboard")
    moderator_key = _mint(admin, "moderator", "moderators")
    integration_key = _mint(admin, "integration", "crm")
    expect(admin.locator("#minted-use")).to_contain_text("POST /v1/surveys/{id}/respondents")
    shots(admin, "dashboard-keys.png", full_page=True)
    admin.reload()  # the key is not shown again
    expect(admin.locator("#keys-table")).to_contain_text("crm")
    expect(admin.locator("#minted-key")).to_have_count(0)
    assert analyst_key not in admin.content()

    # The analyst signs in with its key: it reads the survey, but cannot create surveys or keys.
    analyst = new_page()
    _sign_in_with(analyst, url, analyst_key)
    analyst.get_by_role("link", name="Which policy matters most?").click()
    expect(analyst.locator("#goal-state")).to_have_text("Not yet met")
    expect(analyst.get_by_role("link", name="New survey")).to_be_hidden()
    expect(analyst.get_by_role("link", name="Keys")).to_be_hidden()
    analyst.goto(url + "#/keys")
    expect(analyst.locator("#app")).to_contain_text("Managing keys needs an admin key.")
    analyst.go_back()
    expect(analyst.locator("#goal-state")).to_have_text("Not yet met")

    # The moderator signs in; the integration key registers a respondent from another service.
    moderator = new_page()
    _sign_in_with(moderator, url, moderator_key)
    expect(moderator.get_by_role("heading", name="Surveys")).to_be_visible()
    r = httpx2.post(
        f"{fresh.base}/v1/surveys/{sid}/respondents",
        json={"external_id": "crm-42"},
        headers={"Authorization": f"Bearer {integration_key}"},
    )
    assert r.status_code == 201, r.text

    # The admin revokes the analyst's key: the analyst is signed out at its next request.
    admin.goto(url + "#/keys")
    row = admin.locator("#keys-table tr", has_text="data team")
    row.get_by_role("button", name="Revoke").click()
    expect(row).to_contain_text("revoked")
    expect(row.get_by_role("button", name="Revoke")).to_have_count(0)
    assert any("data team" in d and "cannot be undone" in d for d in dialogs)
    console.allow(401)
    analyst.get_by_role("button", name="Refresh").click()
    expect(analyst.get_by_label("API key")).to_be_visible()
    keys = httpx2.get(f"{fresh.base}/v1/keys", headers={"Authorization": f"Bearer {admin_key}"}).json()
    by_label = {k["label"]: k for k in keys["keys"]}
    assert by_label["data team"]["revoked_at"] is not None
    assert by_label["moderators"]["revoked_at"] is None and by_label["crm"]["revoked_at"] is None


def test_the_new_survey_form_offers_only_goals_the_service_accepts(server, new_page, console):
    """Adaptive assignment needs a goal, the majority certificate needs adaptive assignment,
    and goals are for local pairwise surveys: the form offers nothing else, and sends the
    choice it shows."""
    admin = new_page()
    sign_in(admin, server.base)
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("Ranked by majorities")
    admin.get_by_label("Items, one per line").fill("\n".join(ITEMS))
    adaptive = admin.get_by_label("Adaptive: only pairs that touch items still in doubt")
    expect(adaptive).to_be_disabled()  # no goal yet
    expect(admin.locator("#goal-details")).to_be_hidden()
    admin.get_by_label("Certify the whole ranking").check()
    expect(adaptive).to_be_enabled()
    expect(admin.locator("#certificate-pairwise")).to_be_disabled()  # balanced assignment
    adaptive.check()
    admin.get_by_label("Majorities: items each preferred by a majority to every item below them").check()
    # Central surveys and ranking questions have no goal.
    admin.locator("#model-central").check()
    expect(admin.locator("#goal-fields")).to_be_hidden()
    admin.get_by_label("Local (no one sees a true answer)").check()
    admin.get_by_label("A ranking of all items").check()
    expect(admin.locator("#goal-fields")).to_be_hidden()
    admin.get_by_label("Pairs (which of two matters more?)").check()
    expect(admin.locator("#goal-fields")).to_be_visible()
    admin.get_by_role("button", name="Create survey").click()
    expect(admin.get_by_role("heading", name="Ranked by majorities")).to_be_visible()
    sid = admin.url.rsplit("/", 1)[1]
    survey = httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()
    assert survey["assignment"] == "adaptive"
    assert survey["goal"]["full_ranking"] is True
    assert survey["goal"]["estimand"] == "majority_ranking"
    expect(admin.locator("#goal-estimand")).to_have_text(survey["goal"]["estimand_text"])

    # Turning the goal off again takes adaptive assignment and the majority certificate with it.
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("Plain pairs")
    admin.get_by_label("Items, one per line").fill("\n".join(ITEMS))
    admin.get_by_label("Certify the top K items").check()
    admin.get_by_label("Adaptive: only pairs that touch items still in doubt").check()
    admin.get_by_label("Majorities: items each preferred by a majority to every item below them").check()
    admin.get_by_label("No goal").check()
    borda = admin.get_by_label("Borda: the items most often preferred to an item drawn at random")
    expect(borda).to_be_checked()
    expect(admin.get_by_label("Balanced: the least-answered pairs first")).to_be_checked()
    admin.get_by_role("button", name="Create survey").click()
    expect(admin.get_by_role("heading", name="Plain pairs")).to_be_visible()
    sid = admin.url.rsplit("/", 1)[1]
    survey = httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()
    assert (survey["assignment"], survey["goal"]) == ("balanced", None)


def test_a_goal_the_service_refuses_is_explained_and_stores_nothing(server, new_page, console):
    """K must be below the number of items: the service's 422 shows on the form."""
    console.allow(422)
    admin = new_page()
    sign_in(admin, server.base)
    before = httpx2.get(f"{server.base}/v1/surveys?limit=1", headers=ADMIN).json()["total"]
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("Too many")
    admin.get_by_label("Items, one per line").fill("\n".join(ITEMS))
    admin.get_by_label("Certify the top K items").check()
    admin.get_by_label("K: how many top items").fill(str(len(ITEMS)))
    # The browser's own check (max = items − 1) would stop the form; the service's is the one
    # that counts, so the test lifts the browser's.
    admin.locator("#create-form").evaluate("form => { form.noValidate = true; }")
    admin.get_by_role("button", name="Create survey").click()
    expect(admin.locator("#create-error")).to_contain_text("goal.top_k must be between 1 and")
    assert httpx2.get(f"{server.base}/v1/surveys?limit=1", headers=ADMIN).json()["total"] == before


def test_an_empty_k_is_caught_on_the_form_and_sends_nothing(server, new_page):
    """K left empty: the browser asks for it (nothing is sent, so no 422 in the service's
    words about ``goal.top_k``); with a whole ranking as the goal, K is not asked for."""
    admin = new_page()
    sign_in(admin, server.base)
    sent = []
    admin.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("No K")
    admin.get_by_label("Items, one per line").fill("\n".join(ITEMS))
    admin.get_by_label("Certify the top K items").check()
    k = admin.get_by_label("K: how many top items")
    k.fill("")
    admin.get_by_role("button", name="Create survey").click()
    expect(k).to_be_focused()
    assert k.evaluate("el => el.validity.valueMissing")
    assert sent == []
    admin.get_by_label("Certify the whole ranking").check()
    admin.get_by_role("button", name="Create survey").click()
    expect(admin.get_by_role("heading", name="No K")).to_be_visible()
