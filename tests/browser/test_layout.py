"""The dashboard's layout and wording: charts whose text fits inside them, scores
explained in words, no sideways scrolling on a phone, and the respondent's privacy in plain
words at the end."""

from __future__ import annotations

import httpx2
import pytest
from playwright.sync_api import expect

from tests.helpers.browser import ADMIN, ITEMS, TRUTH, answer_pairs, api_respondent

PHONE = 375

# Every text of every chart on the page that sticks out of its <svg> (by more than half a pixel).
CLIPPED_TEXT = """() => [...document.querySelectorAll("svg")].flatMap((svg) => {
    const box = svg.getBoundingClientRect();
    return [...svg.querySelectorAll("text")]
        .map((t) => [t, t.getBoundingClientRect()])
        .filter(([, r]) => r.width > 0)
        .filter(([, r]) => r.left < box.left - 0.5 || r.right > box.right + 0.5
            || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        .map(([t, r]) => `${t.textContent}: [${r.left.toFixed(0)}, ${r.right.toFixed(0)}] x `
            + `[${r.top.toFixed(0)}, ${r.bottom.toFixed(0)}] outside [${box.left.toFixed(0)}, `
            + `${box.right.toFixed(0)}] x [${box.top.toFixed(0)}, ${box.bottom.toFixed(0)}]`);
})"""

# Tables and charts on show that are not in a scrolling box a keyboard can reach and a
# screen reader can name.
UNWRAPPED = """() => [...document.querySelectorAll("table, .chart svg")]
    .filter((el) => !el.closest(".visually-hidden"))
    .filter((el) => {
        const box = el.closest(".table-wrap, .chart");
        return !box || box.getAttribute("tabindex") !== "0" || !box.getAttribute("aria-label")
            || getComputedStyle(box).overflowX !== "auto";
    })
    .map((el) => el.id || el.outerHTML.slice(0, 60))"""


def _post(server, path: str, body: dict, headers: dict | None = None) -> dict:
    r = httpx2.post(f"{server.base}{path}", json=body, headers=headers or ADMIN)
    assert r.status_code in (200, 201), r.text
    return r.json()


def _survey(server, title: str, **settings) -> dict:
    return _post(server, "/v1/surveys", {"title": title, "items": ITEMS, **settings})


def _answer_pairs(server, sid: str, respondents: int, epsilon: float | None = 8.0) -> None:
    """Respondents answering every pair in TRUTH's order through the API (randomized by the
    server at ε = 8 in a local survey: what the charts show does not matter here, only
    how they are laid out)."""
    with httpx2.Client(base_url=server.base, timeout=60) as api:
        for _ in range(respondents):
            assert api_respondent(api, sid, count=6, epsilon=epsilon) == 6


def _pairwise_with_answers(server) -> dict:
    # 6 pairs each at ε up to 8: a cap of 48.
    privacy = {"epsilon_default": 2.0, "epsilon_max": 8.0, "respondent_budget": 48.0}
    s = _survey(server, "A pairwise survey", privacy=privacy)
    _answer_pairs(server, s["id"], 12)
    return s


def _ranking_with_rankings(server, n: int = 30) -> dict:
    s = _survey(server, "A ranking survey", kind="ranking", privacy={"epsilon_max": 8.0})
    ids = {it["label"]: it["id"] for it in s["items"]}
    for _ in range(n):
        reg = _post(server, f"/v1/surveys/{s['id']}/respondents", {"epsilon": 8.0}, {})
        body = {"privatized": False, "ranking": [ids[x] for x in TRUTH]}
        _post(server, f"/v1/surveys/{s['id']}/responses", body, {"Authorization": f"Bearer {reg['token']}"})
    return s


def _central_with_a_release(server) -> dict:
    s = _survey(
        server,
        "A central survey",
        privacy={"model": "central", "total_budget": 2.0, "max_comparisons_per_respondent": 6},
    )
    _answer_pairs(server, s["id"], 5, epsilon=None)
    body = {"method": "perturbed_mle", "unit": "individual", "epsilon": 1.0, "k": 3}
    _post(server, f"/v1/surveys/{s['id']}/releases", body)
    return s


@pytest.fixture(scope="module")
def surveys(server) -> dict[str, dict]:
    """The surveys whose views the tests below look at (and leave as they are): a pairwise
    survey with answers, a ranking survey with rankings, a central survey with a release."""
    return {
        "pairwise": _pairwise_with_answers(server),
        "ranking": _ranking_with_rankings(server),
        "central": _central_with_a_release(server),
    }


def _open_survey(page, server, sid: str, ready: str) -> None:
    page.goto(f"{server.base}/#/survey/{sid}")
    expect(page.locator(ready).first).to_be_visible()


def test_chart_text_stays_inside_the_charts(server, new_page, surveys):
    """Every text of every chart (error bars, heat maps), each method, desktop and phone,
    lies inside its svg — the consensus chart's notes ("rank 1, mean position 3.00") need
    about 160 px."""
    ranking, pairwise = surveys["ranking"], surveys["pairwise"]
    for width in (1280, PHONE):
        page = new_page(width=width, height=900, signed_in=server.base)
        _open_survey(page, server, ranking["id"], "#ranking-box svg")
        for method in ("borda", "kemeny", "btl", "lehmer"):
            page.get_by_label("Method").select_option(method)
            expect(page.locator("#ranking-box svg title").first).to_have_text(f"Consensus by {method}")
            assert page.evaluate(CLIPPED_TEXT) == [], (width, method)
            assert "null" not in page.locator("#ranking-box").inner_text()  # no missing value shown
        notes = page.locator("#ranking-box svg g.row > text:last-child").all_text_contents()
        assert notes[0].startswith("rank 1, mean position")
        _open_survey(page, server, pairwise["id"], "#pairwise-box svg")
        expect(page.locator("#coverage-box svg")).to_be_visible()
        expect(page.locator("svg[role=img]")).to_have_count(3)  # ranking, coverage, win probabilities
        assert page.evaluate(CLIPPED_TEXT) == [], width


def test_scores_are_explained_in_words(server, new_page, surveys):
    """The pairwise ranking says what a score gap means (Bradley–Terry odds); the consensus
    of a ranking survey says what its scores are for each method."""
    pairwise, ranking = surveys["pairwise"], surveys["ranking"]
    page = new_page(signed_in=server.base)
    _open_survey(page, server, pairwise["id"], "#ranking-table")
    expect(page.locator("#score-meaning")).to_have_text(
        "Scores are on the Bradley–Terry scale: a gap of 1 between two items means odds of about "
        "2.7 : 1 (73%) that a respondent prefers the higher-scored one, a gap of 2 about 7.4 : 1 (88%). "
        "Only differences between scores mean anything."
    )
    _open_survey(page, server, ranking["id"], "#ranking-box svg")
    meaning = page.locator("#score-meaning")
    copies = "the randomized copies of the respondents' rankings"
    expect(meaning).to_have_text(
        "Scores are Borda points: the mean number of items a ranking puts below the item "
        f"(4 items: from 0 to 3), over {copies}."
    )
    page.get_by_label("Method").select_option("btl")
    expect(meaning).to_have_text(
        "Scores are on the Bradley–Terry scale of the pairs the rankings imply: a gap of 1 between two "
        "items means odds of about 2.7 : 1 (73%) that a ranking puts the higher-scored one above the other, "
        "a gap of 2 about 7.4 : 1 (88%). Only differences between scores mean anything. "
        f"Fitted to {copies}."
    )
    for method in ("kemeny", "lehmer"):
        page.get_by_label("Method").select_option(method)
        expect(page.locator("#ranking-box svg title").first).to_have_text(f"Consensus by {method}")
        expect(meaning).to_have_text(
            "This method orders the items without scores: the chart shows each item's mean position "
            f"(1 = first) in {copies}."
        )
    # A central survey's release with scores (perturbed MLE) says the same, and that they are noisy.
    central = _survey(
        server,
        "Central",
        privacy={"model": "central", "total_budget": 2.0, "max_comparisons_per_respondent": 6},
    )
    _answer_pairs(server, central["id"], 5, epsilon=None)
    _open_survey(page, server, central["id"], "#release-form")
    page.get_by_label("Method").select_option("perturbed_mle")
    page.get_by_label("ε of this release").fill("1")
    page.get_by_role("button", name="Make release").click()
    expect(page.locator("#release-score-meaning")).to_have_text(
        "Scores are on the Bradley–Terry scale: a gap of 1 between two items means odds of about "
        "2.7 : 1 (73%) that a respondent prefers the higher-scored one, a gap of 2 about 7.4 : 1 (88%). "
        "Only differences between scores mean anything. The scores include the noise that makes the "
        "release differentially private."
    )
    page.get_by_label("Method").select_option("noisy_counts")
    page.get_by_role("button", name="Make release").click()
    expect(page.locator("#ledger tbody tr")).to_have_count(2)
    expect(page.locator("#release-score-meaning")).to_have_count(0)  # noisy counts: no scores
    for box in ("#ledger-box", "#release-box"):
        assert "null" not in page.locator(box).inner_text()  # no left-out paragraph shown as "null"


@pytest.mark.parametrize("view", ["list", "pairwise", "central", "ranking", "new", "keys"])
def test_no_sideways_scrolling_on_a_phone(server, new_page, surveys, view):
    """At 375 px the page itself never scrolls sideways: wide tables and charts scroll inside
    their own box, which the keyboard can reach and a screen reader names; the ranking table
    keeps its headers, labels and numbers on one line each (no "Rank" in 34 px, no "Tran|sit").
    The list is of every survey the server has (the other tests' too), the three of this
    module among them."""
    page = new_page(width=PHONE, height=800, signed_in=server.base)
    if view == "list":
        page.goto(server.base + "/")
        for s in surveys.values():
            expect(page.locator(f'table a[href="#/survey/{s["id"]}"]')).to_have_count(1)
    elif view == "pairwise":
        _open_survey(page, server, surveys["pairwise"]["id"], "#pairwise-box svg")
        expect(page.locator("#coverage-box svg")).to_be_visible()
        expect(page.locator("#ranking-table")).to_be_visible()
    elif view == "central":
        _open_survey(page, server, surveys["central"]["id"], "#ledger tbody tr")
    elif view == "new":  # the form with every goal field showing
        page.goto(server.base + "/#/new")
        page.get_by_label("Certify the top K items").check()
        expect(page.locator("#goal-details")).to_be_visible()
    elif view == "keys":  # the list, and a key just minted in its one-time field
        page.goto(server.base + "/#/keys")
        page.get_by_role("button", name="Mint key").click()
        expect(page.locator("#minted-key")).to_be_visible()
        expect(page.locator("#keys-table")).to_be_visible()
    else:
        _open_survey(page, server, surveys["ranking"]["id"], "#ranking-box svg")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE, f"the {view} view is {width} px wide"
    assert page.evaluate(UNWRAPPED) == []
    if view == "pairwise":
        # Headers, labels and numbers on one line each: nothing squeezed to a few letters' width.
        wrapped = page.evaluate(
            """() => [...document.querySelectorAll("#ranking-table th, #ranking-table td")]
                .filter((el) => {
                    const range = document.createRange();
                    range.selectNodeContents(el);
                    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size > 1;
                })
                .map((el) => el.textContent)"""
        )
        assert wrapped == []
        scroller = page.locator("#ranking-table").locator("xpath=..")
        scroller.focus()
        expect(scroller).to_be_focused()


def test_the_thanks_say_in_words_what_the_answers_reveal(server, new_page):
    """The end of the respondent page says in words, with ε, how each answer was randomized
    and what all of them reveal together (not only "Your total privacy spent is ε = 30")."""
    local = _survey(server, "Pairs", privacy={"epsilon_default": 1.0})
    link = f"{server.base}/s/{local['id']}"
    page = new_page()
    answer_pairs(page, link, 3)
    expect(page.locator("#spent")).to_have_text(
        "You answered 3 pairs. Each answer was randomized on this device before it was sent: reported as you "
        "gave it with probability 73% and the opposite otherwise (ε = 1: ε-local differential privacy for "
        "each answer). Together your 3 answers reveal at most as much as one answer reported as you gave it "
        "with probability 95% would (ε = 3 in total, the sum over your answers)."
    )
    one = new_page()
    answer_pairs(one, link, 1)
    expect(one.locator("#spent")).to_have_text(
        "You answered 1 pair. Your answer was randomized on this device before it was sent: reported as you "
        "gave it with probability 73% and the opposite otherwise (ε = 1: ε-local differential privacy)."
    )
    ranking = _survey(server, "Ranks", kind="ranking", privacy={"epsilon_default": 2.0})
    rank = new_page()
    rank.goto(f"{server.base}/s/{ranking['id']}")
    rank.get_by_role("button", name="Start").click()
    rank.get_by_role("button", name="Submit my ranking").click()
    expect(rank.locator("#spent")).to_have_text(
        "Your ranking was replaced on this device by a randomized copy, and only the copy was sent: two "
        "items you put next to each other appear swapped in it with probability 34%, items further "
        "apart less often. Someone who sees the copy and guesses between your ranking and the same "
        "ranking with one item moved is right at most 88% of the time, against 50% by chance; between "
        "any two rankings, at most 98% (ε = 2 for moving one item, ε = 4 between any two rankings)."
    )
