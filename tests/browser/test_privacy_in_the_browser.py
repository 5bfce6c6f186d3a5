"""What leaves the browser, measured in the browser: bodies on the wire, the randomizers'
laws, permanent randomized response, privrank.js's network behaviour, key handling, and
the details a keyboard or phone user meets."""

from __future__ import annotations

import json
import math
from collections import Counter

import httpx2
import numpy as np
from playwright.sync_api import expect
from scipy import stats as sps

from app.stats import entropy
from app.stats.rankings import expected_concordant_pairs, mallows_log_pmf
from tests.helpers.browser import (
    ADMIN,
    ADMIN_KEY,
    ITEMS,
    TRUTH,
    api_respondent,
    random_values_calls,
    shown_pair,
    sign_in,
)
from tests.helpers.stats import assert_close_mc, binomial_se


def _survey(server, **privacy) -> dict:
    body = {"title": "Privacy", "items": ITEMS, "privacy": {"epsilon_default": 1.0, **privacy}}
    return httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()


#: Answers questions ``start``… of the respondent page's ``n`` with the buttons' own click(),
#: on side ``sides[k]`` ("a" or "b"); returns the pairs' labels as shown. Fails if a question
#: does not show within 10 s.
CLICK_THROUGH = """async ([start, n, sides]) => {
    const shown = [];
    const until = async (ready, what) => {
        const deadline = Date.now() + 10_000;
        while (!ready()) {
            if (Date.now() > deadline) throw new Error(`not shown within 10 s: ${what}`);
            await new Promise((resolve) => setTimeout(resolve, 1));
        }
    };
    for (let k = start; k < n; k++) {
        const question = `Question ${k + 1} of ${n}`;
        await until(() => document.querySelector("#progress-text")?.textContent === question, question);
        const [a, b] = ["#choice-a", "#choice-b"].map((id) => document.querySelector(id));
        shown.push([a.innerText, b.innerText]);
        (sides[k] === "a" ? a : b).click();
    }
    return shown;
}"""


def test_the_page_sends_only_randomized_answers_at_the_chosen_epsilon(server, new_page):
    """Every POST /responses the page makes says privatized: true with the ε chosen in the
    page, and carries {a, b, winner} with the winner one of the pair; the first report for
    each pair differs from the clicked winner 1/(1+e^0.5) = 37.8% of the time at ε = 0.5,
    whichever side was clicked; a pair offered again is sent with its first report,
    unchanged (permanent randomized response), whatever was clicked.

    Both endpoints are stubbed: nothing is stored, and the pairs come from a schedule
    drawn by the test's seeded generator among the 4,950 pairs of 100 items — 280
    distinct pairs, clicked on side a and b in turn, and 20 pairs offered again (in the
    other orientation, the other side clicked). The page's randomness is seeded
    (conftest.py): the outcome is the same on every run; over seeds the three checks at
    z = 4.5 fail with probability < 2.1e-5."""
    items = [f"item {k:03d}" for k in range(100)]
    # 300 answers from one respondent, for the flip rate: no cap on its total, explicitly.
    privacy = {"epsilon_min": 0.5, "epsilon_max": 3.0, "respondent_budget": "unlimited"}
    body = {"title": "Privacy", "items": items, "privacy": privacy}
    s = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()
    ids = [it["id"] for it in s["items"]]
    n, firsts = 300, 280
    rng = entropy.generator()  # seeded by the test's id (tests/conftest.py)
    everything = [(x, y) for k, x in enumerate(ids) for y in ids[k + 1 :]]
    schedule = [everything[k] for k in rng.choice(len(everything), size=firsts, replace=False)]
    again: set[frozenset] = set()
    for k in range(14, n, 15):  # every 15th question: a pair offered before, turned round
        earlier = [q for q in schedule[:k] if frozenset(q) not in again]
        b, a = earlier[int(rng.integers(len(earlier)))]
        again.add(frozenset((a, b)))
        schedule.insert(k, (a, b))
    assert len(schedule) == n
    label = {it["id"]: it["label"] for it in s["items"]}
    served = iter(schedule)
    bodies: list[dict] = []

    def pairs(route):
        a, b = next(served)
        pair = {"a": a, "b": b, "a_label": label[a], "b_label": label[b], "ticket": None}
        route.fulfill(status=200, content_type="application/json", body=json.dumps({"pairs": [pair]}))

    def responses(route):
        bodies.append(json.loads(route.request.post_data))
        route.fulfill(
            status=201,
            content_type="application/json",
            body=json.dumps(
                {"accepted": 1, "epsilon_spent": 0.5, "epsilon_total": 0.5, "budget_remaining": None}
            ),
        )

    page = new_page()
    page.route("**/pairs?*", pairs)
    page.route("**/responses", responses)
    page.goto(f"{server.base}/s/{s['id']}?n={n}")
    page.get_by_label("Privacy level").select_option("0.5")
    page.get_by_role("button", name="Start").click()
    clicked: dict[frozenset, list[str]] = {}
    sides: list[str] = []
    for a, b in schedule:
        pair = frozenset((a, b))
        if pair in clicked:  # the other item than the first time
            side = "a" if clicked[pair][0] == b else "b"
        else:  # a and b in turn
            side = "a" if len(clicked) % 2 == 0 else "b"
        clicked.setdefault(pair, []).append(a if side == "a" else b)
        sides.append(side)
    shown = [(label[a], label[b]) for a, b in schedule]
    # The first questions by Playwright's mouse on the button; the rest by the buttons' own
    # click() in the page, which runs the same handler (what the page sends is the point here).
    real = 30
    for k in range(real):
        expect(page.locator("#progress-text")).to_have_text(f"Question {k + 1} of {n}")
        assert shown_pair(page) == shown[k]
        page.locator(f"#choice-{sides[k]}").click()
    assert page.evaluate(CLICK_THROUGH, [real, n, sides]) == [list(x) for x in shown[real:]]
    expect(page.locator("#thanks")).to_be_visible()
    assert len(bodies) == n
    assert random_values_calls(page) >= firsts  # each first report drew from crypto.getRandomValues
    flips: dict[str, list[bool]] = {"a": [], "b": []}
    first_report: dict[frozenset, str] = {}
    for body, (a, b) in zip(bodies, schedule, strict=True):
        assert (
            body["privatized"] is True
            and body["epsilon"] == 0.5
            and set(body) == {"privatized", "epsilon", "comparisons"}
        )
        (c,) = body["comparisons"]
        pair = frozenset((a, b))
        assert {c["a"], c["b"]} == pair and c["winner"] in pair
        if pair in first_report:
            assert c["winner"] == first_report[pair]  # the same report, not a new draw
            continue
        first_report[pair] = c["winner"]
        truth = clicked[pair][0]
        flips["a" if truth == a else "b"].append(c["winner"] != truth)
    assert len(flips["a"]) == len(flips["b"]) == firsts // 2
    assert sum(len(v) == 2 and v[0] != v[1] for v in clicked.values()) == n - firsts
    p = 1 / (1 + math.exp(0.5))
    every = flips["a"] + flips["b"]
    assert_close_mc(sum(every) / len(every), p, binomial_se(len(every), p), what="flips")
    for side in ("a", "b"):
        m = len(flips[side])
        assert_close_mc(sum(flips[side]) / m, p, binomial_se(m, p), what=f"flips when {side} was clicked")


def test_a_retried_answer_is_the_same_report_not_a_new_draw(server, new_page, console):
    """Permanent randomized response: the server refuses every answer (409); after each
    'Try again' the respondent clicks its true answer to whatever pair comes. Over 6 tries
    on 3 items (3 pairs: some pair must come back) every body sent for one pair is the
    same, Idempotency-Key included — never a fresh randomization of the same answer."""
    s = httpx2.post(
        f"{server.base}/v1/surveys", json={"title": "Retry", "items": ITEMS[:3]}, headers=ADMIN
    ).json()
    console.allow(409)
    page = new_page()
    sent: dict[frozenset, set] = {}

    def refuse(route):
        body = json.loads(route.request.post_data)
        (c,) = body["comparisons"]
        key = (route.request.post_data, route.request.headers.get("idempotency-key"))
        sent.setdefault(frozenset((c["a"], c["b"])), set()).add(key)
        route.fulfill(
            status=409, content_type="application/json", body=json.dumps({"detail": "refused for the test"})
        )

    page.route("**/responses", refuse)
    page.goto(f"{server.base}/s/{s['id']}?n=1")
    page.get_by_role("button", name="Start").click()
    for _ in range(6):
        expect(page.locator("#choice-a")).to_be_visible()
        a, b = page.locator("#choice-a").inner_text(), page.locator("#choice-b").inner_text()
        best = a if TRUTH.index(a) < TRUTH.index(b) else b
        page.get_by_role("button", name=best, exact=True).click()
        expect(page.locator("#failure")).to_contain_text("refused for the test")
        page.get_by_role("button", name="Try again").click()
    assert sum(len(v) for v in sent.values()) == len(sent)  # one report per pair
    assert len(sent) <= 3


def test_privrank_js_network_behaviour(server, new_page):
    """With a stubbed fetch: a network failure then two 5xx answers are retried with one and the
    same Idempotency-Key; a POST without a key (registration) is not retried after a network
    failure; a 429 waits for Retry-After and is retried; a 4xx raises PrivrankError with the
    server's message, field errors made readable."""
    page = new_page()
    page.goto(server.base + "/")
    out = page.evaluate(
        """async () => {
            const { PrivrankClient, PrivrankError } = await import("/static/privrank.js");
            const log = [];
            const script = (answers) => async (url, init) => {
                const key = init.headers["Idempotency-Key"] || null;
                log.push({ url, method: init.method, key, body: init.body });
                const next = answers.shift();
                if (next === "network") throw new TypeError("network down");
                const headers = next.headers || {};
                return new Response(JSON.stringify(next.body || {}), { status: next.status, headers });
            };
            const res = {};
            // 1. retries of a keyed POST
            const ok = { status: 201, body: { accepted: 1 } };
            let c = new PrivrankClient({ surveyId: "srv_x", token: "rsp_a.b", retries: 4,
                fetchImpl: script(["network", { status: 503 }, { status: 500 }, ok]) });
            c.epsilon = 1;
            const realSleep = globalThis.setTimeout;
            globalThis.setTimeout = (fn) => realSleep(fn, 0);  // no real waiting in the test
            res.answer = await c.answer([{ a: "i1", b: "i2", winner: "i1" }]);
            res.keys = [...new Set(log.map((x) => x.key))];
            res.bodies = [...new Set(log.map((x) => x.body))].length;
            res.attempts = log.length;
            // 2. no retry of a key-less POST after a network failure
            log.length = 0;
            c = new PrivrankClient({ surveyId: "srv_x", fetchImpl: script(["network", { status: 201 }]) });
            try { await c.register(); res.register = "resolved"; } catch (e) { res.register = e.message; }
            res.registerAttempts = log.length;
            // 3. 429 then success
            log.length = 0;
            const busy = { status: 429, headers: { "Retry-After": "1" } };
            const registered = { status: 201, body: { respondent_id: "r", token: "t", epsilon: 1 } };
            c = new PrivrankClient({ surveyId: "srv_x", fetchImpl: script([busy, registered]) });
            res.after429 = (await c.register()).token;
            res.attempts429 = log.length;
            // 4. 4xx → PrivrankError, readable
            const detail = [{ loc: ["query", "k"], msg: "Input should be greater than or equal to 1" }];
            const invalid = { status: 422, body: { detail } };
            c = new PrivrankClient({ surveyId: "srv_x", fetchImpl: script([invalid]) });
            try {
                await c.pairs(1);
            } catch (e) {
                res.error = [e instanceof PrivrankError, e.status, e.message];
            }
            globalThis.setTimeout = realSleep;
            return res;
        }"""
    )
    assert out["answer"] == {"accepted": 1} and out["attempts"] == 4
    assert len(out["keys"]) == 1 and out["keys"][0] and out["bodies"] == 1
    assert out["register"] == "network down" and out["registerAttempts"] == 1
    assert out["after429"] == "t" and out["attempts429"] == 2
    assert out["error"] == [True, 422, "k: Input should be greater than or equal to 1"]


def test_the_browser_mallows_randomizer_through_submit_ranking(server, new_page):
    """privrank.js's submitRanking (completion + Mallows at ε = 2, m = 5), captured from a
    stubbed fetch over 6,000 respondents: the Kendall distance to the given ranking follows
    the exact Mallows law (χ² over its 11 values), and partial rankings keep their head
    only in distribution (the tail is shuffled).

    The page's crypto.getRandomValues is seeded (conftest.py) and counted: the draws are
    the same on every run, and each of the four insertions of a respondent's ranking drew
    from it. Over seeds the χ² check (p > 1e-4) and the mean's (z = 4.5) fail with
    probability < 1.1e-4."""
    page = new_page()
    page.goto(server.base + "/")
    before = random_values_calls(page)
    draws = page.evaluate(
        """async () => {
            const { PrivrankClient } = await import("/static/privrank.js");
            const out = [];
            for (let k = 0; k < 6000; k++) {
                let body = null;
                const mem = new Map();
                const store = { getItem: (x) => mem.get(x) ?? null, setItem: (x, v) => mem.set(x, v) };
                const fetchImpl = async (url, init) => {
                    body = JSON.parse(init.body);
                    return new Response("{}", { status: 201 });
                };
                const c = new PrivrankClient({ surveyId: "srv_x", token: `rsp_${k}.s`, store, fetchImpl });
                await c.submitRanking(["c", "a", "e", "b", "d"], ["a", "b", "c", "d", "e"], { epsilon: 2 });
                out.push(body.ranking.join(""));
            }
            return out;
        }"""
    )
    assert random_values_calls(page) - before >= 4 * len(draws)
    given = "caebd"
    pos = {x: k for k, x in enumerate(given)}
    dist = Counter(sum(1 for x in range(5) for y in range(x + 1, 5) if pos[d[x]] > pos[d[y]]) for d in draws)
    import itertools

    center = np.arange(5)
    law = Counter()
    for perm in itertools.permutations(range(5)):
        d = sum(1 for x in range(5) for y in range(x + 1, 5) if perm[x] > perm[y])
        law[d] += math.exp(mallows_log_pmf(np.array(perm), center, 2.0))
    observed = np.array([dist[d] for d in range(11)])
    expected = np.array([law[d] * len(draws) for d in range(11)])
    assert sps.chisquare(observed, expected).pvalue > 1e-4
    # The mean distance: z = 4.5 against its Monte Carlo standard error under the exact law,
    # whose mean is (exactly) 10 minus the expected concordant pairs.
    d = np.arange(11)
    p = np.array([law[k] for k in range(11)])
    mean, var = float((d * p).sum()), float((d**2 * p).sum() - (d * p).sum() ** 2)
    assert abs((10 - mean) - expected_concordant_pairs(5, 2.0)) < 1e-9
    observed_mean = float((d * observed).sum() / len(draws))
    assert abs(observed_mean - mean) < 4.5 * math.sqrt(var / len(draws))


def test_the_admin_key_stays_in_session_storage(server, new_page):
    page = new_page()
    urls: list[str] = []
    page.on("request", lambda req: urls.append(req.url))
    sign_in(page, server.base)
    assert page.evaluate("() => localStorage.length") == 0
    assert page.evaluate("() => sessionStorage.getItem('privrank.key')") == ADMIN_KEY
    assert all(ADMIN_KEY not in u for u in urls) and ADMIN_KEY not in page.url
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    assert page.evaluate("() => sessionStorage.getItem('privrank.key')") is None


def test_a_view_that_loads_while_the_user_signs_out_is_not_drawn(server, new_page):
    """Signing out while a survey's view waits for the API: its answer, when it comes, is
    not drawn over the sign-in form, and the view sends nothing further (no request goes
    out without the key). The console fixture fails the test on any 401."""
    sid = _survey(server)["id"]
    page = new_page()
    sign_in(page, server.base)
    held = []
    page.route(f"**/v1/surveys/{sid}", lambda route: held.append(route))
    sent: list[str] = []
    page.on("request", lambda req: sent.append(req.url) if "/v1/" in req.url else None)
    page.evaluate(f"location.hash = '#/survey/{sid}'")
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    with page.expect_response(f"**/v1/surveys/{sid}") as response:
        held[0].continue_()
    assert response.value.ok  # sent with the key, before signing out
    # Anything the view did on its answer has run once a timer set after it fires.
    page.evaluate("() => new Promise((resolve) => setTimeout(resolve, 200))")
    expect(page.get_by_label("API key")).to_be_visible()
    assert page.locator("#survey-title").count() == 0
    assert page.evaluate("() => sessionStorage.getItem('privrank.key')") is None
    assert sent == [f"{server.base}/v1/surveys/{sid}"]


def test_the_content_security_policy_allows_no_inline_code(server):
    policy = httpx2.get(server.base + "/").headers["content-security-policy"]
    directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
    assert "unsafe" not in policy
    assert directives["script-src"] == ["'self'"] and directives["style-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"] and directives["frame-ancestors"] == ["'none'"]
    docs = httpx2.get(server.base + "/docs")
    assert docs.headers["x-frame-options"] == "DENY"


def test_cant_decide_sends_no_pair_and_resume_keeps_progress(server, new_page):
    """“Can't decide” sends only the pair's opaque undecided ticket (no pair, no answer),
    shows the next pair, and the survey's count goes up by one."""
    s = _survey(server)
    page = new_page()
    posted: list[str] = []
    undecided: list[tuple[str, str | None]] = []

    def watch(req) -> None:
        if req.method == "POST" and "/responses" in req.url:
            posted.append(req.url)
        if req.method == "POST" and req.url.endswith("/undecided"):
            undecided.append((req.url, req.post_data))

    page.on("request", watch)
    page.goto(f"{server.base}/s/{s['id']}?n=4")
    page.get_by_role("button", name="Start").click()
    first = (page.locator("#choice-a").inner_text(), page.locator("#choice-b").inner_text())
    page.get_by_role("button", name="Can't decide").click()
    expect(page.locator(".pair")).to_have_attribute("data-serial", "2")  # the next pair is shown
    expect(page.locator("#progress-text")).to_have_text("Question 1 of 4")
    assert posted == []
    ((url, body),) = undecided
    assert url == f"{server.base}/v1/surveys/{s['id']}/undecided"
    sent = json.loads(body or "{}")
    assert list(sent) == ["ticket"]  # the ticket alone: no pair, no item id, no label
    assert not any(item["id"] in sent["ticket"] or item["label"] in sent["ticket"] for item in s["items"])
    assert httpx2.get(f"{server.base}/v1/surveys/{s['id']}", headers=ADMIN).json()["undecided"] == 1
    assert (page.locator("#choice-a").inner_text(), page.locator("#choice-b").inner_text()) != first
    page.locator("#choice-a").click()
    expect(page.locator("#progress-text")).to_have_text("Question 2 of 4")
    page.locator("#choice-b").click()
    expect(page.locator("#progress-text")).to_have_text("Question 3 of 4")
    page.reload()  # the same tab: the token and the reports are in sessionStorage
    expect(page.locator("#progress-text")).to_have_text("Question 3 of 4")
    assert len(posted) == 2


def test_dashboard_charts_show_the_api_numbers_and_the_analyst_view(server, api, new_page):
    """An analyst's dashboard draws what the API says: the ranking's order, the items whose
    place in the top 3 is certain (✓), the win probabilities. The answers (40 respondents,
    every pair, in TRUTH's order) are randomized at ε = 8 by the test's seeded generator:
    the stored answers are the same on every run. Which items are certain also depends on
    the server's 4,000 draws for the simultaneous critical value: the page and the API get
    the same set for the same answers, and Transit and Schools, about 5 standard errors
    above Parks, are in it on every run."""
    s = _survey(server, epsilon_max=8.0, respondent_budget=48.0)  # 6 pairs each at ε = 8
    rng = entropy.generator()  # seeded by the test's id (tests/conftest.py)
    for _ in range(40):  # strong, consistent preferences at ε = 8
        assert api_respondent(api, s["id"], count=6, epsilon=8.0, rng=rng) == 6
    key = httpx2.post(f"{server.base}/v1/keys", json={"label": "viewer"}, headers=ADMIN).json()["key"]
    page = new_page()
    page.goto(server.base + "/")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Surveys")).to_be_visible()
    expect(page.locator("#nav-new")).to_be_hidden()  # analysts do not create surveys
    page.goto(f"{server.base}/#/survey/{s['id']}")
    expect(page.locator("#ranking-table tbody tr")).to_have_count(4)
    assert page.locator("#toggle-status").count() == 0  # nor close them
    api = httpx2.get(f"{server.base}/v1/surveys/{s['id']}/ranking?k=3", headers=ADMIN).json()
    certain = {it["label"] for it in api["items"] if it["item_id"] in (api["top_k_certain"] or [])}
    expect(page.locator("#top-k .certain")).to_have_count(len(certain))
    shown = set(page.locator("#top-k .certain").all_inner_texts())
    assert {x.strip(", ") for x in shown} == certain and certain  # ✓ exactly on the certain items
    assert page.locator("#ranking-box svg g.row line").count() == 4 * 3  # a whisker and two caps each
    pw = httpx2.get(f"{server.base}/v1/surveys/{s['id']}/pairwise", headers=ADMIN).json()
    table = page.locator("#pairwise-box table")
    expect(table.locator("tbody tr")).to_have_count(len(pw["probability"]))  # drawn (its own request)
    first_row = table.locator("tbody tr").nth(0).locator("td").all_inner_texts()
    assert first_row == ["–" if v is None else f"{v:.2f}" for v in pw["probability"][0]]
    ranking_rows = page.locator("#ranking-table tbody tr td:nth-child(2)").all_inner_texts()
    assert ranking_rows == [it["label"] for it in api["items"]]


def test_keyboard_ranking_keeps_focus_and_the_phone_layout_fits(server, new_page, console):
    r = httpx2.post(
        f"{server.base}/v1/surveys",
        json={
            "title": "A rather long survey title that has to wrap on a phone screen",
            "kind": "ranking",
            "items": ITEMS,
        },
        headers=ADMIN,
    ).json()
    page = new_page(width=375, height=800)
    page.goto(f"{server.base}/s/{r['id']}")
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#rank-list li")).to_have_count(4)
    # Move the last item to the top with the keyboard: focus must stay on a button of it.
    last = page.locator("#rank-list li .label").nth(3).inner_text()
    page.get_by_role("button", name=f"Move {last} up").focus()
    for _ in range(3):
        page.keyboard.press("Enter")
    expect(page.locator("#rank-list li .label").nth(0)).to_have_text(last)
    focused = page.evaluate("() => document.activeElement.getAttribute('aria-label')")
    assert focused == f"Move {last} down"
    # Nothing overflows the phone's width (charts scroll inside their own box).
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    console.allow(409)  # the dashboard asks for a consensus of no rankings yet
    admin = new_page(width=375, height=800, signed_in=server.base)
    admin.goto(f"{server.base}/#/survey/{r['id']}")
    expect(admin.locator("#no-data")).to_be_visible()
    assert admin.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def test_epsilon_choices_respect_the_budget(server, new_page):
    s = _survey(server, epsilon_min=0.5, epsilon_max=3.0, respondent_budget=2.0)
    page = new_page()
    page.goto(f"{server.base}/s/{s['id']}")
    expect(page.locator("#epsilon option")).not_to_have_count(0)  # the page fetched the survey
    values = page.locator("#epsilon option").evaluate_all("(os) => os.map((o) => Number(o.value))")
    assert max(values) <= 2.0 and 0.5 in values
    page.get_by_label("Privacy level").select_option("2")
    expect(page.locator("#epsilon-budget")).to_have_text(
        "At this level you can answer up to 1 pair "
        "(your total privacy is the sum over your answers, at most ε = 2)."
    )


def test_the_intro_counts_no_more_pairs_than_the_survey_has(server, new_page):
    """A cap of ε = 20 at ε = 1 would allow 20 answers, but four items make only six pairs."""
    s = _survey(server, epsilon_min=0.5, epsilon_max=1.0, respondent_budget=20.0)
    page = new_page()
    page.goto(f"{server.base}/s/{s['id']}")
    page.get_by_label("Privacy level").select_option("1")
    expect(page.locator("#epsilon-budget")).to_have_text(
        "At this level you can answer up to 6 pairs "
        "(your total privacy is the sum over your answers, at most ε = 20)."
    )
    # Where the cap binds, it is the cap: ⌊20 / 0.5⌋ = 40 > 6 still says 6; a cap of 2 at ε = 1 says 2.
    s = _survey(server, epsilon_min=0.5, epsilon_max=1.0, respondent_budget=2.0)
    page.goto(f"{server.base}/s/{s['id']}")
    page.get_by_label("Privacy level").select_option("1")
    expect(page.locator("#epsilon-budget")).to_contain_text("up to 2 pairs")


def test_the_accuracy_preview_simulates_what_the_cap_allows(server, new_page):
    """Five items make ten pairs; a cap of ε = 3 at ε = 1 allows three: the preview simulates
    three pairs per respondent, and each respondent's total ε is 3, not 10."""
    admin = new_page(signed_in=server.base)
    admin.goto(f"{server.base}/#/new")
    admin.get_by_label("Items, one per line").fill("\n".join([*ITEMS, "Libraries"]))
    admin.get_by_label("ε given to respondents who do not choose").fill("1")
    admin.get_by_label("Total ε one respondent may spend (the sum over its answers)").fill("3")
    admin.get_by_label("Respondents you expect").fill("50")
    admin.get_by_label("Pairs each answers").fill("10")
    admin.get_by_role("button", name="Preview accuracy").click()
    out = admin.locator("#plan-out")
    expect(out).to_contain_text("answering 3 of the 10 pairs each", timeout=60_000)
    expect(out).to_contain_text("The cap of ε = 3 per respondent allows 3 pairs at ε = 1.")
    total = out.locator("dt", has_text="Each respondent's total ε").locator("xpath=following-sibling::dd")
    expect(total).to_have_text("3.00")
    # No cap: the ten pairs asked for.
    admin.get_by_label("No cap").check()
    admin.get_by_role("button", name="Preview accuracy").click()
    expect(out).to_contain_text("answering 10 of the 10 pairs each", timeout=60_000)
    expect(total).to_have_text("10.00")
