"""Pilot scores are checked where they arrive, and a library's refusal never reaches a client.

``GET /v1/plan``, ``GET /v1/plan/goal``, ``GET /v1/surveys/{sid}/plan`` and their jobs
take pilot scores: NaN, infinities, or a spread beyond ±50 log-odds around their mean
are a 422 with a sentence before anything runs or is stored as a job (PostgreSQL's
``jsonb`` cannot hold NaN). A ``ValueError`` raised inside NumPy or SciPy (``LinAlgError``)
is answered with a generic sentence, the same in a job's ``error``
(:func:`app.core.errors.invalid_from`).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.linalg

from app.core.errors import COMPUTATION_FAILED, Invalid, invalid_from
from app.planning import service as planning
from tests.helpers.api import ADMIN, import_survey

DESIGN = "/v1/plan?items=3&pairs_per_respondent=1&k=1&respondents=20&epsilon=1&replications=20"
BOUND = "within ±50 of their mean"
NOT_FINITE = "scores must be finite numbers"


def _json(client, url: str, body: str):
    """A body as written: Python's JSON writer spells NaN, which no JSON writer should."""
    return client.post(url, content=body.encode(), headers={**ADMIN, "Content-Type": "application/json"})


def _wait(client, job_id: str, seconds: float = 60.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}", headers=ADMIN).json()
        if job["status"] in ("done", "failed", "cancelled"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def _answered_survey(client) -> str:
    """3 items, 6 respondents × 2 answers."""
    return import_survey(client, 3, 6, 2, seed=5)


@pytest.mark.parametrize(
    ("scores", "message"),
    [("nan,0,1", NOT_FINITE), ("0,-inf,1", NOT_FINITE), ("1e308,0,-1e308", BOUND), ("51,0,-51", BOUND)],
)
def test_bad_pilot_scores_are_refused_before_a_plan_runs_or_a_job_is_stored(
    client, inline, unchanged, scores, message
):
    sid = _answered_survey(client)
    inline(0)  # every plan would be a job: the refusal comes first
    urls = [
        f"{DESIGN}&scores={scores}",
        f"/v1/plan/goal?items=3&top_k=1&scores={scores}",
        f"/v1/surveys/{sid}/plan?k=1&pairs_per_respondent=2&epsilon=1&replications=20&scores={scores}",
    ]
    with unchanged():
        for url in urls:
            r = client.get(url, headers=ADMIN)
            assert r.status_code == 422, (url, r.text)
            assert message in r.json()["detail"], (url, r.text)


@pytest.mark.parametrize("scores", ["[NaN, 0, 1]", "[0, Infinity, 1]", "[1e308, 0, -1e308]"])
def test_bad_pilot_scores_in_a_job_body_store_no_job(client, unchanged, scores):
    sid = _answered_survey(client)
    design = '{"kind": "design", "items": 3, "pairs_per_respondent": 1, "k": 1, "respondents": 20, '
    design += f'"epsilon": [1], "replications": 20, "scores": {scores}}}'
    survey = f'{{"kind": "plan", "k": 1, "pairs_per_respondent": 2, "epsilon": 1, "scores": {scores}}}'
    with unchanged():
        for url, body in (("/v1/jobs", design), (f"/v1/surveys/{sid}/jobs", survey)):
            r = _json(client, url, body)
            assert r.status_code == 422, (url, r.text)
            assert "finite" in r.text or BOUND in r.text, r.text


def test_scores_within_the_bound_are_planned(client):
    r = client.get(f"{DESIGN}&scores=50,0,-50", headers=ADMIN)
    assert r.status_code == 200, r.text


def _linalg_error(*args, **kwargs):
    """What SciPy raises on a matrix that is not positive definite (a LinAlgError)."""
    scipy.linalg.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))


def test_a_library_error_never_reaches_a_response_or_a_job(client, inline, monkeypatch):
    monkeypatch.setattr(planning, "plan", _linalg_error)
    monkeypatch.setattr(planning, "plan_survey", _linalg_error)
    sid = _answered_survey(client)
    survey_plan = (
        f"/v1/surveys/{sid}/plan?k=1&pairs_per_respondent=2&epsilon=1&replications=20&respondents=10"
    )
    for url in (DESIGN, survey_plan):
        r = client.get(url, headers=ADMIN)
        assert r.status_code == 422 and r.json() == {"detail": COMPUTATION_FAILED}, r.text
    inline(0)
    for url in (DESIGN, survey_plan):
        r = client.get(url, headers=ADMIN)
        assert r.status_code == 202, r.text
        job = _wait(client, r.json()["id"])
        assert job["status"] == "failed" and job["error"] == COMPUTATION_FAILED, job


def test_only_the_projects_own_messages_are_passed_on():
    with pytest.raises(ValueError) as own:
        planning.pilot_scores([np.nan])
    assert str(invalid_from(own.value)) == "scores must be finite numbers (not NaN or infinite)"
    with pytest.raises(np.linalg.LinAlgError) as scipy_error:
        _linalg_error()
    assert "leading minor" in str(scipy_error.value)
    refused = invalid_from(scipy_error.value)
    assert isinstance(refused, Invalid) and refused.detail == COMPUTATION_FAILED
    with pytest.raises(ValueError) as other:
        np.zeros(2).reshape(3)
    assert invalid_from(other.value).detail == COMPUTATION_FAILED


@pytest.mark.parametrize(
    ("query", "model", "spread", "gap", "words"),
    [
        ("", "uniform", 2.0, None, "drawn at random between −2 and 2"),
        ("&spread=1.5", "uniform", 1.5, None, "drawn at random between −1.5 and 1.5"),
        ("&gap=0.5", "even", None, 0.5, "evenly spaced, 0.5 apart"),
        ("&scores=0,1,2", "pilot", None, None, "equal to the pilot scores given"),
    ],
)
def test_a_plan_names_its_true_score_model_by_code(client, query, model, spread, gap, words):
    """Beside the assumption in words, the model as a code with its number, for a client that
    words the assumption in its own language (the dashboard)."""
    r = client.get(DESIGN + query, headers=ADMIN)
    assert r.status_code == 200, r.text
    plan = r.json()["plan"]
    assert (plan["score_model"], plan["spread"], plan["gap"]) == (model, spread, gap)
    assert words in plan["assumption"]
