"""``privrank plan``: before a survey runs, and ``--survey`` against a live server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.cli import privrank
from tests.helpers.live import LiveServer

ADMIN = {"Authorization": "Bearer plan-admin"}
LABELS = ["A", "B", "C", "D", "E"]


def _plan(*args, key: str | None = None):
    if key is None:
        return privrank("plan", *args, unset=("PRIVRANK_API_KEY",))
    return privrank("plan", *args, env={"PRIVRANK_API_KEY": key})


@pytest.mark.slow
def test_plan_from_pilot_scores():
    p = _plan(
        "-m",
        "5",
        "-p",
        "3",
        "-k",
        "2",
        "-L",
        "50",
        "-e",
        "1",
        "-r",
        "20",
        "--scores",
        "2",
        "1",
        "0",
        "-1",
        "-2",
    )
    assert p.returncode == 0, p.stderr
    assert "pilot scores 2, 1, 0, -1, -2" in p.stdout
    out = json.loads(
        _plan(
            "-m",
            "5",
            "-p",
            "3",
            "-k",
            "2",
            "-L",
            "50",
            "-e",
            "1",
            "-r",
            "20",
            "--scores",
            "1",
            "0",
            "0",
            "0",
            "-1",
            "--json",
        ).stdout
    )
    assert out["plan"]["scores"].startswith("pilot scores")
    bad = _plan("-m", "5", "-p", "3", "-k", "2", "-L", "50", "-e", "1", "--scores", "1", "2")
    assert bad.returncode == 2 and "one value per item" in bad.stderr
    missing = _plan("-p", "3", "-k", "2")
    assert missing.returncode == 2 and "--items" in missing.stderr


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan")
    srv = LiveServer({"DATABASE_URL": f"sqlite:///{path}/plan.db", "PRIVRANK_ADMIN_KEY": "plan-admin"})
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def survey(server):
    import httpx2

    body = {"title": "P", "items": LABELS, "privacy": {"respondent_budget": 8.0}}  # 4 pairs at ε = 2
    s = httpx2.post(f"{server.base}/v1/surveys", json=body, headers=ADMIN).json()
    rng = np.random.default_rng(3)
    theta = np.array([1.5, 0.7, 0.0, -0.7, -1.5])
    a, b = np.triu_indices(5, 1)
    rows = ["respondent,item_a,item_b,winner,epsilon"]
    for r in range(30):
        for x in rng.choice(a.size, 4, replace=False):
            i, j = a[x], b[x]
            won = (rng.random() < 1 / (1 + np.exp(theta[j] - theta[i]))) ^ (rng.random() < 0.12)
            rows.append(f"r{r},{LABELS[i]},{LABELS[j]},{LABELS[i] if won else LABELS[j]},2.0")
    r = httpx2.post(
        f"{server.base}/v1/surveys/{s['id']}/comparisons/import?privatized=true",
        content="\n".join(rows) + "\n",
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    return s


@pytest.mark.slow
def test_plan_a_running_survey(server, survey):
    import httpx2

    args = ("--survey", survey["id"], "--server", server.base, "-k", "2", "-r", "30")
    p = _plan(*args, key="plan-admin")
    assert p.returncode == 0, p.stderr
    assert "respondents to add for P(top-2 certified) >= 0.8" in p.stdout
    assert "survey now: 30 respondents, 120 comparisons" in p.stdout
    assert "assumption: Assumes the true scores are the survey's current estimates" in p.stdout
    # --json prints exactly what the endpoint answers.
    out = json.loads(_plan(*args, "--json", key="plan-admin").stdout)
    direct = httpx2.get(
        f"{server.base}/v1/surveys/{survey['id']}/plan", params={"k": 2, "replications": 30}, headers=ADMIN
    ).json()
    assert out == direct
    fixed = json.loads(_plan(*args, "-L", "100", "--tau", "0.5", "--json", key="plan-admin").stdout)
    assert fixed["plan"]["added_respondents"] == 100 and fixed["tau_source"] == "query"
    assert fixed["target"] is None


@pytest.mark.slow
def test_plan_survey_errors(server, survey):
    args = ("--survey", survey["id"], "--server", server.base, "-k", "2", "-r", "20")
    p = _plan(*args)
    assert p.returncode == 2 and "PRIVRANK_API_KEY" in p.stderr
    p = _plan(*args, key="key_aaaaaaaaaaaaaaaa.wrong")
    assert p.returncode == 1 and "401" in p.stderr
    p = _plan("--survey", survey["id"], "--server", server.base, "-k", "9", key="plan-admin")
    assert p.returncode == 1 and "422" in p.stderr and "k must be between" in p.stderr
    p = _plan("--survey", "srv_nope", "--server", server.base, "-k", "2", key="plan-admin")
    assert p.returncode == 1 and "404" in p.stderr
    p = _plan("--survey", survey["id"], "-k", "2", key="plan-admin")
    assert p.returncode == 2 and "--server" in p.stderr
    p = _plan("--survey", survey["id"], "--server", "file:///etc/passwd", "-k", "2", key="plan-admin")
    assert p.returncode == 2 and "http" in p.stderr


def test_plan_shows_its_progress_on_the_terminal():
    p = _plan("-m", "8", "-p", "5", "-k", "2", "-L", "40", "-e", "1", "-r", "20", "--progress")
    assert p.returncode == 0, p.stderr
    # Redrawn in place with \r (which text mode reads as a line break).
    shown = [line for line in p.stderr.splitlines() if line.startswith("simulating…")]
    assert shown and shown[0].endswith("0%"), p.stderr
    assert "P(exact top-2 recovered)" in p.stdout and "simulating" not in p.stdout
    quiet = _plan("-m", "8", "-p", "5", "-k", "2", "-L", "40", "-e", "1", "-r", "20")  # stderr is a pipe
    assert quiet.returncode == 0 and quiet.stderr == ""


@pytest.mark.slow
def test_plan_follows_a_job_when_the_server_hands_the_simulation_to_one(tmp_path):
    import httpx2

    srv = LiveServer(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path}/jobs.db",
            "PRIVRANK_ADMIN_KEY": "plan-admin",
            "PRIVRANK_INLINE_SECONDS": "0",  # every plan runs as a job
        }
    )
    try:
        s = httpx2.post(f"{srv.base}/v1/surveys", json={"title": "J", "items": LABELS}, headers=ADMIN).json()
        rows = ["respondent,item_a,item_b,winner,epsilon"]
        rows += [f"r{r},A,{LABELS[1 + r % 4]},A,2.0" for r in range(40)]
        rows += [f"r{r},B,{LABELS[2 + r % 3]},{LABELS[2 + r % 3]},2.0" for r in range(40)]
        r = httpx2.post(
            f"{srv.base}/v1/surveys/{s['id']}/comparisons/import?privatized=true",
            content="\n".join(rows) + "\n",
            headers={**ADMIN, "Content-Type": "text/csv"},
        )
        assert r.status_code == 201, r.text
        args = ("--survey", s["id"], "--server", srv.base, "-k", "1", "-r", "20", "-L", "50")
        p = _plan(*args, "--progress", key="plan-admin")
        assert p.returncode == 0, p.stderr
        assert "the server runs this as job job_" in p.stderr and "simulating…" in p.stderr
        assert "with 50 more respondents:" in p.stdout
        out = json.loads(_plan(*args, "--json", key="plan-admin").stdout)
        jobs = httpx2.get(f"{srv.base}/v1/surveys/{s['id']}/jobs", headers=ADMIN).json()["jobs"]
        assert [j["status"] for j in jobs] == ["done", "done"]
        assert out == httpx2.get(f"{srv.base}/v1/jobs/{jobs[0]['id']}", headers=ADMIN).json()["result"]
    finally:
        srv.stop()
