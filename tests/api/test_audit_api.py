"""End to end: the server's privatization through the API is the audited sampler, and
what the CSV exports release has the audited law (docs/audits.md §3).

The full-size audits (10⁶ draws per input) are tests/audits/test_samplers.py; here a
spy on the function the service calls shows that every exported bit (ranking) is that
function's output, and a Clopper–Pearson audit of the exported rows at the same
α = 10⁻⁸ per side accepts the shipped mechanism and rejects it with a flip rate doubled
or halved. Draws come from the test's seeded source (tests/conftest.py).
"""

from __future__ import annotations

import csv
import io
from collections import Counter

import numpy as np
import pytest

from app.rankings import ballot_import
from app.respondents import ingestion
from app.stats import mechanisms as mech
from app.stats.rankings import mallows_privatize
from tests.helpers.api import ADMIN, create_survey, register
from tests.helpers.audit import AuditError, audit

EPS = 1.0


def _rows(client, path: str) -> list[dict]:
    r = client.get(path, headers=ADMIN)
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))


def _answer_through_the_api(client, monkeypatch) -> tuple[dict, dict, list[dict]]:
    """4 respondents at ε = 1 answer 1,000 distinct pairs of 46 items each (4,000 true
    answers, privatized by the server on arrival); returns the true winners, the flips
    the spied sampler made, and the exported rows."""
    real = ingestion.privatize
    assert real is mech.privatize
    calls: list[tuple[np.ndarray, np.ndarray]] = []

    def spy(y, epsilon, rng=None):
        assert rng is None and float(np.max(epsilon)) == float(np.min(epsilon)) == EPS
        out = real(y, epsilon, rng)
        calls.append((np.asarray(y).copy(), out.copy()))
        return out

    monkeypatch.setattr(ingestion, "privatize", spy)
    m, per = 46, 1000
    # A sampler audit needs many answers per respondent: no cap, explicitly.
    s = create_survey(
        client, items=[f"option {k}" for k in range(m)], epsilon_default=EPS, respondent_budget="unlimited"
    )
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    rng = np.random.default_rng(11)
    pairs = [(a, b) for a in range(m) for b in range(a + 1, m)]
    truth: dict[tuple, str] = {}
    asked: list[tuple] = []
    for _ in range(4):
        rid, h = register(client, sid, EPS)
        comps = []
        for k in rng.choice(len(pairs), per, replace=False):
            a, b = pairs[k] if rng.random() < 0.5 else pairs[k][::-1]
            winner = ids[a] if rng.random() < 0.5 else ids[b]
            key = (rid, *sorted((ids[a], ids[b])))
            truth[key] = winner
            asked.append(key)
            comps.append({"a": ids[a], "b": ids[b], "winner": winner})
        r = client.post(
            f"/v1/surveys/{sid}/responses", json={"privatized": False, "comparisons": comps}, headers=h
        )
        assert r.status_code == 201, r.text
    # The spy saw every answer once, in the order sent (canonical orientation: y = 1 when the
    # first item of the stored pair won); its flips are out != y.
    flips = np.concatenate([y != out for y, out in calls])
    assert flips.size == len(asked)
    flipped = dict(zip(asked, flips.tolist(), strict=True))
    return truth, flipped, _rows(client, f"/v1/surveys/{sid}/comparisons.csv")


def _audit_export(truth: dict, rows: list[dict]):
    """S = {the export's item_a reported as winner}; D₁: item_a truly won, D₀: item_b did."""
    k = {True: 0, False: 0}
    n = {True: 0, False: 0}
    for r in rows:
        first_won = truth[(r["respondent"], *sorted((r["item_a"], r["item_b"])))] == r["item_a"]
        n[first_won] += 1
        k[first_won] += r["winner"] == r["item_a"]
    return audit(k[True], n[True], k[False], n[False], EPS)


def test_exported_answers_are_the_audited_samplers_output(client, monkeypatch):
    """Every exported winner is the spied sampler's output for that answer (flipped exactly
    when it flipped), and the export passes the audit: ε_lower ≤ 1 ≤ ε_upper."""
    truth, flipped, rows = _answer_through_the_api(client, monkeypatch)
    assert len(rows) == len(truth) == 4000
    for r in rows:
        key = (r["respondent"], *sorted((r["item_a"], r["item_b"])))
        assert (r["winner"] != truth[key]) == flipped[key]
        assert float(r["epsilon"]) == EPS
    bounds = _audit_export(truth, rows)
    # About 2,000 answers per input put the bounds ≈ 0.28 below and ≈ 0.31 above ε; the
    # log-ratio estimate has standard error 0.04, so 0.5 and 1.5 are ≥ 5 of them away.
    assert bounds.lower > 0.5 and bounds.upper < 1.5


@pytest.mark.parametrize(("factor", "side"), [(2.0, "noisier"), (0.5, "exceeds")])
def test_a_wrong_flip_rate_in_the_sampler_shows_in_the_export(client, monkeypatch, factor, side):
    """The flip rate doubled or halved inside the shipped sampler: the export of the same
    4,000 answers fails the audit."""
    real = mech.flip_probability
    monkeypatch.setattr(mech, "flip_probability", lambda e: factor * real(e))
    truth, _, rows = _answer_through_the_api(client, monkeypatch)
    with pytest.raises(AuditError, match=side):
        _audit_export(truth, rows)


def test_imported_rankings_are_privatized_by_the_audited_sampler(client, monkeypatch):
    """10,000 ballots through POST …/rankings/import (privatized on the server): 5,000 of
    x > y > z and 5,000 of its single-item move y > z > x, ε = 2. The exported rankings are
    the spied mallows_privatize's outputs, and S = {x first} passes the audit."""
    real = ballot_import.mallows_privatize
    assert real is mallows_privatize
    outputs: list[np.ndarray] = []

    def spy(order, epsilon, rng=None):
        out = real(order, epsilon, rng)
        outputs.append(out)
        return out

    monkeypatch.setattr(ballot_import, "mallows_privatize", spy)
    r = client.post(
        "/v1/surveys", json={"title": "Ballots", "kind": "ranking", "items": ["x", "y", "z"]}, headers=ADMIN
    )
    s = r.json()
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    n, eps = 5000, 2.0
    lines = ["respondent,ranking,epsilon"]
    lines += [f"a{k},x>y>z,{eps}" for k in range(n)] + [f"b{k},y>z>x,{eps}" for k in range(n)]
    r = client.post(
        f"/v1/surveys/{sid}/rankings/import?privatized=false",
        content="\n".join(lines).encode(),
        headers=ADMIN,
    )
    assert r.status_code in (200, 201), r.text
    rows = _rows(client, f"/v1/surveys/{sid}/rankings.csv")
    assert len(rows) == 2 * n and {row["source"] for row in rows} == {"import"}
    (out,) = outputs
    assert Counter(row["ranking"] for row in rows) == Counter(">".join(ids[x] for x in o) for o in out)
    by_input = {True: [], False: []}  # True: the ballot was x > y > z
    for ballot, o in zip(lines[1:], out, strict=True):
        by_input[ballot.startswith("a")].append(o[0] == 0)
    s1, s0 = np.array(by_input[True]), np.array(by_input[False])
    audit(int(s1.sum()), s1.size, int(s0.sum()), s0.size, eps)
