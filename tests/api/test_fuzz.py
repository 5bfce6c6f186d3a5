"""Schemathesis against the service's own OpenAPI document: no 5xx, no response that breaks the schema.

Every operation is called with generated data (valid and invalid), authenticated as
the caller it is meant for (admin or analyst, the survey's respondent, a federated
site) and aimed at real surveys, rounds and releases so that the generated bodies
reach the service code. The checks: no server error; every status code, content type,
header and body conforms to the document; the Allow header of 405s; resources stay
available.

Left out on purpose: `positive_data_acceptance` and `negative_data_rejection`. The
service enforces rules JSON Schema cannot state (unique labels, ε within the survey's
bounds, cross-field privacy settings, items of *this* survey), so schema-valid
requests are rightly refused with 4xx, and it ignores unknown query parameters.

``PRIVRANK_FUZZ_EXAMPLES`` sets the examples per operation (default 30; the long run
in the README uses 500).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from app.db.migrate import upgrade
from tests.helpers.api import make_app

EXAMPLES = int(os.environ.get("PRIVRANK_FUZZ_EXAMPLES", "30"))
ADMIN = {"Authorization": "Bearer fuzz-admin"}
#: The fuzzed service's database: nothing is created on import (the engine connects
#: lazily); the ``world`` fixture makes the directory and the schema, and removes both.
_DIR = Path(tempfile.gettempdir()) / f"privrank-fuzz-{os.getpid()}"
APP = make_app(f"sqlite:///{_DIR / 'fuzz.db'}", "fuzz-admin")
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)  # in process: no database involved


@pytest.fixture(scope="module")
def world():
    _DIR.mkdir(parents=True, exist_ok=True)
    try:
        upgrade(str(APP.state.settings.database_url))
        yield _world(APP)
    finally:
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
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        excluded_checks=[positive_data_acceptance, negative_data_rejection],
    )
