"""GET …/pairs does O(m + answers) work at any m (app.services.assignment).

The old picker built arrays over all m(m−1)/2 pairs on every call: on a 2,000-item
survey, 40 concurrent ``count=1`` calls took the server from 247 MB to 1.27 GB with a
median of 3.9 s. Here: the rank-mapping draw is exact and uniform, both branches serve
least-answered pairs first and never a pair the respondent answered, and a live server
keeps its RSS growth under 50 MB for 40 concurrent calls at 2,000 and 10,000 items.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import threading
import time
from collections import Counter

import httpx2
import numpy as np
import pytest
from scipy import stats as sps

from app.services import assignment
from tests.helpers.api import ADMIN, ADMIN_KEY, create_survey, register
from tests.helpers.live import LiveServer


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
    starts = assignment._row_starts(m)
    i, j = np.array(list(itertools.combinations(range(m), 2))).T
    keys = assignment._keys(i, j, starts)
    assert keys.tolist() == list(range(m * (m - 1) // 2))
    back_i, back_j = assignment._pairs(keys, starts)
    assert back_i.tolist() == i.tolist() and back_j.tolist() == j.tolist()


def test_draw_is_uniform_outside_the_exclusions():
    """Each of the 8 free values of [0, 12) is drawn with probability 3/8 per draw of 3:
    χ² over 4,000 draws (seeded); excluded values never, and a draw never repeats."""
    rng = np.random.default_rng(1)
    excluded = np.array([0, 3, 4, 11])
    seen = Counter()
    for _ in range(4000):
        got = assignment._draw(12, excluded, 3, rng)
        assert got.size == 3 and len(set(got.tolist())) == 3
        seen.update(got.tolist())
    assert set(seen) == set(range(12)) - set(excluded.tolist())
    assert sps.chisquare(list(seen.values())).pvalue > 1e-3
    assert sorted(assignment._draw(12, excluded, 100, rng).tolist()) == [1, 2, 5, 6, 7, 8, 9, 10]
    assert assignment._draw(4, np.arange(4), 5, rng).size == 0


def _counts_of(n: np.ndarray) -> assignment._Counts:
    key = np.flatnonzero(n).astype(np.int64)
    cnt = n[key]
    order = np.lexsort((key, cnt))
    levels = np.concatenate(([0], np.flatnonzero(np.diff(cnt[order])) + 1, [key.size])).astype(np.int64)
    return assignment._Counts(key, key[order], levels, assignment._free_below(key))


def test_least_answered_matches_a_brute_force_ordering():
    """On 300 random count vectors (36 pairs, counts 0–3, random own answers): the served
    pairs are distinct, never the respondent's, and their counts are exactly the
    smallest ``want`` counts among the eligible pairs (least-answered first)."""
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = rng.integers(0, 4, size=36) * (rng.random(36) < 0.8)
        mine = np.flatnonzero(rng.random(36) < 0.3).astype(np.int64)
        want = int(rng.integers(1, 40))
        got = assignment._least_answered(_counts_of(n), 36, mine, want, rng)
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
    seen = Counter(int(assignment._least_answered(_counts_of(n), 10, mine, 1, rng)[0]) for _ in range(3000))
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
    s = create_survey(client, items=[f"i{k}" for k in range(50)])
    ids = [it["id"] for it in s["items"]]
    pairs = list(itertools.combinations(ids, 2))
    rng = np.random.default_rng(4)
    taken = [pairs[k] for k in rng.choice(len(pairs), 300, replace=False)]
    _, h1 = register(client, s["id"])
    answer(client, s["id"], h1, taken)
    monkeypatch.setattr(assignment, "_counts", _no("the per-pair counts"))
    _, h2 = register(client, s["id"])
    got = fetch(client, s["id"], h2, 100)
    assert len(got) == len(set(got)) == 100 and not set(got) & set(map(frozenset, taken))
    mine = fetch(client, s["id"], h1, 100)
    assert len(mine) == 100 and not set(mine) & set(map(frozenset, taken))


def test_a_dense_survey_serves_the_least_answered_pairs_from_the_counts(client, monkeypatch):
    """Every pair answered once and 600 twice: the counts branch serves only once-answered
    pairs, never the respondent's own, and caches the counts once per data version."""
    s = create_survey(client, items=[f"i{k}" for k in range(50)])
    ids = [it["id"] for it in s["items"]]
    pairs = list(itertools.combinations(ids, 2))
    _, h1 = register(client, s["id"])
    answer(client, s["id"], h1, pairs[:1000])
    answer(client, s["id"], h1, pairs[1000:])
    _, h2 = register(client, s["id"])
    answer(client, s["id"], h2, pairs[:600])
    monkeypatch.setattr(assignment, "_never_answered", _no("the key look-ups"))
    once = set(map(frozenset, pairs[600:]))
    _, h3 = register(client, s["id"])
    got = fetch(client, s["id"], h3, 100)
    assert len(set(got)) == 100 and set(got) <= once
    assert set(fetch(client, s["id"], h2, 100)) <= once  # h2's own 600 are excluded
    assert fetch(client, s["id"], h1, 100) == []  # h1 answered every pair
    cache = client.app.state.fit_cache.lru
    assert sum(1 for k in cache._items if k[0] == "pair-counts" and k[1] == s["id"]) == 1


@pytest.mark.slow
def test_concurrent_requests_read_the_counts_once(monkeypatch):
    """Cold cache, then a new data version: 16 threads ask at once; the counts are read
    once each time (the others wait for that read, or serve from the previous counts;
    without the per-key lock every thread read them: 32 reads of ~2 s and ~30 MB each
    on a dense 2,000-item survey)."""
    from app.services.analysis import FitCache

    reads: list[int] = []

    def slow_read(session, survey_id, m, version):
        reads.append(version)
        time.sleep(0.3)  # a long read: everyone else arrives meanwhile
        return assignment._Counts(
            *(np.empty(0, dtype=np.int64),) * 2,
            np.array([0, 0], dtype=np.int64),
            np.empty(0, dtype=np.int64),
            version,
            time.monotonic(),
            0.3,
        )

    monkeypatch.setattr(assignment, "_read_counts", slow_read)
    cache = FitCache()

    def ask(version: int) -> None:
        assignment._counts(None, "srv_x", 50, version, cache)

    for version in (1, 2):
        threads = [threading.Thread(target=ask, args=(version,)) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        if version == 1:
            time.sleep(3.1)  # past the reuse window (10 × the 0.3 s read): version 2 reads again
    assert reads == [1, 2]


def test_a_respondent_gets_every_pair_once_across_both_branches(client):
    """One respondent on 50 items answers what it is served, 100 at a time: the survey
    crosses from key look-ups to counts on the way, and the respondent sees each of the
    1,225 pairs exactly once, then nothing."""
    s = create_survey(client, items=[f"i{k}" for k in range(50)])
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
    s = create_survey(client, items=("A", "B", "C"))
    _, h = register(client, s["id"])
    answer(client, s["id"], h, [tuple(p) for p in fetch(client, s["id"], h, 3)])
    new = client.post(f"/v1/surveys/{s['id']}/items", json={"items": ["D"]}, headers=ADMIN).json()[0]["id"]
    got = fetch(client, s["id"], h, 10)
    assert len(got) == 3 and all(new in p for p in got)


# -- a live server under 40 concurrent calls ----------------------------------------


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def _calls(base: str, sid: str, tokens: list[str]) -> tuple[list[int], list[float]]:
    async with httpx2.AsyncClient(base_url=base, timeout=120, limits=httpx2.Limits(max_connections=60)) as c:

        async def one(token):
            t = time.perf_counter()
            r = await c.get(f"/v1/surveys/{sid}/pairs?count=1", headers={"Authorization": f"Bearer {token}"})
            return (
                r.status_code,
                time.perf_counter() - t,
                len(r.json()["pairs"]) if r.status_code == 200 else 0,
            )

        out = await asyncio.gather(*[one(t) for t in tokens])
    return [code for code, _, n in out if n == 1], [s for _, s, _ in out]


def _burst_memory(server: LiveServer, c: httpx2.Client, sid: str, label: str) -> None:
    """40 new respondents each ask for one pair at once: all served, RSS growth < 50 MB."""
    tokens = [c.post(f"/v1/surveys/{sid}/respondents", json={}).json()["token"] for _ in range(41)]
    warm = c.get(f"/v1/surveys/{sid}/pairs?count=1", headers={"Authorization": f"Bearer {tokens.pop()}"})
    assert warm.status_code == 200
    before = _rss_mb(server.proc.pid)
    peak = [before]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak.append(_rss_mb(server.proc.pid))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        served, seconds = asyncio.run(_calls(server.base, sid, tokens))
        t = time.perf_counter()
        assert c.get("/readyz").status_code == 200
        unrelated = time.perf_counter() - t
    finally:
        stop.set()
        sampler.join()
    growth = max(peak) - before
    median, slowest = statistics.median(seconds) * 1000, max(seconds) * 1000
    print(
        f"\n{label}: RSS {before:.0f} MB → peak {max(peak):.0f} MB (+{growth:.1f} MB) over 40 concurrent "
        f"count=1 calls; median {median:.0f} ms, max {slowest:.0f} ms; "
        f"/readyz right after {unrelated * 1000:.0f} ms"
    )
    assert served == [200] * 40
    assert growth < 50


def _big_survey(c: httpx2.Client, m: int) -> tuple[str, list[str]]:
    sid = c.post(
        "/v1/surveys", json={"title": "big", "items": [f"item {k}" for k in range(m)]}, headers=ADMIN
    ).json()["id"]
    return sid, [it["id"] for it in c.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]]


@pytest.mark.slow
@pytest.mark.parametrize("m", [2_000, 10_000])
def test_40_concurrent_pair_requests_keep_memory_flat(database_url, m):
    """Sparse surveys (4,000 answers): the key look-ups. The old picker: +912 MB and a
    median of 3.1 s at 2,000 items on SQLite."""
    server = LiveServer({"DATABASE_URL": database_url, "PRIVRANK_ADMIN_KEY": ADMIN_KEY})
    try:
        c = httpx2.Client(base_url=server.base, timeout=120)
        sid, ids = _big_survey(c, m)
        rng = np.random.default_rng(5)
        for _ in range(4):  # 4,000 answers on random pairs, so pair_stats is not empty
            token = c.post(f"/v1/surveys/{sid}/respondents", json={}).json()["token"]
            picks = {tuple(sorted(rng.choice(m, 2, replace=False).tolist())) for _ in range(1000)}
            body = {
                "privatized": False,
                "comparisons": [{"a": ids[a], "b": ids[b], "winner": ids[a]} for a, b in picks],
            }
            r = c.post(
                f"/v1/surveys/{sid}/responses", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            assert r.status_code == 201, r.text
        _burst_memory(server, c, sid, f"m={m}, sparse")
    finally:
        server.stop()


@pytest.mark.slow
def test_40_concurrent_pair_requests_on_a_dense_survey_keep_memory_flat(private_url):
    """2,000 items with 60% of the 1,999,000 pairs answered (written behind the API, in one
    INSERT … SELECT, in a database of the test's own): the per-pair counts are read once
    and shared; a new answer (a new data version) does not make 40 requests read them 40
    times."""
    _dense_survey_burst(private_url)


def _dense_survey_burst(url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.db.session import make_engine

    server = LiveServer({"DATABASE_URL": url, "PRIVRANK_ADMIN_KEY": ADMIN_KEY})
    engine = make_engine(url)
    try:
        c = httpx2.Client(base_url=server.base, timeout=120)
        sid, ids = _big_survey(c, 2_000)
        with Session(engine) as session:
            session.execute(
                text(
                    "INSERT INTO pair_stats (survey_id, i, j, n, sum_y, sum_z, sum_z2, sum_v) "
                    "SELECT a.survey_id, a.position, b.position, "
                    "1 + (a.position + b.position) % 3, 0, 0, 0, 1 "
                    "FROM items a JOIN items b ON a.survey_id = b.survey_id AND a.position < b.position "
                    "WHERE a.survey_id = :sid AND (7 * a.position + 13 * b.position) % 5 < 3"
                ),
                {"sid": sid},
            )
            stored = session.scalar(
                text("SELECT COUNT(*) FROM pair_stats WHERE survey_id = :sid"), {"sid": sid}
            )
            session.execute(
                text(
                    "UPDATE survey_stats SET n_comparisons = :n, version = version + 1 WHERE survey_id = :sid"
                ),
                {"n": 2 * stored, "sid": sid},
            )
            session.commit()
        assert stored > 1_000_000
        token = c.post(f"/v1/surveys/{sid}/respondents", json={}).json()["token"]
        t = time.perf_counter()
        first = c.get(f"/v1/surveys/{sid}/pairs?count=1", headers={"Authorization": f"Bearer {token}"})
        read = time.perf_counter() - t
        assert first.status_code == 200 and len(first.json()["pairs"]) == 1
        body = {"privatized": False, "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[0]}]}
        r = c.post(f"/v1/surveys/{sid}/responses", json=body, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201
        print(f"\nm=2000, {stored:,} pairs answered: counts read in {read:.2f} s")
        _burst_memory(server, c, sid, f"m=2000, dense ({stored:,} pairs answered)")
    finally:
        engine.dispose()
        server.stop()
