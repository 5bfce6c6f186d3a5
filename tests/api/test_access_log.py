"""The service's log line per request cannot be forged or made to name a flagged item:
control characters in a path are escaped, and a flag's item id is replaced by its name."""

from __future__ import annotations

import logging

import pytest

from app.main import logged_path
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
