"""The service's log line per request cannot be forged or made to name a flagged item:
control characters in a path are escaped, and a flag's item id is replaced by its name."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.core.http_errors import logged_path
from app.participation import router as participation
from tests.helpers.api import ADMIN, create_survey, register


@pytest.mark.parametrize(
    ("encoded", "logged"),
    [
        ("%0A", "\\x0a"),
        ("%0D%0A", "\\x0d\\x0a"),
        ("%1B%5B31m", "\\x1b[31m"),  # a terminal escape sequence
        ("%C2%85", "\\x85"),  # NEL
        ("%E2%80%A8", "\\u2028"),  # LINE SEPARATOR
    ],
)
def test_a_control_character_in_the_path_is_escaped_in_the_log(client, caplog, encoded, logged):
    with caplog.at_level(logging.INFO, logger="privrank.access"):
        r = client.get(f"/v1/surveys/srv_x{encoded}GET%20/v1/forged%20200", headers=ADMIN)
    assert r.status_code == 404
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "privrank.access"]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"GET /v1/surveys/srv_x{logged}GET /v1/forged 200 404 ")
    assert all(ch.isprintable() for ch in lines[0])


def test_a_flag_names_no_item_and_escapes_control_characters():
    assert logged_path("/v1/surveys/srv_a/items/itm_secret/flag") == "/v1/surveys/srv_a/items/{item_id}/flag"
    assert logged_path("/v1/surveys/srv_a/items/itm_x\n/flag") == "/v1/surveys/srv_a/items/{item_id}/flag"
    assert logged_path("/a\tb\x7f") == "/a\\x09b\\x7f"


def test_a_flag_request_logs_no_item_id(client, caplog):
    survey = create_survey(client)
    item = survey["items"][0]["id"]
    _, headers = register(client, survey["id"])
    with caplog.at_level(logging.INFO, logger="privrank.access"):
        client.post(f"/v1/surveys/{survey['id']}/items/{item}/flag", headers=headers)
    text = " ".join(rec.getMessage() for rec in caplog.records)
    assert "/items/{item_id}/flag" in text and item not in text


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (PoolTimeout("QueuePool limit reached"), 503),  # the database unavailable
        (DBAPIError("UPDATE items SET flags = ?", ("itm_in_params",), Exception("boom")), 500),
        (RuntimeError("itm_in_message"), 500),
    ],
    ids=["unavailable", "database error", "unexpected"],
)
def test_a_failed_flag_logs_no_item_id(client, caplog, monkeypatch, error, status):
    """The error handlers' lines (database unavailable, database error, unexpected) name
    the path as the access line does: without the flagged item's id."""
    survey = create_survey(client)
    item = survey["items"][0]["id"]
    _, headers = register(client, survey["id"])

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(participation.svc, "flag_item", fail)
    with caplog.at_level(logging.DEBUG):
        r = client.post(f"/v1/surveys/{survey['id']}/items/{item}/flag", headers=headers)
    assert r.status_code == status
    service = [rec for rec in caplog.records if rec.name.startswith("privrank")]  # not the test's client
    text = " ".join(f"{rec.getMessage()} {rec.exc_text or ''}" for rec in service)
    assert text.count("/items/{item_id}/flag") == 2  # the error line and the access line
    assert item not in text and "itm_in_" not in text
