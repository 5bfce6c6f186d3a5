"""Every endpoint × every kind of caller: who may call what.

Callers: anonymous, a garbage token, a respondent of the survey, a respondent of
another survey, an analyst, a moderator, an admin, a federated site, an integration key
(which may only register respondents and ask who it is; the public endpoints ignore
credentials, so they answer it like anyone). For each operation of the
OpenAPI document (the test fails if one is missing from the table) a caller outside
the allowed set must get exactly 401 (no or invalid credentials) or 403 (valid
credentials, wrong role or wrong survey), and one inside it anything but 401/403/5xx.
"""

from __future__ import annotations

import pytest

from tests.helpers.api import (
    ADMIN,
    analyst_headers,
    create_central_survey,
    create_ranking_survey,
    create_survey,
    register,
)

ANON, BAD, RESP, OTHER, ANALYST, ADMIN_, SITE = "anon", "bad", "resp", "other", "analyst", "admin", "site"
MODERATOR, INTEGRATION = "moderator", "integration"
EVERYONE = {ANON, BAD, RESP, OTHER, ANALYST, MODERATOR, ADMIN_, SITE, INTEGRATION}
READERS = {ANALYST, ADMIN_}
MODERATORS = {MODERATOR, ADMIN_}

# (method, path) → who may call it. Respondent calls are made against the respondent's own survey.
TABLE: dict[tuple[str, str], set[str]] = {
    ("post", "/v1/surveys"): {ADMIN_},
    ("get", "/v1/surveys"): READERS | {MODERATOR},
    ("get", "/v1/surveys/{survey_id}"): READERS | {MODERATOR},
    ("patch", "/v1/surveys/{survey_id}"): {ADMIN_},
    ("post", "/v1/surveys/{survey_id}/items"): {ADMIN_},
    ("get", "/v1/surveys/{survey_id}/public"): EVERYONE,
    ("get", "/v1/surveys/{survey_id}/coverage"): READERS,
    ("post", "/v1/surveys/{survey_id}/respondents"): EVERYONE,
    ("get", "/v1/surveys/{survey_id}/respondents/me"): {RESP},
    ("get", "/v1/surveys/{survey_id}/question"): {RESP},
    ("get", "/v1/surveys/{survey_id}/pairs"): {RESP},
    ("post", "/v1/surveys/{survey_id}/responses"): {RESP},
    ("post", "/v1/surveys/{survey_id}/undecided"): {RESP},
    ("post", "/v1/surveys/{survey_id}/suggestions"): {RESP},
    ("post", "/v1/surveys/{survey_id}/items/{item_id}/flag"): {RESP},
    ("get", "/v1/surveys/{survey_id}/suggestions"): MODERATORS,
    ("patch", "/v1/surveys/{survey_id}/suggestions/{suggestion_id}"): MODERATORS,
    ("post", "/v1/surveys/{survey_id}/suggestions/{suggestion_id}/approve"): MODERATORS,
    ("post", "/v1/surveys/{survey_id}/suggestions/{suggestion_id}/reject"): MODERATORS,
    ("post", "/v1/surveys/{survey_id}/suggestions/{suggestion_id}/merge"): MODERATORS,
    ("patch", "/v1/surveys/{survey_id}/items/{item_id}"): MODERATORS,
    ("get", "/v1/surveys/{survey_id}/results"): EVERYONE,
    ("get", "/v1/surveys/{survey_id}/ranking"): READERS,
    ("get", "/v1/surveys/{survey_id}/pairwise"): READERS,
    ("get", "/v1/surveys/{survey_id}/comparisons.csv"): READERS,
    ("get", "/v1/surveys/{survey_id}/rankings.csv"): READERS,
    ("get", "/v1/surveys/{survey_id}/items.csv"): READERS,
    ("get", "/v1/surveys/{survey_id}/comparisons.parquet"): READERS,
    ("get", "/v1/surveys/{survey_id}/rankings.parquet"): READERS,
    ("get", "/v1/surveys/{survey_id}/items.parquet"): READERS,
    ("post", "/v1/surveys/{survey_id}/comparisons/import"): {ADMIN_},
    ("post", "/v1/surveys/{survey_id}/rankings/import"): {ADMIN_},
    ("post", "/v1/surveys/{survey_id}/releases"): READERS,
    ("get", "/v1/surveys/{survey_id}/releases"): READERS,
    ("get", "/v1/surveys/{survey_id}/releases/{release_id}"): READERS,
    ("post", "/v1/surveys/{survey_id}/rounds"): {ADMIN_},
    ("get", "/v1/surveys/{survey_id}/rounds"): READERS,
    ("get", "/v1/surveys/{survey_id}/rounds/{round_id}"): READERS,
    ("post", "/v1/surveys/{survey_id}/rounds/{round_id}/cancel"): {ADMIN_},
    ("get", "/v1/site"): {SITE},
    ("put", "/v1/site/key"): {SITE},
    ("post", "/v1/site/contribution"): {SITE},
    ("get", "/v1/plan"): READERS,
    ("get", "/v1/surveys/{survey_id}/plan"): READERS,
    ("get", "/v1/plan/goal"): READERS,
    ("get", "/v1/surveys/{survey_id}/goal/plan"): READERS,
    ("post", "/v1/surveys/{survey_id}/jobs"): READERS,
    ("get", "/v1/surveys/{survey_id}/jobs"): READERS,
    ("get", "/v1/jobs/{job_id}"): READERS,
    ("post", "/v1/jobs"): READERS,
    ("delete", "/v1/jobs/{job_id}"): READERS,
    ("get", "/v1/whoami"): EVERYONE - {ANON, BAD},
    ("post", "/v1/keys"): {ADMIN_},
    ("get", "/v1/keys"): {ADMIN_},
    ("delete", "/v1/keys/{key_id}"): {ADMIN_},
    ("get", "/healthz"): EVERYONE,
    ("get", "/readyz"): EVERYONE,
}

BODIES = {
    ("post", "/v1/surveys"): {"title": "t", "items": ["a", "b"]},
    ("patch", "/v1/surveys/{survey_id}"): {"title": "renamed"},
    ("post", "/v1/surveys/{survey_id}/items"): {"items": ["new item"]},
    ("post", "/v1/surveys/{survey_id}/respondents"): {},
    ("post", "/v1/surveys/{survey_id}/responses"): None,  # filled per survey below
    ("post", "/v1/surveys/{survey_id}/releases"): {"method": "noisy_counts", "unit": "edge", "epsilon": 0.1},
    ("post", "/v1/surveys/{survey_id}/rounds"): {"method": "borda", "sites": ["a", "b", "c"]},
    ("put", "/v1/site/key"): {"public_key": "A" * 43},
    ("post", "/v1/site/contribution"): {"masked": [0]},
    ("post", "/v1/keys"): {"label": "x"},
    ("post", "/v1/surveys/{survey_id}/suggestions"): {"label": "A new idea"},
    ("patch", "/v1/surveys/{survey_id}/suggestions/{suggestion_id}"): {"label": "edited"},
    ("post", "/v1/surveys/{survey_id}/suggestions/{suggestion_id}/reject"): {"reason": "off topic"},
    ("post", "/v1/surveys/{survey_id}/suggestions/{suggestion_id}/merge"): {
        "item_id": "itm_aaaaaaaaaaaaaaaa"
    },
    ("patch", "/v1/surveys/{survey_id}/items/{item_id}"): {"status": "live"},
    ("post", "/v1/surveys/{survey_id}/jobs"): {"kind": "ranking"},
    ("post", "/v1/jobs"): {
        "kind": "design",
        "items": 4,
        "pairs_per_respondent": 2,
        "k": 1,
        "respondents": 10,
        "epsilon": [1.0],
        "replications": 20,
    },
}


def test_the_table_covers_every_operation(client):
    spec = client.get("/openapi.json").json()
    ops = {
        (m, p)
        for p, item in spec["paths"].items()
        for m in item
        if m in ("get", "post", "put", "patch", "delete")
    }
    assert ops == set(TABLE), {"missing": ops - set(TABLE), "stale": set(TABLE) - ops}


@pytest.fixture
def world(client):
    """A survey of each kind, respondents, an analyst, a site, and the ids the paths need."""
    pairwise = create_survey(client, respondent_budget=50)
    other = create_survey(client)
    ranking = create_ranking_survey(client)
    central = create_central_survey(client)
    rnd = client.post(
        f"/v1/surveys/{ranking['id']}/rounds",
        json={"method": "borda", "sites": ["x", "y", "z"]},
        headers=ADMIN,
    ).json()
    release = client.post(
        f"/v1/surveys/{central['id']}/releases",
        json={"method": "noisy_counts", "unit": "edge", "epsilon": 0.1},
        headers=ADMIN,
    ).json()
    key = client.post("/v1/keys", json={"label": "victim"}, headers=ADMIN).json()
    job = client.post(f"/v1/surveys/{pairwise['id']}/jobs", json={"kind": "ranking"}, headers=ADMIN).json()
    return {
        "job": job,
        "surveys": {"pairwise": pairwise, "ranking": ranking, "central": central},
        "other": other,
        "round": rnd,
        "release": release,
        "key": key,
        "analyst": analyst_headers(client),
        "moderator": analyst_headers(client, role="moderator"),
        "integration": analyst_headers(client, role="integration"),
    }


def _target(path: str) -> str:
    """Which survey an operation is exercised on."""
    if "/releases" in path:
        return "central"
    if "/rounds" in path or "/question" in path or "/rankings." in path or "/rankings/import" in path:
        return "ranking"
    return "pairwise"


def _callers(client, world, survey_id: str) -> dict[str, dict]:
    _, resp = register(client, survey_id)
    other_survey = (
        world["other"]["id"] if survey_id != world["other"]["id"] else world["surveys"]["pairwise"]["id"]
    )
    _, other = register(client, other_survey)
    return {
        ANON: {},
        BAD: {"Authorization": "Bearer key_aaaaaaaaaaaaaaaa.not-a-key"},
        RESP: resp,
        OTHER: other,
        ANALYST: world["analyst"],
        MODERATOR: world["moderator"],
        ADMIN_: ADMIN,
        SITE: {"Authorization": f"Bearer {world['round']['sites'][0]['token']}"},
        INTEGRATION: world["integration"],
    }


@pytest.mark.parametrize(("method", "path"), sorted(TABLE))
def test_who_may_call_what(client, world, method, path):
    survey = world["surveys"][_target(path)]
    sid = survey["id"]
    url = (
        path.replace("{survey_id}", sid)
        .replace("{round_id}", world["round"]["id"])
        .replace("{release_id}", world["release"]["id"])
        .replace("{key_id}", world["key"]["id"])
        .replace("{job_id}", world["job"]["id"])
        .replace("{item_id}", survey["items"][0]["id"])
        .replace("{suggestion_id}", "sug_aaaaaaaaaaaaaaaa")
    )
    if path == "/v1/plan":
        url += "?items=4&pairs_per_respondent=2&k=1&respondents=10&epsilon=1&replications=20"
    if path == "/v1/plan/goal":
        url += "?items=4&top_k=1&replications=2&max_answers=1000"
    if path.endswith("/{survey_id}/plan"):
        url += "?k=1&respondents=10&replications=20&scores=1,0,0,-1&pairs_per_respondent=2&epsilon=1"
    body = BODIES.get((method, path))
    if path.endswith("/responses"):
        a, b = survey["items"][0]["id"], survey["items"][1]["id"]
        body = {"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a}]}
    callers = _callers(client, world, sid)
    allowed = TABLE[(method, path)]
    for who, headers in callers.items():
        kwargs = {"headers": headers}
        if path.endswith("/import"):
            kwargs["content"] = (
                "respondent,item_a,item_b,winner,epsilon\n"
                if path.endswith("/comparisons/import")
                else "respondent,ranking,epsilon\n"
            )
            kwargs["headers"] = {**headers, "Content-Type": "text/csv"}
            url_ = url + "?privatized=true"
        else:
            url_ = url
            if body is not None:
                kwargs["json"] = body
        r = client.request(method.upper(), url_, **kwargs)
        if who in allowed:
            assert r.status_code not in (401, 403) and r.status_code < 500, (
                who,
                method,
                path,
                r.status_code,
                r.text,
            )
        elif who in (ANON, BAD):
            assert r.status_code == 401, (who, method, path, r.status_code)
        else:
            assert r.status_code == 403, (who, method, path, r.status_code)
