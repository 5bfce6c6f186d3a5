"""Jobs (app.jobs.service): a ranking, a bootstrap or a plan submitted now
(202) and read later; the result equals the synchronous endpoint's; cancelling;
bad submissions store nothing; a lost runner's job is retried once, then fails —
never left running."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from app.core.db.models import Job, utcnow
from app.jobs import cost, execution
from app.jobs import service as runners
from app.jobs import store as jobs
from tests.helpers.api import (
    ADMIN,
    analyst_headers,
    create_central_survey,
    create_ranking_survey,
    import_survey,
    make_app,
    register,
)


@pytest.fixture(scope="module")
def answered(app) -> str:
    """8 items, 120 respondents × 8 answers."""
    with TestClient(app) as client:
        return import_survey(client, 8, 120, 8, seed=11)


def _wait(client, job_id: str, headers=ADMIN, seconds: float = 60.0) -> dict:
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        seen.append(job["progress"])
        if job["status"] in ("done", "failed", "cancelled"):
            assert seen == sorted(seen), "progress went backwards"
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish: {job}")


def test_a_bootstrap_job_gives_what_the_ranking_endpoint_gives(client, answered):
    body = {"kind": "bootstrap", "replicates": 100, "k": 3}
    r = client.post(f"/v1/surveys/{answered}/jobs", json=body, headers=ADMIN)
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["status"] in ("queued", "running") and job["kind"] == "bootstrap" and job["result"] is None
    assert job["parameters"] == {"k": 3, "confidence": 0.95, "covariance": "cluster", "replicates": 100}
    done = _wait(client, job["id"])
    assert done["status"] == "done" and done["progress"] == 1.0 and done["error"] is None
    assert done["attempts"] == 1 and done["started_at"] and done["finished_at"]
    direct = client.get(
        f"/v1/surveys/{answered}/ranking?uncertainty=bootstrap&replicates=100&k=3", headers=ADMIN
    ).json()
    # The same data version and the same seeded replicates: the same answer.
    assert done["result"] == direct


def test_a_plan_job_gives_what_the_plan_endpoint_gives(client, answered):
    analyst = analyst_headers(client)
    body = {"kind": "plan", "k": 2, "respondents": 50, "replications": 20, "seed": 4}
    r = client.post(f"/v1/surveys/{answered}/jobs", json=body, headers=analyst)
    assert r.status_code == 202, r.text
    done = _wait(client, r.json()["id"], analyst)
    assert done["status"] == "done", done
    direct = client.get(
        f"/v1/surveys/{answered}/plan?k=2&respondents=50&replications=20&seed=4", headers=analyst
    ).json()
    assert done["result"] == direct
    listed = client.get(f"/v1/surveys/{answered}/jobs", headers=analyst).json()["jobs"]
    assert listed[0]["id"] == done["id"] and listed[0]["result"] is None  # newest first, no results


def test_cancelling_a_running_job_stops_it(app, answered, monkeypatch):
    """DELETE marks the job cancelled; its runner sees that at its next heartbeat and
    cancels the work's deadline, which stops the bootstrap at its next replicate; the
    runner then takes the job waiting behind it (one runner thread)."""
    from app.analysis import bootstrap

    monkeypatch.setattr(execution, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(runners, "HEARTBEAT_SECONDS", 0.05)
    in_third, cancelled = threading.Event(), threading.Event()

    class Watched(execution.JobDeadline):
        def cancel(self) -> None:
            super().cancel()
            cancelled.set()

    monkeypatch.setattr(execution, "JobDeadline", Watched)
    calls = []
    real = bootstrap.cluster_bootstrap_confidence

    def gated(*args, check, **kwargs):
        def counted() -> None:
            calls.append(1)
            check()
            if len(calls) == 3:  # the third replicate runs until the runner cancels the work
                in_third.set()
                cancelled.wait(30)

        return real(*args, check=counted, **kwargs)

    monkeypatch.setattr(bootstrap, "cluster_bootstrap_confidence", gated)
    with TestClient(app) as client:
        long = client.post(
            f"/v1/surveys/{answered}/jobs", json={"kind": "bootstrap", "replicates": 2000}, headers=ADMIN
        ).json()
        waiting = client.post(f"/v1/surveys/{answered}/jobs", json={"kind": "ranking"}, headers=ADMIN).json()
        assert in_third.wait(30)
        assert client.get(f"/v1/jobs/{long['id']}", headers=ADMIN).json()["status"] == "running"
        r = client.delete(f"/v1/jobs/{long['id']}", headers=ADMIN)
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        assert client.delete(f"/v1/jobs/{long['id']}", headers=ADMIN).json()["status"] == "cancelled"
        after = _wait(client, waiting["id"])
        assert after["status"] == "done"
        assert len(calls) == 4  # one check after the cancel, and no replicate after it
        final = client.get(f"/v1/jobs/{long['id']}", headers=ADMIN).json()
        assert final["status"] == "cancelled" and final["result"] is None and final["progress"] < 1
        # A finished job cannot be cancelled.
        r = client.delete(f"/v1/jobs/{waiting['id']}", headers=ADMIN)
        assert r.status_code == 409 and "finished" in r.json()["detail"]


def test_bad_submissions_are_refused_and_store_nothing(client, answered, unchanged):
    ranking = create_ranking_survey(client)["id"]
    central = create_central_survey(client)["id"]
    _, respondent = register(client, answered)
    with unchanged():
        for body in (
            {"kind": "sleep"},
            {"kind": "bootstrap", "replicates": 10**9},
            {"kind": "plan"},  # k is required
            {"kind": "plan", "k": 2, "replications": 5},
            {"kind": "ranking", "confidence": 2},
            {"kind": "ranking", "unknown": 1},
        ):
            r = client.post(f"/v1/surveys/{answered}/jobs", json=body, headers=ADMIN)
            assert r.status_code == 422, (body, r.text)
        assert (
            client.post(f"/v1/surveys/{ranking}/jobs", json={"kind": "ranking"}, headers=ADMIN).status_code
            == 409
        )
        assert (
            client.post(f"/v1/surveys/{central}/jobs", json={"kind": "ranking"}, headers=ADMIN).status_code
            == 409
        )
        assert (
            client.post("/v1/surveys/srv_nope/jobs", json={"kind": "ranking"}, headers=ADMIN).status_code
            == 404
        )
        assert client.post(f"/v1/surveys/{answered}/jobs", json={"kind": "ranking"}).status_code == 401
        assert (
            client.post(
                f"/v1/surveys/{answered}/jobs", json={"kind": "ranking"}, headers=respondent
            ).status_code
            == 403
        )
        assert client.get("/v1/jobs/job_nope", headers=ADMIN).status_code == 404
        assert client.delete("/v1/jobs/job_nope", headers=ADMIN).status_code == 404


def test_a_full_backlog_is_503_and_stores_nothing(database_url, tmp_path):
    from tests.helpers.api import private_database

    with private_database(database_url, tmp_path) as url:
        app = make_app(url, job_backlog=2, job_threads=1)
        try:
            with TestClient(app) as client:
                sid = import_survey(client, 6, 60, 6, seed=2)
                with app.state.session_factory() as s:  # two jobs in progress (of other keys)
                    held = [jobs.create_job(s, sid, "ranking", {"k": n}, f"key_{n}", 2).id for n in (1, 2)]
                r = client.post(f"/v1/surveys/{sid}/jobs", json={"kind": "ranking"}, headers=ADMIN)
                assert r.status_code == 503 and "too many jobs" in r.json()["detail"]
                assert int(r.headers["retry-after"]) >= 1
                with app.state.session_factory() as s:
                    assert s.execute(select(func.count()).select_from(Job)).scalar_one() == 2
                client.delete(f"/v1/jobs/{held[0]}", headers=ADMIN)  # one place free again
                assert (
                    client.post(
                        f"/v1/surveys/{sid}/jobs", json={"kind": "ranking"}, headers=ADMIN
                    ).status_code
                    == 202
                )
                client.delete(f"/v1/jobs/{held[1]}", headers=ADMIN)
        finally:
            app.state.jobs.close()
            app.state.engine.dispose()


def _stale(db, job_id: str, status: str, attempts: int) -> None:
    db.execute(
        update(Job)
        .where(Job.id == job_id)
        .values(
            status=status,
            attempts=attempts,
            runner="gone-host:1:1",
            heartbeat_at=utcnow() - timedelta(seconds=jobs.STALE_SECONDS + 5),
        )
    )
    db.commit()


def test_a_job_lost_by_its_runner_is_retried_once_then_fails(client, db, answered):
    """A runner that stops heartbeating (killed) loses its job: the next read queues it
    again and this process runs it; lost a second time, it fails with the reason."""
    job = jobs.create_job(db, answered, "ranking", {}, "test", 100)  # never dispatched: as if its runner died
    _stale(db, job.id, "running", attempts=1)
    retried = _wait(client, job.id)
    assert retried["status"] == "done" and retried["attempts"] == 2 and retried["result"]["items"]

    job = jobs.create_job(db, answered, "ranking", {}, "test", 100)
    _stale(db, job.id, "running", attempts=jobs.MAX_ATTEMPTS)
    failed = client.get(f"/v1/jobs/{job.id}", headers=ADMIN).json()
    assert failed["status"] == "failed" and "runner stopped" in failed["error"] and failed["finished_at"]

    # A job still heartbeating is left alone.
    job = jobs.create_job(db, answered, "ranking", {}, "test", 100)
    db.execute(update(Job).where(Job.id == job.id).values(status="running", runner="busy:1:1", attempts=1))
    db.commit()
    assert client.get(f"/v1/jobs/{job.id}", headers=ADMIN).json()["status"] == "running"
    db.execute(update(Job).where(Job.id == job.id).values(status="cancelled"))
    db.commit()


def test_a_late_result_of_a_cancelled_job_is_dropped(app, db, answered, monkeypatch):
    """The runner finishes only a job it still holds: cancel between claim and finish."""
    job = jobs.create_job(db, answered, "ranking", {}, "test", 100)
    ctx = execution.JobContext(app.state.session_factory, app.state.fit_cache, 60.0)
    real = execution._work

    def cancel_then_work(kind, parameters, c):
        fn, n = real(kind, parameters, c)

        def wrapped(session, survey, deadline):
            with app.state.session_factory() as s:
                jobs.cancel_job(s, job.id)
            return fn(session, survey, deadline)

        return wrapped, n

    monkeypatch.setattr(execution, "_work", cancel_then_work)
    assert execution.execute(job.id, ctx) is None
    db.expire_all()
    row = db.get(Job, job.id)
    assert row.status == "cancelled" and row.result is None


def test_long_bootstraps_and_plans_asked_synchronously_become_jobs(client, answered, inline):
    query = "uncertainty=bootstrap&replicates=200&k=2"
    plan_query = "k=2&respondents=40&replications=20&seed=1"
    inline_ranking = client.get(f"/v1/surveys/{answered}/ranking?{query}", headers=ADMIN)
    inline_plan = client.get(f"/v1/surveys/{answered}/plan?{plan_query}", headers=ADMIN)
    assert inline_ranking.status_code == 200 and inline_plan.status_code == 200  # predicted well under 10 s
    inline(0.0)  # everything predicted to take any time at all goes through a job
    for path, expected in ((f"ranking?{query}", inline_ranking), (f"plan?{plan_query}", inline_plan)):
        r = client.get(f"/v1/surveys/{answered}/{path}", headers=ADMIN)
        assert r.status_code == 202, r.text
        job = r.json()
        assert r.headers["location"] == f"/v1/jobs/{job['id']}" and job["status"] in (
            "queued",
            "running",
            "done",
        )
        done = _wait(client, job["id"])
        assert done["status"] == "done" and done["result"] == expected.json()
    design = "items=6&pairs_per_respondent=3&k=2&respondents=50&epsilon=1&replications=20"
    inline(10.0)
    inline_design = client.get(f"/v1/plan?{design}", headers=ADMIN)
    assert inline_design.status_code == 200
    inline(0.0)
    r = client.get(f"/v1/plan?{design}", headers=ADMIN)
    assert r.status_code == 202 and r.json()["survey_id"] is None and r.json()["kind"] == "design"
    assert _wait(client, r.json()["id"])["result"] == inline_design.json()
    # The same as a job submitted directly.
    body = {"kind": "design", "items": 6, "pairs_per_respondent": 3, "k": 2, "respondents": 50}
    r = client.post("/v1/jobs", json={**body, "epsilon": [1.0], "replications": 20}, headers=ADMIN)
    assert r.status_code == 202, r.text
    assert _wait(client, r.json()["id"])["result"] == inline_design.json()
    assert client.post("/v1/jobs", json={**body, "items": 10**6}, headers=ADMIN).status_code == 422
    assert client.post("/v1/jobs", json={"kind": "ranking"}, headers=ADMIN).status_code == 422
    # Sandwich intervals never take a job: they answer inline whatever the threshold.
    assert client.get(f"/v1/surveys/{answered}/ranking", headers=ADMIN).status_code == 200


def test_answers_not_yet_folded_count_in_the_prediction(client, inline):
    """Answers waiting to be folded are work too: a bootstrap on a survey that was
    answered (imported) but never read is predicted from every stored answer."""
    fresh = import_survey(client, 8, 120, 8, seed=12)
    inline(0.0)
    r = client.get(f"/v1/surveys/{fresh}/ranking?uncertainty=bootstrap&replicates=200", headers=ADMIN)
    assert r.status_code == 202, r.text
    assert _wait(client, r.json()["id"])["status"] == "done"


def test_predictions_follow_the_work():
    from app.analysis.bootstrap import bootstrap_seconds

    p = {"uncertainty": "bootstrap", "replicates": 400, "covariance": "cluster"}
    assert cost.predicted_seconds("ranking", p, 30, 50_000) == bootstrap_seconds(30, 50_000, 400, "cluster")
    assert cost.predicted_seconds("ranking", {}, 30, 50_000) == 0.0  # sandwich: inline
    fixed = cost.predicted_seconds("plan", {"respondents": 100, "replications": 100}, 20, 10_000)
    search = cost.predicted_seconds("plan", {"replications": 100}, 20, 10_000)
    assert fixed == pytest.approx((10_000 + 1000 + 8000 / 50) * 100 / cost.PLAN_UNITS_PER_SECOND)
    assert fixed < search <= 15_000_000 / cost.PLAN_UNITS_PER_SECOND  # a search: at most the work bound
    from app.stats.planner import plan_seconds

    design = {"items": 20, "pairs_per_respondent": 10, "k": 3, "respondents": 500, "replications": 200}
    assert cost.predicted_seconds("design", design, 20, 0) == plan_seconds(20, 5000, 1, 200)
    solving = {**design, "solve": "respondents", "epsilon": [0.5, 1.0, 2.0]}
    assert cost.predicted_seconds("design", solving, 20, 0) == plan_seconds(20, 100, 3, 200) * 12


def test_a_repeated_request_follows_the_same_job_and_a_key_has_a_cap(
    client, db, answered, inline, monkeypatch
):
    """A reload of a long GET, or the same POST again, while the job is in progress is
    the same job, not another; a key with JOBS_PER_KEY jobs in progress gets 429 (and
    nothing stored)."""
    inline(0.0)
    query = "uncertainty=bootstrap&replicates=2000"
    # What that GET submits, as a job of the admin's still waiting (as behind a long one).
    parameters = {
        "method": "debiased_mle",
        "confidence": 0.95,
        "uncertainty": "bootstrap",
        "covariance": "cluster",
        "replicates": 2000,
    }
    waiting = jobs.create_job(db, answered, "ranking", parameters, "admin", 100)
    r = client.get(f"/v1/surveys/{answered}/ranking?{query}", headers=ADMIN)
    assert r.status_code == 202 and r.json()["id"] == waiting.id  # the same job, followed again
    r = client.post(f"/v1/surveys/{answered}/jobs", json={"kind": "ranking", **parameters}, headers=ADMIN)
    assert r.json()["id"] == waiting.id
    other = jobs.create_job(db, answered, "ranking", {**parameters, "k": 2}, "admin", 100)
    monkeypatch.setattr(jobs, "JOBS_PER_KEY", 2)
    with client.app.state.session_factory() as s:
        before = s.execute(select(func.count()).select_from(Job)).scalar_one()
    r = client.get(f"/v1/surveys/{answered}/ranking?{query}&k=3", headers=ADMIN)
    assert r.status_code == 429 and "jobs queued or running" in r.json()["detail"]
    with client.app.state.session_factory() as s:
        assert s.execute(select(func.count()).select_from(Job)).scalar_one() == before
    for job in (waiting, other):
        client.delete(f"/v1/jobs/{job.id}", headers=ADMIN)


def test_what_the_job_would_refuse_is_refused_before_it_is_stored(client, answered, unchanged):
    with unchanged():
        for body, words in (
            ({"kind": "plan", "k": 8}, "k must be between 1 and 7"),
            ({"kind": "plan", "k": 2, "scores": [1.0, 2.0]}, "one value per item"),
            ({"kind": "ranking", "k": 99}, "k must be between 1 and the number of items"),
            ({"kind": "ranking", "method": "naive_mle", "uncertainty": "bootstrap"}, "debiased_mle"),
            ({"kind": "ranking", "confidence": 0.955}, "two decimals"),
        ):
            r = client.post(f"/v1/surveys/{answered}/jobs", json=body, headers=ADMIN)
            assert r.status_code == 422 and words in r.json()["detail"], (body, r.text)
        r = client.post(
            "/v1/jobs", json={"kind": "design", "items": 5, "pairs_per_respondent": 2, "k": 5}, headers=ADMIN
        )
        assert r.status_code == 422 and "k must be less than" in r.json()["detail"]
        # Work past twice a job's budget: 32 ε levels at every pair of 500 items, 2,000
        # times (~1,270 s), with a job budget of 60 s — refused at once, with the prediction.
        huge = {
            "kind": "design",
            "items": 500,
            "pairs_per_respondent": 10,
            "k": 2,
            "respondents": 100_000,
            "replications": 2000,
            "epsilon": [0.5 + x / 10 for x in range(32)],
        }
        settings = client.app.state.settings
        client.app.state.settings = settings.model_copy(update={"job_seconds": 60.0})
        try:
            r = client.post("/v1/jobs", json=huge, headers=ADMIN)
        finally:
            client.app.state.settings = settings
        assert (
            r.status_code == 422 and "about 1267 s here, beyond twice a job's time budget of 60 s" in r.text
        )


def test_queued_jobs_that_nobody_holds_are_sent_again_and_old_ones_deleted(client, db, answered):
    """A queued job whose holder went silent (a stopped process's backlog, a queue push
    lost with Redis) is dispatched again — not counted as an attempt; finished jobs are
    deleted after the retention period."""
    job = jobs.create_job(db, answered, "ranking", {}, "test", 100)  # never dispatched
    db.execute(
        update(Job)
        .where(Job.id == job.id)
        .values(heartbeat_at=utcnow() - timedelta(seconds=jobs.STALE_SECONDS + 5))
    )
    db.commit()
    done = _wait(client, job.id)  # the read finds it silent and this process runs it
    assert done["status"] == "done" and done["attempts"] == 1
    db.execute(
        update(Job).where(Job.id == job.id).values(finished_at=utcnow() - jobs.RETENTION - timedelta(hours=1))
    )
    db.commit()
    assert jobs.purge_finished(db) >= 1
    assert client.get(f"/v1/jobs/{job.id}", headers=ADMIN).status_code == 404


def test_waiting_for_a_turn_is_not_progress():
    d = execution.JobDeadline(60.0, 10, what="x")
    for _ in range(50):
        d.check_waiting()
    assert d.progress == 0.0
    for _ in range(5):
        d.check()
    assert d.progress == 0.5


def test_every_call_that_can_submit_a_job_documents_the_429_of_a_keys_cap(app):
    """A key with JOBS_PER_KEY jobs in progress gets 429 from any call that submits one:
    the job routes and the synchronous ones that hand long work to a job."""
    paths = app.openapi()["paths"]
    submitting = [
        ("/v1/surveys/{survey_id}/jobs", "post"),
        ("/v1/jobs", "post"),
        ("/v1/plan", "get"),
        ("/v1/surveys/{survey_id}/plan", "get"),
        ("/v1/surveys/{survey_id}/ranking", "get"),
    ]
    for path, method in submitting:
        assert "429" in paths[path][method]["responses"], (path, method)


def test_only_the_submitting_key_or_an_admin_cancels_a_job(client, answered, monkeypatch):
    """Another analyst's DELETE of a job is 404, word for word the answer for a job that
    does not exist, and leaves the job as it was; its own key, or an admin, cancels it."""
    monkeypatch.setattr(client.app.state.jobs, "dispatch", lambda job_id: None)  # stays queued
    mine, theirs = analyst_headers(client), analyst_headers(client)
    body = {"kind": "ranking", "k": 2}
    analysts_job = client.post(f"/v1/surveys/{answered}/jobs", json=body, headers=mine).json()["id"]
    admins_job = client.post(f"/v1/surveys/{answered}/jobs", json=body, headers=ADMIN).json()["id"]
    unknown = client.delete("/v1/jobs/job_unknown", headers=theirs)
    assert unknown.status_code == 404
    for job_id, stranger in ((analysts_job, theirs), (admins_job, theirs), (admins_job, mine)):
        r = client.delete(f"/v1/jobs/{job_id}", headers=stranger)
        assert (r.status_code, r.json()) == (404, unknown.json())
        assert client.get(f"/v1/jobs/{job_id}", headers=ADMIN).json()["status"] == "queued"
    r = client.delete(f"/v1/jobs/{analysts_job}", headers=mine)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    r = client.delete(f"/v1/jobs/{admins_job}", headers=ADMIN)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    # An admin cancels an analyst's job too.
    another = client.post(f"/v1/surveys/{answered}/jobs", json={"kind": "ranking", "k": 3}, headers=theirs)
    r = client.delete(f"/v1/jobs/{another.json()['id']}", headers=ADMIN)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
