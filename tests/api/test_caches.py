"""Every per-process cache is bounded by bytes, and counts its values honestly.

A bound by a number of entries whatever their size does not bound memory: 1,024 surveys
in the item index cache, of up to 10,000 items with 500-character labels, take gigabytes;
so does a count of the ranking surveys' cached consensus entries.
"""

from __future__ import annotations

import tracemalloc
from types import MappingProxyType

import pytest
from fastapi.testclient import TestClient

from app.core.cache import ByteLRU
from app.core.deadline import OutOfTime
from app.surveys import items as surveys
from app.surveys.items import ItemIndex, item_index
from tests.helpers.api import ADMIN, create_ranking_survey, create_survey, register


def _index(m: int, label_chars: int) -> ItemIndex:
    ids = [f"itm_{k:016d}" for k in range(m)]
    labels = [f"{k:06d}" + "x" * (label_chars - 6) for k in range(m)]
    return ItemIndex(tuple(ids), tuple(labels), MappingProxyType({x: k for k, x in enumerate(ids)}))


@pytest.mark.parametrize(("m", "chars"), [(10_000, 20), (10_000, 500), (200, 40)])
def test_an_item_index_counts_about_the_memory_it_holds(m, chars):
    """The estimate is within a factor 1.5 of what tracemalloc sees the index allocate."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index = _index(m, chars)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    ratio = index.nbytes / held
    print(f"\nm={m}, {chars}-char labels: estimated {index.nbytes:,} B, allocated {held:,} B ({ratio:.2f})")
    assert 1 / 1.5 < ratio < 1.5


def test_the_item_index_cache_stays_within_its_byte_budget(client, monkeypatch):
    cache = surveys._ItemIndexCache(max_bytes=120_000)
    monkeypatch.setattr(surveys, "_ITEM_INDEXES", cache)
    made = [create_survey(client, items=[f"label {k} " + "y" * 60 for k in range(300)]) for _ in range(4)]
    with client.app.state.session_factory() as session:
        size = item_index(session, made[0]["id"]).nbytes
        assert 40_000 < size < 120_000  # two fit in the budget, three do not
        for s in made:
            got = surveys.known_item_index(session, s["id"], lambda index: True)
            assert len(got) == 300
            assert cache.lru.bytes <= cache.lru.max_bytes
    assert len(cache.lru) == 120_000 // size
    assert made[-1]["id"] in cache.lru and made[0]["id"] not in cache.lru  # least recent went first
    # Still served correctly after eviction: the index is read again.
    _, h = register(client, made[0]["id"])
    r = client.get(f"/v1/surveys/{made[0]['id']}/pairs?count=2", headers=h)
    assert r.status_code == 200 and len(r.json()["pairs"]) == 2


def test_consensus_results_share_the_analysis_cache_budget(client: TestClient):
    """Ranking surveys' consensus goes into the worker's one byte-bounded cache."""
    s = create_ranking_survey(client, items=("A", "B", "C", "D"))
    a, b, c, d = (it["id"] for it in s["items"])
    for order in ([a, b, c, d], [b, a, c, d], [a, c, b, d]):
        _, h = register(client, s["id"])
        body = {"ranking": order, "privatized": False}
        assert client.post(f"/v1/surveys/{s['id']}/responses", json=body, headers=h).status_code == 201
    lru: ByteLRU = client.app.state.fit_cache.lru
    before = lru.bytes
    assert client.get(f"/v1/surveys/{s['id']}/ranking?method=btl", headers=ADMIN).status_code == 200
    keys = [k for k in lru._items if k[0] == "consensus" and k[1] == s["id"]]
    assert len(keys) == 1
    assert lru.bytes - before >= lru._items[keys[0]][1] > 1000
    assert client.app.state.consensus_cache.lru is lru


class _TurnsTaken:
    """Work slots that are all taken: asking for one is refused (503), as when the
    request's budget runs out while it waits; ``asked`` counts the requests for one."""

    def __init__(self) -> None:
        self.asked = 0

    def hold(self, deadline):
        self.asked += 1
        raise OutOfTime("every turn for long computations is taken")


def test_a_cached_consensus_does_not_wait_for_a_turn(client: TestClient):
    """The consensus and its rank summaries (per k) are cached: a repeated request is
    answered while every turn for long computations is taken — it asks for none."""
    s = create_ranking_survey(client, items=("A", "B", "C", "D"))
    ids = [it["id"] for it in s["items"]]
    for r in range(32):  # intervals need 30 rankings
        _, h = register(client, s["id"])
        order = ids[r % 4 :] + ids[: r % 4]
        assert (
            client.post(
                f"/v1/surveys/{s['id']}/responses", json={"ranking": order, "privatized": False}, headers=h
            ).status_code
            == 201
        )
    url = f"/v1/surveys/{s['id']}/ranking?method=borda&k=2"
    first = client.get(url, headers=ADMIN)
    assert first.status_code == 200 and first.json()["uncertainty"]["available"], first.text
    cache = client.app.state.consensus_cache
    original = cache.work
    cache.work = taken = _TurnsTaken()
    try:
        again = client.get(url, headers=ADMIN)
        assert again.status_code == 200 and again.json() == first.json()
        assert taken.asked == 0
        # Another k is a rank summary not cached yet: it asks for a turn and gets none.
        other = client.get(url.replace("k=2", "k=3"), headers=ADMIN)
        assert other.status_code == 503 and taken.asked == 1, other.text
    finally:
        cache.work = original
