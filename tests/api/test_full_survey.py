"""A whole survey through the API, checked against the library and the mechanism."""

from __future__ import annotations

import csv
import io
import logging
import math

import numpy as np
import pytest

from app.stats import fit_debiased_mle, privatize
from app.stats.simulation import uniform_theta
from tests.helpers.api import ADMIN, create_survey, register
from tests.helpers.stats import Z


def _export(client, sid) -> list[dict]:
    r = client.get(f"/v1/surveys/{sid}/comparisons.csv", headers=ADMIN)
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))


@pytest.mark.slow
def test_complete_survey_ranking_equals_the_library_fit_of_its_export(client):
    """40 respondents at three ε, each served 15 pairs and answering them from a BTL
    population, half privatized on the server and half on the device: the service's
    ranking is the library's fit of the released CSV, device-privatized answers are
    stored as sent, and every answer carries its respondent's ε. (That the server flips
    at the rate of that ε is the next test's.)"""
    rng = np.random.default_rng(2026)
    m, n_resp, per = 10, 40, 15
    theta = uniform_theta(m, rng)
    s = create_survey(
        client,
        items=[f"option {k}" for k in range(m)],
        epsilon_default=1.0,
        epsilon_min=0.5,
        epsilon_max=2.0,
        respondent_budget=per * 2.0,  # every respondent answers its 15 pairs, at ε up to 2
    )
    sid = s["id"]
    pos = {it["id"]: it["position"] for it in s["items"]}
    levels = (0.5, 1.0, 2.0)
    sent = {}  # (respondent, item_a, item_b) -> (winner as sent, ε, privatized on the device)
    for r in range(n_resp):
        eps = levels[r % 3]
        rid, h = register(client, sid, eps)
        pairs = client.get(f"/v1/surveys/{sid}/pairs?count={per}", headers=h).json()["pairs"]
        assert len(pairs) == per
        a = np.array([pos[p["a"]] for p in pairs])
        b = np.array([pos[p["b"]] for p in pairs])
        a_wins = rng.random(per) < 1 / (1 + np.exp(theta[b] - theta[a]))
        server = r % 2 == 0
        # Client-privatized respondents randomize on the device, as the browser library will.
        reported = a_wins if server else privatize(a_wins.astype(int), eps, rng=rng).astype(bool)
        comps = [
            {"a": p["a"], "b": p["b"], "winner": p["a"] if w else p["b"]}
            for p, w in zip(pairs, reported, strict=True)
        ]
        body = {"privatized": not server, "comparisons": comps}
        if not server:
            body["epsilon"] = eps
        resp = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)
        assert resp.status_code == 201, resp.text
        for c in comps:
            sent[(rid, *sorted((c["a"], c["b"])))] = (c["winner"], eps, not server)

    rows = _export(client, sid)
    assert len(rows) == n_resp * per
    # The service's ranking is the library's fit on the released CSV.
    ids = [it["id"] for it in s["items"]]
    idx = {x: k for k, x in enumerate(ids)}
    i = np.array([idx[r["item_a"]] for r in rows])
    j = np.array([idx[r["item_b"]] for r in rows])
    y = np.array([r["winner"] == r["item_a"] for r in rows], dtype=int)
    eps = np.array([float(r["epsilon"]) for r in rows])
    fit = fit_debiased_mle(m, i, j, y, eps)
    ranking = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    scores = {it["item_id"]: it["score"] for it in ranking["items"]}
    np.testing.assert_allclose([scores[x] for x in ids], fit.theta, atol=1e-8, rtol=0)
    assert ranking["diagnostics"]["comparisons"] == n_resp * per
    assert ranking["diagnostics"]["respondents"] == n_resp
    # Each stored answer is one that was sent, with its respondent's ε; the device's as sent.
    stored = {(r["respondent"], *sorted((r["item_a"], r["item_b"]))): r for r in rows}
    assert stored.keys() == sent.keys()
    for key, (winner, e, device) in sent.items():
        assert float(stored[key]["epsilon"]) == e, key
        if device:
            assert stored[key]["winner"] == winner, key


def test_server_side_answers_flip_at_the_rr_rate_of_the_respondents_epsilon(client):
    """3,000 true answers privatized on the server, 1,000 at each ε (one respondent each,
    one request of 1,000 distinct pairs of 46 items): each is stored flipped with
    probability 1/(1+e^ε) of its respondent's ε. Binomial tolerance Z·√(n·p·(1−p)) per
    ε and pooled; the service's randomness is the test's seeded source."""
    rng = np.random.default_rng(2026)
    m, n = 46, 1000  # 1,035 pairs; 1,000 comparisons is one batch (PRIVRANK_MAX_BATCH)
    levels = (0.5, 1.0, 2.0)
    # A thousand answers from each respondent: the flip rate needs them, so no cap (explicitly).
    s = create_survey(
        client,
        items=[f"option {k}" for k in range(m)],
        epsilon_default=1.0,
        epsilon_min=0.5,
        epsilon_max=2.0,
        respondent_budget="unlimited",
    )
    sid = s["id"]
    ids = [it["id"] for it in s["items"]]
    all_pairs = [(a, b) for a in range(m) for b in range(a + 1, m)]
    truth = {}  # (respondent, item_a, item_b) -> (true winner, ε)
    for eps in levels:
        rid, h = register(client, sid, eps)
        comps = []
        for k in rng.choice(len(all_pairs), n, replace=False):
            a, b = all_pairs[k]
            if rng.random() < 0.5:
                a, b = b, a  # either orientation
            winner = ids[a] if rng.random() < 0.5 else ids[b]
            comps.append({"a": ids[a], "b": ids[b], "winner": winner})
            truth[(rid, *sorted((ids[a], ids[b])))] = (winner, eps)
        resp = client.post(
            f"/v1/surveys/{sid}/responses", json={"privatized": False, "comparisons": comps}, headers=h
        )
        assert resp.status_code == 201, resp.text
        assert resp.json()["accepted"] == n

    rows = _export(client, sid)
    assert len(rows) == len(truth) == n * len(levels)
    flips = {e: [0, 0] for e in levels}
    for r in rows:
        winner, e = truth[(r["respondent"], *sorted((r["item_a"], r["item_b"])))]
        assert float(r["epsilon"]) == e
        flips[e][0] += r["winner"] != winner
        flips[e][1] += 1
    expected = variance = observed = 0.0
    for e, (k, count) in flips.items():
        assert count == n
        p = 1 / (1 + math.exp(e))
        assert abs(k - count * p) <= Z * math.sqrt(count * p * (1 - p)), (e, k, count, p)
        expected += count * p
        variance += count * p * (1 - p)
        observed += k
    assert abs(observed - expected) <= Z * math.sqrt(variance)


def test_no_raw_answer_reaches_the_logs(client, caplog):
    """Capture the log output during ingestion — everything at DEBUG, SQL
    statements included (INFO: what ``echo=True`` shows) — and look for the
    submitted winners by id and by label, and for the request body.

    (SQLAlchemy's DEBUG level would also print result rows, e.g. the items
    table with its ids and labels, which are not answers; it is left at INFO.)
    """
    labels = ["Zebra-ANSWER-LABEL", "Yak-ANSWER-LABEL", "Xerus-ANSWER-LABEL"]
    s = create_survey(client, items=labels)
    ids = [it["id"] for it in s["items"]]
    _, h = register(client, s["id"], 1.0)
    loggers = [
        logging.getLogger(n) for n in ("", "sqlalchemy.engine", "sqlalchemy.pool", "privrank", "uvicorn")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO if lg.name == "sqlalchemy.engine" else logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG):
            body = {
                "privatized": False,
                "comparisons": [
                    {"a": ids[0], "b": ids[1], "winner": ids[1]},
                    {"a": ids[1], "b": ids[2], "winner": ids[2]},
                ],
            }
            assert client.post(f"/v1/surveys/{s['id']}/responses", json=body, headers=h).status_code == 201
            # Failing requests must not leak either.
            bad = {
                "privatized": False,
                "comparisons": [{"a": ids[0], "b": ids[2], "winner": "SECRET-RAW-WINNER"}],
            }
            assert client.post(f"/v1/surveys/{s['id']}/responses", json=bad, headers=h).status_code == 422
            dup = {"privatized": False, "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[0]}]}
            assert client.post(f"/v1/surveys/{s['id']}/responses", json=dup, headers=h).status_code == 409
    finally:
        for lg, lvl in zip(loggers, levels, strict=True):
            lg.setLevel(lvl)
    assert caplog.records, "nothing was logged: the capture is not working"
    assert any(r.name.startswith("sqlalchemy.engine") for r in caplog.records), "SQL logging was not captured"
    assert any("parameters hidden" in r.getMessage() for r in caplog.records)
    text = "\n".join(
        f"{r.name} {r.getMessage()} {r.exc_text or ''} {getattr(r, 'args', '')}" for r in caplog.records
    )
    for secret in [*ids, *labels, "SECRET-RAW-WINNER", '"winner"']:
        assert secret not in text, f"{secret!r} appeared in the logs"


@pytest.mark.parametrize("privatized", [False, True])
def test_concurrent_folds_count_each_answer_once(client, app, privatized):
    """Many small batches, interleaved with ranking reads that fold them."""
    s = create_survey(client, items=("A", "B", "C", "D", "E"))
    ids = [it["id"] for it in s["items"]]
    total = 0
    for r in range(30):
        _, h = register(client, s["id"], 1.0)
        body = {
            "privatized": privatized,
            "comparisons": [
                {"a": ids[r % 5], "b": ids[(r + 1) % 5], "winner": ids[r % 5]},
                {"a": ids[(r + 2) % 5], "b": ids[(r + 4) % 5], "winner": ids[(r + 4) % 5]},
            ],
        }
        if privatized:
            body["epsilon"] = 1.0
        assert client.post(f"/v1/surveys/{s['id']}/responses", json=body, headers=h).status_code == 201
        total += 2
        if r % 7 == 0:
            d = client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN).json()["diagnostics"]
            assert d["comparisons"] == total
    d = client.get(f"/v1/surveys/{s['id']}/ranking", headers=ADMIN).json()["diagnostics"]
    assert d["comparisons"] == total == 60
