"""Schemathesis against the service's own OpenAPI document: no 5xx, no response that breaks the schema.

Every operation is called with generated data (valid and invalid), authenticated as
the caller it is meant for (admin or analyst, the survey's respondent, a federated
site) and aimed at real surveys, rounds and releases so that the generated bodies
reach the service code. The checks: no server error; every status code, content type,
header and body conforms to the document; the Allow header of 405s; resources stay
available.

One 5xx is the document's own: a plan, analysis or job that outruns its time budget
answers 503 with Retry-After. The fuzzed service's budgets are a second
(``PRIVRANK_ANALYSIS_SECONDS``, ``PRIVRANK_JOB_SECONDS``), so that no example computes
for longer (a goal plan without ``max_answers`` is sized to fill its budget); on a
loaded machine such a plan can outrun it, and that 503 (saying "time budget", with
Retry-After) is accepted. Any other 5xx fails.

Left out on purpose: `positive_data_acceptance` and `negative_data_rejection`. The
service enforces rules JSON Schema cannot state (unique labels, ε within the survey's
bounds, cross-field privacy settings, items of *this* survey), so schema-valid
requests are rightly refused with 4xx, and it ignores unknown query parameters.

Each operation gets Schemathesis's coverage examples (boundary values, missing and
mistyped fields: about 3,300 in all, the same every run, up to ~400 for an operation
with many parameters), then
``PRIVRANK_FUZZ_EXAMPLES`` generated ones: 10 by default (the coverage examples are
then two thirds of the module's time), ``PRIVRANK_FUZZ_EXAMPLES=30 .venv/bin/pytest
tests/api/test_fuzz.py`` for a wider search and 500 for the long run. The document is
the application's own ``openapi()``, read without starting the application (it starts
at the first call).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, not_a_server_error, positive_data_acceptance

from app.core.db.migrate import upgrade
from tests.helpers.api import make_app

EXAMPLES = int(os.environ.get("PRIVRANK_FUZZ_EXAMPLES", "10"))
ADMIN = {"Authorization": "Bearer fuzz-admin"}
#: The fuzzed service's database: nothing is created on import (the engine connects
#: lazily); the ``world`` fixture makes the directory and the schema, and removes both.
_DIR = Path(tempfile.gettempdir()) / f"privrank-fuzz-{os.getpid()}"
#: Time budgets of a second: a generated plan, analysis or job costs at most that.
BUDGETS = {"PRIVRANK_ANALYSIS_SECONDS": 1, "PRIVRANK_JOB_SECONDS": 1}
APP = make_app(f"sqlite:///{_DIR / 'fuzz.db'}", "fuzz-admin", **BUDGETS)
#: The document GET /openapi.json serves, read in process (the application starts at the first call).
schema = schemathesis.openapi.from_dict(json.loads(json.dumps(APP.openapi())))
schema.app = APP


@pytest.fixture(scope="module")
def world():
    _DIR.mkdir(parents=True, exist_ok=True)
    try:
        upgrade(str(APP.state.settings.database_url))
        yield _world(APP)
    finally:
        APP.state.jobs.close()  # the jobs the examples queued stop here, not at the process's exit
        APP.state.engine.dispose()
        shutil.rmtree(_DIR, ignore_errors=True)


def _world(app) -> dict:
    with TestClient(app) as c:
        pairwise = c.post(
            "/v1/surveys", json={"title": "p", "items": ["a", "b", "c", "d"]}, headers=ADMIN
        ).json()
        ranking = c.post(
            "/v1/surveys", json={"title": "r", "kind": "ranking", "items": ["a", "b", "c"]}, headers=ADMIN
        ).json()
        central = c.post(
            "/v1/surveys",
            json={
                "title": "c",
                "items": ["a", "b", "c"],
                "privacy": {"model": "central", "total_budget": 100, "max_comparisons_per_respondent": 3},
            },
            headers=ADMIN,
        ).json()
        resp = {
            kind: c.post(f"/v1/surveys/{s['id']}/respondents", json={}).json()["token"]
            for kind, s in (("pairwise", pairwise), ("ranking", ranking), ("central", central))
        }
        rnd = c.post(
            f"/v1/surveys/{ranking['id']}/rounds",
            json={"method": "borda", "sites": ["x", "y", "z"]},
            headers=ADMIN,
        ).json()
        release = c.post(
            f"/v1/surveys/{central['id']}/releases",
            json={"method": "noisy_counts", "unit": "edge", "epsilon": 0.1},
            headers=ADMIN,
        ).json()
        key = c.post("/v1/keys", json={"label": "fuzzed"}, headers=ADMIN).json()
    return {
        "survey": {"pairwise": pairwise["id"], "ranking": ranking["id"], "central": central["id"]},
        "respondent": resp,
        "site": rnd["sites"][0]["token"],
        "round": rnd["id"],
        "release": release["id"],
        "key": key["id"],
    }


def _kind(path: str) -> str:
    if "/releases" in path:
        return "central"
    if "/rounds" in path or "/question" in path or "/rankings.csv" in path:
        return "ranking"
    return "pairwise"


_RESPONDENT_PATHS = ("/pairs", "/responses", "/question", "/respondents/me")


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_server_errors_and_no_schema_violations(case, world):
    path = case.operation.path
    kind = _kind(path)
    params = case.path_parameters or {}
    for name, value in (
        ("survey_id", world["survey"][kind]),
        ("round_id", world["round"]),
        ("release_id", world["release"]),
        ("key_id", world["key"]),
    ):
        if name in params:
            params[name] = value
    if path.startswith("/v1/site"):
        token = world["site"]
    elif path.endswith(_RESPONDENT_PATHS):
        token = world["respondent"][kind]
    else:
        token = "fuzz-admin"
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        excluded_checks=[positive_data_acceptance, negative_data_rejection, not_a_server_error],
    )
    if response.status_code >= 500:  # only the documented 503 of a computation out of its time budget
        body = response.content.decode(errors="replace")
        assert response.status_code == 503 and "time budget" in body, (response.status_code, body)
        assert "retry-after" in response.headers, response.headers
