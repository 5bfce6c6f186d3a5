"""Privacy by default in the pages (Playwright + Debian Chromium): the new-survey form fills in
the default cap and offers the opt-out only as a deliberate tick; the survey's privacy summary
on the dashboard and the respondent page; the privacy receipt at the end of the respondent
page, in the page's language."""

from __future__ import annotations

import httpx2
import pytest
from playwright.sync_api import expect

from tests.helpers.browser import ADMIN, ITEMS

#: The end screen after two answers at ε = 2 under the default cap of 5: each answer guessed
#: right at most e²/(1+e²) = 88%, the total ε = 4 at most e⁴/(1+e⁴) = 98%, ε = 1 left; the
#: survey's summary: the cap of 5 pays for 2 pairs at the default ε = 2.
RECEIPT = {
    "en": {
        "title": "Your privacy receipt",
        "guess": "at most 88%",
        "where": "on this device",
        "total": "In total: ε = 4, the sum over your 2 answers. Taken together, they let anyone who sees "
        "everything stored guess any one thing about them correctly at most 98% of the time "
        "(a coin toss: 50%).",
        "remaining": "What remains of your cap of ε = 5: ε = 1.",
        "summary": "Your total is capped at ε = 5, the sum over your answers: up to 2 pairs at the default "
        "level.",
        "pair": " or ",
    },
    "de": {
        "title": "Ihr Datenschutz-Beleg",
        "guess": "höchstens 88 %",
        "where": "auf diesem Gerät",
        "total": "Insgesamt: ε = 4, die Summe über Ihre 2 Antworten. Zusammen lassen sie jeden, der "
        "alles Gespeicherte sieht, einen beliebigen Umstand über sie höchstens in 98 % der Fälle "
        "richtig erraten (ein Münzwurf: 50 %).",
        "remaining": "Was von Ihrer Grenze ε = 5 bleibt: ε = 1.",
        "summary": "Ihr Gesamtwert ist auf ε = 5 begrenzt, die Summe über Ihre Antworten: bis zu 2 Paare "
        "bei der Standardstufe.",
        "pair": " oder ",
    },
    "fr": {
        "title": "Votre reçu de confidentialité",
        "guess": "au plus 88 %",
        "where": "sur cet appareil",
        "total": "Au total : ε = 4, la somme sur vos 2 réponses. Prises ensemble, elles permettent à "
        "quiconque voit tout ce qui est conservé de deviner quoi que ce soit à leur sujet au plus 98 % "
        "du temps (pile ou face : 50 %).",
        "remaining": "Ce qui reste de votre plafond de ε = 5 : ε = 1.",
        "summary": "Votre total est plafonné à ε = 5, la somme sur vos réponses : jusqu'à 2 paires au niveau "
        "par défaut.",
        "pair": " ou ",
    },
}


def _plain(text: str) -> str:
    return text.replace("\u00a0", " ").replace("\u202f", " ")


def _survey(server, **privacy) -> dict:
    body = {
        "title": "Which policy matters most?",
        "items": ITEMS,
        "privacy": {"epsilon_default": 2.0, **privacy},
    }
    r = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


@pytest.mark.parametrize("lang", ["en", "de", "fr"])
def test_the_end_screen_shows_the_receipt_in_the_pages_language(server, new_page, lang):
    s = _survey(server)  # no budget given: the default cap of 5
    said = RECEIPT[lang]
    page = new_page()
    page.goto(f"{server.base}/s/{s['id']}?lang={lang}&n=2")
    # The introduction states the survey's settings in words.
    expect(page.locator("#privacy-summary")).to_be_visible()
    assert said["summary"] in _plain(page.locator("#privacy-summary").inner_text())
    page.locator("#start").click()
    for _ in range(2):
        expect(page.locator("#choice-a")).to_be_visible()
        page.locator("#choice-a").click()
    expect(page.locator("#thanks")).to_be_visible()
    receipt = page.locator("#receipt")
    expect(receipt.get_by_role("heading", name=said["title"])).to_be_visible()
    rows = receipt.locator("tbody tr")
    expect(rows).to_have_count(2)
    for k in range(2):
        cells = [_plain(c) for c in rows.nth(k).locator("th, td").all_inner_texts()]
        a, b = cells[0].split(said["pair"])
        assert {a, b} <= set(ITEMS) and a != b  # the pair, as the respondent saw it
        assert cells[1] == said["where"] and cells[3] == "2" and cells[4] == said["guess"], cells
    assert _plain(page.locator("#receipt-total").inner_text()) == said["total"]
    assert _plain(page.locator("#receipt-remaining").inner_text()) == said["remaining"]
    # The page's receipt is the service's: the same numbers.
    token = page.evaluate(f"sessionStorage.getItem('privrank.respondent.{s['id']}')")
    me = httpx2.get(
        f"{server.base}/v1/surveys/{s['id']}/respondents/me", headers={"Authorization": f"Bearer {token}"}
    ).json()["receipt"]
    assert me["epsilon_total"] == 4.0 and me["budget_remaining"] == 1.0 and me["answers_total"] == 2


def test_the_dashboard_fills_in_the_cap_and_shows_the_summary(server, new_page):
    page = new_page(signed_in=server.base)
    page.goto(f"{server.base}/#/new")
    expect(page.locator("#budget")).to_have_value("5")
    expect(page.locator("#budget-unlimited")).not_to_be_checked()
    page.locator("#title").fill("Capped by default")
    page.locator("#items").fill("\n".join(ITEMS))
    page.locator("#create-btn").click()
    expect(page.locator("#survey-title")).to_contain_text("Capped by default")
    sid = page.url.rsplit("/", 1)[1]
    assert (
        httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()["privacy"]["respondent_budget"]
        == 5
    )
    summary = _plain(page.locator("#privacy-summary").inner_text())
    assert "at most 73% of the time at the default ε = 1" in summary, summary
    assert "Each respondent's total is capped at ε = 5 (the sum over its answers): up to 5 pairs" in summary
    # e⁵/(1+e⁵) = 0.9933, as a number (rounded up: it is a bound), not ">99%".
    assert "correctly at most 99.4% of the time" in summary, summary
    # Opting out is a deliberate tick, and the summary says so.
    page.goto(f"{server.base}/#/new")
    page.locator("#title").fill("No cap, on purpose")
    page.locator("#items").fill("\n".join(ITEMS))
    page.locator("#budget-unlimited").check()
    expect(page.locator("#budget")).to_be_disabled()
    page.locator("#create-btn").click()
    expect(page.locator("#survey-title")).to_contain_text("No cap, on purpose")
    sid = page.url.rsplit("/", 1)[1]
    privacy = httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()["privacy"]
    assert privacy["respondent_budget"] is None and privacy["respondent_budget_policy"] == "unlimited"
    expect(page.locator("#privacy-summary")).to_contain_text(
        "No cap on a respondent's total ε: the admin opted out"
    )


def test_the_respondent_page_says_when_the_organizer_opted_out(server, new_page):
    s = _survey(server, respondent_budget="unlimited")
    page = new_page()
    page.goto(f"{server.base}/s/{s['id']}?lang=es")
    expect(page.locator("#privacy-summary")).to_contain_text("El organizador decidió no limitar tu total")


def test_a_zcdp_survey_taking_suggestions_says_both_in_words(server, new_page):
    """The summary of a central survey accounting in zCDP gives its δ (as "1 in N" to the
    respondent), and a survey taking suggestions its batch, on both pages."""
    body = {
        "title": "Ideas, counted centrally",
        "items": ITEMS,
        "privacy": {
            "model": "central",
            "total_budget": 2.0,
            "max_comparisons_per_respondent": 3,
            "accounting": "zcdp",
            "delta": 1e-6,
        },
        "suggestions": {"batch": 4},
    }
    r = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    page = new_page()
    page.goto(f"{server.base}/s/{sid}?lang=en")
    said = _plain(page.locator("#privacy-summary").inner_text())
    assert "at ε = 2 at most (except with a chance of at most 1 in 1,000,000)" in said, said
    assert "published in groups from 4 different people" in said, said
    admin = new_page(signed_in=server.base)
    admin.goto(f"{server.base}/#/survey/{sid}")
    said = _plain(admin.locator("#privacy-summary").inner_text())
    assert "within ε = 2 at δ = 1e-6" in said, said
    assert "published in batches from 4 different respondents" in said, said
