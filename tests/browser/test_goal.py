"""A goal survey in the browser: the respondent page sends each pair's ticket (its answers
count for the goal), the dashboard shows the goal and the planner's estimate, and a
survey that closed itself on meeting its goal thanks late arrivals.

The respondents that take a survey to its goal answer through the API, truthfully (in
TRUTH's order), randomized by the server at ε = 2 (OS CSPRNG), which also draws the pairs.
Both tests assert that the certified top 1 is Transit, so each states the chance that a
certificate at level 0.9 names another item: Azuma–Hoeffding on each sequence's mean at
every size n, summed over n ≥ 1, with the sequences' own radii h(n) (app.stats.adaptive).

* Borda certificate: another item X is certified above Transit only if Transit's
  upper bound falls below 5/6 or X's lower bound rises above 5/6, each ≥ 1/6 + h(n)
  from its true Borda score (Transit 1, the others at most 2/3): at most 2.2e-8 per
  item, 8.7e-8 for the four — over the server's draws and the page's seed (the page's
  six answers, randomized at ε = 2 by the seeded page, are samples like the others).
* Pairwise certificate: Transit is certainly beaten only if a pair's lower bound on
  P(X beats Transit) = 0 rises above 1/2: at most 1.2e-22 for the three pairs.

The survey is met after 100–150 respondents in a typical run; :data:`CAP` respondents
leave it unmet with probability below 1e-20 (Hoeffding at that many answers per item).
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.helpers.browser import ADMIN, ITEMS, answer_pairs, api_respondent

#: At most this many API respondents (see the module docstring).
CAP = 3000


def _goal_survey(api, title: str, goal: dict) -> dict:
    body = {
        "title": title,
        "items": ITEMS,
        "privacy": {"epsilon_default": 2, "respondent_budget": 12},  # all 6 pairs at ε = 2
        "assignment": "adaptive",
        "goal": {"top_k": 1, "level": 0.9, **goal},
    }
    r = api.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def _survey(api, sid: str) -> dict:
    return api.get(f"/v1/surveys/{sid}", headers=ADMIN).json()


def test_a_goal_survey_counts_the_pages_answers_and_stops(server, api, new_page, survey_page, console, shots):
    """Three respondents answer two pairs each on the page: all six answers are used and
    each counts for the goal (for one item or two). API respondents then take the survey
    to its goal (another item than Transit certified: probability ≤ 8.7e-8, module docstring); it
    closes itself, the dashboard says so, and a late arrival is told the survey has its
    answer."""
    survey = _goal_survey(api, "Which one first?", {"close_when_met": True})
    sid = survey["id"]
    admin = survey_page(sid)
    expect(admin.locator("#goal-state")).to_have_text("Not yet met")
    link = admin.locator("#respondent-link").inner_text()
    # Three respondents answer two pairs each on the respondent page (randomized there).
    for _ in range(3):
        answer_pairs(new_page(), link, 2)
    goal = _survey(api, sid)["goal"]
    assert goal["answers_used"] == 6
    # The page sent each pair's ticket back: every answer counted for one item or two.
    assert 6 <= goal["counted_answers"] <= 12
    for _ in range(CAP):
        # 0 answers: closed (the goal is met), or nothing left to ask this respondent.
        if api_respondent(api, sid) == 0 and _survey(api, sid)["status"] == "closed":
            break
    assert _survey(api, sid)["status"] == "closed"
    admin.get_by_role("button", name="Refresh").click()
    expect(admin.locator("#goal-state")).to_have_text("Met — the survey closed itself")
    expect(admin.locator("#goal-items")).to_have_text("Certified top 1: Transit")
    admin.get_by_role("button", name="Estimate the answers saved").click()
    expect(admin.locator("#goal-saving")).to_contain_text("Planner's estimate:", timeout=60_000)
    shots(admin.locator("#goal"), "dashboard-goal.png")
    late = new_page(width=420, height=700)
    late.goto(link)
    expect(late.get_by_role("heading", name="This survey has its answer")).to_be_visible()


def test_the_dashboard_shows_a_pairwise_goal(server, api, survey_page, console):
    """A goal certified pairwise: the dashboard's goal view shows its standing and the
    certified item (another than Transit: probability ≤ 1.2e-22, module docstring), names the
    certificate and its estimand, and the planner's estimate simulates the pairwise certificate."""
    survey = _goal_survey(api, "Which one first, pairwise?", {"certificate": "pairwise"})
    sid = survey["id"]
    assert survey["goal"]["certificate"] == "pairwise"
    admin = survey_page(sid)
    expect(admin.locator("#goal-state")).to_have_text("Not yet met")
    for n in range(CAP):
        api_respondent(api, sid)
        if n % 5 == 4 and _survey(api, sid)["goal"]["met"]:
            break
    assert _survey(api, sid)["goal"]["met"]
    admin.get_by_role("button", name="Refresh").click()
    expect(admin.locator("#goal-state")).to_have_text("Met")
    expect(admin.locator("#goal-items")).to_have_text("Certified top 1: Transit")
    expect(admin.locator("#goal")).to_contain_text("by the pairwise certificate")
    expect(admin.locator("#goal-estimand")).to_contain_text("The majority top 1, certified at")
    admin.get_by_role("button", name="Estimate the answers saved").click()
    expect(admin.locator("#goal-saving")).to_contain_text("Planner's estimate:", timeout=60_000)
    expect(admin.locator("#saving-box")).to_contain_text("this goal's pairwise certificate")
