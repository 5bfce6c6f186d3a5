"""Participatory surveys in the browser: respondents suggest items and report items on the
respondent page, a moderator (a key with the role "moderator") decides in the dashboard,
"can't decide" is counted, and the public results page shows the ranking (or says it is
not public).

Screenshots: participation-suggest.png, participation-moderation.png,
participation-results.png and respondent-undecided.png (``PRIVRANK_SCREENSHOT_DIR=docs/img``
regenerates docs/how-to/moderate.md's)."""

from __future__ import annotations

import json

import httpx2
from playwright.sync_api import expect

from app.stats import entropy
from tests.helpers.browser import ADMIN, ADMIN_KEY, ITEMS, TRUTH, api_respondent, shown_pair
from tests.helpers.live import LiveServer


def _survey(server, title: str = "Which policy matters most?", **settings) -> dict:
    body = {
        "title": title,
        "items": ITEMS,
        "privacy": {
            "epsilon_default": 2.0,
            "epsilon_max": 8.0,
            "respondent_budget": 48.0,
        },  # 6 pairs at ε ≤ 8
        **settings,
    }
    r = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def _get(server, path: str) -> dict:
    r = httpx2.get(f"{server.base}{path}", headers=ADMIN)
    assert r.status_code == 200, r.text
    return r.json()


def _item(server, sid: str, label: str) -> dict:
    return next(it for it in _get(server, f"/v1/surveys/{sid}")["items"] if it["label"] == label)


def _respondent(server, sid: str) -> dict:
    """The headers of a new respondent, registered through the API."""
    token = httpx2.post(f"{server.base}/v1/surveys/{sid}/respondents", json={}).json()["token"]
    return {"Authorization": f"Bearer {token}"}


def _moderator_key(server) -> str:
    r = httpx2.post(
        f"{server.base}/v1/keys", json={"role": "moderator", "label": "moderation"}, headers=ADMIN
    )
    assert r.status_code == 201, r.text
    return r.json()["key"]


def _sign_in_with(page, base: str, key: str) -> None:
    page.goto(base + "/")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Surveys")).to_be_visible()


def _truthful_answers(server, sid: str, respondents: int, epsilon: float | None = 8.0, rng=None) -> None:
    """Respondents answering every pair in TRUTH's order through the API: randomized at ε = 8
    by ``rng`` (a seeded generator: the same answers on every run) in a local survey, true
    answers in a central one."""
    with httpx2.Client(base_url=server.base, timeout=60) as api:
        for _ in range(respondents):
            assert api_respondent(api, sid, epsilon=epsilon, rng=rng) > 0


def _shown(page) -> tuple[str, str]:
    return shown_pair(page)


def _start(page, link: str) -> None:
    page.goto(link)
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#choice-a")).to_be_visible()


def _suggest(page, label: str) -> None:
    page.get_by_label("Your idea (at most 200 characters)").fill(label)
    page.get_by_role("button", name="Send idea").click()


def _card(page, label: str):
    return page.locator("li.suggestion").filter(has=page.locator(".sugg-label", has_text=label))


def test_suggestions_from_the_respondent_page_through_moderation(server, new_page, console, shots):
    """An admin creates a survey taking suggestions in the dashboard; a respondent suggests
    three ideas (the page says the suggestion is stored without a link to them, counts down
    what is left, and answers the fourth, over the limit, politely); a moderator key sees the
    survey list and only the moderation: the pending ideas, a near-duplicate of "Housing"
    flagged as the same text; it edits and approves one, rejects one with a reason and
    merges the duplicate into "Housing". The approved idea becomes a live item with source
    "suggested" that respondents are then asked about."""
    admin = new_page(signed_in=server.base)
    admin.goto(server.base + "/")
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("Which policy matters most?")
    admin.get_by_label("Items, one per line").fill("\n".join(ITEMS))
    admin.get_by_label("ε given to respondents who do not choose").fill("2")
    admin.get_by_label("Total ε one respondent may spend (the sum over its answers)").fill("20")  # 10 pairs
    expect(admin.locator("#suggestion-fields")).to_be_hidden()
    admin.get_by_label("Participants may suggest items (and report items)").check()
    expect(admin.locator("#suggestion-fields")).to_be_visible()
    admin.get_by_label("Ideas one participant may suggest").fill("3")
    admin.get_by_label("Reports that send an item to review").fill("2")
    admin.get_by_label("Publish suggestions and reports in batches of (respondents)").fill("2")
    expect(admin.get_by_label("Show results at the end of the respondent page")).to_be_disabled()
    admin.get_by_label("Publish results at /r/{id}", exact=False).check()
    expect(admin.get_by_label("Show results at the end of the respondent page")).to_be_enabled()
    admin.get_by_role("button", name="Create survey").click()
    expect(admin.get_by_role("heading", name="Which policy matters most?")).to_be_visible()
    sid = admin.locator("#respondent-link").inner_text().rsplit("/", 1)[1]
    s = _get(server, f"/v1/surveys/{sid}")
    assert s["suggestions"]["enabled"] is True and s["suggestions"]["per_respondent"] == 3
    assert s["suggestions"]["flag_threshold"] == 2 and s["suggestions"]["moderation"] == "before"
    assert s["suggestions"]["batch"] == 2
    assert s["public_results"] is True and s["results_on_finish"] is False
    expect(admin.locator("#public-results-link")).to_have_text(f"{server.base}/r/{sid}")
    assert {it["source"] for it in s["items"]} == {"seed"}

    # A respondent suggests three ideas; what goes on the wire is the label alone.
    resp = new_page(width=420, height=900)
    bodies: list[dict] = []
    resp.on(
        "request",
        lambda req: (
            bodies.append(json.loads(req.post_data))
            if req.method == "POST" and req.url.endswith("/suggestions")
            else None
        ),
    )
    _start(resp, f"{server.base}/s/{sid}?n=3")
    resp.get_by_text("Suggest an idea").click()
    expect(resp.locator("#suggest-privacy")).to_contain_text(
        "Your suggestion is stored without any link to you or your answers."
    )
    expect(resp.locator("#suggest-privacy")).to_contain_text("published in groups from 2 different people")
    _suggest(resp, "Bike lanes")
    expect(resp.locator("#suggest-msg")).to_have_text(
        "Thank you — a moderator will review it once 2 people have sent ideas. You can suggest 2 more ideas."
    )
    expect(resp.get_by_label("Your idea (at most 200 characters)")).to_have_value("")
    shots(resp, "participation-suggest.png", full_page=True)
    # The box stays (with its message) under the next pair.
    resp.locator("#choice-a").click()
    expect(resp.locator("#progress-text")).to_have_text("Question 2 of 3")
    expect(resp.locator("#suggest-msg")).to_contain_text("You can suggest 2 more ideas.")
    _suggest(resp, "Night buses")
    expect(resp.locator("#suggest-msg")).to_contain_text("You can suggest 1 more idea.")
    _suggest(resp, "housing!")
    expect(resp.locator("#suggest-msg")).to_contain_text("That was your last one.")
    expect(resp.locator("#suggest-send")).to_be_disabled()
    assert bodies == [{"label": "Bike lanes"}, {"label": "Night buses"}, {"label": "housing!"}]
    # After a reload the page does not know the count: the server's 409 is answered politely.
    console.allow(409)
    resp.reload()
    expect(resp.locator("#choice-a")).to_be_visible()
    resp.get_by_text("Suggest an idea").click()
    _suggest(resp, "Trams")
    expect(resp.locator("#suggest-msg")).to_contain_text("you have sent all the ideas this survey takes")
    expect(resp.locator("#suggest-send")).to_be_disabled()
    # Held until another respondent suggests: three more publish all six, in batches of two.
    pending = _get(server, f"/v1/surveys/{sid}/suggestions")
    assert (pending["total"], pending["held"], pending["held_respondents"]) == (0, 3, 1)
    other = _respondent(server, sid)
    for label in ("Tree planting", "Street lights", "Public toilets"):
        sent = httpx2.post(
            f"{server.base}/v1/surveys/{sid}/suggestions", json={"label": label}, headers=other
        )
        assert sent.status_code == 202, sent.text
    pending = _get(server, f"/v1/surveys/{sid}/suggestions")
    assert pending["total"] == 6 and {x["label"] for x in pending["suggestions"]} == {
        "Bike lanes",
        "Night buses",
        "housing!",
        "Tree planting",
        "Street lights",
        "Public toilets",
    }

    # A moderator: the survey list, then the survey's moderation and nothing else.
    mod = new_page()
    _sign_in_with(mod, server.base, _moderator_key(server))
    expect(mod.locator("#nav-new")).to_be_hidden()
    # Its row in the list of every survey of the server (other tests' share the title).
    row = mod.locator("tr").filter(has=mod.locator(f'a[href="#/survey/{sid}"]'))
    expect(row.get_by_role("link")).to_have_text("Which policy matters most?")
    expect(row.locator("td.pending")).to_have_text("6 to review")
    row.get_by_role("link").click()
    expect(mod.locator("#moderation-summary")).to_contain_text("6 suggestions wait for a moderator")
    expect(mod.get_by_role("heading", name="Moderation")).to_be_visible()
    expect(mod.locator("li.suggestion")).to_have_count(6)
    assert mod.locator("#ranking, #progress, #export, #toggle-status, #items").count() == 0
    dup = _card(mod, "housing!")
    expect(dup.locator(".similar-one").first).to_contain_text("“Housing”")
    expect(dup.locator(".similar-one").first).to_contain_text("100% similar")
    expect(dup.locator(".badge.same-text")).to_have_text("same text")
    assert _card(mod, "Night buses").locator(".badge.same-text").count() == 0
    shots(mod, "participation-moderation.png", full_page=True)

    # Edit, then approve.
    bike = _card(mod, "Bike lanes")
    bike.get_by_role("button", name="Edit").click()
    mod.get_by_label("New wording for “Bike lanes”").fill("Bike lanes on main streets")
    bike.get_by_role("button", name="Save").click()
    bike = _card(mod, "Bike lanes on main streets")
    expect(bike).to_have_count(1)
    bike.get_by_role("button", name="Approve").click()
    expect(mod.locator("li.suggestion")).to_have_count(5)
    expect(mod.locator("#suggestions-count")).to_have_text("5 pending suggestions.")
    # Reject with a reason (asked for first).
    night = _card(mod, "Night buses")
    night.get_by_role("button", name="Reject").click()
    night.get_by_role("button", name="Reject suggestion").click()
    expect(night.locator(".card-error")).to_contain_text("Give a reason")
    mod.get_by_label("Why reject “Night buses”?").fill("Out of the council's remit")
    night.get_by_role("button", name="Reject suggestion").click()
    expect(mod.locator("li.suggestion")).to_have_count(4)
    # Merge the duplicate: the select starts on the most similar item.
    dup.get_by_role("button", name="Merge into…").click()
    expect(mod.get_by_label("Merge “housing!” into")).to_have_value(_item(server, sid, "Housing")["id"])
    dup.get_by_role("button", name="Merge", exact=True).click()
    expect(mod.locator("#suggestions-count")).to_have_text("3 pending suggestions.")
    mod.get_by_label("Show").select_option("all")
    expect(mod.locator("li.suggestion")).to_have_count(6)
    expect(_card(mod, "Night buses")).to_contain_text("reason: Out of the council's remit")
    expect(_card(mod, "housing!").locator(".badge")).to_have_text("merged")

    decided = {
        x["label"]: x for x in _get(server, f"/v1/surveys/{sid}/suggestions?status=all")["suggestions"]
    }
    assert decided["Bike lanes on main streets"]["status"] == "approved"
    assert decided["Night buses"]["status"] == "rejected"
    assert decided["Night buses"]["reason"] == "Out of the council's remit"
    assert decided["housing!"]["status"] == "merged"
    assert decided["housing!"]["item_id"] == _item(server, sid, "Housing")["id"]
    new_item = _item(server, sid, "Bike lanes on main streets")
    assert new_item["source"] == "suggested" and new_item["status"] == "live"
    assert decided["Bike lanes on main streets"]["item_id"] == new_item["id"]

    # The admin's items table shows where each item came from.
    admin.get_by_role("button", name="Refresh").click()
    new_row = admin.locator("#items-table tr").filter(has_text="Bike lanes on main streets")
    expect(new_row.locator("td.source")).to_have_text("suggested")
    expect(admin.locator("#items-table tr").filter(has_text="Transit").locator("td.source")).to_have_text(
        "seed"
    )

    # A new respondent answering all ten pairs of the five items meets the approved one.
    later = new_page()
    _start(later, f"{server.base}/s/{sid}?n=10")
    seen: set[str] = set()
    for k in range(10):
        expect(later.locator("#progress-text")).to_have_text(f"Question {k + 1} of 10")
        seen.update(_shown(later))
        later.locator("#choice-a").click()
    expect(later.locator("#thanks")).to_be_visible()
    assert seen == {*ITEMS, "Bike lanes on main streets"}


def test_with_moderation_after_an_idea_is_an_item_at_once(server, new_page):
    """Moderation "after": the respondent is thanked (no review promised), the idea is a
    live item at once, and a moderator finds it among the items to watch and hides it."""
    s = _survey(server, suggestions={"enabled": True, "moderation": "after", "per_respondent": 2, "batch": 2})
    resp = new_page(width=420, height=900)
    _start(resp, f"{server.base}/s/{s['id']}?n=3")
    resp.get_by_text("Suggest an idea").click()
    _suggest(resp, "Night buses")
    expect(resp.locator("#suggest-msg")).to_have_text(
        "Thank you for your idea! It appears in the survey once 2 people have sent ideas. "
        "You can suggest 1 more idea."
    )
    assert len(_get(server, f"/v1/surveys/{s['id']}")["items"]) == len(ITEMS)  # held
    # A second respondent's idea completes the batch; the admin hides it (not watched here).
    other = _respondent(server, s["id"])
    sent = httpx2.post(
        f"{server.base}/v1/surveys/{s['id']}/suggestions", json={"label": "Trams"}, headers=other
    )
    assert sent.status_code == 202, sent.text
    trams = _item(server, s["id"], "Trams")["id"]
    hidden = httpx2.patch(
        f"{server.base}/v1/surveys/{s['id']}/items/{trams}", json={"status": "hidden"}, headers=ADMIN
    )
    assert hidden.status_code == 200, hidden.text
    item = _item(server, s["id"], "Night buses")
    assert item["source"] == "suggested" and item["status"] == "live"
    mod = new_page()
    _sign_in_with(mod, server.base, _moderator_key(server))
    mod.goto(f"{server.base}/#/survey/{s['id']}")
    row = mod.locator("#review-table tbody tr").filter(has_text="Night buses")
    expect(row).to_contain_text("suggested")
    row.get_by_role("button", name="Hide").click()
    expect(row).to_contain_text("hidden")
    assert _item(server, s["id"], "Night buses")["status"] == "hidden"
    # A hidden item is not asked about: a new respondent sees only the four others.
    later = new_page()
    _start(later, f"{server.base}/s/{s['id']}?n=6")
    seen: set[str] = set()
    for k in range(6):
        expect(later.locator("#progress-text")).to_have_text(f"Question {k + 1} of 6")
        seen.update(_shown(later))
        later.locator("#choice-a").click()
    expect(later.locator("#thanks")).to_be_visible()
    assert seen == set(ITEMS)


def test_cant_decide_moves_on_and_the_dashboard_counts_it(server, new_page, survey_page, shots):
    s = _survey(server, suggestions={"enabled": True})
    admin = survey_page(s["id"])
    expect(admin.locator("#stat-undecided")).to_have_text("0")
    resp = new_page(width=420, height=900)
    _start(resp, f"{server.base}/s/{s['id']}?n=4")
    seen = [_shown(resp)]
    for serial in (2, 3):
        resp.locator("#skip").click()
        expect(resp.locator(".pair")).to_have_attribute("data-serial", str(serial))
        expect(resp.locator("#progress-text")).to_have_text("Question 1 of 4")  # nothing answered
        seen.append(_shown(resp))
    assert len({frozenset(p) for p in seen}) == 3  # a skipped pair is not shown again
    resp.locator("#choice-b").focus()
    resp.keyboard.press("Tab")  # "Can't decide" with its keyboard focus ring, for the picture
    expect(resp.locator("#skip")).to_be_focused()
    shots(resp, "respondent-undecided.png", full_page=True)
    assert _get(server, f"/v1/surveys/{s['id']}")["undecided"] == 2
    admin.get_by_role("button", name="Refresh").click()
    expect(admin.locator("#stat-undecided")).to_have_text("2")
    expect(admin.locator("#stat-comparisons")).to_have_text("0")


def test_reports_up_to_the_threshold_send_an_item_to_review(server, new_page, survey_page):
    """Two respondents report "Parks", a participant's suggestion (threshold 2, batches of
    two): after the first it is still live, its report held; after the second both are
    published and it is under review, shown as
    such in the dashboard and not asked about any more; restoring it clears its reports.
    (Seed items collect reports but stay live: tests/api/test_participation.py.)"""
    seeds = [label for label in ITEMS if label != "Parks"]
    body = {
        "title": "Which policy matters most?",
        "items": seeds,
        "privacy": {"epsilon_default": 2.0, "epsilon_max": 8.0, "respondent_budget": 48.0},
        "suggestions": {"enabled": True, "flag_threshold": 2, "moderation": "after", "batch": 2},
    }
    s = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()
    sid = s["id"]
    # "Parks", and a seed item's label from another respondent (merged): a batch of two.
    for label in ("Parks", seeds[0].upper()):
        token = httpx2.post(f"{server.base}/v1/surveys/{sid}/respondents", json={}).json()["token"]
        suggested = httpx2.post(
            f"{server.base}/v1/surveys/{sid}/suggestions",
            json={"label": label},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert suggested.status_code == 202, suggested.text
    assert _item(server, sid, "Parks")["source"] == "suggested"
    assert len(_get(server, f"/v1/surveys/{sid}")["items"]) == len(seeds) + 1

    def report_parks(page) -> None:
        _start(page, f"{server.base}/s/{sid}?n=6")
        serial = 1
        while "Parks" not in _shown(page):  # "can't decide" until a pair with Parks shows
            page.locator("#skip").click()
            serial += 1
            expect(page.locator(".pair")).to_have_attribute("data-serial", str(serial))
        pair = frozenset(_shown(page))
        page.get_by_role("button", name="Report “Parks”").click()
        expect(page.locator("#notice")).to_have_text(
            "Thank you: “Parks” was reported. Moderators will look at it."
        )
        # Moved on: to another pair, or to the thanks when the server's order left none
        # (it draws the order from the OS CSPRNG), the notice in sight on either.
        following = page.locator(f'.pair[data-serial="{serial + 1}"]')
        expect(following.or_(page.locator("#thanks"))).to_be_visible()
        if following.count():
            assert frozenset(_shown(page)) != pair

    report_parks(new_page(width=420, height=900))
    parks = _item(server, sid, "Parks")
    assert parks["flags"] == 0 and parks["status"] == "live"  # held until a second report
    report_parks(new_page(width=420, height=900))
    parks = _item(server, sid, "Parks")
    assert parks["flags"] == 2 and parks["status"] == "review"

    admin = survey_page(sid)
    row = admin.locator("#review-table tbody tr").filter(has_text="Parks")
    expect(row).to_contain_text("under review")
    expect(row.locator("td.num")).to_have_text("2")
    expect(admin.locator("#items-table tr").filter(has_text="Parks").locator("td.status")).to_have_text(
        "under review"
    )
    # Not served while under review: a new respondent answers all three remaining pairs.
    third = new_page()
    _start(third, f"{server.base}/s/{sid}?n=6")
    for k in range(3):
        expect(third.locator("#progress-text")).to_have_text(f"Question {k + 1} of 6")
        assert "Parks" not in _shown(third)
        third.locator("#choice-a").click()
    expect(third.locator("#thanks")).to_be_visible()  # no pair left without Parks
    row.get_by_role("button", name="Restore").click()
    # Still listed (moderation "after" lists suggested items, to hide), no longer in review.
    expect(admin.locator("#review-table tbody tr").filter(has_text="Parks")).not_to_contain_text(
        "under review"
    )
    parks = _item(server, sid, "Parks")
    assert parks["status"] == "live" and parks["flags"] == 0


def test_a_report_on_the_last_pair_is_confirmed_on_the_thanks(server, new_page, console):
    """In a survey of two items a respondent reports one item of the only pair: no pair is
    left, and the thanks keep the report's confirmation in sight (not only announced to
    screen readers)."""
    body = {"title": "One pair", "items": ITEMS[:2], "suggestions": {"enabled": True}}
    sid = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()["id"]
    page = new_page(width=420, height=900)
    _start(page, f"{server.base}/s/{sid}")
    label = _shown(page)[0]
    page.get_by_role("button", name=f"Report “{label}”").click()
    expect(page.locator("#thanks")).to_be_visible()
    expect(page.locator("#notice")).to_have_text(
        f"Thank you: “{label}” was reported. Moderators will look at it."
    )
    assert page.locator("#status").text_content() == page.locator("#notice").text_content()


def test_the_public_results_page(server, new_page, survey_page, console, shots):
    """/r/{id} shows a public survey's ranking in the API's order with each item's
    comparisons, interval strips and the note, and fits a phone; a survey that does not
    publish says so (404), until the admin publishes it from the dashboard; a survey
    with results at the end shows them after the thanks.

    The answers (30 respondents, every pair, in TRUTH's order) are randomized at ε = 8 by
    the test's seeded generator, so the ranking is the same on every run: TRUTH, each item
    winning about 30 comparisons more than the next (a flip at ε = 8 is a 1-in-3,000
    event), which the respondent page's one answer more, on any pair, cannot reorder."""
    s = _survey(server, public_results=True, results_on_finish=True)
    sid = s["id"]
    _truthful_answers(server, sid, 30, rng=entropy.generator())  # seeded by the test's id
    api = httpx2.get(f"{server.base}/v1/surveys/{sid}/results").json()
    assert [it["label"] for it in api["items"]] == TRUTH
    page = new_page(width=375, height=800)
    page.goto(f"{server.base}/r/{sid}")
    expect(page.get_by_role("heading", level=1)).to_have_text("Which policy matters most?")
    expect(page.locator("#results-list li")).to_have_count(4)
    labels = [x.strip() for x in page.locator("#results-list .result-label").all_inner_texts()]
    assert labels == TRUTH
    figures = page.locator("#results-list .result-figures").all_inner_texts()
    for text, it in zip(figures, api["items"], strict=True):
        assert f"{it['comparisons']} comparisons" in text
        # Negative scores are written with the minus sign U+2212, never a hyphen.
        assert f"score {it['score']:.2f}".replace("-", "\u2212") in text
    assert any(it["score"] < 0 for it in api["items"])  # scores sum to 0: some are negative
    expect(page.locator("#results-list svg.strip[role=img]")).to_have_count(4)
    expect(page.locator("#results-note")).to_have_text(api["note"])
    expect(page.locator("#results-summary")).to_contain_text(
        f"{api['respondents']} respondents, {api['comparisons']} comparisons"
    )
    # Intervals drawn in order: each dot sits inside its bar.
    for k in range(4):
        strip = page.locator("#results-list svg.strip").nth(k)
        bar = strip.locator("rect.interval")
        x0, w = float(bar.get_attribute("x")), float(bar.get_attribute("width"))
        assert x0 <= float(strip.locator("circle.score").get_attribute("cx")) <= x0 + w
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    shots(page, "participation-results.png", full_page=True)
    # Items added more than an hour after the first are marked new.
    marked = page.evaluate(
        """async () => {
            const { addedLater } = await import("/static/results-view.js");
            const at = (h) => new Date(Date.UTC(2025, 0, 1, h)).toISOString();
            return [...addedLater([
                { item_id: "a", added_at: at(9) }, { item_id: "b", added_at: at(10) },
                { item_id: "c", added_at: at(12) },
            ])];
        }"""
    )
    assert marked == ["c"]

    # The end of the respondent page shows the same ranking.
    resp = new_page(width=420, height=900)
    _start(resp, f"{server.base}/s/{sid}?n=1")
    resp.locator("#choice-a").click()
    expect(resp.locator("#thanks")).to_be_visible()
    expect(resp.locator("#finish-results-list li")).to_have_count(4)
    assert [x.strip() for x in resp.locator("#finish-results .result-label").all_inner_texts()] == TRUTH

    # Not public: the page says so; the admin publishes it from the dashboard.
    hidden = _survey(server, title="Internal")
    console.allow(404)
    other = new_page()
    other.goto(f"{server.base}/r/{hidden['id']}")
    expect(other.get_by_role("heading", name="These results are not public")).to_be_visible()
    admin = survey_page(hidden["id"])
    settings = admin.get_by_text("Participation settings")
    expect(settings).to_be_visible()  # the survey's view is drawn
    expect(admin.locator("#public-results-link")).to_have_count(0)
    settings.click()
    admin.get_by_label(f"Publish results at /r/{hidden['id']}").check()
    expect(admin.locator("#public-results-link")).to_have_text(f"{server.base}/r/{hidden['id']}")
    assert _get(server, f"/v1/surveys/{hidden['id']}")["public_results"] is True
    other.reload()
    expect(other.get_by_role("heading", level=1)).to_have_text("Internal")
    expect(other.locator("#results-list li")).to_have_count(4)


def test_the_public_results_of_a_central_survey_are_its_latest_release(server, new_page):
    """A central survey publishes only releases: before the first the page says nothing is
    released (the API's note); after one it shows the release's date and ε and its ranking."""
    body = {
        "title": "Trusted",
        "items": ITEMS,
        "privacy": {"model": "central", "total_budget": 20.0, "max_comparisons_per_respondent": 6},
        "public_results": True,
    }
    s = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()
    _truthful_answers(server, s["id"], 40, epsilon=None)
    page = new_page(width=375, height=800)
    page.goto(f"{server.base}/r/{s['id']}")
    before = httpx2.get(f"{server.base}/v1/surveys/{s['id']}/results").json()
    assert before["release"] is None
    expect(page.locator("#results-note")).to_have_text(before["note"])
    expect(page.locator("#results-release")).to_have_count(0)
    r = httpx2.post(
        f"{server.base}/v1/surveys/{s['id']}/releases",
        json={"method": "perturbed_mle", "unit": "edge", "epsilon": 2.0},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    after = httpx2.get(f"{server.base}/v1/surveys/{s['id']}/results").json()
    assert after["release"]["id"] == r.json()["id"]
    page.reload()
    expect(page.locator("#results-release")).to_contain_text("Results released on")
    expect(page.locator("#results-release")).to_contain_text("ε = 2.00")
    expect(page.locator("#results-list li")).to_have_count(4)
    labels = [x.strip() for x in page.locator("#results-list .result-label").all_inner_texts()]
    assert labels == [it["label"] for it in after["items"]]
    expect(page.locator("#results-note")).to_have_text(after["note"])


def test_merge_starts_on_the_item_the_card_flags(server, new_page, survey_page):
    """ "Merge into…" starts on the item the card flags as a near-duplicate, here not the
    survey's first; a suggestion whose only near-duplicate is another suggestion starts on
    no item (not the first one), and Merge asks for a choice rather than merging."""
    s = _survey(server, suggestions={"enabled": True, "batch": 2})
    sid = s["id"]
    for label in ("schools!", "Night buses", "Night bus"):
        sent = httpx2.post(
            f"{server.base}/v1/surveys/{sid}/suggestions",
            json={"label": label},
            headers=_respondent(server, sid),
        )
        assert sent.status_code == 202, sent.text
    sent = httpx2.post(
        f"{server.base}/v1/surveys/{sid}/suggestions",
        json={"label": "Trams"},
        headers=_respondent(server, sid),
    )
    assert _get(server, f"/v1/surveys/{sid}/suggestions")["total"] == 4
    page = survey_page(sid)
    dup = _card(page, "schools!")
    expect(dup.locator(".similar-one").first).to_contain_text("“Schools”")
    dup.get_by_role("button", name="Merge into…").click()
    expect(page.get_by_label("Merge “schools!” into")).to_have_value(_item(server, sid, "Schools")["id"])
    # Flagged: only the other suggestion, which cannot take a merge.
    night = _card(page, "Night buses")
    expect(night.locator(".similar-one").first).to_contain_text("“Night bus” (suggestion)")
    night.get_by_role("button", name="Merge into…").click()
    expect(page.get_by_label("Merge “Night buses” into")).to_have_value("")
    night.get_by_role("button", name="Merge", exact=True).click()
    expect(night.locator(".card-error")).to_contain_text("Choose the item to merge it into.")
    assert _get(server, f"/v1/surveys/{sid}/suggestions")["total"] == 4  # nothing merged


def test_an_hourly_refusal_is_said_at_once_not_waited_out(tmp_path, new_page, console):
    """Past the address's suggestions for the hour (PRIVRANK_SUGGEST_PER_HOUR=1) the service
    answers 429 with a Retry-After of an hour: the page says so at once and lets the
    respondent go on, instead of holding the Send button while it retries for minutes."""
    server = LiveServer(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path}/hourly.db",
            "PRIVRANK_ADMIN_KEY": ADMIN_KEY,
            "PRIVRANK_SUGGEST_PER_HOUR": "1",
        }
    )
    try:
        body = {"title": "Hourly", "items": ITEMS, "suggestions": {"enabled": True, "per_respondent": 3}}
        sid = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()["id"]
        console.allow(429)
        resp = new_page(width=420, height=900)
        posts: list[int] = []
        resp.on(
            "response",
            lambda r: (
                posts.append(r.status)
                if r.request.method == "POST" and r.url.endswith("/suggestions")
                else None
            ),
        )
        _start(resp, f"{server.base}/s/{sid}?n=3")
        resp.get_by_text("Suggest an idea").click()
        _suggest(resp, "Bike lanes")
        expect(resp.locator("#suggest-msg")).to_contain_text("You can suggest 2 more ideas.")
        _suggest(resp, "Night buses")
        expect(resp.locator("#suggest-msg")).to_contain_text("too many suggestions from this address")
        expect(resp.locator("#suggest-send")).to_be_enabled()
        assert posts == [202, 429]  # asked once, not again after a minute
    finally:
        server.stop()
