"""No raw answer, token or key in any log line.

A live ``privrank serve`` (two workers, most verbose log level, access log on via
uvicorn's own logger) goes through every kind of call that carries a secret or an
answer — success and failure paths: registrations, true answers randomized on
arrival, client-privatized answers, repeated pairs, malformed answers, bad and
revoked credentials, a central survey's true answers, an import, a release, a
ranking question — and its whole output is then searched for every secret it saw.

What counts as a raw answer in a log: the answer's item ids (an answer is a pair of
item ids and a winner id; with no item id in the logs no answer can be read from
them), the ranking a respondent submitted, or a ``winner`` field.
"""

from __future__ import annotations

import uuid

import httpx2
import pytest

from tests.helpers.live import LiveServer

ADMIN = "log-admin-" + uuid.uuid4().hex


def _secrets_in(output: str, secrets: dict[str, str]) -> list[str]:
    return [f"{name} ({value[:12]}…)" for name, value in secrets.items() if value and value in output]


@pytest.mark.slow
def test_no_answer_token_or_key_reaches_the_logs(tmp_path):
    server = LiveServer(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path}/logs.db",
            "PRIVRANK_ADMIN_KEY": ADMIN,
            "PRIVRANK_LOG_LEVEL": "debug",
            "PRIVRANK_ACCESS_LOG": "1",
            # Rate limits on: their 429s are logged paths too.
            "PRIVRANK_REGISTER_PER_MINUTE": "6",
            "PRIVRANK_AUTH_FAILURES_PER_MINUTE": "3",
        },
        workers=2,
    )
    secrets: dict[str, str] = {"admin key": ADMIN}
    admin = {"Authorization": f"Bearer {ADMIN}"}
    try:
        c = httpx2.Client(base_url=server.base, timeout=30)
        local = c.post(
            "/v1/surveys", json={"title": "logs", "items": ["A", "B", "C", "D"]}, headers=admin
        ).json()
        central = c.post(
            "/v1/surveys",
            json={
                "title": "logs central",
                "items": ["E", "F", "G"],
                "privacy": {"model": "central", "total_budget": 3.0, "max_comparisons_per_respondent": 3},
            },
            headers=admin,
        ).json()
        ranking = c.post(
            "/v1/surveys",
            json={"title": "logs ranking", "kind": "ranking", "items": ["H", "I", "J", "K"]},
            headers=admin,
        ).json()
        for s in (local, central, ranking):
            for it in s["items"]:
                secrets[f"item id {it['label']}"] = it["id"]
        key = c.post("/v1/keys", json={"label": "analysts"}, headers=admin).json()
        secrets["analyst key"] = key["key"]
        analyst = {"Authorization": f"Bearer {key['key']}"}

        ids = [it["id"] for it in local["items"]]
        tokens = []
        for _ in range(3):
            r = c.post(f"/v1/surveys/{local['id']}/respondents", json={"epsilon": 1.0})
            assert r.status_code == 201
            tokens.append(r.json()["token"])
        for n, t in enumerate(tokens):
            secrets[f"respondent token {n}"] = t
        bearer = [{"Authorization": f"Bearer {t}"} for t in tokens]
        true_answers = {
            "privatized": False,
            "comparisons": [
                {"a": ids[0], "b": ids[1], "winner": ids[0]},
                {"a": ids[2], "b": ids[3], "winner": ids[3]},
            ],
        }
        idem = "idem-" + uuid.uuid4().hex
        secrets["idempotency key"] = idem
        # the first time, the same key again (a replay), then a repeated pair (409 naming the
        # pair to its owner only)
        for _ in range(2):
            r = c.post(
                f"/v1/surveys/{local['id']}/responses",
                json=true_answers,
                headers={**bearer[0], "Idempotency-Key": idem},
            )
            assert r.status_code == 201
        assert (
            c.post(f"/v1/surveys/{local['id']}/responses", json=true_answers, headers=bearer[0]).status_code
            == 409
        )
        # client-privatized answers, and malformed ones (winner not in the pair, unknown item, bad JSON)
        privatized = {
            "privatized": True,
            "epsilon": 1.0,
            "comparisons": [{"a": ids[1], "b": ids[2], "winner": ids[2]}],
        }
        assert (
            c.post(f"/v1/surveys/{local['id']}/responses", json=privatized, headers=bearer[1]).status_code
            == 201
        )
        bad_winner = {"privatized": False, "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[2]}]}
        assert (
            c.post(f"/v1/surveys/{local['id']}/responses", json=bad_winner, headers=bearer[2]).status_code
            == 422
        )
        unknown = {
            "privatized": False,
            "comparisons": [{"a": ids[0], "b": "itm_secretunknown", "winner": ids[0]}],
        }
        secrets["unknown item id"] = "itm_secretunknown"
        assert c.post(
            f"/v1/surveys/{local['id']}/responses", json=unknown, headers=bearer[2]
        ).status_code in (404, 422)
        raw = (
            f'{{"privatized": false, "comparisons": [{{"a": "{ids[0]}", "b": "{ids[3]}", "winner": "{ids[0]}"'
        )
        r = c.post(
            f"/v1/surveys/{local['id']}/responses",
            content=raw,
            headers={**bearer[2], "Content-Type": "application/json"},
        )
        assert r.status_code == 422
        # the respondent's own views
        assert c.get(f"/v1/surveys/{local['id']}/respondents/me", headers=bearer[0]).status_code == 200
        assert c.get(f"/v1/surveys/{local['id']}/pairs", headers=bearer[1]).status_code == 200
        # central survey: true answers stored, release against the budget
        eids = [it["id"] for it in central["items"]]
        ct = c.post(f"/v1/surveys/{central['id']}/respondents", json={}).json()["token"]
        secrets["central respondent token"] = ct
        body = {
            "privatized": False,
            "comparisons": [
                {"a": eids[0], "b": eids[1], "winner": eids[1]},
                {"a": eids[1], "b": eids[2], "winner": eids[2]},
            ],
        }
        assert (
            c.post(
                f"/v1/surveys/{central['id']}/responses", json=body, headers={"Authorization": f"Bearer {ct}"}
            ).status_code
            == 201
        )
        rel = c.post(
            f"/v1/surveys/{central['id']}/releases",
            json={"method": "noisy_counts", "unit": "edge", "epsilon": 1.0},
            headers=analyst,
        )
        assert rel.status_code in (201, 409), rel.text

        # ranking survey: a submitted ranking
        rids = [it["id"] for it in ranking["items"]]
        rt = c.post(f"/v1/surveys/{ranking['id']}/respondents", json={"epsilon": 2.0}).json()["token"]
        secrets["ranking respondent token"] = rt
        order = [rids[2], rids[0], rids[3], rids[1]]
        secrets["submitted ranking"] = ",".join(order)
        r = c.post(
            f"/v1/surveys/{ranking['id']}/responses",
            json={"privatized": False, "ranking": order},
            headers={"Authorization": f"Bearer {rt}"},
        )
        assert r.status_code == 201, r.text

        # analysts read results; an import through the admin; a revoked key
        assert c.get(f"/v1/surveys/{local['id']}/ranking", headers=analyst).status_code == 200
        csv = "respondent,item_a,item_b,winner,epsilon\np1,A,B,A,1.0\np1,C,D,D,1.0\n"
        r = c.post(
            f"/v1/surveys/{local['id']}/comparisons/import?privatized=false",
            content=csv,
            headers={**admin, "Content-Type": "text/csv"},
        )
        assert r.status_code in (200, 201), r.text
        assert c.delete(f"/v1/keys/{key['id']}", headers=admin).status_code in (200, 204)
        assert c.get(f"/v1/surveys/{local['id']}/ranking", headers=analyst).status_code in (401, 429)
        # bad credentials: a forged token close to a real one, a token of another survey, then 429s
        forged = tokens[0][:-4] + "AAAA"
        secrets["forged token"] = forged
        for _ in range(5):
            c.get(f"/v1/surveys/{local['id']}/respondents/me", headers={"Authorization": f"Bearer {forged}"})
        assert c.get(f"/v1/surveys/{ranking['id']}/question", headers=bearer[0]).status_code in (
            401,
            403,
            404,
            429,
        )

        c.close()
    finally:
        output = server.stop()

    assert '"POST /v1/surveys' in output, (
        "uvicorn's access log should be on: this test reads every request line"
    )
    assert "INFO privrank.access: POST /v1/surveys" in output, "every worker should log through privrank.*"
    assert "DEBUG" in output, "the most verbose level should be on"
    leaked = _secrets_in(output, secrets)
    assert not leaked, f"secrets in the logs: {leaked}"
    assert '"winner"' not in output and "'winner'" not in output


@pytest.mark.slow
def test_no_log_line_links_a_suggestion_or_a_flag_to_its_respondent(tmp_path):
    """After suggestions and flags from known respondents (debug level, access
    log on), no log line holds a respondent id or token, nor the suggestion's text; and
    the stored suggestions and flags hold neither."""
    import sqlite3

    db = tmp_path / "suggest.db"
    server = LiveServer(
        {
            "DATABASE_URL": f"sqlite:///{db}",
            "PRIVRANK_ADMIN_KEY": ADMIN,
            "PRIVRANK_LOG_LEVEL": "debug",
            "PRIVRANK_ACCESS_LOG": "1",
        },
        workers=1,
    )
    admin = {"Authorization": f"Bearer {ADMIN}"}
    known: list[tuple[str, str]] = []
    texts = [f"Suggestion {uuid.uuid4().hex[:8]} number {k}" for k in range(4)]
    try:
        c = httpx2.Client(base_url=server.base, timeout=30)
        s = c.post(
            "/v1/surveys",
            json={
                "title": "ideas",
                "items": ["A", "B", "C"],
                "suggestions": {"per_respondent": 1, "moderation": "before", "flag_threshold": 2, "batch": 2},
            },
            headers=admin,
        ).json()
        for k, label in enumerate(texts):
            r = c.post(f"/v1/surveys/{s['id']}/respondents", json={}).json()
            known.append((r["respondent_id"], r["token"]))
            h = {"Authorization": f"Bearer {r['token']}"}
            assert (
                c.post(f"/v1/surveys/{s['id']}/suggestions", json={"label": label}, headers=h).status_code
                == 202
            )
            over = c.post(f"/v1/surveys/{s['id']}/suggestions", json={"label": label + "!"}, headers=h)
            assert over.status_code == 409  # the failure path too
            flagged = c.post(f"/v1/surveys/{s['id']}/items/{s['items'][k % 3]['id']}/flag", headers=h)
            assert flagged.status_code == 204
        queue = c.get(f"/v1/surveys/{s['id']}/suggestions", headers=admin).json()["suggestions"]
        assert (
            c.post(
                f"/v1/surveys/{s['id']}/suggestions/{queue[0]['id']}/reject",
                json={"reason": "no"},
                headers=admin,
            ).status_code
            == 200
        )
        c.close()
    finally:
        output = server.stop()
    assert "/suggestions" in output and "/items/{item_id}/flag" in output, "the requests should be logged"
    secrets = {f"respondent {k}": rid for k, (rid, _) in enumerate(known)}
    secrets |= {f"token {k}": token for k, (_, token) in enumerate(known)}
    secrets |= {f"text {k}": t for k, t in enumerate(texts)}
    # Which item a respondent flagged is not logged either (the path is logged as a template).
    secrets |= {f"flagged item {k}": it["id"] for k, it in enumerate(s["items"])}
    assert not _secrets_in(output, secrets), _secrets_in(output, secrets)
    with sqlite3.connect(db) as conn:
        for table in ("suggestions", "item_flags"):
            dump = " ".join(str(v) for row in conn.execute(f"SELECT * FROM {table}") for v in row)
            assert dump, table
            assert not any(x in dump for rid, token in known for x in (rid, token, token.partition(".")[2]))


@pytest.mark.slow
def test_no_external_id_reaches_the_logs_or_the_database(tmp_path):
    """An integration key registers people by their external ids — new, again
    (a new token), with a refused ε, too long, from an anonymous caller, over the key's
    limit — and no log line (debug level, access log on) nor any stored row holds an id."""
    import sqlite3

    db = tmp_path / "integration.db"
    server = LiveServer(
        {
            "DATABASE_URL": f"sqlite:///{db}",
            "PRIVRANK_ADMIN_KEY": ADMIN,
            "PRIVRANK_LOG_LEVEL": "debug",
            "PRIVRANK_ACCESS_LOG": "1",
            "PRIVRANK_INTEGRATION_PER_MINUTE": "8",
        },
        workers=1,
    )
    admin = {"Authorization": f"Bearer {ADMIN}"}
    ids = [f"person-{uuid.uuid4().hex}@example.org" for _ in range(3)]
    try:
        c = httpx2.Client(base_url=server.base, timeout=30)
        s = c.post("/v1/surveys", json={"title": "hr", "items": ["A", "B", "C"]}, headers=admin).json()
        key = c.post("/v1/keys", json={"role": "integration"}, headers=admin).json()["key"]
        integration = {"Authorization": f"Bearer {key}"}
        url = f"/v1/surveys/{s['id']}/respondents"
        for ext in ids:
            assert c.post(url, json={"external_id": ext}, headers=integration).status_code == 201
        assert c.post(url, json={"external_id": ids[0]}, headers=integration).status_code == 201
        assert (
            c.post(url, json={"external_id": ids[0], "epsilon": 0.5}, headers=integration).status_code == 409
        )
        assert c.post(url, json={"external_id": ids[1] * 10}, headers=integration).status_code == 422
        assert c.post(url, json={"external_id": ids[2]}).status_code == 403
        codes = [c.post(url, json={"external_id": ids[1]}, headers=integration).status_code for _ in range(4)]
        assert 429 in codes
        c.close()
    finally:
        output = server.stop()
    assert "/respondents" in output, "the requests should be logged"
    secrets = {f"external id {k}": ext for k, ext in enumerate(ids)} | {"integration key": key}
    assert not _secrets_in(output, secrets), _secrets_in(output, secrets)
    assert "person-" not in output
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        dump = " ".join(
            str(v) for table in tables for row in conn.execute(f'SELECT * FROM "{table}"') for v in row
        )
    assert "person-" not in dump and not any(ext in dump for ext in ids)
