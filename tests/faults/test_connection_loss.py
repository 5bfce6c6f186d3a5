"""PostgreSQL stops at a chosen step of a submission: 503, nothing stored, and a retry
with the same Idempotency-Key stores the batch once.

The load tests hit these steps only by chance; here the cluster is stopped (``pg_ctl
stop -m fast``) from inside the request, at each database step of
``submit_responses`` in turn, and started again before the retry. After the commit,
losing the database must not turn a stored batch into an error: the answer is the
201, and the retry is answered from the idempotency record.
"""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from app.core.db.migrate import upgrade
from app.respondents import ingestion, spending
from tests.helpers.api import make_app
from tests.helpers.faults import ADMIN, ADMIN_KEY, PrivatePostgres

#: The steps of a submission, each after the write transaction began: the statement that
#: takes the survey's row lock, looks the Idempotency-Key up and spends the budget, the
#: statement storing the comparisons, pending batch and idempotency record, the COMMIT
#: (after that statement), and after the COMMIT (the request's last log line).
STEPS = ("spend", "store", "commit", "after_commit")


@pytest.fixture(scope="module")
def service():
    pg = PrivatePostgres()
    try:
        pg.start()
        url = pg.create_database("privrank")
        upgrade(url)
        app = make_app(url, ADMIN_KEY)
        with TestClient(app, raise_server_exceptions=False) as client:
            yield pg, client
        app.state.engine.dispose()
    finally:
        pg.cleanup()


def _stop_at(monkeypatch, step: str, pg: PrivatePostgres) -> None:
    """Stop PostgreSQL when the submission reaches ``step``."""

    def outage() -> None:
        if pg.running:
            pg.stop("fast")

    def before(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            outage()
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    if step == "spend":
        before(spending, "_spend_statement")
    elif step == "store":
        before(ingestion, "_store_batch")
    elif step == "commit":
        original_store = ingestion._store_batch

        def store(*args, **kwargs):
            original_store(*args, **kwargs)
            outage()

        monkeypatch.setattr(ingestion, "_store_batch", store)
    elif step == "after_commit":

        class Log:
            def info(self, *args, **kwargs):
                outage()

        monkeypatch.setattr(ingestion, "log", Log())


@pytest.mark.parametrize("step", STEPS)
def test_database_lost_at_a_step_of_a_submission(service, monkeypatch, step):
    pg, client = service
    if not pg.running:  # an earlier case failed with the cluster down
        pg.start()
    survey = client.post("/v1/surveys", json={"title": step, "items": list("ABCDE")}, headers=ADMIN).json()
    sid = survey["id"]
    ids = [item["id"] for item in survey["items"]]
    reg = client.post(f"/v1/surveys/{sid}/respondents", json={}).json()
    body = {
        "privatized": False,
        "comparisons": [{"a": ids[0], "b": ids[k], "winner": ids[k]} for k in (1, 2, 3)],
    }
    headers = {"Authorization": f"Bearer {reg['token']}", "Idempotency-Key": uuid.uuid4().hex}

    with monkeypatch.context() as patch:
        _stop_at(patch, step, pg)
        first = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)
    assert not pg.running  # the fault was injected
    if step == "after_commit":
        assert first.status_code == 201, first.text  # stored: the lost connection changes nothing
    else:
        assert first.status_code == 503, first.text
        assert first.json() == {"detail": "database unavailable, retry later"}
        assert first.headers["Retry-After"] == "1"
    # While the database is down, the retry fails fast too; then it comes back.
    assert client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers).status_code == 503
    pg.start()

    retry = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)
    assert retry.status_code == 201, retry.text
    assert retry.json()["accepted"] == 3
    # Replayed when the first attempt had committed, stored now otherwise.
    assert (retry.headers.get("Idempotent-Replayed") == "true") == (step == "after_commit")
    again = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)
    assert again.status_code == 201
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == retry.json()

    with pg.connect("privrank") as conn:
        (rows,) = conn.execute(
            "SELECT count(*) FROM comparisons WHERE respondent_id = %s", (reg["respondent_id"],)
        ).fetchone()
        (counter, spent) = conn.execute(
            "SELECT n_comparisons, epsilon_spent FROM respondents WHERE id = %s", (reg["respondent_id"],)
        ).fetchone()
    assert rows == 3
    assert counter == 3
    assert spent == pytest.approx(3 * reg["epsilon"])
