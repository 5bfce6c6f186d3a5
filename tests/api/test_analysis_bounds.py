"""Bounded analysis: the bootstrap's replicate limit and time budget, cancellation,
the byte-bounded cache of fits and intervals, the offered confidence levels, and
the cached ranking's cost."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.analysis import answer_log, diagnostics, fits, intervals
from app.analysis import bootstrap as boot
from app.analysis import service as analysis
from app.core.cache import ByteLRU
from app.core.deadline import SHUTDOWN, Deadline, OutOfTime, WorkSlots
from app.stats import fit_debiased_mle
from app.stats.inference import Clusters, cluster_bootstrap_confidence, confidence
from app.surveys.service import get_survey
from tests.helpers.api import ADMIN, import_survey


class _Clock:
    """A deadline clock (``app.core.deadline._clock``) that moves only when told: a
    budget of B seconds is spent at the check that brings it B seconds on."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = 1.0) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr("app.core.deadline._clock", fake)
    return fake


@pytest.fixture(scope="module")
def small(app) -> str:
    """12 items, 150 respondents × 12 answers (1,800 comparisons)."""
    with TestClient(app) as client:
        return import_survey(client, 12, 150, 12, seed=3)


def test_absurd_replicates_are_refused(client, small, unchanged):
    with unchanged():
        for value in (10**9, boot.BOOTSTRAP_MAX_REPLICATES + 1, 5, -1):
            r = client.get(
                f"/v1/surveys/{small}/ranking?uncertainty=bootstrap&replicates={value}", headers=ADMIN
            )
            assert r.status_code == 422, r.text
            assert r.json()["detail"][0]["loc"] == ["query", "replicates"]
    # The library refuses them too (a caller that bypasses the API's query bounds).
    with client.app.state.session_factory() as session:
        survey = get_survey(session, small)
        with pytest.raises(analysis.Invalid, match="replicates must be between 20 and 2000"):
            analysis.ranking(session, survey, fits.FitCache(), uncertainty="bootstrap", replicates=10**6)


def test_bootstrap_predicted_beyond_the_budget_is_refused_before_it_starts(
    client, small, budget, monkeypatch
):
    """Refused (422) before any replicate: the bootstrap functions are replaced by ones
    that record the call and fail."""
    # Predicted: 2,000 replicates × 1,800 comparisons × 2e-7 s = 0.72 s (cluster).
    predicted = boot.bootstrap_seconds(12, 1800, 2000, "cluster")
    assert predicted == pytest.approx(0.72)
    started: list[str] = []

    def bootstrap(name: str):
        def refuse(*args, **kwargs):
            started.append(name)
            raise AssertionError("the bootstrap started")

        return refuse

    for name in ("cluster_bootstrap_confidence", "bootstrap_confidence"):
        monkeypatch.setattr(boot, name, bootstrap(name))
    url = f"/v1/surveys/{small}/ranking?uncertainty=bootstrap&replicates=2000"
    budget(predicted / 3)  # more than BOOTSTRAP_REFUSE_FACTOR (2) times over
    for covariance in ("cluster", "model"):
        r = client.get(f"{url}&covariance={covariance}", headers=ADMIN)
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]
        assert (
            "2000 replicates" in detail and "time budget of 0.24 s" in detail and "fewer replicates" in detail
        )
    assert started == []
    # Within the budget the request goes on to the bootstrap replaced above.
    budget(600)
    assert client.get(url, headers=ADMIN).status_code == 500
    assert started == ["cluster_bootstrap_confidence"]


def test_bootstrap_over_its_budget_stops_with_503(client, small, budget, clock, monkeypatch):
    """The bootstrap checks its deadline before every replicate and stops at the first
    check past the budget: 2,000 replicates asked, the 5 s budget spent at the 5th."""
    client.get(f"/v1/surveys/{small}/ranking", headers=ADMIN)  # the fit and its clusters, cached
    monkeypatch.setattr(boot, "BOOTSTRAP_SECONDS_PER_COMPARISON", 0.0)  # never refused up front
    calls = []
    real = boot.cluster_bootstrap_confidence

    def counting(*args, check, **kwargs):
        def counted() -> None:
            calls.append(1)
            clock.advance()
            check()

        return real(*args, check=counted, **kwargs)

    monkeypatch.setattr(boot, "cluster_bootstrap_confidence", counting)
    budget(5)
    r = client.get(f"/v1/surveys/{small}/ranking?uncertainty=bootstrap&replicates=2000", headers=ADMIN)
    assert r.status_code == 503, r.text
    assert "time budget of 5 s" in r.json()["detail"]
    assert int(r.headers["Retry-After"]) >= 1
    assert len(calls) == 5
    # Nothing was cached for that request: with the budget to spare it runs to its end.
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
    """The bootstrap runs in a worker thread; the request's thread cancels it (the client
    left) while a replicate is under way: the next check stops it."""
    fit, clusters = _fit_and_clusters()
    limit = Deadline(600.0)
    in_third, cancelled = threading.Event(), threading.Event()
    calls = 0
    outcome: list[BaseException] = []

    def check() -> None:
        nonlocal calls
        calls += 1
        limit.check()
        if calls == 3:  # the third replicate runs until the other thread has cancelled
            in_third.set()
            assert cancelled.wait(30)

    def work() -> None:
        try:
            cluster_bootstrap_confidence(
                fit, clusters, n_boot=10**6, rng=np.random.default_rng(2), check=check
            )
        except BaseException as exc:  # recorded for the assertion below
            outcome.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    assert in_third.wait(30)
    limit.cancel()
    cancelled.set()
    thread.join(30)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], OutOfTime), outcome
    assert "the client went away" in str(outcome[0].detail)
    assert calls == 4  # one check after the cancel, and no replicate after it


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
    cache = fits.FitCache()
    levels = analysis.LEVELS[::3]  # 18 of the 52, from 0.5 to 0.999
    with app.state.session_factory() as session:
        survey = get_survey(session, small)
        analysis.ranking(session, survey, cache, level=0.5)
        one = cache.bytes  # the fit, its clusters, rows, one set of intervals and rank summaries
        (fit_key,) = [key for key in cache.lru._items if key[0] == "fit"]
        intervals = [key for key in cache.lru._items if key[0] == "intervals"]
        assert len(intervals) == 1
        size_one = cache.lru._items[intervals[0]][1]
        cache.max_bytes = one + 3 * size_one  # room for a few sets of intervals, not for 18
        for level in levels:
            for k in (1, 5, None):
                analysis.ranking(session, survey, cache, level=level, k=k)
                assert cache.bytes <= cache.max_bytes
        kept = [key[2] for key in cache.lru._items if key[0] == "intervals"]
        print(
            f"\n{len(kept)} of {len(levels)} levels kept in {cache.bytes} of {cache.max_bytes} bytes "
            f"({size_one} each)"
        )
        assert 1 <= len(kept) < len(levels) and len(kept) <= cache.max_bytes // size_one
        assert 0.5 not in kept and levels[-1] in kept  # least recently used went first
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


def test_a_value_in_use_keeps_what_it_depends_on():
    """Reading a summary counts as using its fit: the fit does not go before other values."""
    lru = ByteLRU(1000)
    lru.put("fit", object(), 400)
    lru.put("intervals", object(), 200, parents=("fit",))
    lru.put("other", object(), 300)
    assert lru.get("intervals") is not None  # uses the fit too: "other" is now the oldest
    lru.put("more", object(), 200)
    assert "fit" in lru and "intervals" in lru and "other" not in lru


def test_a_cached_ranking_computes_nothing_again(client, monkeypatch):
    """The first ranking fits, reads the answers, computes intervals, rank summaries and
    the graph diagnostics (each O(m³) or O(N)); the same ranking again reuses every one
    of them, and answers the same."""
    sid = import_survey(client, 20, 100, 8, seed=11)
    calls: dict[str, int] = {}

    def counted(name: str, real):
        def spy(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        return spy

    monkeypatch.setitem(fits.METHODS, "debiased_mle", counted("fit", fits.METHODS["debiased_mle"]))
    for module, name in (
        (intervals, "level_free_uncertainty"),
        (intervals, "rank_draws"),
        (diagnostics, "_graph"),
    ):
        monkeypatch.setattr(module, name, counted(name, getattr(module, name)))
    monkeypatch.setattr(answer_log, "decode_batch", counted("rows", answer_log.decode_batch))
    first = client.get(f"/v1/surveys/{sid}/ranking?k=10", headers=ADMIN)
    assert first.status_code == 200 and first.json()["uncertainty"]["available"], first.text
    assert first.json()["diagnostics"]["algebraic_connectivity"] is not None
    once = {"fit": 1, "rows": 1, "level_free_uncertainty": 1, "rank_draws": 1, "_graph": 1}
    assert calls == once
    for _ in range(3):
        again = client.get(f"/v1/surveys/{sid}/ranking?k=10", headers=ADMIN)
        assert again.json() == first.json()
    assert calls == once
    # Another level or k rescales what was kept: no covariance and no draws again.
    for query in ("k=10&confidence=0.9", "k=3", "confidence=0.8"):
        r = client.get(f"/v1/surveys/{sid}/ranking?{query}", headers=ADMIN)
        assert r.status_code == 200 and r.json()["uncertainty"]["available"], r.text
    assert calls == once


class _Turns(WorkSlots):
    """One turn whose users are recorded: ``asked`` counts the turns asked for, ``waits``
    the times a request was refused the turn and looked at its deadline — each moving
    ``clock`` one second on."""

    def __init__(self, clock: _Clock | None = None) -> None:
        super().__init__(1)
        self.clock = clock
        self.asked = 0
        self.waits = 0

    @contextmanager
    def hold(self, deadline):
        self.asked += 1
        turns = self

        class Waiting:
            def check_waiting(self) -> None:
                turns.waits += 1
                if turns.clock is not None:
                    turns.clock.advance()
                deadline.check_waiting()

        with super().hold(Waiting()):
            yield


def test_long_computations_take_turns_within_their_budget(client, small, budget, clock):
    """At most PRIVRANK_ANALYSIS_CONCURRENCY long computations run at once per worker (each
    holds O(m²) memory: eight new rank summaries at 2,000 items at once peak at 2.7 GB).
    A request that needs one waits for a turn, within its own time budget; a cached
    answer needs none."""
    cache = client.app.state.fit_cache
    original = cache.work
    cache.work = turns = _Turns(clock)
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
            # Cached: answered at once, without asking for the only turn (taken).
            turns.asked = 0
            assert client.get(f"/v1/surveys/{small}/ranking?k=2", headers=ADMIN).status_code == 200
            assert turns.asked == 0
            # A new rank summary waits for the turn and runs out of its 3 s budget on the
            # third look at its deadline.
            budget(3)
            r = client.get(f"/v1/surveys/{small}/ranking?k=5", headers=ADMIN)
            assert r.status_code == 503 and "time budget of 3 s" in r.json()["detail"], r.text
            assert (turns.asked, turns.waits) == (1, 3)
        finally:
            done.set()
            thread.join(10)
        # With the turn free it is computed, without waiting.
        turns.asked = turns.waits = 0
        assert client.get(f"/v1/surveys/{small}/ranking?k=5", headers=ADMIN).status_code == 200
        assert (turns.asked, turns.waits) == (1, 0)
    finally:
        cache.work = original


def test_work_slots_bound_concurrent_holders():
    """Eight threads ask for two slots: two get them and stay until released, the six
    others are each refused at least once meanwhile; then all of them run, never more
    than two at once."""
    slots = WorkSlots(2)
    inside, most = 0, 0
    refused: set[int] = set()
    changed = threading.Condition()
    release = threading.Event()

    class Waiting:
        def __init__(self, number: int) -> None:
            self.number = number

        def check_waiting(self) -> None:
            with changed:
                refused.add(self.number)
                changed.notify_all()

    def work(number: int) -> None:
        nonlocal inside, most
        with slots.hold(Waiting(number)):
            with changed:
                inside += 1
                most = max(most, inside)
                changed.notify_all()
            assert release.wait(30)
            with changed:
                inside -= 1

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    with changed:
        assert changed.wait_for(lambda: inside == 2 and len(refused) == 6, timeout=30), (inside, refused)
        assert most == 2
    release.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert most == 2 and inside == 0
