"""A long simulation on the dashboard runs as a job: the page shows its progress bar and
a Cancel button, then the answer; a cancelled job says so."""

from __future__ import annotations

import httpx2
import pytest
from playwright.sync_api import expect

from tests.helpers.browser import ADMIN, ADMIN_KEY, ITEMS, TRUTH, sign_in
from tests.helpers.live import LiveServer


@pytest.fixture
def job_server(tmp_path):
    # Every plan is handed to a job (PRIVRANK_INLINE_SECONDS=0), run by this process.
    srv = LiveServer(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path}/jobs.db",
            "PRIVRANK_ADMIN_KEY": ADMIN_KEY,
            "PRIVRANK_INLINE_SECONDS": "0",
        }
    )
    yield srv
    srv.stop()


def _survey_with_answers(base: str) -> str:
    s = httpx2.post(
        f"{base}/v1/surveys", json={"title": "Plan me", "items": ITEMS}, headers=ADMIN, timeout=30
    ).json()
    for _ in range(12):
        token = httpx2.post(f"{base}/v1/surveys/{s['id']}/respondents", json={}).json()["token"]
        headers = {"Authorization": f"Bearer {token}"}
        pairs = httpx2.get(f"{base}/v1/surveys/{s['id']}/pairs?count=6", headers=headers).json()["pairs"]
        comparisons = [
            {
                "a": p["a"],
                "b": p["b"],
                "winner": p["a"] if TRUTH.index(p["a_label"]) < TRUTH.index(p["b_label"]) else p["b"],
            }
            for p in pairs
        ]
        r = httpx2.post(
            f"{base}/v1/surveys/{s['id']}/responses",
            json={"privatized": False, "comparisons": comparisons},
            headers=headers,
        )
        assert r.status_code == 201, r.text
    return s["id"]


def test_a_plan_run_as_a_job_shows_its_progress_then_the_answer(job_server, new_page, console, shots):
    sid = _survey_with_answers(job_server.base)
    admin = new_page()
    sign_in(admin, job_server.base)
    admin.goto(f"{job_server.base}/#/survey/{sid}")
    admin.get_by_role("button", name="Plan from here").click()
    bar = admin.locator("#job-progress")
    expect(bar).to_be_visible()
    expect(bar).to_have_attribute("role", "progressbar")
    expect(admin.locator("#job-cancel")).to_be_visible()
    admin.locator("#survey-plan").screenshot(path=str(shots / "dashboard-job.png"))
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
