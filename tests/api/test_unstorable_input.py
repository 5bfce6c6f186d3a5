"""NUL and lone surrogates in paths, queries and JSON bodies (app.core.storable).

PostgreSQL text cannot hold NUL and a lone surrogate has no UTF-8 form: either one
reaching a query is a driver error. Every such request is a 404 (path) or 422 (query,
body) that repeats nothing of the input, and writes nothing. Unguarded, each of these
requests is a 500 on PostgreSQL (``PRIVRANK_TEST_DATABASE``), and those with a lone
surrogate on SQLite too; on SQLite the others answer with the NUL repeated.
"""

from __future__ import annotations

import pytest

from app.core.db.models import is_id, new_id
from tests.helpers.api import ADMIN, analyst_headers, register

#: What the client sent, as the answer could repeat it (raw, escaped or as Python's repr).
_ECHOES = ("\x00", "\\x00", "\\u0000", "%00", "\ud800", "\\ud800")


def _no_echo(r) -> None:
    assert r.headers["content-type"] == "application/json", r.text
    text = r.content.decode("utf-8", "surrogatepass")
    assert not any(e in text for e in _ECHOES), text


def _raw(client, method: str, url: str, body: str, headers: dict):
    """A JSON body as written (httpx cannot encode a lone surrogate)."""
    return client.request(
        method, url, content=body.encode("ascii"), headers={**headers, "Content-Type": "application/json"}
    )


def _suggestion_survey(client) -> tuple[str, str, str, dict]:
    """A survey with one published pending suggestion: (survey id, its id, an item id, a
    respondent's headers)."""
    body = {
        "title": "ideas",
        "items": ["Parks", "Libraries", "Buses"],
        "suggestions": {"enabled": True, "per_respondent": 3, "moderation": "before", "batch": 2},
    }
    s = client.post("/v1/surveys", json=body, headers=ADMIN).json()
    sid = s["id"]
    _, one = register(client, sid)
    _, two = register(client, sid)
    for h, label in ((one, "Tree planting"), (two, "Street lights")):
        r = client.post(f"/v1/surveys/{sid}/suggestions", json={"label": label}, headers=h)
        assert r.status_code == 202, r.text
    queue = client.get(f"/v1/surveys/{sid}/suggestions", headers=ADMIN).json()["suggestions"]
    assert len(queue) == 2
    return sid, queue[0]["id"], s["items"][0]["id"], one


def test_nul_in_a_path_is_not_found_for_every_role(client, unchanged):
    sid, sug, _, respondent = _suggestion_survey(client)
    analyst = analyst_headers(client)
    moderator = analyst_headers(client, role="moderator")
    calls = [
        ("POST", f"/v1/surveys/{sid}/items/%00/flag", respondent, None),
        ("POST", f"/v1/surveys/{sid}/items/itm_%00/flag", respondent, None),
        ("GET", "/v1/jobs/%00", analyst, None),
        ("DELETE", "/v1/jobs/%00", analyst, None),
        ("GET", "/v1/jobs/job_%00", analyst, None),
        ("POST", f"/v1/surveys/{sid}/suggestions/%00/approve", moderator, {}),
        ("POST", f"/v1/surveys/{sid}/suggestions/%00/reject", moderator, {"reason": "no"}),
        ("POST", f"/v1/surveys/{sid}/suggestions/%00/merge", moderator, {"item_id": new_id("itm")}),
        ("PATCH", f"/v1/surveys/{sid}/suggestions/%00", moderator, {"label": "x"}),
        ("PATCH", f"/v1/surveys/{sid}/items/%00", moderator, {"status": "hidden"}),
        ("GET", f"/v1/surveys/{sid}/releases/rel_%00", analyst, None),
        ("DELETE", "/v1/keys/key_%00", ADMIN, None),
    ]
    with unchanged():
        for method, url, headers, body in calls:
            r = client.request(method, url, headers=headers, json=body)
            assert r.status_code == 404, (method, url, r.status_code, r.text)
            _no_echo(r)
    # The suggestion is still there to decide: nothing above touched it.
    assert (
        client.post(
            f"/v1/surveys/{sid}/suggestions/{sug}/reject", json={"reason": "no"}, headers=moderator
        ).status_code
        == 200
    )


def test_ids_not_shaped_like_ids_are_not_found(client, unchanged):
    sid, _, item, respondent = _suggestion_survey(client)
    moderator = analyst_headers(client, role="moderator")
    with unchanged():
        for bad in ("itm_", item.upper(), item + "a", "sug" + item[3:], "x" * 40):
            r = client.post(f"/v1/surveys/{sid}/items/{bad}/flag", headers=respondent)
            assert r.status_code == 404, (bad, r.text)
            r = client.patch(f"/v1/surveys/{sid}/items/{bad}", json={"status": "hidden"}, headers=moderator)
            assert r.status_code == 404, (bad, r.text)
    assert is_id(item, "itm") and not is_id(item, "sug") and not is_id(item[:-1], "itm")


def test_nul_in_a_json_body_is_422(client, unchanged):
    sid, sug, _, _ = _suggestion_survey(client)
    moderator = analyst_headers(client, role="moderator")
    url = f"/v1/surveys/{sid}/suggestions/{sug}/merge"
    with unchanged():
        r = _raw(client, "POST", url, '{"item_id": "itm_\\u0000"}', moderator)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "item_id"]
        _no_echo(r)
        # A merge into an id of the right shape but naming no item: 404, the suggestion stays.
        r = client.post(url, json={"item_id": new_id("itm")}, headers=moderator)
        assert r.status_code == 404, r.text
    assert (
        client.post(url.replace("/merge", "/reject"), json={"reason": "no"}, headers=moderator).status_code
        == 200
    )


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "\\u0000", "a\\ud83d", "\\ude00b"])
def test_lone_surrogates_and_nul_in_strings_are_422(client, unchanged, escape):
    key = client.post("/v1/keys", json={"label": "crm", "role": "integration"}, headers=ADMIN).json()
    integration = {"Authorization": f"Bearer {key['key']}"}
    sid = client.post("/v1/surveys", json={"title": "t", "items": ["a", "b"]}, headers=ADMIN).json()["id"]
    with unchanged():
        r = _raw(
            client, "POST", f"/v1/surveys/{sid}/respondents", f'{{"external_id": "{escape}"}}', integration
        )
        assert r.status_code == 422, r.text
        _no_echo(r)
        r = _raw(client, "POST", "/v1/keys", f'{{"label": "{escape}", "role": "analyst"}}', ADMIN)
        assert r.status_code == 422, r.text
        _no_echo(r)
        # Anywhere in the body: an object key, deep in a list.
        body = f'{{"title": "t", "items": ["a", "b"], "item_translations": {{"fr": ["x", "{escape}"]}}}}'
        r = _raw(client, "POST", "/v1/surveys", body, ADMIN)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "item_translations", "fr", 1]
        r = _raw(
            client, "POST", "/v1/surveys", f'{{"title": "t", "items": ["a", "b"], "{escape}": 1}}', ADMIN
        )
        assert r.status_code == 422, r.text
        _no_echo(r)


def test_a_surrogate_pair_is_one_character_and_stored(client):
    # "\ud83d\ude00" is the JSON spelling of one emoji: not a lone surrogate.
    r = _raw(client, "POST", "/v1/keys", '{"label": "smile \\ud83d\\ude00", "role": "analyst"}', ADMIN)
    assert r.status_code == 201, r.text
    assert r.json()["label"] == "smile \U0001f600"


def test_nul_in_a_query_is_422(client, unchanged):
    sid, _, _, _ = _suggestion_survey(client)
    moderator = analyst_headers(client, role="moderator")
    with unchanged():
        for query, where in (
            ("status=%00", "status"),
            ("status=pending&x%00=1", "<parameter>"),
            ("lang=%00", "lang"),
        ):
            r = client.get(f"/v1/surveys/{sid}/suggestions?{query}", headers=moderator)
            assert r.status_code == 422, (query, r.text)
            assert r.json()["detail"][0]["loc"] == ["query", where], r.text
            _no_echo(r)
        r = client.get(f"/v1/surveys/{sid}/public?lang=fr%00")
        assert r.status_code == 422, r.text
        _no_echo(r)
