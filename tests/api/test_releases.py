"""Central-model surveys: true answers stay inside; results leave only as releases."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.core.db.models import Comparison, Release
from tests.helpers.api import ADMIN, analyst_headers, create_survey, import_comparisons, register

CENTRAL = {"model": "central", "total_budget": 3.0, "max_comparisons_per_respondent": 3}


def central_survey(client, items=("A", "B", "C", "D"), **privacy):
    body = {"title": "Trusted", "items": list(items), "privacy": {**CENTRAL, **privacy}}
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def answer(client, sid, h, triples):
    body = {"privatized": False, "comparisons": [{"a": a, "b": b, "winner": w} for a, b, w in triples]}
    return client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)


@pytest.fixture
def filled(client):
    """A central survey where item A beats everyone: 40 respondents, each with 3 answers
    (A–B, A–C, and one pair of the others), imported in one request."""
    s = central_survey(client, total_budget=4.0)
    ids = [it["id"] for it in s["items"]]
    labels = [it["label"] for it in s["items"]]
    lines = ["respondent,item_a,item_b,winner"]
    for r in range(40):
        for a, b in ((0, 1), (0, 2), ((r % 3) + 1, ((r + 1) % 3) + 1)):
            lines.append(f"p{r},{labels[a]},{labels[b]},{labels[a]}")
    assert import_comparisons(client, s["id"], lines, privatized=False)["imported"] == 120
    return s["id"], ids


def test_create_central_survey_and_validation(client, unchanged):
    s = central_survey(client)
    p = s["privacy"]
    assert (p["model"], p["total_budget"], p["max_comparisons_per_respondent"]) == ("central", 3.0, 3)
    assert p["epsilon_default"] is None and p["flip_probability_default"] is None
    bad = [
        {"model": "central", "max_comparisons_per_respondent": 3},
        {"model": "central", "total_budget": 0, "max_comparisons_per_respondent": 3},
        {"model": "central", "total_budget": 3},
        {"model": "central", "total_budget": 3, "max_comparisons_per_respondent": 7},  # > 6 pairs
        {"model": "central", "total_budget": 3, "max_comparisons_per_respondent": 3, "epsilon_default": 1},
        {"model": "local", "total_budget": 3},
    ]
    with unchanged():
        for privacy in bad:
            r = client.post(
                "/v1/surveys",
                json={"title": "t", "items": ["A", "B", "C", "D"], "privacy": privacy},
                headers=ADMIN,
            )
            assert r.status_code == 422, (privacy, r.text)


def test_central_respondents_answer_truthfully_up_to_L(client, db, unchanged):
    s = central_survey(client)
    a, b, c, d = (it["id"] for it in s["items"])
    r = client.post(f"/v1/surveys/{s['id']}/respondents", json={})
    assert r.status_code == 201
    data = r.json()
    assert data["epsilon"] is None and data["flip_probability"] is None and data["comparisons_remaining"] == 3
    h = {"Authorization": f"Bearer {data['token']}"}
    with unchanged():
        assert client.post(f"/v1/surveys/{s['id']}/respondents", json={"epsilon": 1.0}).status_code == 422
        r = client.post(
            f"/v1/surveys/{s['id']}/responses",
            headers=h,
            json={"privatized": True, "epsilon": 1.0, "comparisons": [{"a": a, "b": b, "winner": a}]},
        )
        assert r.status_code == 422 and "central" in r.text
    r = answer(client, s["id"], h, [(a, b, b), (c, a, c)])
    assert (
        r.status_code == 201 and r.json()["comparisons_remaining"] == 1 and r.json()["epsilon_spent"] is None
    )
    # Stored as given: true answers, no ε, source "central".
    rows = db.scalars(select(Comparison).where(Comparison.survey_id == s["id"]).order_by(Comparison.j)).all()
    assert [(x.i, x.j, x.y_tilde, x.epsilon, x.source) for x in rows] == [
        (0, 1, 0, None, "central"),
        (0, 2, 0, None, "central"),
    ]
    with unchanged():
        r = answer(client, s["id"], h, [(a, d, a), (b, c, b)])  # 4 > L = 3
        assert r.status_code == 409 and "at most 3" in r.json()["detail"]
    assert len(client.get(f"/v1/surveys/{s['id']}/pairs?count=5", headers=h).json()["pairs"]) == 1
    assert answer(client, s["id"], h, [(a, d, a)]).status_code == 201
    assert client.get(f"/v1/surveys/{s['id']}/pairs?count=5", headers=h).json()["pairs"] == []


def test_true_answers_are_never_returned(client, filled):
    sid, _ = filled
    analyst = analyst_headers(client)
    for url in (
        f"/v1/surveys/{sid}/ranking",
        f"/v1/surveys/{sid}/comparisons.csv",
        f"/v1/surveys/{sid}/pairwise",
    ):
        for h in (ADMIN, analyst):
            r = client.get(url, headers=h)
            assert r.status_code == 409 and "releases" in r.json()["detail"], url


def test_releases_spend_the_budget_and_are_stored(client, db, filled, unchanged):
    sid, ids = filled
    r = client.post(
        f"/v1/surveys/{sid}/releases",
        json={"method": "noisy_counts", "unit": "individual", "epsilon": 1.0, "k": 1},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    rel = r.json()
    assert rel["cost"] == 1.0 and rel["budget"] == {"total": 4.0, "spent": 1.0, "remaining": 3.0}
    assert rel["parameters"]["scale"] == pytest.approx(2 * 3 / 1.0)  # 2L/ε with L = 3
    items = rel["result"]["items"]
    assert [it["rank"] for it in items] == [1, 2, 3, 4] and all(
        isinstance(it["noisy_wins"], int) for it in items
    )
    assert set(rel["result"]["top_k"]) <= set(ids) and len(rel["result"]["top_k"]) == 1
    assert all("comparisons" not in it for it in items)  # nothing un-noised leaves the service
    # Edge releases cost L·ε (person-level, by group privacy): 3 × 0.5.
    r = client.post(
        f"/v1/surveys/{sid}/releases",
        json={"method": "perturbed_mle", "unit": "edge", "epsilon": 0.5},
        headers=analyst_headers(client),
    )
    assert r.status_code == 201 and r.json()["cost"] == pytest.approx(1.5)
    second = r.json()["id"]
    assert r.json()["parameters"]["lambda"] == pytest.approx(16.0)  # 8κ₁/ε
    assert r.json()["parameters"]["gamma"] >= 2.0  # ≥ 4κ₂/ε
    assert all(isinstance(it["score"], float) for it in r.json()["result"]["items"])
    # Over budget: 409, nothing spent, nothing stored.
    with unchanged():
        r = client.post(
            f"/v1/surveys/{sid}/releases",
            json={"method": "noisy_counts", "unit": "individual", "epsilon": 2.0},
            headers=ADMIN,
        )
    assert r.status_code == 409 and "nothing was spent" in r.json()["detail"]
    ledger = client.get(f"/v1/surveys/{sid}/releases", headers=ADMIN).json()
    assert ledger["budget"] == {"total": 4.0, "spent": 2.5, "remaining": 1.5}
    assert [x["id"] for x in ledger["releases"]] == [second, rel["id"]]  # newest first
    assert ledger["total"] == 2
    oldest = ledger["releases"][1]
    assert oldest["top"] == rel["result"]["items"][:10] and "result" not in oldest
    page = client.get(f"/v1/surveys/{sid}/releases?limit=1&offset=1", headers=ADMIN).json()
    assert [x["id"] for x in page["releases"]] == [rel["id"]] and page["total"] == 2
    # Reading a release again is free and returns the same result.
    with unchanged():
        again = client.get(f"/v1/surveys/{sid}/releases/{rel['id']}", headers=ADMIN).json()
    assert again["result"] == rel["result"] and again["budget"]["spent"] == 2.5
    assert client.get(f"/v1/surveys/{sid}/releases/rel_aaaaaaaaaaaaaaaa", headers=ADMIN).status_code == 404
    # Immutable: no way to change or delete one.
    assert client.put(f"/v1/surveys/{sid}/releases/{rel['id']}", json={}, headers=ADMIN).status_code == 405
    assert client.delete(f"/v1/surveys/{sid}/releases/{rel['id']}", headers=ADMIN).status_code == 405
    assert db.scalar(select(func.count()).select_from(Release).where(Release.survey_id == sid)) == 2


def test_release_idempotency_and_exhaustion(client, filled):
    sid, _ = filled
    body = {"method": "noisy_counts", "unit": "individual", "epsilon": 2.0}
    first = client.post(f"/v1/surveys/{sid}/releases", json=body, headers={**ADMIN, "Idempotency-Key": "r1"})
    again = client.post(f"/v1/surveys/{sid}/releases", json=body, headers={**ADMIN, "Idempotency-Key": "r1"})
    assert first.status_code == 201 and again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true" and again.json()["id"] == first.json()["id"]
    assert again.json()["budget"]["spent"] == 2.0
    assert client.post(f"/v1/surveys/{sid}/releases", json=body, headers=ADMIN).status_code == 201
    r = client.post(f"/v1/surveys/{sid}/releases", json={**body, "epsilon": 0.01}, headers=ADMIN)
    assert r.status_code == 409  # exhausted: 4.0 of 4.0 spent


def test_release_validation_and_authorization(client, filled, unchanged):
    sid, _ = filled
    _, h = register(client, sid)
    local = create_survey(client)
    ok = {"method": "noisy_counts", "unit": "edge", "epsilon": 1.0}
    with unchanged():
        for body in (
            {**ok, "method": "borda"},
            {**ok, "unit": "group"},
            {**ok, "epsilon": 0},
            {**ok, "epsilon": 1e-12},  # tiny ε: refused (it bought exact counts through clamped noise)
            {**ok, "epsilon": 0.0009},
            {**ok, "epsilon": 50},
            {**ok, "k": 0},
            {**ok, "k": 5},
            {"method": "noisy_counts"},
        ):
            assert client.post(f"/v1/surveys/{sid}/releases", json=body, headers=ADMIN).status_code == 422, (
                body
            )
        assert client.post(f"/v1/surveys/{sid}/releases", json=ok).status_code == 401
        assert client.post(f"/v1/surveys/{sid}/releases", json=ok, headers=h).status_code == 403
        r = client.post(f"/v1/surveys/{local['id']}/releases", json=ok, headers=ADMIN)
        assert r.status_code == 409 and "central-model" in r.json()["detail"]
        assert client.post("/v1/surveys/srv_nope/releases", json=ok, headers=ADMIN).status_code == 404
    assert client.get(f"/v1/surveys/{sid}/releases", headers=h).status_code == 403


def test_large_epsilon_release_recovers_the_true_order(client, filled):
    sid, ids = filled
    r = client.post(
        f"/v1/surveys/{sid}/releases",
        json={"method": "noisy_counts", "unit": "individual", "epsilon": 4.0, "k": 1},
        headers=ADMIN,
    )
    # A won all 80 of its comparisons; the noise scale is 2L/ε = 1.5.
    assert r.json()["result"]["top_k"] == [ids[0]]


def test_import_into_a_central_survey(client, db, unchanged):
    s = central_survey(client)
    url = f"/v1/surveys/{s['id']}/comparisons/import"
    csv_text = "respondent,item_a,item_b,winner\np1,A,B,A\np1,A,C,C\np2,B,C,B\n"
    with unchanged():
        assert (
            client.post(
                url + "?privatized=true", content=csv_text, headers={**ADMIN, "Content-Type": "text/csv"}
            ).status_code
            == 422
        )
        too_many = "respondent,item_a,item_b,winner\n" + "".join(
            f"p3,{a},{b},{a}\n" for a, b in (("A", "B"), ("A", "C"), ("A", "D"), ("B", "C"))
        )
        r = client.post(
            url + "?privatized=false", content=too_many, headers={**ADMIN, "Content-Type": "text/csv"}
        )
        assert r.status_code == 409 and "more than 3" in r.text
    r = client.post(
        url + "?privatized=false", content=csv_text, headers={**ADMIN, "Content-Type": "text/csv"}
    )
    assert r.status_code == 201 and r.json()["imported"] == 3
    rows = db.scalars(select(Comparison).where(Comparison.survey_id == s["id"])).all()
    assert {x.source for x in rows} == {"central"} and all(x.epsilon is None for x in rows)
    assert sorted((x.i, x.j, x.y_tilde) for x in rows) == [(0, 1, 1), (0, 2, 0), (1, 2, 1)]


def test_release_idempotency_key_reused_for_another_request_is_refused(client, filled, unchanged):
    sid, _ = filled
    body = {"method": "noisy_counts", "unit": "individual", "epsilon": 0.5}
    key = {**ADMIN, "Idempotency-Key": "same"}
    assert client.post(f"/v1/surveys/{sid}/releases", json=body, headers=key).status_code == 201
    with unchanged():
        for other in ({**body, "epsilon": 1.0}, {**body, "method": "perturbed_mle"}, {**body, "k": 2}):
            r = client.post(f"/v1/surveys/{sid}/releases", json=other, headers=key)
            assert r.status_code == 409 and "different release" in r.json()["detail"]


def test_individual_perturbed_mle_release_through_the_service(client, filled):
    """L and ε reach the mechanism; the published parameters are public values only, and
    each released item carries exactly one value (score or noisy_wins)."""
    sid, _ids = filled
    r = client.post(
        f"/v1/surveys/{sid}/releases",
        json={"method": "perturbed_mle", "unit": "individual", "epsilon": 1.0, "k": 2},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    rel = r.json()
    assert rel["cost"] == 1.0
    p = rel["parameters"]
    assert p["lambda"] == pytest.approx(8 * 3 / 1.0) and p["gamma"] == pytest.approx(8 * 3 * 0.25 / 1.0)
    assert p["L"] == 3 and "gamma_accuracy" not in p and "gradient_norm" not in p
    for it in rel["result"]["items"]:
        assert set(it) == {"item_id", "label", "rank", "score"}
    assert abs(sum(it["score"] for it in rel["result"]["items"])) < 1e-5  # centred over all items
    r = client.post(
        f"/v1/surveys/{sid}/releases",
        json={"method": "noisy_counts", "unit": "edge", "epsilon": 0.5},
        headers=ADMIN,
    )
    for it in r.json()["result"]["items"]:
        assert set(it) == {"item_id", "label", "rank", "noisy_wins"}


def test_release_parameters_do_not_depend_on_the_data(client):
    """Two central surveys with different numbers of answers and registrations publish the
    same λ and γ for the same request (public values, fixed by L and ε alone)."""
    params = []
    for n_resp in (1, 8):
        s = central_survey(client, total_budget=10.0)
        ids = [it["id"] for it in s["items"]]
        for _ in range(n_resp):
            _, h = register(client, s["id"])
            assert answer(client, s["id"], h, [(ids[0], ids[1], ids[0])]).status_code == 201
        for _ in range(n_resp * 3):  # empty registrations
            register(client, s["id"])
        for unit in ("edge", "individual"):
            r = client.post(
                f"/v1/surveys/{s['id']}/releases",
                json={"method": "perturbed_mle", "unit": unit, "epsilon": 1.0},
                headers=ADMIN,
            )
            assert r.status_code == 201, r.text
            params.append((unit, r.json()["parameters"]))
    assert params[0] == params[2] and params[1] == params[3]


def test_central_pairs_are_served_without_reading_others_answers(client):
    """Least-answered-first would reveal which pairs others answered; central surveys draw
    uniformly among the respondent's unanswered pairs. After 30 respondents answered pair
    (A, B), each of 60 new respondents is served 2 of the 6 pairs, (A, B) among them with
    probability 1/3: Binomial(60, 1/3), 20 ± Z·3.7, so at least 4 times (least-answered-
    first never serves it: 0), and every pair is served. The draws come from the test's
    seeded source."""
    import math

    from tests.helpers.stats import Z

    s = central_survey(client, total_budget=10.0, max_comparisons_per_respondent=2)
    ids = [it["id"] for it in s["items"]]
    r = client.post(
        f"/v1/surveys/{s['id']}/comparisons/import?privatized=false",
        content="respondent,item_a,item_b,winner\n" + "".join(f"p{k},A,B,A\n" for k in range(30)),
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201 and r.json()["imported"] == 30, r.text
    counts = {}
    n = 60
    for _ in range(n):
        _, h = register(client, s["id"])
        pairs = client.get(f"/v1/surveys/{s['id']}/pairs?count=2", headers=h).json()["pairs"]
        assert len(pairs) == 2
        for pair in pairs:
            key = tuple(sorted((pair["a"], pair["b"])))
            counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6, counts
    answered = counts.get(tuple(sorted((ids[0], ids[1]))), 0)
    p = 1 / 3
    assert abs(answered - n * p) <= Z * math.sqrt(n * p * (1 - p)), counts


def test_the_mechanism_runs_outside_the_write_lock(app, filled, monkeypatch):
    """On SQLite the write transaction holds the database's only write lock, which every
    answer waits for, and a perturbed MLE on 10,000 items takes seconds: the mechanism
    runs before the write. While it runs (held here until the answer is in), another
    survey's answer is stored at once."""
    import threading
    import time

    from fastapi.testclient import TestClient

    from app.releases import service as releases

    sid, _ = filled
    computing, finish = threading.Event(), threading.Event()
    real = releases.perturbed_mle

    def slow(*args, **kwargs):
        computing.set()
        assert finish.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(releases, "perturbed_mle", slow)
    outcome = []

    def release() -> None:
        with TestClient(app) as c:
            body = {"method": "perturbed_mle", "unit": "individual", "epsilon": 0.5}
            outcome.append(c.post(f"/v1/surveys/{sid}/releases", json=body, headers=ADMIN).status_code)

    with TestClient(app) as c:  # another survey and its respondent, before the release starts
        other = create_survey(c)
        _, h = register(c, other["id"])
    a, b = (it["id"] for it in other["items"][:2])
    thread = threading.Thread(target=release)
    thread.start()
    try:
        assert computing.wait(30)
        with TestClient(app) as c:
            started = time.perf_counter()
            r = c.post(
                f"/v1/surveys/{other['id']}/responses",
                json={"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a}]},
                headers=h,
            )
            waited = time.perf_counter() - started
    finally:
        finish.set()
        thread.join(60)
    assert r.status_code == 201 and waited < 2.0, (r.status_code, waited)
    assert outcome == [201]


def test_a_retry_racing_its_original_is_replayed_not_refused(client, filled, monkeypatch):
    """PostgreSQL, READ COMMITTED: a retry's first look-up for its Idempotency-Key can run
    before the original commits, and its budget check after: the budget is then spent by
    the very release it retries. It must be replayed, not told "nothing was spent"."""
    from app.releases import service as releases

    sid, _ = filled
    body = {"method": "noisy_counts", "unit": "individual", "epsilon": 3.5}  # most of the 4.0
    first = client.post(f"/v1/surveys/{sid}/releases", json=body, headers={**ADMIN, "Idempotency-Key": "K"})
    assert first.status_code == 201
    real, calls = releases._existing, []

    def late(session, survey_id, key, request):
        calls.append(key)
        return None if len(calls) == 1 else real(session, survey_id, key, request)  # not yet committed

    monkeypatch.setattr(releases, "_existing", late)
    again = client.post(f"/v1/surveys/{sid}/releases", json=body, headers={**ADMIN, "Idempotency-Key": "K"})
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true", again.text
    assert again.json()["id"] == first.json()["id"] and len(calls) == 2


def test_the_ledger_never_reads_the_results(client, filled):
    """A page of the ledger reads each release's ``top`` column, never its whole result
    (1.1 MB of JSON at 10,000 items: a page of 1,000 would parse ~3.6 GiB)."""
    from sqlalchemy import event

    sid, _ = filled
    body = {"method": "noisy_counts", "unit": "individual", "epsilon": 0.5}
    made = client.post(f"/v1/surveys/{sid}/releases", json=body, headers=ADMIN).json()
    statements: list[str] = []

    def seen(conn, cursor, statement, *args):
        statements.append(statement)

    engine = client.app.state.engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        ledger = client.get(f"/v1/surveys/{sid}/releases", headers=ADMIN).json()
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert ledger["releases"][0]["top"] == made["result"]["items"][:10]
    assert not [s for s in statements if "releases.result" in s]


def test_the_ledger_explains_each_cost_and_the_budget_after_it(client, filled):
    """Each release says why it costs what it does (edge: L·ε, and for noisy counts the
    same noise as an individual release of that charge), and what remained after it:
    on every page of the ledger, and when read or replayed alone."""
    sid, _ = filled  # budget 4, L = 3
    made = []
    for body in (
        {"method": "noisy_counts", "unit": "edge", "epsilon": 0.25},  # cost 0.75
        {"method": "perturbed_mle", "unit": "individual", "epsilon": 0.5},  # cost 0.5
        {"method": "noisy_counts", "unit": "individual", "epsilon": 1.0},  # cost 1
    ):
        r = client.post(f"/v1/surveys/{sid}/releases", json=body, headers=ADMIN)
        assert r.status_code == 201, r.text
        made.append(r.json())
    assert [m["budget_after"] for m in made] == pytest.approx([3.25, 2.75, 1.75])
    assert [m["budget"]["remaining"] for m in made] == pytest.approx([3.25, 2.75, 1.75])
    edge = made[0]["cost_explanation"]
    assert "3 × 0.25 = 0.75" in edge and "same as that of an individual release at ε = 0.75" in edge
    assert "individual" in made[1]["cost_explanation"] and "same as" not in made[1]["cost_explanation"]
    # Pages of one: the budget after each, newest first, whatever the page.
    after = [
        client.get(f"/v1/surveys/{sid}/releases?limit=1&offset={k}", headers=ADMIN).json()["releases"][0]
        for k in range(3)
    ]
    assert [x["id"] for x in after] == [m["id"] for m in reversed(made)]
    assert [x["budget_after"] for x in after] == pytest.approx([1.75, 2.75, 3.25])
    assert after[2]["cost_explanation"] == edge
    alone = client.get(f"/v1/surveys/{sid}/releases/{made[0]['id']}", headers=ADMIN).json()
    assert alone["budget_after"] == pytest.approx(3.25) and alone["budget"]["remaining"] == pytest.approx(
        1.75
    )
