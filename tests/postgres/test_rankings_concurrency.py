"""Ranking submissions and federated contributions racing on a live multi-worker server (PostgreSQL)."""

from __future__ import annotations

import threading

import httpx2
import numpy as np
from sqlalchemy import create_engine, func, select

from app.cli.site import masked_message, new_private_key, public_key
from app.core.db.models import FederatedRound, Ranking, RoundSite
from app.stats.rankings import mallows_sample
from tests.helpers.live import LiveServer

ADMIN = {"Authorization": "Bearer ranking-race-admin"}
LABELS = ["a", "b", "c", "d", "e"]


def _race(calls):
    """Run the callables at once (released together by a barrier); their results in order."""
    barrier = threading.Barrier(len(calls))
    out = [None] * len(calls)

    def run(k, fn):
        barrier.wait()
        out[k] = fn()

    threads = [threading.Thread(target=run, args=(k, fn)) for k, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_one_ranking_per_respondent_and_rounds_complete_exactly_once(postgres_url):
    server = LiveServer({"DATABASE_URL": postgres_url, "PRIVRANK_ADMIN_KEY": "ranking-race-admin"}, workers=3)
    engine = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        base = server.base
        s = httpx2.post(
            f"{base}/v1/surveys", json={"title": "r", "kind": "ranking", "items": LABELS}, headers=ADMIN
        ).json()
        ids = [it["id"] for it in s["items"]]
        # Eight identical submissions of one respondent at once, for ten respondents.
        for _ in range(10):
            reg = httpx2.post(f"{base}/v1/surveys/{s['id']}/respondents", json={}).json()
            h = {"Authorization": f"Bearer {reg['token']}"}
            body = {"privatized": False, "ranking": ids}
            url = f"{base}/v1/surveys/{s['id']}/responses"

            def post(url=url, body=body, h=h):
                return httpx2.post(url, json=body, headers=h, timeout=60).status_code

            codes = _race([post] * 8)
            assert sorted(codes) == [201] + [409] * 7, codes
        with engine.connect() as conn:
            n = conn.execute(
                select(func.count()).select_from(Ranking).where(Ranking.survey_id == s["id"])
            ).scalar_one()
        assert n == 10
        r = httpx2.get(f"{base}/v1/surveys/{s['id']}/ranking", headers=ADMIN).json()
        assert r["diagnostics"]["rankings"] == 10

        # Four rounds whose five sites all contribute at the same moment.
        rng = np.random.default_rng(0)
        for _ in range(4):
            rnd = httpx2.post(
                f"{base}/v1/surveys/{s['id']}/rounds",
                json={"method": "borda", "sites": [f"s{k}" for k in range(5)]},
                headers=ADMIN,
            ).json()
            keys = [new_private_key() for _ in rnd["sites"]]
            heads = [{"Authorization": f"Bearer {x['token']}"} for x in rnd["sites"]]
            for key, h in zip(keys, heads, strict=True):
                httpx2.put(f"{base}/v1/site/key", json={"public_key": public_key(key)}, headers=h)
            bodies = []
            for key, h in zip(keys, heads, strict=True):
                view = httpx2.get(f"{base}/v1/site", headers=h).json()
                orders = mallows_sample(np.arange(5), 0.4, 6, rng)
                bodies.append({"masked": masked_message(view, key, orders), "privatization": "none"})
            codes = _race(
                [
                    (
                        lambda b=b, h=h: (
                            httpx2.post(
                                f"{base}/v1/site/contribution", json=b, headers=h, timeout=60
                            ).status_code
                        )
                    )
                    for b, h in zip(bodies, heads, strict=True)
                ]
            )
            assert codes == [201] * 5, codes
            with engine.connect() as conn:
                row = conn.execute(select(FederatedRound).where(FederatedRound.id == rnd["id"])).one()
                left = conn.execute(
                    select(func.count())
                    .select_from(RoundSite)
                    .where(RoundSite.round_id == rnd["id"], RoundSite.masked.is_not(None))
                ).scalar_one()
            assert row.status == "complete" and row.result is not None and left == 0
    finally:
        engine.dispose()
        server.stop()
