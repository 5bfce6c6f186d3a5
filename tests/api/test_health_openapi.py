"""Probes and the OpenAPI contract."""

from __future__ import annotations

from tests.helpers.api import ADMIN

CONTRACT = {
    ("post", "/v1/surveys"),
    ("get", "/v1/surveys/{survey_id}"),
    ("patch", "/v1/surveys/{survey_id}"),
    ("post", "/v1/surveys/{survey_id}/respondents"),
    ("get", "/v1/surveys/{survey_id}/pairs"),
    ("post", "/v1/surveys/{survey_id}/responses"),
    ("get", "/v1/surveys/{survey_id}/ranking"),
    ("get", "/v1/surveys/{survey_id}/comparisons.csv"),
    ("post", "/v1/keys"),
    ("get", "/healthz"),
    ("get", "/readyz"),
}


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json() == {"status": "ready", "database": "ok"}


def test_readiness_reports_an_unreachable_database(tmp_path):
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.main import create_app

    broken = create_app(
        Settings(DATABASE_URL=f"sqlite:///{tmp_path}/missing/dir/x.db", PRIVRANK_ADMIN_KEY="k")
    )
    with TestClient(broken) as c:
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json()["database"] == "unreachable"
        assert c.get("/healthz").status_code == 200
        r = c.get("/v1/surveys", headers={"Authorization": "Bearer k"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"


def test_openapi_documents_the_whole_contract_with_examples(client):
    spec = client.get("/openapi.json").json()
    ops = {(method, path) for path, item in spec["paths"].items() for method in item}
    assert ops >= CONTRACT
    schemas = spec["components"]["schemas"]
    for name in (
        "SurveyCreate",
        "ResponsesIn",
        "RespondentCreate",
        "SurveyUpdate",
        "ItemsAdd",
        "KeyCreate",
        "SurveyOut",
        "RespondentCreated",
        "PairsOut",
        "ResponsesOut",
        "RankingOut",
        "KeyCreated",
        "RespondentStatus",
        "ImportOut",
    ):
        assert schemas[name].get("examples"), name
    responses = spec["paths"]["/v1/surveys/{survey_id}/responses"]["post"]
    assert {"201", "401", "403", "404", "409", "422"} <= set(responses["responses"])
    params = {p["name"] for p in responses["parameters"]}
    assert "Idempotency-Key" in params
    ranking = spec["paths"]["/v1/surveys/{survey_id}/ranking"]["get"]
    assert {p["name"] for p in ranking["parameters"]} >= {"method", "lambda", "k"}
    assert "bearer" in str(spec["components"]["securitySchemes"]).lower()


def test_cors_is_opt_in(tmp_path, database_url):
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.main import create_app

    app = create_app(
        Settings(
            DATABASE_URL=database_url,
            PRIVRANK_ADMIN_KEY="k",
            PRIVRANK_CORS_ORIGINS="https://survey.example.org",
        )
    )
    with TestClient(app) as c:
        r = c.options(
            "/v1/surveys/x/responses",
            headers={
                "Origin": "https://survey.example.org",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,idempotency-key,content-type",
            },
        )
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://survey.example.org"
        r = c.options(
            "/v1/surveys", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        )
        assert "access-control-allow-origin" not in r.headers
    app.state.engine.dispose()


def test_unknown_route_is_json_404(client):
    r = client.get("/v1/nothing", headers=ADMIN)
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}


def test_pages_are_served_at_the_root(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "privrank" in r.text and 'href="/docs"' in r.text


def test_every_documented_example_is_valid_for_its_own_schema():
    """Examples are part of the contract: each must parse as the model it illustrates."""
    import importlib.util
    import inspect
    import pkgutil

    from pydantic import BaseModel

    import app

    # The request bodies: each domain's schemas module, and the shared one.
    names = ["app.core.schemas"] + [
        f"app.{m.name}.schemas"
        for m in pkgutil.iter_modules(app.__path__)
        if m.ispkg and importlib.util.find_spec(f"app.{m.name}.schemas") is not None
    ]
    assert len(names) >= 8
    checked = 0
    for name in names:
        schemas = importlib.import_module(name)
        for _name, model in inspect.getmembers(schemas, inspect.isclass):
            if not issubclass(model, BaseModel) or model.__module__ != name:
                continue
            extra = model.model_config.get("json_schema_extra") or {}
            for example in extra.get("examples", []):
                model.model_validate(example)
                checked += 1
    assert checked >= 15
