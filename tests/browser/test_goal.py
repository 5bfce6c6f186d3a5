"""A goal survey in the browser: the respondent page sends each pair's ticket (its answers
count for the goal), the dashboard shows the goal and the planner's estimate, and a
survey that closed itself on meeting its goal thanks late arrivals."""

from __future__ import annotations

import httpx2
from playwright.sync_api import expect

from tests.helpers.browser import ADMIN, ITEMS, TRUTH, answer_pairs, sign_in


def _api_respondent(base: str, sid: str) -> int:
    """A respondent answering truthfully through the API, with the tickets; answers stored."""
    r = httpx2.post(f"{base}/v1/surveys/{sid}/respondents", json={})
    if r.status_code == 409:  # closed: the goal is met
        return 0
    headers = {"Authorization": f"Bearer {r.json()['token']}"}
    pairs = httpx2.get(f"{base}/v1/surveys/{sid}/pairs?count=10", headers=headers).json()["pairs"]
    if not pairs:
        return 0
    comparisons = [
        {
            "a": p["a"],
            "b": p["b"],
            "winner": p["a"] if TRUTH.index(p["a_label"]) < TRUTH.index(p["b_label"]) else p["b"],
            "ticket": p["ticket"],
        }
        for p in pairs
    ]
    r = httpx2.post(
        f"{base}/v1/surveys/{sid}/responses",
        json={"privatized": False, "comparisons": comparisons},
        headers=headers,
    )
    return len(comparisons) if r.status_code == 201 else 0


def test_a_goal_survey_counts_the_pages_answers_and_stops(server, new_page, console, shots):
    body = {
        "title": "Which one first?",
        "items": ITEMS,
        "privacy": {"epsilon_default": 2},
        "assignment": "adaptive",
        "goal": {"top_k": 1, "level": 0.9, "close_when_met": True},
    }
    survey = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()
    sid = survey["id"]
    admin = new_page()
    sign_in(admin, server.base)
    admin.goto(f"{server.base}/#/survey/{sid}")
    expect(admin.locator("#goal-state")).to_have_text("Not yet met")
    link = admin.locator("#respondent-link").inner_text()
    # Three respondents answer two pairs each on the respondent page (randomized there).
    for _ in range(3):
        answer_pairs(new_page(), link, 2)
    goal = httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()["goal"]
    assert goal["answers_used"] == 6
    # The page sent each pair's ticket back: every answer counted for one item or two.
    assert 6 <= goal["counted_answers"] <= 12
    for _ in range(400):
        _api_respondent(server.base, sid)
        if httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()["status"] == "closed":
            break
    admin.get_by_role("button", name="Refresh").click()
    expect(admin.locator("#goal-state")).to_have_text("Met — the survey closed itself")
    expect(admin.locator("#goal-items")).to_have_text("Certified top 1: Transit")
    admin.get_by_role("button", name="Estimate the answers saved").click()
    expect(admin.locator("#goal-saving")).to_contain_text("Planner's estimate:", timeout=60_000)
    admin.locator("#goal").screenshot(path=str(shots / "dashboard-goal.png"))
    late = new_page(width=420, height=700)
    late.goto(link)
    expect(late.get_by_role("heading", name="This survey has its answer")).to_be_visible()


def test_the_dashboard_shows_a_pairwise_goal(server, new_page, console):
    """A goal certified pairwise: the dashboard's goal view shows its standing and the
    certified item, names the certificate, and the planner's estimate simulates the
    pairwise certificate."""
    body = {
        "title": "Which one first, pairwise?",
        "items": ITEMS,
        "privacy": {"epsilon_default": 2},
        "assignment": "adaptive",
        "goal": {"top_k": 1, "level": 0.9, "certificate": "pairwise"},
    }
    survey = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()
    sid = survey["id"]
    assert survey["goal"]["certificate"] == "pairwise"
    admin = new_page()
    sign_in(admin, server.base)
    admin.goto(f"{server.base}/#/survey/{sid}")
    expect(admin.locator("#goal-state")).to_have_text("Not yet met")
    for n in range(600):
        _api_respondent(server.base, sid)
        if n % 10 == 9 and httpx2.get(f"{server.base}/v1/surveys/{sid}", headers=ADMIN).json()["goal"]["met"]:
            break
    admin.get_by_role("button", name="Refresh").click()
    expect(admin.locator("#goal-state")).to_have_text("Met")
    expect(admin.locator("#goal-items")).to_have_text("Certified top 1: Transit")
    expect(admin.locator("#goal")).to_contain_text("by the pairwise certificate")
    admin.get_by_role("button", name="Estimate the answers saved").click()
    expect(admin.locator("#goal-saving")).to_contain_text("Planner's estimate:", timeout=60_000)
    expect(admin.locator("#saving-box")).to_contain_text("this goal's pairwise certificate")
