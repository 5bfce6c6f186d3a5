"""Bounded analysis: the bootstrap's replicate limit and time budget, cancellation,
the byte-bounded cache of fits and intervals, the offered confidence levels, and
the cached ranking's cost."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.services import analysis
from app.services.cache import ByteLRU
from app.services.deadline import SHUTDOWN, Deadline, OutOfTime
from app.services.surveys import get_survey
from app.stats import fit_debiased_mle
from app.stats.inference import Clusters, cluster_bootstrap_confidence, confidence
from tests.helpers.api import ADMIN, import_survey


@pytest.fixture(scope="module")
def small(app) -> str:
    """12 items, 150 respondents × 12 answers (1,800 comparisons)."""
    with TestClient(app) as client:
        return import_survey(client, 12, 150, 12, seed=3)


def test_absurd_replicates_are_refused(client, small, unchanged):
    with unchanged():
        for value in (10**9, analysis.BOOTSTRAP_MAX_REPLICATES + 1, 5, -1):
            r = client.get(
                f"/v1/surveys/{small}/ranking?uncertainty=bootstrap&replicates={value}", headers=ADMIN
            )
            assert r.status_code == 422, r.text
            assert r.json()["detail"][0]["loc"] == ["query", "replicates"]
    # The library refuses them too (a caller that bypasses the API's query bounds).
    with client.app.state.session_factory() as session:
        survey = get_survey(session, small)
        with pytest.raises(analysis.Invalid, match="replicates must be between 20 and 2000"):
            analysis.ranking(session, survey, analysis.FitCache(), uncertainty="bootstrap", replicates=10**6)


def test_bootstrap_predicted_beyond_the_budget_is_refused_before_it_starts(client, small, budget):
    # Predicted: 2,000 replicates × 1,800 comparisons × 2e-7 s = 0.72 s (cluster).
    predicted = analysis.bootstrap_seconds(12, 1800, 2000, "cluster")
    assert predicted == pytest.approx(0.72)
    budget(predicted / 3)  # more than BOOTSTRAP_REFUSE_FACTOR (2) times over
    started = time.perf_counter()
    r = client.get(f"/v1/surveys/{small}/ranking?uncertainty=bootstrap&replicates=2000", headers=ADMIN)
    elapsed = time.perf_counter() - started
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "2000 replicates" in detail and "time budget of 0.24 s" in detail and "fewer replicates" in detail
    # Refused before the replicates ran: well under what they would cost (a generous 5 s bound).
    print(f"\nrefused in {elapsed:.3f} s")
    assert elapsed < 5.0


def test_bootstrap_over_its_budget_stops_with_503(client, small, budget, monkeypatch):
    client.get(f"/v1/surveys/{small}/ranking", headers=ADMIN)  # the fit and its clusters, cached
    monkeypatch.setattr(analysis, "BOOTSTRAP_SECONDS_PER_COMPARISON", 0.0)  # never refused up front
    calls = []
    real = analysis.cluster_bootstrap_confidence

    def counting(*args, check, **kwargs):
        def counted() -> None:
            calls.append(time.perf_counter())
            check()

        return real(*args, check=counted, **kwargs)

    monkeypatch.setattr(analysis, "cluster_bootstrap_confidence", counting)
    budget(0.2)
    r = client.get(f"/v1/surveys/{small}/ranking?uncertainty=bootstrap&replicates=2000", headers=ADMIN)
    assert r.status_code == 503, r.text
    assert "time budget of 0.2 s" in r.json()["detail"]
    assert int(r.headers["Retry-After"]) >= 1
    # It stopped at a replicate boundary after the budget, not after 2,000 replicates.
    print(f"\nstopped after {len(calls)} of 2000 replicates")
    assert 1 <= len(calls) < 2000
    # Nothing was cached for that request: with a budget it now finishes.
    budget(600)
    calls.clear()
    r = client.get(f"/v1/surveys/{small}/ranking?uncertainty=bootstrap&replicates=40", headers=ADMIN)
    assert r.status_code == 200 and r.json()["uncertainty"]["method"] == "cluster_bootstrap"
    assert len(calls) == 40


def _fit_and_clusters(n_items: int = 12, n_respondents: int = 150, per: int = 12, seed: int = 5):
    rng = np.random.default_rng(seed)
    theta = np.linspace(2.0, -2.0, n_items)
    rows = []
    for r in range(n_respondents):
        for _ in range(per):
            a, b = rng.choice(n_items, 2, replace=False)
            won = rng.random() < 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
            rows.append((r, a, b, int(won)))
    who, i, j, y = (np.array(c) for c in zip(*rows, strict=True))
    y_tilde = np.where(rng.random(y.size) < 1 / (1 + np.exp(2.0)), 1 - y, y)
    fit = fit_debiased_mle(n_items, i, j, y_tilde, 2.0)
    return fit, Clusters.from_answers(n_items, i, j, y_tilde, 2.0, who)


def test_a_cancelled_deadline_stops_the_bootstrap_at_the_next_replicate():
    """What run_bounded does when the client disconnects: cancel the deadline."""
    fit, clusters = _fit_and_clusters()
    deadline = Deadline.none()
    calls = 0

    def check() -> None:
        nonlocal calls
        calls += 1
        if calls == 5:
            deadline.cancel()  # the client went away during the 5th replicate's turn
        deadline.check()

    with pytest.raises(OutOfTime, match="the client went away"):
        cluster_bootstrap_confidence(fit, clusters, n_boot=2000, rng=np.random.default_rng(1), check=check)
    assert calls == 5


def test_cancelling_from_another_thread_stops_a_running_bootstrap_promptly():
    fit, clusters = _fit_and_clusters()
    deadline = Deadline(600.0)
    started = threading.Event()
    outcome: list[BaseException] = []

    def check() -> None:
        started.set()
        deadline.check()

    def work() -> None:
        try:
            cluster_bootstrap_confidence(
                fit, clusters, n_boot=10**6, rng=np.random.default_rng(2), check=check
            )
        except BaseException as exc:  # recorded for the assertion below
            outcome.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    assert started.wait(30)
    cancelled = time.perf_counter()
    deadline.cancel()
    thread.join(30)
    stopped = time.perf_counter() - cancelled
    print(f"\nstopped {stopped * 1000:.1f} ms after the cancel")
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], OutOfTime)
    # One replicate at this size takes a few ms; 5 s is a wide margin for a loaded machine,
    # while the 10⁶ replicates asked for would take hours.
    assert stopped < 5.0


def test_shutdown_stops_the_intervals():
    fit, clusters = _fit_and_clusters()
    SHUTDOWN.set()
    try:
        with pytest.raises(OutOfTime, match="shutting down"):
            confidence(fit, 0.95, clusters=clusters, check=Deadline(600.0).check)
    finally:
        SHUTDOWN.clear()
    assert confidence(fit, 0.95, clusters=clusters, check=Deadline(600.0).check).se.size == 12


def test_confidence_levels_are_a_finite_set(client, small, unchanged):
    with unchanged():
        for value in ("0.951", "0.9999", "0.505"):
            r = client.get(f"/v1/surveys/{small}/ranking?confidence={value}", headers=ADMIN)
            assert r.status_code == 422, r.text
            assert "at most two decimals" in r.json()["detail"]
            r = client.get(f"/v1/surveys/{small}/pairwise?confidence={value}", headers=ADMIN)
            assert r.status_code == 422 and "at most two decimals" in r.json()["detail"]
    for value in ("0.5", "0.90", "0.995", "0.999"):
        r = client.get(f"/v1/surveys/{small}/ranking?confidence={value}", headers=ADMIN)
        assert r.status_code == 200 and r.json()["uncertainty"]["level"] == float(value)
    assert len(analysis.LEVELS) == 52 == len(set(analysis.LEVELS))


def test_the_cache_stays_within_its_byte_budget(app, small):
    """Many distinct (level, k) summaries: the oldest go, the total never exceeds the budget."""
    cache = analysis.FitCache()
    with app.state.session_factory() as session:
        survey = get_survey(session, small)
        analysis.ranking(session, survey, cache, level=0.5)
        one = cache.bytes  # the fit, its clusters, rows, one set of intervals and rank summaries
        (fit_key,) = [key for key in cache.lru._items if key[0] == "fit"]
        intervals = [key for key in cache.lru._items if key[0] == "intervals"]
        assert len(intervals) == 1
        size_one = cache.lru._items[intervals[0]][1]
        cache.max_bytes = one + 3 * size_one  # room for a few sets of intervals, not for 52
        for level in analysis.LEVELS:
            for k in (1, 5, None):
                analysis.ranking(session, survey, cache, level=level, k=k)
                assert cache.bytes <= cache.max_bytes
        kept = [key[2] for key in cache.lru._items if key[0] == "intervals"]
        print(
            f"\n{len(kept)} of 52 levels kept in {cache.bytes} of {cache.max_bytes} bytes ({size_one} each)"
        )
        assert 1 <= len(kept) <= cache.max_bytes // size_one < 52
        assert 0.5 not in kept and analysis.LEVELS[-1] in kept  # least recently used went first
        assert fit_key in cache.lru  # the fit was used by every request: it stayed
        # The bytes accounted are the arrays held: the sizes of what is cached add up.
        assert cache.bytes == sum(size for _, size in cache.lru._items.values())


def test_evicting_a_fit_takes_its_summaries_with_it():
    lru = ByteLRU(1000)
    assert lru.put("fit", object(), 400)
    assert lru.put("intervals", object(), 300, parents=("fit",))
    assert lru.put("ranks", object(), 100, parents=("fit", "intervals"))
    assert lru.bytes == 800
    assert lru.put("other", object(), 250)  # over budget: "fit" is the least recently used
    assert "fit" not in lru and "intervals" not in lru and "ranks" not in lru
    assert lru.bytes == 250
    assert not lru.put("huge", object(), 1001)  # larger than the budget: not kept
    assert not lru.put("orphan", object(), 10, parents=("fit",))  # its parent is gone
    assert lru.bytes == 250 and len(lru) == 1


def test_cached_ranking_is_much_cheaper_than_the_first(client):
    """The cached ranking reuses intervals, rank summaries and the graph diagnostics."""
    sid = import_survey(client, 300, 200, 40, seed=11)
    started = time.perf_counter()
    first = client.get(f"/v1/surveys/{sid}/ranking?k=10", headers=ADMIN)
    uncached = time.perf_counter() - started
    assert first.status_code == 200 and first.json()["uncertainty"]["available"]
    times = []
    for _ in range(3):
        started = time.perf_counter()
        again = client.get(f"/v1/surveys/{sid}/ranking?k=10", headers=ADMIN)
        times.append(time.perf_counter() - started)
        assert again.json() == first.json()
    cached = min(times)
    print(f"\nuncached {uncached:.3f} s, cached {cached:.3f} s, ratio {uncached / cached:.1f}")
    # Measured ~10× here; a factor 3 leaves room for a loaded machine.
    assert cached * 3 < uncached


def test_long_computations_take_turns_within_their_budget(client, small, budget):
    """At most PRIVRANK_ANALYSIS_CONCURRENCY long computations run at once per worker (each
    holds O(m²) memory: eight new rank summaries at 2,000 items at once peaked at 2.7 GB).
    A request that needs one waits for a turn, within its own time budget; a cached
    answer needs none."""
    from app.services.deadline import WorkSlots

    cache = client.app.state.fit_cache
    original = cache.work
    cache.work = WorkSlots(1)
    try:
        assert client.get(f"/v1/surveys/{small}/ranking?k=2", headers=ADMIN).status_code == 200
        held = threading.Event()
        done = threading.Event()

        def occupy() -> None:
            with cache.work.hold(Deadline(60)):
                held.set()
                done.wait(30)

        thread = threading.Thread(target=occupy)
        thread.start()
        assert held.wait(10)
        try:
            # Cached: answered at once although the only slot is taken.
            assert client.get(f"/v1/surveys/{small}/ranking?k=2", headers=ADMIN).status_code == 200
            # A new rank summary waits for the slot and runs out of its 0.5 s budget.
            budget(0.5)
            started = time.perf_counter()
            r = client.get(f"/v1/surveys/{small}/ranking?k=5", headers=ADMIN)
            waited = time.perf_counter() - started
            assert r.status_code == 503 and "time budget of 0.5 s" in r.json()["detail"], r.text
            assert 0.5 <= waited < 5.0
        finally:
            done.set()
            thread.join(10)
        # With the slot free it is computed.
        assert client.get(f"/v1/surveys/{small}/ranking?k=5", headers=ADMIN).status_code == 200
    finally:
        cache.work = original


def test_work_slots_bound_concurrent_holders():
    from app.services.deadline import WorkSlots

    slots = WorkSlots(2)
    inside, most = 0, 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        with slots.hold(Deadline(60)):
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.05)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert most == 2 and inside == 0
