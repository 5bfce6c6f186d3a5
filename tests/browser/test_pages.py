"""The dashboard and the respondent page in a real browser (Playwright + Debian Chromium)."""

from __future__ import annotations

import itertools
import json
import math

import httpx2
import numpy as np
import pytest
from playwright.sync_api import expect

from app.stats import entropy
from app.stats.rankings import kendall_distance, mallows_log_pmf
from tests.helpers.browser import (
    ADMIN,
    ITEMS,
    TRUTH,
    answer_pairs,
    api_respondent,
    random_values_calls,
    shown_pair,
    sign_in,
)
from tests.helpers.stats import assert_close_mc, binomial_se


def test_a_survey_from_the_dashboard_to_the_respondents_and_back(server, api, new_page, console, shots):
    """An admin creates a survey in the dashboard; seven respondents answer all six pairs
    at the survey's ε = 2 (two on the respondent page, randomized there; five through the
    API, randomized by the test); the dashboard shows their answers, plans from them, and
    closes the survey under a respondent's feet. Both randomizations are seeded (the page's
    by conftest.py, the test's by tests/conftest.py), but which pairs their flips fall on
    follows the order and orientation of the pairs the live server draws (OS CSPRNG): the
    stored answers differ from run to run, and in about 1 run in 1,000 they leave an item
    separated (e.g. Parks losing all its 21 comparisons) and the survey without intervals,
    which the dashboard then says instead of drawing the win probabilities."""
    admin = new_page()
    sign_in(admin, server.base)
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("Which policy matters most?")
    admin.get_by_label("Items, one per line").fill("\n".join(ITEMS))
    admin.get_by_label("ε given to respondents who do not choose").fill("2")
    expect(admin.locator("#eps-meaning")).to_contain_text("truthful with probability e^ε/(1+e^ε) = 88%")
    admin.get_by_label("Smallest ε a respondent may choose").fill("0.5")
    admin.get_by_label("Largest ε a respondent may choose").fill("4")
    total = admin.get_by_label("Total ε one respondent may spend (the sum over its answers)")
    expect(total).to_have_value("5")  # the service's default cap, filled in
    total.fill("20")
    admin.get_by_role("button", name="Preview accuracy").click()
    # A simulation on the server: seconds, more than expect's default 5 on a busy machine.
    expect(admin.locator("#plan-out")).to_contain_text("P(exact top-3 found)", timeout=60_000)
    # The preview says what it assumes, in words.
    expect(admin.locator("#plan-assumption")).to_contain_text(
        "Assumes the items' true scores are drawn at random"
    )
    expect(admin.locator("#plan-assumption")).to_contain_text("answer independently")
    shots(admin, "dashboard-create.png", full_page=True)
    admin.get_by_role("button", name="Create survey").click()
    expect(admin.get_by_role("heading", name="Which policy matters most?")).to_be_visible()
    expect(admin.locator("#survey-status")).to_have_text("open")
    expect(admin.locator("#no-data")).to_be_visible()  # no answers yet
    link = admin.locator("#respondent-link").inner_text()
    sid = link.rsplit("/", 1)[1]

    # Seven respondents answer six pairs each: two on the respondent page, five through the API.
    first = new_page(width=420, height=860)  # a phone-sized screen
    first.goto(f"{link}?n=6")
    expect(first.get_by_role("heading", name="Your privacy")).to_be_visible()
    expect(first.locator("#epsilon-meaning")).to_contain_text("reported as you gave it with probability 88%")
    shots(first, "respondent-intro.png", full_page=True)
    first.get_by_role("button", name="Start").click()
    expect(first.locator("#choice-a")).to_be_visible()
    shots(first, "respondent-pair.png", full_page=True)
    answer_pairs(new_page(), link, 6)
    rng = entropy.generator()  # seeded by the test's id
    for _ in range(5):
        assert api_respondent(api, sid, count=6, epsilon=2.0, rng=rng) == 6
    spent = new_page()
    answer_pairs(spent, link, 6)
    expect(spent.locator("#spent")).to_have_text(
        "You answered 6 pairs. Each answer was randomized on this device before it was sent: reported as you "
        "gave it with probability 88% and the opposite otherwise (ε = 2: ε-local differential privacy for "
        "each answer). Together your 6 answers reveal at most as much as one answer reported as you gave it "
        "with probability >99% would (ε = 12 in total, the sum over your answers)."
    )
    shots(spent, "respondent-thanks.png")
    stored = httpx2.get(f"{server.base}/v1/surveys/{sid}/comparisons.csv", headers=ADMIN).text.splitlines()
    assert len(stored) == 1 + 42
    assert all(line.split(",")[4] == "2.0" for line in stored[1:])  # the page's with the browser's ε

    # The dashboard shows progress, coverage, the ranking chart and the win matrix.
    admin.get_by_role("button", name="Refresh").click()
    expect(admin.locator("#stat-comparisons")).to_have_text("42")
    expect(admin.locator("#stat-respondents")).to_have_text("7")
    chart = admin.locator("#ranking-box svg[role=img]")
    expect(chart).to_have_count(1)
    expect(chart.locator("g.row")).to_have_count(4)
    expect(admin.locator("#ranking-table tbody tr")).to_have_count(4)
    # The score axis is ticked at round values, evenly spaced (not at −3.01, −1.39, 0.23).
    ticks = [float(t.replace("−", "-")) for t in chart.locator("text.tick").all_text_contents()]
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(ticks) >= 3 and len(steps) == 1, ticks
    (step,) = steps
    assert any(abs(step / 10 ** round(math.log10(step) - 0.5) - f) < 1e-9 for f in (1, 2, 2.5, 5, 10)), step
    assert all(abs(t / step - round(t / step)) < 1e-6 for t in ticks), ticks
    nice = admin.evaluate("async () => (await import('/static/charts.js')).niceTicks(-3.01, 0.23)")
    assert [t["text"] for t in nice["ticks"]] == ["−4", "−3", "−2", "−1", "0", "1"]
    expect(admin.locator("#coverage-box svg")).to_have_count(1)
    # The win probabilities when the answers give intervals, else why not (docstring).
    if api.get(f"/v1/surveys/{sid}/pairwise", headers=ADMIN).json()["available"]:
        expect(admin.locator("#pairwise-box svg")).to_have_count(1)
    else:
        expect(admin.locator("#pairwise-box")).to_contain_text("No intervals yet")
    expect(admin.locator("#top-k")).to_contain_text("Top 3:")
    shots(admin, "dashboard-survey.png", full_page=True)

    # Planning from where the survey stands: the answer and its assumption, in words.
    admin.get_by_role("button", name="Plan from here").click()
    # It simulates the survey a few hundred times per candidate size: seconds, not the default 5.
    expect(admin.locator("#survey-plan-answer")).to_contain_text("certify the top 3", timeout=120_000)
    assumption = admin.locator("#survey-plan-assumption")
    expect(assumption).to_contain_text("Assumes the true scores are the survey's current estimates")
    expect(assumption).to_contain_text("the current 7 respondents keep their 42 answered pairs")
    expect(assumption).to_contain_text("served least-answered first")
    shots(admin.locator("#survey-plan"), "dashboard-plan.png")

    # A respondent in the middle of the survey when the admin closes it.
    late = new_page()
    late.goto(f"{link}?n=3")
    late.get_by_role("button", name="Start").click()
    expect(late.locator("#choice-a")).to_be_visible()
    admin.get_by_role("button", name="Close survey").click()
    expect(admin.locator("#survey-status")).to_have_text("closed")
    console.allow(409)
    late.locator("#choice-a").click()
    expect(late.locator("#closed")).to_have_text("This survey has closed")
    after = new_page()
    after.goto(link)
    expect(after.get_by_role("heading", name="This survey is closed")).to_be_visible()
    rows = httpx2.get(f"{server.base}/v1/surveys/{sid}/comparisons.csv", headers=ADMIN).text.splitlines()
    assert len(rows) == 1 + 42  # nothing stored after closing
    expect(admin.get_by_role("button", name="Reopen survey")).to_be_visible()


def test_the_browser_randomizer_flips_at_the_rr_rate(server, new_page):
    """Measured inside the browser with privrank.js: over 400,000 draws at ε = 1 and at
    ε = 0.25 the reported answer differs from the true one 1/(1+e^ε) of the time (z = 4.5);
    and the Mallows randomizer returns the input ranking with its exact Mallows probability.

    The page's crypto.getRandomValues is seeded (conftest.py): the outcome is the same on
    every run; over seeds the checks (2 + 6 at z = 4.5) fail with probability < 6e-5.
    Every draw went through crypto.getRandomValues (its calls are counted), and
    privrank.js's source calls it and never Math.random."""
    page = new_page()
    page.goto(server.base + "/")
    n = 400_000
    for eps in (1.0, 0.25):
        before = random_values_calls(page)
        flips = page.evaluate(
            """async ([n, eps]) => {
                const { randomizeComparison } = await import("/static/privrank.js");
                let flips = 0;
                for (let k = 0; k < n; k++) {
                    if (randomizeComparison({ a: "x", b: "y", winner: "x" }, eps).winner === "y") flips++;
                }
                return flips;
            }""",
            [n, eps],
        )
        assert random_values_calls(page) - before == n  # one uniform() a draw
        p = 1 / (1 + math.exp(eps))
        assert_close_mc(flips / n, p, binomial_se(n, p), what=f"browser flip rate at ε={eps}")
    draws = 60_000
    counts = page.evaluate(
        """async ([n]) => {
            const { mallowsPrivatize } = await import("/static/privrank.js");
            const out = {};
            for (let k = 0; k < n; k++) {
                const key = mallowsPrivatize(["c", "a", "b"], 1.0).join("");
                out[key] = (out[key] || 0) + 1;
            }
            return out;
        }""",
        [draws],
    )
    assert len(counts) == 6
    index = {"a": 1, "b": 2, "c": 0}
    center = np.array([0, 1, 2])  # c, a, b
    for key, count in counts.items():
        p = math.exp(mallows_log_pmf(np.array([index[x] for x in key]), center, 1.0))
        assert_close_mc(count / draws, p, binomial_se(draws, p), what=f"Mallows P({key})")
    source = httpx2.get(server.base + "/static/privrank.js").text
    assert "Math.random" not in source.replace("never `Math.random`", "").replace("(never `Math.random`)", "")
    assert "crypto.getRandomValues" in source


def _unlabelled_controls(page) -> list[str]:
    return page.evaluate(
        """() => [...document.querySelectorAll("input, select, textarea")]
            .filter((el) => el.type !== "hidden" && el.type !== "radio" && el.type !== "checkbox")
            .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label")
                && !el.getAttribute("aria-labelledby"))
            .map((el) => el.id || el.name || el.outerHTML.slice(0, 60))"""
    )


def _unnamed_graphics(page) -> list[str]:
    return page.evaluate(
        """() => [
            ...[...document.querySelectorAll("img")]
                .filter((el) => !el.hasAttribute("alt")).map((el) => el.src),
            ...[...document.querySelectorAll("svg")].filter((el) => {
                const ids = (el.getAttribute("aria-labelledby") || "").split(" ").filter(Boolean);
                return el.getAttribute("role") !== "img" || !ids.length
                    || ids.some((id) => !document.getElementById(id)?.textContent.trim());
            }).map((el) => el.outerHTML.slice(0, 60)),
        ]"""
    )


def _radios_without_labels(page) -> list[str]:
    return page.evaluate(
        """() => [...document.querySelectorAll("input[type=radio], input[type=checkbox]")]
            .filter((el) => !(el.labels && el.labels.length && el.labels[0].textContent.trim()))
            .map((el) => el.value)"""
    )


def _tab_sequence(page, presses: int) -> list[str]:
    out = []
    for _ in range(presses):
        page.keyboard.press("Tab")
        out.append(
            page.evaluate("() => document.activeElement.id || document.activeElement.textContent.trim()")
        )
    return out


def test_accessibility_basics(server, new_page):
    sid = httpx2.post(
        f"{server.base}/v1/surveys",
        json={"title": "A11y", "items": ITEMS, "privacy": {"epsilon_default": 1.0, "respondent_budget": 10}},
        headers=ADMIN,
    ).json()["id"]
    page = new_page()
    page.goto(server.base + "/")
    assert _unlabelled_controls(page) == []
    expect(page.locator("#sign-out")).to_be_hidden()  # nothing to sign out of yet
    sign_in(page, server.base)
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    page.get_by_role("link", name="New survey").click()
    expect(page.get_by_label("Title")).to_be_focused()
    assert _unlabelled_controls(page) == [] and _radios_without_labels(page) == []
    page.goto(f"{server.base}/#/survey/{sid}")
    expect(page.locator("#ranking-box")).to_be_visible()
    assert _unlabelled_controls(page) == [] and _unnamed_graphics(page) == []

    # The respondent page: labels, and a focus order that follows the task.
    resp = new_page()
    resp.goto(f"{server.base}/s/{sid}?n=2")
    expect(resp.locator("#epsilon")).to_be_focused()
    assert _unlabelled_controls(resp) == []
    resp.keyboard.press("Tab")
    expect(resp.locator("#start")).to_be_focused()
    resp.keyboard.press("Enter")  # keyboard only
    expect(resp.locator("#choice-a")).to_be_focused()
    assert _tab_sequence(resp, 3) == ["choice-b", "skip", "finish"]
    resp.keyboard.press("Shift+Tab")
    resp.keyboard.press("Shift+Tab")
    resp.keyboard.press("Shift+Tab")
    expect(resp.locator("#choice-a")).to_be_focused()
    resp.keyboard.press("Enter")
    expect(resp.locator("#progress-text")).to_have_text("Question 2 of 2")
    expect(resp.locator("#choice-a")).to_be_focused()
    # The skip link is the only stop before the question.
    resp.goto(f"{server.base}/s/{sid}")
    expect(resp.locator("#choice-a")).to_be_focused()  # resumed: the same respondent, next pair
    resp.keyboard.press("Shift+Tab")
    assert resp.evaluate("() => document.activeElement.className") == "skip-link"


def test_a_ranking_survey_through_the_respondent_page(server, new_page, survey_page, shots):
    r = httpx2.post(
        f"{server.base}/v1/surveys",
        json={"title": "Rank the parks", "kind": "ranking", "items": ITEMS, "privacy": {"epsilon_max": 30}},
        headers=ADMIN,
    ).json()
    sid = r["id"]
    page = new_page()
    page.goto(f"{server.base}/s/{sid}")
    page.get_by_label("Privacy level").select_option("30")
    meaning = page.locator("#epsilon-meaning")
    expect(meaning).to_contain_text("appear swapped with probability <1%")  # never "0%"
    expect(meaning).to_contain_text("ε = 60 between any two rankings")  # εm/2
    expect(meaning).to_contain_text("choose a smaller ε for real protection")
    page.get_by_role("button", name="Start").click()
    items = page.locator("#rank-list li")
    expect(items).to_have_count(4)
    # Put the list in TRUTH order with the keyboard-accessible ↑ buttons.
    for place, label in enumerate(TRUTH):
        current = [x.strip() for x in page.locator("#rank-list li .label").all_inner_texts()]
        for _ in range(current.index(label) - place):
            page.get_by_role("button", name=f"Move {label} up").click()
    expect(page.locator("#rank-list li .label")).to_have_text(TRUTH)
    shots(page, "respondent-ranking.png", full_page=True)
    page.get_by_role("button", name="Submit my ranking").click()
    expect(page.locator("#spent")).to_have_text(
        "Your ranking was replaced on this device by a randomized copy, and only the copy was sent: two "
        "items you put next to each other appear swapped in it with probability <1%, items further "
        "apart less often. Someone who sees the copy and guesses between your ranking and the same "
        "ranking with one item moved is right at most >99% of the time, against 50% by chance; between "
        "any two rankings, at most >99% (ε = 30 for moving one item, ε = 60 between any two rankings)."
    )
    # What was stored is the browser's synthetic ranking: at ε = 30 (b = 10 per pair) it is at
    # most one adjacent swap away from the given one (P(two or more) < 1e-8 over the page's
    # seed; the seeded page draws the same ranking on every run).
    csv_rows = httpx2.get(f"{server.base}/v1/surveys/{sid}/rankings.csv", headers=ADMIN).text.splitlines()
    label = {it["id"]: it["label"] for it in r["items"]}
    assert len(csv_rows) == 2 and csv_rows[1].split(",")[1:3] == ["30.0", "client"]
    stored = [label[x] for x in csv_rows[1].split(",")[3].split(">")]
    assert kendall_distance(np.array([TRUTH.index(x) for x in stored]), np.arange(4)) <= 1
    admin = survey_page(sid)
    expect(admin.locator("#stat-rankings")).to_have_text("1")
    admin.get_by_label("Method").select_option("kemeny")
    expect(admin.locator("#ranking-box")).to_contain_text("Order: " + " > ".join(stored))


@pytest.mark.parametrize("path", ["/", "/s/srv_aaaaaaaaaaaaaaaa"])
def test_pages_send_a_content_security_policy(server, path):
    r = httpx2.get(server.base + path)
    assert r.status_code == 200
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY"


def test_a_central_survey_answers_and_a_release_from_the_dashboard(
    server, api, new_page, central_survey, survey_page
):
    """Central model: the respondent page sends true answers (no ε to choose) up to L; the
    dashboard shows the budget and makes a release, which spends it. One respondent
    answers on the page, two more through the API."""
    r = central_survey
    sent: list[dict] = []
    page = new_page()
    page.on(
        "request",
        lambda req: sent.append(json.loads(req.post_data)) if req.url.endswith("/responses") else None,
    )
    page.goto(f"{server.base}/s/{r['id']}")
    expect(page.locator("#epsilon-meaning")).to_contain_text("differentially private")
    page.get_by_role("button", name="Start").click()
    for k in range(3):
        expect(page.locator("#progress-text")).to_have_text(f"Question {k + 1} of 3")
        a, b = shown_pair(page)
        page.get_by_role("button", name=a if TRUTH.index(a) < TRUTH.index(b) else b, exact=True).click()
    expect(page.locator("#spent")).to_have_text("You answered 3 pairs.")
    # The true answers, as clicked: not privatized, no ε.
    label = {it["id"]: it["label"] for it in r["items"]}
    assert [b["privatized"] for b in sent] == [False] * 3 and not any("epsilon" in b for b in sent)
    for (c,) in (b["comparisons"] for b in sent):
        assert label[c["winner"]] == min(label[c["a"]], label[c["b"]], key=TRUTH.index)
    for _ in range(2):
        assert api_respondent(api, r["id"]) == 3
    admin = survey_page(r["id"])
    expect(admin.locator("#ledger-box")).to_contain_text("Spent ε = 0.00 of 2.00")
    admin.get_by_label("ε of this release").fill("1")
    admin.get_by_role("button", name="Make release").click()
    expect(admin.locator("#release-box")).to_contain_text("cost ε = 1.00")
    expect(admin.locator("#ledger-box")).to_contain_text("Spent ε = 1.00 of 2.00; 1.00 remains.")
    expect(admin.locator("#ledger tbody tr")).to_have_count(1)
    expect(admin.locator("#release-box")).to_contain_text("protects everything one respondent answered")
    expect(admin.locator("#ledger tbody tr td").nth(5)).to_have_text("1.00")  # budget left after it
    assert admin.locator("#export").count() == 0  # true answers are never exported


def test_hostile_labels_render_as_text(server, new_page):
    """Titles and labels with HTML/script payloads show as text in the dashboard (list,
    survey view, charts, tables) and on the respondent page; nothing runs, no element is
    injected."""
    from tests.helpers.api import PAYLOADS

    labels = PAYLOADS[:4]
    r = httpx2.post(
        f"{server.base}/v1/surveys",
        json={"title": PAYLOADS[2], "items": labels, "privacy": {"epsilon_default": 2.0}},
        headers=ADMIN,
    ).json()
    sid = r["id"]
    # Some answers so that the charts draw the labels.
    for _ in range(3):
        reg = httpx2.post(f"{server.base}/v1/surveys/{sid}/respondents", json={}).json()
        h = {"Authorization": f"Bearer {reg['token']}"}
        for p in httpx2.get(f"{server.base}/v1/surveys/{sid}/pairs?count=6", headers=h).json()["pairs"]:
            body = {"privatized": False, "comparisons": [{"a": p["a"], "b": p["b"], "winner": p["a"]}]}
            assert (
                httpx2.post(f"{server.base}/v1/surveys/{sid}/responses", json=body, headers=h).status_code
                == 201
            )
    admin = new_page(signed_in=server.base)
    admin.goto(server.base + "/")
    link = admin.locator(f'a[href="#/survey/{sid}"]')  # in the list of every survey of the server
    expect(link).to_have_text(PAYLOADS[2])
    link.click()
    expect(admin.locator("#ranking-table tbody tr")).to_have_count(4)
    for label in labels:
        expect(admin.locator("#ranking-table")).to_contain_text(label)
    resp = new_page()
    resp.goto(f"{server.base}/s/{sid}")
    expect(resp.locator("#survey-name")).to_have_text(PAYLOADS[2])
    resp.get_by_role("button", name="Start").click()
    expect(resp.locator("#choice-a")).to_be_visible()
    assert resp.locator("#choice-a").inner_text() in labels
    for page in (admin, resp):
        assert page.evaluate("() => window.__pwned") is None
        assert page.evaluate("() => document.querySelectorAll('img, script:not([src]), svg svg').length") == 0


def test_the_dashboard_says_when_there_is_not_enough_data_for_intervals(server, new_page, shots):
    """The README walkthrough's survey (4 items, one respondent at ε = 2): the dashboard
    shows the point estimates with a plain notice that there are no intervals yet, and
    why — not error bars nowhere near their dots."""
    r = httpx2.post(
        f"{server.base}/v1/surveys",
        json={"title": "Which policy matters most?", "items": ITEMS, "privacy": {"epsilon_default": 2.0}},
        headers=ADMIN,
    ).json()
    sid = r["id"]
    reg = httpx2.post(f"{server.base}/v1/surveys/{sid}/respondents", json={"epsilon": 2.0}).json()
    h = {"Authorization": f"Bearer {reg['token']}"}
    pairs = httpx2.get(f"{server.base}/v1/surveys/{sid}/pairs?count=4", headers=h).json()["pairs"]
    body = {"privatized": False, "comparisons": [{"a": p["a"], "b": p["b"], "winner": p["a"]} for p in pairs]}
    assert httpx2.post(f"{server.base}/v1/surveys/{sid}/responses", json=body, headers=h).status_code == 201
    admin = new_page(signed_in=server.base)
    admin.goto(server.base + "/")
    admin.locator(f'a[href="#/survey/{sid}"]').click()  # other tests' surveys share the title
    notice = admin.locator("#no-intervals")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Not enough data for intervals yet")
    expect(notice).to_contain_text("not enough data yet")
    expect(admin.locator("#ranking-table tbody tr")).to_have_count(4)
    expect(admin.locator("#pairwise-box")).to_contain_text("No intervals yet")
    shots(admin, "dashboard-not-enough-data.png", full_page=True)


def test_a_zcdp_survey_shows_its_budget_in_epsilon_delta_and_releases_by_rho(api, survey_page):
    """A survey with zCDP accounting: the dashboard states the budget as (ε, δ) with the ρ
    behind it, offers releases by ρ (discrete Gaussian counts; the perturbed MLE is pure ε
    only), and the ledger lists the ρ each release was charged."""
    r = api.post(
        "/v1/surveys",
        json={
            "title": "Weekly",
            "items": ITEMS,
            "privacy": {
                "model": "central",
                "total_budget": 2.0,
                "max_comparisons_per_respondent": 3,
                "accounting": "zcdp",
            },
        },
        headers=ADMIN,
    ).json()
    for _ in range(3):
        assert api_respondent(api, r["id"]) == 3
    admin = survey_page(r["id"])
    expect(admin.locator("#budget-text")).to_contain_text(
        "zCDP accounting: spent (ε, δ) = (0.00, 1e-10) of ε = 2.00"
    )
    expect(admin.locator('#rel-method option[value="perturbed_mle"]')).to_be_disabled()
    admin.get_by_label("ρ of this release").fill("0.02")
    admin.get_by_role("button", name="Make release").click()
    expect(admin.locator("#release-box")).to_contain_text("cost ρ = 0.02")
    expect(admin.locator("#ledger tbody tr")).to_have_count(1)
    expect(admin.locator("#ledger tbody tr td").nth(4)).to_have_text("0.02")  # ρ charged
    ledger = api.get(f"/v1/surveys/{r['id']}/releases", headers=ADMIN).json()
    spent = ledger["budget"]["spent"]
    assert ledger["budget"]["rho_spent"] == 0.02 and 0 < spent < 2
    expect(admin.locator("#budget-text")).to_contain_text(f"spent (ε, δ) = ({spent:.2f}, 1e-10)")
    expect(admin.locator("#ledger thead")).to_contain_text("ρ charged")
    # By ε: a pure ε-DP release, charged ε²/2.
    admin.get_by_label("Noise").select_option("epsilon")
    admin.get_by_label("ε of this release").fill("0.1")
    admin.get_by_role("button", name="Make release").click()
    expect(admin.locator("#ledger tbody tr")).to_have_count(2)
    expect(admin.locator("#ledger tbody tr").first.locator("td").nth(4)).to_have_text("0.005")  # 0.1²/2


def test_the_new_survey_form_chooses_zcdp_accounting(server, new_page):
    admin = new_page()
    sign_in(admin, server.base)
    admin.get_by_role("link", name="New survey").click()
    admin.get_by_label("Title").fill("Weekly priorities")
    admin.get_by_label("Items, one per line").fill("\n".join(ITEMS))
    admin.locator("#model-central").check()
    accounting = admin.get_by_label("Privacy accounting")
    assert accounting.input_value() == "pure"  # the default
    accounting.select_option("zcdp")
    admin.get_by_role("button", name="Create survey").click()
    expect(admin.get_by_role("heading", name="Weekly priorities")).to_be_visible()
    expect(admin.locator("#budget-text")).to_contain_text("zCDP accounting")
    listed = httpx2.get(f"{server.base}/v1/surveys?limit=1", headers=ADMIN).json()["surveys"][0]
    assert listed["title"] == "Weekly priorities"
    assert (listed["privacy"]["accounting"], listed["privacy"]["delta"]) == ("zcdp", 1e-10)


def test_negative_numbers_are_written_with_one_minus_sign(server, new_page, console):
    """Every formatter the pages use writes a negative number with U+2212, as the charts' ticks do."""
    console.allow(404)  # a page without a survey, for its modules
    page = new_page()
    page.goto(f"{server.base}/r/none")
    written = page.evaluate(
        """async () => {
            const dom = await import("/static/dom.js");
            const i18n = await import("/static/i18n.js");
            return [dom.fmt(-0.41), dom.fmtSignificant(-0.0123), i18n.num(-1234.5), i18n.fixed(-0.41),
                    dom.fmt(0.41), i18n.num(2)];
        }"""
    )
    assert written == ["\u22120.41", "\u22120.012", "\u22121,234.5", "\u22120.41", "0.41", "2"]
