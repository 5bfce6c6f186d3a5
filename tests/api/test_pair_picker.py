"""GET …/pairs does O(m + answers) work at any m (app.respondents.assignment).

Pairs are never materialized: the rank-mapping draw is exact and uniform, both
branches serve least-answered pairs first and never a pair the respondent answered,
a request on a 10,000-item survey (50 million pairs) allocates a few MB, and a burst
of concurrent requests reads a dense survey's per-pair counts once per data version.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import Counter

import httpx2
import numpy as np
from scipy import stats as sps

from app.respondents import balanced, pair_numbers
from tests.helpers.api import ADMIN, create_survey, register


def fetch(client, sid, h, count):
    r = client.get(f"/v1/surveys/{sid}/pairs?count={count}", headers=h)
    assert r.status_code == 200, r.text
    return [frozenset((p["a"], p["b"])) for p in r.json()["pairs"]]


def answer(client, sid, h, pairs):
    body = {"privatized": False, "comparisons": [{"a": a, "b": b, "winner": a} for a, b in map(tuple, pairs)]}
    r = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)
    assert r.status_code == 201, r.text


# -- the draw -------------------------------------------------------------------


def test_pair_numbering_round_trips():
    m = 7
    starts = pair_numbers._row_starts(m)
    i, j = np.array(list(itertools.combinations(range(m), 2))).T
    keys = pair_numbers._keys(i, j, starts)
    assert keys.tolist() == list(range(m * (m - 1) // 2))
    back_i, back_j = pair_numbers._pairs(keys, starts)
    assert back_i.tolist() == i.tolist() and back_j.tolist() == j.tolist()


def test_draw_is_uniform_outside_the_exclusions():
    """Each of the 8 free values of [0, 12) is drawn with probability 3/8 per draw of 3:
    χ² over 4,000 draws (seeded); excluded values never, and a draw never repeats."""
    rng = np.random.default_rng(1)
    excluded = np.array([0, 3, 4, 11])
    seen = Counter()
    for _ in range(4000):
        got = pair_numbers._draw(12, excluded, 3, rng)
        assert got.size == 3 and len(set(got.tolist())) == 3
        seen.update(got.tolist())
    assert set(seen) == set(range(12)) - set(excluded.tolist())
    assert sps.chisquare(list(seen.values())).pvalue > 1e-3
    assert sorted(pair_numbers._draw(12, excluded, 100, rng).tolist()) == [1, 2, 5, 6, 7, 8, 9, 10]
    assert pair_numbers._draw(4, np.arange(4), 5, rng).size == 0


def _counts_of(n: np.ndarray) -> balanced._Counts:
    key = np.flatnonzero(n).astype(np.int64)
    cnt = n[key]
    order = np.lexsort((key, cnt))
    levels = np.concatenate(([0], np.flatnonzero(np.diff(cnt[order])) + 1, [key.size])).astype(np.int64)
    return balanced._Counts(key, key[order], levels, pair_numbers._free_below(key))


def test_least_answered_matches_a_brute_force_ordering():
    """On 300 random count vectors (36 pairs, counts 0–3, random own answers): the served
    pairs are distinct, never the respondent's, and their counts are exactly the
    smallest ``want`` counts among the eligible pairs (least-answered first)."""
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = rng.integers(0, 4, size=36) * (rng.random(36) < 0.8)
        mine = np.flatnonzero(rng.random(36) < 0.3).astype(np.int64)
        want = int(rng.integers(1, 40))
        got = balanced._least_answered(_counts_of(n), 36, mine, want, rng)
        eligible = np.setdiff1d(np.arange(36), mine)
        assert len(set(got.tolist())) == got.size == min(want, eligible.size)
        assert not set(got.tolist()) & set(mine.tolist())
        assert sorted(n[got].tolist()) == sorted(n[eligible].tolist())[: got.size]
        assert n[got].tolist() == sorted(n[got].tolist())  # served in order of counts


def test_ties_at_the_least_count_are_broken_uniformly():
    """Six pairs share the least eligible count (1); one is drawn per call: each 1/6."""
    n = np.array([2, 1, 1, 3, 1, 1, 2, 1, 1, 2], dtype=np.int64)  # pair 2 is the respondent's
    mine = np.array([2], dtype=np.int64)
    rng = np.random.default_rng(3)
    seen = Counter(int(balanced._least_answered(_counts_of(n), 10, mine, 1, rng)[0]) for _ in range(3000))
    assert set(seen) == {1, 4, 5, 7, 8}  # the five count-1 pairs the respondent has not answered
    assert sps.chisquare(list(seen.values())).pvalue > 1e-3


# -- both branches through the API --------------------------------------------------


def _no(name):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{name} must not be used here")

    return refuse


def test_a_sparse_survey_serves_never_answered_pairs_by_key_lookups(client, monkeypatch):
    """50 items (1,225 pairs), 300 answered: the look-up branch (the counts are never
    read) serves only never-answered pairs, and never the respondent's own."""
    s = create_survey(client, items=[f"i{k}" for k in range(50)], respondent_budget="unlimited")
    ids = [it["id"] for it in s["items"]]
    pairs = list(itertools.combinations(ids, 2))
    rng = np.random.default_rng(4)
    taken = [pairs[k] for k in rng.choice(len(pairs), 300, replace=False)]
    _, h1 = register(client, s["id"])
    answer(client, s["id"], h1, taken)
    monkeypatch.setattr(balanced, "_counts", _no("the per-pair counts"))
    _, h2 = register(client, s["id"])
    got = fetch(client, s["id"], h2, 100)
    assert len(got) == len(set(got)) == 100 and not set(got) & set(map(frozenset, taken))
    mine = fetch(client, s["id"], h1, 100)
    assert len(mine) == 100 and not set(mine) & set(map(frozenset, taken))


def test_a_dense_survey_serves_the_least_answered_pairs_from_the_counts(client, monkeypatch):
    """Every pair answered once and 600 twice: the counts branch serves only once-answered
    pairs, never the respondent's own, and caches the counts once per data version."""
    s = create_survey(client, items=[f"i{k}" for k in range(50)], respondent_budget="unlimited")
    ids = [it["id"] for it in s["items"]]
    pairs = list(itertools.combinations(ids, 2))
    _, h1 = register(client, s["id"])
    answer(client, s["id"], h1, pairs[:1000])
    answer(client, s["id"], h1, pairs[1000:])
    _, h2 = register(client, s["id"])
    answer(client, s["id"], h2, pairs[:600])
    monkeypatch.setattr(balanced, "_never_answered", _no("the key look-ups"))
    once = set(map(frozenset, pairs[600:]))
    _, h3 = register(client, s["id"])
    got = fetch(client, s["id"], h3, 100)
    assert len(set(got)) == 100 and set(got) <= once
    assert set(fetch(client, s["id"], h2, 100)) <= once  # h2's own 600 are excluded
    assert fetch(client, s["id"], h1, 100) == []  # h1 answered every pair
    cache = client.app.state.fit_cache.lru
    assert sum(1 for k in cache._items if k[0] == "pair-counts" and k[1] == s["id"]) == 1


class _FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_concurrent_requests_read_the_counts_once(monkeypatch):
    """Cold cache, then a new data version: 16 threads ask at once; the counts are read
    once each time (the others wait for that read, or serve from the previous counts).
    The read holds until all 16 have looked in the cache, so without the per-key lock
    every thread would read them (32 reads, each ~2 s and ~30 MB on a dense 2,000-item
    survey). On a fake clock: counts that took 0.3 s to read are reused at a new data
    version for 3 s (REFRESH_SHARE), then read again."""
    from app.analysis.fits import FitCache

    clock = _FakeClock()
    monkeypatch.setattr(balanced, "_clock", clock)
    cache = FitCache()
    arrived = threading.Condition()
    looked: set[threading.Thread] = set()  # the threads that have looked in the cache
    real_get = cache.lru.get

    def get(key):
        found = real_get(key)
        with arrived:
            looked.add(threading.current_thread())
            arrived.notify_all()
        return found

    cache.lru.get = get
    reads: list[int] = []

    def read(session, survey_id, m, version):
        reads.append(version)
        with arrived:  # everyone else arrives meanwhile
            assert arrived.wait_for(lambda: len(looked) == 16, timeout=60)
        return balanced._Counts(
            *(np.empty(0, dtype=np.int64),) * 2,
            np.array([0, 0], dtype=np.int64),
            np.empty(0, dtype=np.int64),
            version,
            clock(),
            0.3,
        )

    monkeypatch.setattr(balanced, "_read_counts", read)

    def burst(version: int) -> Counter:
        served: list[int] = []
        looked.clear()

        def ask() -> None:
            served.append(balanced._counts(None, "srv_x", 50, version, cache).version)

        threads = [threading.Thread(target=ask) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(served) == 16
        return Counter(served)

    assert burst(1) == {1: 16} and reads == [1]
    clock.now += 2.9  # within 10 × the 0.3 s read: version 2 is served the version-1 counts
    assert burst(2) == {1: 16} and reads == [1]
    clock.now += 0.2  # past it: one thread reads version 2, the others serve 1 (or 2, once read)
    served = burst(2)
    assert reads == [1, 2] and served[2] >= 1 and served[1] + served[2] == 16


def test_a_respondent_gets_every_pair_once_across_both_branches(client):
    """One respondent on 50 items answers what it is served, 100 at a time: the survey
    crosses from key look-ups to counts on the way, and the respondent sees each of the
    1,225 pairs exactly once, then nothing."""
    s = create_survey(client, items=[f"i{k}" for k in range(50)], respondent_budget="unlimited")
    _, h = register(client, s["id"])
    seen: list[frozenset] = []
    for _ in range(20):
        got = fetch(client, s["id"], h, 100)
        if not got:
            break
        assert not set(got) & set(seen)
        seen += got
        answer(client, s["id"], h, got)
    assert len(seen) == len(set(seen)) == 50 * 49 // 2


def test_public_counts_items_without_loading_them(client):
    s = create_survey(client, items=[f"i{k}" for k in range(30)])
    assert client.get(f"/v1/surveys/{s['id']}/public").json()["n_items"] == 30
    assert (
        client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["x"]}, headers=ADMIN).status_code == 201
    )
    assert client.get(f"/v1/surveys/{s['id']}/public").json()["n_items"] == 31


def test_items_added_later_are_served(client):
    """The cached item index is checked against the item count: a new item is served."""
    s = create_survey(client, items=("A", "B", "C"), respondent_budget=6.0)  # all 6 pairs of 4 items
    _, h = register(client, s["id"])
    answer(client, s["id"], h, [tuple(p) for p in fetch(client, s["id"], h, 3)])
    new = client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["D"]}, headers=ADMIN).json()[0]["id"]
    got = fetch(client, s["id"], h, 10)
    assert len(got) == 3 and all(new in p for p in got)


# -- memory and concurrency -----------------------------------------------------------


def test_a_request_on_10000_items_allocates_a_few_mb(client, db, monkeypatch):
    """10,000 items (49,995,000 pairs; all but two written behind the API, in one
    executemany) with 1,000 pairs answered: a request for 100 pairs takes the key
    look-ups (the counts are never read) and its peak allocation is a few MB, where one
    array over the pairs would take 50 MB (bools) to 400 MB (pair numbers)."""
    import tracemalloc

    from sqlalchemy import insert, select

    from app.core.db.models import Item, new_id, utcnow

    m = 10_000
    sid = create_survey(client, items=["item 0", "item 1"], respondent_budget="unlimited")[
        "id"
    ]  # 1,000 answers
    now = utcnow()
    db.execute(
        insert(Item),
        [
            {"id": new_id("itm"), "survey_id": sid, "position": k, "label": f"item {k}", "created_at": now}
            for k in range(2, m)
        ],
    )
    db.commit()
    ids = db.scalars(select(Item.id).where(Item.survey_id == sid).order_by(Item.position)).all()
    assert len(ids) == m
    rng = np.random.default_rng(5)
    picks = {tuple(sorted(rng.choice(m, 2, replace=False).tolist())) for _ in range(1000)}
    taken = {frozenset((ids[a], ids[b])) for a, b in picks}
    _, h1 = register(client, sid)
    answer(client, sid, h1, [tuple(p) for p in taken])
    _, h2 = register(client, sid)
    assert len(fetch(client, sid, h2, 1)) == 1  # warm: the item index is cached
    monkeypatch.setattr(balanced, "_counts", _no("the per-pair counts"))
    _, h3 = register(client, sid)
    tracemalloc.start()
    try:
        got = fetch(client, sid, h3, 100)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"\nm={m}: peak {peak / 2**20:.1f} MiB for 100 pairs")
    assert len(set(got)) == 100 and not set(got) & taken
    assert peak < 8 * 2**20, peak


def test_a_burst_on_a_dense_survey_reads_the_counts_once_per_data_version(client, app, db, monkeypatch):
    """200 items with 60% of the 19,900 pairs answered (written behind the API, in one
    INSERT … SELECT): 20 concurrent requests read the per-pair counts once and share
    them; after a new answer (a new data version) 20 more read them once again, not 20
    times. The clock is frozen, so counts are never reused past their data version."""
    from sqlalchemy import text

    from app.analysis.aggregation import fold_pending

    m = 200
    s = create_survey(client, items=[f"item {k}" for k in range(m)], respondent_budget="unlimited")
    sid, ids = s["id"], [it["id"] for it in s["items"]]
    db.execute(
        text(
            "INSERT INTO pair_stats (survey_id, i, j, n, sum_y, sum_z, sum_z2, sum_v) "
            "SELECT a.survey_id, a.position, b.position, 1 + (a.position + b.position) % 3, 0, 0, 0, 1 "
            "FROM items a JOIN items b ON a.survey_id = b.survey_id AND a.position < b.position "
            "WHERE a.survey_id = :sid AND (7 * a.position + 13 * b.position) % 5 < 3"
        ),
        {"sid": sid},
    )
    stored = db.scalar(text("SELECT COUNT(*) FROM pair_stats WHERE survey_id = :sid"), {"sid": sid})
    db.execute(
        text("UPDATE survey_stats SET n_comparisons = :n, version = version + 1 WHERE survey_id = :sid"),
        {"n": 2 * stored, "sid": sid},
    )
    db.commit()
    assert stored > m * (m - 1) // 2 // 2

    def version() -> int:
        db.commit()  # a new snapshot (SQLite)
        return db.scalar(text("SELECT version FROM survey_stats WHERE survey_id = :sid"), {"sid": sid})

    monkeypatch.setattr(balanced, "_clock", lambda: 1000.0)
    monkeypatch.setattr(balanced, "_never_answered", _no("the key look-ups"))
    reads: list[int] = []
    real_read = balanced._read_counts

    def read(session, survey_id, m, version):
        reads.append(version)
        return real_read(session, survey_id, m, version)

    monkeypatch.setattr(balanced, "_read_counts", read)
    tokens = [register(client, sid)[1] for _ in range(20)]

    async def burst() -> list[int]:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://t") as c:
            calls = [c.get(f"/v1/surveys/{sid}/pairs?count=1", headers=h) for h in tokens]
            return [
                len(r.json()["pairs"]) if r.status_code == 200 else 0 for r in await asyncio.gather(*calls)
            ]

    first = version()
    assert asyncio.run(burst()) == [1] * 20
    assert reads == [first]
    answer(client, sid, tokens[0], [(ids[0], ids[1])])
    db.commit()  # a new snapshot (SQLite), which sees the answer pending
    assert fold_pending(db, sid) == 1
    second = version()
    assert second == first + 1
    assert asyncio.run(burst()) == [1] * 20
    assert reads == [first, second]
