"""A long simulation on the dashboard runs as a job: the page shows its progress bar and
a Cancel button, then the answer; a cancelled job says so."""

from __future__ import annotations

import httpx2
import pytest
from playwright.sync_api import expect

from tests.helpers.browser import ADMIN, ADMIN_KEY, ITEMS, api_respondent
from tests.helpers.live import LiveServer


@pytest.fixture(scope="session")
def job_server(tmp_path_factory):
    """A server that hands every plan to a job (PRIVRANK_INLINE_SECONDS=0), run by its own
    process; shared by the tests of this process that need one."""
    path = tmp_path_factory.mktemp("job-server") / "jobs.db"
    srv = LiveServer(
        {
            "DATABASE_URL": f"sqlite:///{path}",
            "PRIVRANK_ADMIN_KEY": ADMIN_KEY,
            "PRIVRANK_INLINE_SECONDS": "0",
        }
    )
    yield srv
    srv.stop()


def _survey_with_answers(base: str) -> str:
    """12 respondents' answers to all 6 pairs, randomized by the server (what is planned
    from them does not matter here: only that the plan runs as a job)."""
    with httpx2.Client(base_url=base, timeout=30) as api:
        body = {"title": "Plan me", "items": ITEMS, "privacy": {"respondent_budget": 6.0}}  # 6 pairs at ε 1
        s = api.post("/v1/surveys", json=body, headers=ADMIN).json()
        for _ in range(12):
            assert api_respondent(api, s["id"], count=6) == 6
    return s["id"]


def test_a_plan_run_as_a_job_shows_its_progress_then_the_answer(job_server, new_page, console, shots):
    sid = _survey_with_answers(job_server.base)
    admin = new_page(signed_in=job_server.base)
    admin.goto(f"{job_server.base}/#/survey/{sid}")
    admin.get_by_role("button", name="Plan from here").click()
    bar = admin.locator("#job-progress")
    expect(bar).to_be_visible()
    expect(bar).to_have_attribute("role", "progressbar")
    expect(admin.locator("#job-cancel")).to_be_visible()
    shots(admin.locator("#survey-plan"), "dashboard-job.png")
    expect(admin.locator("#survey-plan-answer")).to_contain_text("top", timeout=120_000)
    expect(bar).to_have_count(0)  # replaced by the answer
    jobs = httpx2.get(f"{job_server.base}/v1/surveys/{sid}/jobs", headers=ADMIN).json()["jobs"]
    assert [j["status"] for j in jobs] == ["done"] and jobs[0]["kind"] == "plan"

    # A second plan, cancelled from the page.
    admin.get_by_label("Wanted certainty (%)").fill("99")
    admin.get_by_role("button", name="Plan from here").click()
    expect(admin.locator("#job-cancel")).to_be_visible()
    admin.locator("#job-cancel").click()
    expect(admin.locator("#survey-plan-out")).to_contain_text("the job was cancelled", timeout=30_000)
    statuses = [
        j["status"]
        for j in httpx2.get(f"{job_server.base}/v1/surveys/{sid}/jobs", headers=ADMIN).json()["jobs"]
    ]
    assert statuses == ["cancelled", "done"]
