"""Concurrent writers against a live multi-worker service on PostgreSQL."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import httpx2
import numpy as np
import pytest
from sqlalchemy import create_engine, func, select, text

from app.core.db.models import Comparison, PairStat, PendingBatch
from tests.helpers.api import make_app
from tests.helpers.live import LiveServer

ADMIN = {"Authorization": "Bearer concurrency-admin"}


def test_every_acknowledged_comparison_is_stored_exactly_once(postgres_url):
    server = LiveServer({"DATABASE_URL": postgres_url, "PRIVRANK_ADMIN_KEY": "concurrency-admin"}, workers=2)
    try:
        with httpx2.Client(base_url=server.base, timeout=30) as c:
            labels = [f"item {k}" for k in range(30)]
            privacy = {"respondent_budget": 40.0}  # each respondent: two batches of 20 at ε = 1
            body = {"title": "load", "items": labels, "privacy": privacy}
            s = c.post("/v1/surveys", json=body, headers=ADMIN).json()
        sid = s["id"]
        ids = [it["id"] for it in s["items"]]
        all_pairs = [(a, b) for x, a in enumerate(ids) for b in ids[x + 1 :]]
        acknowledged: list[tuple[str, str, str]] = []
        statuses = Counter()
        lock = threading.Lock()
        stop = time.monotonic() + 8.0
        errors: list[str] = []

        def writer(seed: int) -> None:
            rng = random.Random(seed)
            with httpx2.Client(base_url=server.base, timeout=30) as c:
                while time.monotonic() < stop:
                    reg = c.post(f"/v1/surveys/{sid}/respondents", json={"epsilon": 1.0}).json()
                    h = {"Authorization": f"Bearer {reg['token']}"}
                    pairs = rng.sample(all_pairs, 40)
                    for start in (0, 20):  # two batches per respondent
                        chunk = pairs[start : start + 20]
                        body = {
                            "privatized": rng.random() < 0.5,
                            "comparisons": [{"a": a, "b": b, "winner": rng.choice((a, b))} for a, b in chunk],
                        }
                        if body["privatized"]:
                            body["epsilon"] = 1.0
                        key = f"batch-{start}"
                        r = c.post(
                            f"/v1/surveys/{sid}/responses", json=body, headers={**h, "Idempotency-Key": key}
                        )
                        # A client retry of the same request (as after a lost reply) stores nothing new.
                        retry = c.post(
                            f"/v1/surveys/{sid}/responses", json=body, headers={**h, "Idempotency-Key": key}
                        )
                        with lock:
                            statuses[r.status_code] += 1
                            if r.status_code == 201:
                                if retry.status_code != 201 or retry.json() != r.json():
                                    errors.append(f"retry differs: {retry.status_code} {retry.text}")
                                acknowledged.extend((reg["respondent_id"], a, b) for a, b in chunk)
                            else:
                                errors.append(f"{r.status_code} {r.text}")

        def reader() -> None:
            # Rankings fold pending answers while writers write.
            with httpx2.Client(base_url=server.base, timeout=30) as c:
                while time.monotonic() < stop:
                    r = c.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN)
                    if r.status_code != 200:
                        with lock:
                            errors.append(f"ranking {r.status_code} {r.text}")
                    time.sleep(0.05)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
        threads += [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:5]
        assert statuses[201] > 50, statuses  # the load was real

        with httpx2.Client(base_url=server.base, timeout=30) as c:
            ranking = c.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
        assert ranking["diagnostics"]["comparisons"] == len(acknowledged)

        engine = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.connect() as conn:
            stored = conn.execute(
                select(Comparison.respondent_id, Comparison.i, Comparison.j).where(
                    Comparison.survey_id == sid
                )
            ).all()
            assert conn.scalar(select(func.count()).select_from(PendingBatch)) == 0
            assert conn.scalar(select(func.sum(PairStat.n)).where(PairStat.survey_id == sid)) == len(
                acknowledged
            )
            version = conn.execute(
                text("SELECT version FROM survey_stats WHERE survey_id = :s"), {"s": sid}
            ).scalar()
        engine.dispose()
        pos = {x: k for k, x in enumerate(ids)}
        expected = Counter((r, min(pos[a], pos[b]), max(pos[a], pos[b])) for r, a, b in acknowledged)
        assert max(expected.values()) == 1
        assert Counter(map(tuple, stored)) == expected  # each acknowledged comparison exactly once
        assert version > 1  # several folds ran during the load
        assert np.isfinite([it["score"] for it in ranking["items"]]).all()
    finally:
        out = server.stop()
    assert "Traceback" not in out, out


def test_concurrent_imports_and_retries_on_postgres(postgres_url):
    """Imports for the same pseudonym and copies of one request, racing on PostgreSQL."""
    from fastapi.testclient import TestClient

    from app.core.db.migrate import upgrade
    from app.core.db.models import Respondent

    upgrade(postgres_url)
    app = make_app(postgres_url, "k")
    admin = {"Authorization": "Bearer k"}
    try:
        with TestClient(app) as c:
            s = c.post(
                "/v1/surveys",
                json={
                    "title": "t",
                    "items": [f"i{k}" for k in range(8)],
                    "privacy": {"respondent_budget": 5},
                },
                headers=admin,
            ).json()
        ids = [it["id"] for it in s["items"]]
        pairs = [(a, b) for x, a in enumerate(ids) for b in ids[x + 1 :]]
        bodies = []
        for t in range(4):  # each import: 3 distinct pairs for respondent "r", ε = 1 each → cost 3
            rows = "".join(f"r,{a},{b},{a},1.0\n" for a, b in pairs[3 * t : 3 * t + 3])
            bodies.append("respondent,item_a,item_b,winner,epsilon\n" + rows)
        results: list = []
        gate = threading.Barrier(4)

        def run(body):
            with TestClient(app) as c:
                gate.wait()
                results.append(
                    c.post(
                        f"/v1/surveys/{s['id']}/comparisons/import?privatized=true",
                        content=body,
                        headers={**admin, "Content-Type": "text/csv"},
                    )
                )

        threads = [threading.Thread(target=run, args=(b,)) for b in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(r.status_code for r in results)
        assert codes == [201, 409, 409, 409], [r.text for r in results]
        with app.state.session_factory() as session:
            r = session.scalar(
                select(Respondent).where(Respondent.survey_id == s["id"], Respondent.external_ref == "r")
            )
            stored = session.scalars(select(Comparison.epsilon).where(Comparison.respondent_id == r.id)).all()
            assert sum(stored) == r.epsilon_spent == 3.0 and r.n_comparisons == len(stored) == 3

        # Four copies of one request with one Idempotency-Key, at once: one store, four equal answers.
        with TestClient(app) as c:
            reg = c.post(f"/v1/surveys/{s['id']}/respondents", json={}).json()
        h = {"Authorization": f"Bearer {reg['token']}", "Idempotency-Key": "same"}
        body = {"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a} for a, b in pairs[:5]]}
        answers: list = []
        gate = threading.Barrier(4)

        def retry():
            with TestClient(app) as c:
                gate.wait()
                answers.append(c.post(f"/v1/surveys/{s['id']}/responses", json=body, headers=h))

        threads = [threading.Thread(target=retry) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [a.status_code for a in answers] == [201] * 4 and len({a.text for a in answers}) == 1
        with app.state.session_factory() as session:
            n = session.scalar(
                select(func.count())
                .select_from(Comparison)
                .where(Comparison.respondent_id == reg["respondent_id"])
            )
            assert n == 5
    finally:
        app.state.engine.dispose()


@pytest.mark.parametrize(
    ("accounting", "size", "spent"),
    [
        ({}, {"epsilon": 1.5}, ("spent", 3.0)),  # 2 × 1.5 ≤ 4 < 3 × 1.5
        # ρ budget of ε = 4 at δ = 1e-10: 0.1853; 2 × 0.07 fits, 3 × 0.07 does not.
        ({"accounting": "zcdp"}, {"rho": 0.07}, ("rho_spent", 0.14)),
    ],
)
def test_concurrent_releases_never_overspend_the_budget(postgres_url, accounting, size, spent):
    from fastapi.testclient import TestClient

    from app.core.db.migrate import upgrade

    upgrade(postgres_url)
    app = make_app(postgres_url, "k")
    admin = {"Authorization": "Bearer k"}
    try:
        with TestClient(app) as c:
            s = c.post(
                "/v1/surveys",
                json={
                    "title": "t",
                    "items": ["A", "B", "C"],
                    "privacy": {
                        "model": "central",
                        "total_budget": 4.0,
                        "max_comparisons_per_respondent": 3,
                        **accounting,
                    },
                },
                headers=admin,
            ).json()
            ids = [it["id"] for it in s["items"]]
            for _ in range(10):
                reg = c.post(f"/v1/surveys/{s['id']}/respondents", json={}).json()
                c.post(
                    f"/v1/surveys/{s['id']}/responses",
                    headers={"Authorization": f"Bearer {reg['token']}"},
                    json={"privatized": False, "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[0]}]},
                )
        codes: list = []
        gate = threading.Barrier(5)

        def release():
            with TestClient(app) as c:
                gate.wait()
                codes.append(
                    c.post(
                        f"/v1/surveys/{s['id']}/releases",
                        headers=admin,
                        json={"method": "noisy_counts", "unit": "individual", **size},
                    ).status_code
                )

        threads = [threading.Thread(target=release) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(codes) == [201, 201, 409, 409, 409]
        with TestClient(app) as c:
            key, value = spent
            assert c.get(f"/v1/surveys/{s['id']}/releases", headers=admin).json()["budget"][
                key
            ] == pytest.approx(value)
    finally:
        app.state.engine.dispose()
