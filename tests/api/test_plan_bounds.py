"""The planners' work is bounded: absurd sizes are refused at once with the planner's
own message, and a running plan stops at the time budget, when its client leaves or
when the server stops.

Unbounded, ``GET /v1/plan`` with 500 items and 2,000 ε values runs past 7 minutes at
2.35 GB and SIGTERM cannot stop the server; ``respondents=10**30`` is a 500
(``OverflowError``); weights with ``inf`` give numpy's "pvals < 0 …" as a 422.

Budgets are spent on a fake deadline clock (``app.core.deadline._clock``) that
moves one second per check of the work: a budget of B seconds stops the work at its
B-th check on any machine.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import threading
import time

import anyio
import httpx2
import numpy as np
import pytest

from app.core import bounded
from app.core.deadline import OutOfTime
from app.planning import service as planning
from app.stats import planner
from tests.helpers.api import ADMIN, ADMIN_KEY, create_survey
from tests.helpers.live import LiveServer

PLAN = "/v1/plan?items={m}&pairs_per_respondent={kp}&k=2"

#: 32 ε levels at every pair of 500 items, 2,000 times: predicted ~1,270 s (refused
#: under the default 60 s budget; run under a budget of an hour).
HUGE = (
    PLAN.format(m=500, kp=10)
    + "&respondents=100000&replications=2000&epsilon="
    + ",".join(f"{0.5 + x / 10:g}" for x in range(32))
)


class _Clock:
    """A deadline clock that moves only when told: a budget of B seconds is spent at the
    check that brings it B seconds past the deadline's start."""

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


def _ticking(real, clock: _Clock, calls: list):
    """``real`` (a planner taking ``check``) whose checks are counted in ``calls``, the
    clock moving one second before each."""

    def counting(*args, check, **kwargs):
        def counted() -> None:
            calls.append(1)
            clock.advance()
            check()

        return real(*args, check=counted, **kwargs)

    return counting


def test_absurd_sizes_are_refused_at_once(client, inline, monkeypatch):
    """Refused before any simulation starts (the slowest would run for many minutes)."""
    inline(1e9)  # asked to answer inline (jobs refuse them too: tests/api/test_jobs.py)
    started: list[str] = []

    def simulation(name: str):
        def refuse(*args, **kwargs):
            started.append(name)
            raise AssertionError("simulation started")

        return refuse

    for name in ("plan", "respondents_needed", "epsilon_needed"):
        monkeypatch.setattr(planning, name, simulation(name))
    base = PLAN.format(m=500, kp=10)
    many_eps = ",".join(f"{1 + x / 1000:.3f}" for x in range(2000))
    cases = [
        (base + f"&respondents={10**30}&epsilon=1", "respondents"),  # not a 500 (OverflowError)
        (base + f"&respondents={planner.MAX_PLAN_RESPONDENTS + 1}&epsilon=1", "respondents"),
        (base + f"&respondents=1000&epsilon={many_eps}", "at most 32 distinct epsilon values (2000 given)"),
        (HUGE, "would take about"),
        (PLAN.format(m=501, kp=1) + "&respondents=10&epsilon=1", "items"),
    ]
    for url, message in cases:
        r = client.get(url, headers=ADMIN)
        assert r.status_code == 422, (url[:80], r.text)
        assert message in r.text, r.text
    assert started == []
    # The simulations replaced above are the ones a plan that passes the checks runs.
    r = client.get(PLAN.format(m=5, kp=2) + "&respondents=100&epsilon=1&replications=20", headers=ADMIN)
    assert r.status_code == 500 and started == ["plan"]


def test_the_prediction_of_a_refused_plan_is_stated(client, inline):
    inline(1e9)
    eps = ",".join(f"{0.5 + x / 10:g}" for x in range(32))
    url = PLAN.format(m=500, kp=10) + f"&respondents=100000&replications=2000&epsilon={eps}"
    predicted = planner.plan_seconds(500, 100000 * 10, 32, 2000)
    # 2,000 × (1 ms + 124,750 pairs × (20 ns + 250 ns + 32 × 150 ns)) ≈ 1,267 s
    assert predicted == pytest.approx(2000 * (1e-3 + 124750 * (2e-8 + 2.5e-7 + 32 * 1.5e-7)))
    detail = client.get(url, headers=ADMIN).json()["detail"]
    assert f"about {predicted:.0f} s" in detail and "time budget of 60 s" in detail


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("epsilon=1,2&epsilon_weights=inf,1", "epsilon_weights must be finite"),  # not numpy's "pvals < 0"
        ("epsilon=1,2&epsilon_weights=nan,1", "epsilon_weights must be finite"),
        ("epsilon=1,2&epsilon_weights=0,0", "not all 0"),
        ("epsilon=1,2&epsilon_weights=1", "one per epsilon"),
        ("epsilon=1&scores=1e300,0,0,0,0", "within ±50 of their mean"),
        ("epsilon=1&scores=1e308,-1e308,0,0,0", "within ±50 of their mean"),
        ("epsilon=1&scores=70,0,0,0,0", "within ±50 of their mean"),
        ("epsilon=1&scores=1,0,0,0", "one value per item"),
    ],
)
def test_bad_distributions_and_scores_get_the_planners_own_message(client, query, message):
    r = client.get(PLAN.format(m=5, kp=2) + "&respondents=100&" + query, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert message in r.json()["detail"], r.text


def test_huge_but_finite_weights_are_normalized(client):
    """Weights summing past the largest float (1e308 + 1e308) are normalized, not divided
    into zeros by an infinite sum."""
    url = PLAN.format(m=5, kp=2) + "&respondents=100&epsilon=1,2&replications=20"
    big = client.get(url + "&epsilon_weights=1e308,1e308", headers=ADMIN)
    even = client.get(url + "&epsilon_weights=1,1", headers=ADMIN)
    assert big.status_code == even.status_code == 200, big.text
    assert big.json()["plan"]["epsilon_weights"] == [0.5, 0.5]
    assert big.json()["plan"] == even.json()["plan"]


def test_equal_epsilon_values_are_one_level():
    """A distribution given value by value (2,000 answers at three ε) is the same plan
    as the three levels with their weights, and counts as three levels."""
    rng = np.random.default_rng(1)
    raw = rng.choice([0.5, 1.0, 2.0], size=2000, p=[0.2, 0.3, 0.5])
    values, weights = planner.epsilon_distribution(raw, None)
    assert values.tolist() == [0.5, 1.0, 2.0]
    counts = np.array([(raw == v).sum() for v in values])
    np.testing.assert_allclose(weights, counts / 2000)
    a = planner.plan(6, 50, 3, raw, 2, replications=20, seed=4)
    b = planner.plan(6, 50, 3, values, 2, epsilon_weights=counts, replications=20, seed=4)
    da, db = a.as_dict(), b.as_dict()
    # The same numbers up to the order of floating-point sums (weights, and G averaged over them).
    for key in ("epsilon_weights", "G"):
        np.testing.assert_allclose(da.pop(key), db.pop(key), rtol=1e-12)
    assert da == db


def test_a_plan_over_its_budget_stops_with_503(client, budget, inline, clock, monkeypatch):
    """A plan checks its deadline before every replicate and stops at the first check
    past the budget: 2,000 replicates asked, the 5 s budget spent at the 5th."""
    inline(1e9)  # these test the inline path; beyond PRIVRANK_INLINE_SECONDS a plan is a job
    monkeypatch.setattr(planning, "PLAN_REFUSE_FACTOR", float("inf"))  # never refused up front
    calls: list[int] = []
    monkeypatch.setattr(planning, "plan", _ticking(planner.plan, clock, calls))
    budget(5)
    r = client.get(PLAN.format(m=10, kp=5) + "&respondents=200&epsilon=1&replications=2000", headers=ADMIN)
    assert r.status_code == 503, r.text
    assert "time budget of 5 s" in r.json()["detail"] and int(r.headers["Retry-After"]) >= 1
    assert len(calls) == 5


def test_a_search_over_its_budget_stops_with_503(client, budget, inline, clock, monkeypatch):
    """solve=epsilon runs about ten plans (a bisection on ε); the first alone fits in the
    budget, so the search is not refused up front, but all of them do not: the deadline
    stops the search in its second plan (20 replicates each, a budget of 30 checks)."""
    plans: list[int] = []
    checks: list[int] = []
    ticking = _ticking(planner.plan, clock, checks)

    def counting_plans(*args, **kwargs):
        plans.append(1)
        return ticking(*args, **kwargs)

    # The search's plans are the planner module's own (epsilon_needed calls them there).
    monkeypatch.setattr(planner, "plan", counting_plans)
    url = PLAN.format(m=10, kp=10) + "&respondents=1000&solve=epsilon&target=0.3&replications=20"
    inline(1e9)
    budget(30)
    r = client.get(url, headers=ADMIN)
    assert r.status_code == 503, r.text
    assert "time budget of 30 s" in r.json()["detail"]
    assert (len(plans), len(checks)) == (2, 30)


def test_a_survey_plan_over_its_budget_stops_with_503(client, budget, inline, clock, monkeypatch):
    """The search for the respondents that certify the top-K simulates 10 added
    respondents, then 20 (its limit here), 20 replicates each: a budget of 30 checks
    stops it in the second size; with the budget to spare it runs both."""
    inline(1e9)
    calls: list[int] = []
    monkeypatch.setattr(
        planning, "respondents_to_certify", _ticking(planning.respondents_to_certify, clock, calls)
    )
    s = create_survey(client, items=[f"i{k}" for k in range(8)])
    url = (
        f"/v1/surveys/{s['id']}/plan?k=2&scores=3,2,1,0,0,-1,-2,-3"
        "&pairs_per_respondent=5&epsilon=1&replications=20&max_respondents=20"
    )
    budget(30)
    r = client.get(url, headers=ADMIN)
    assert r.status_code == 503, r.text
    assert "time budget of 30 s" in r.json()["detail"]
    assert len(calls) == 30
    calls.clear()
    budget(10**6)
    r = client.get(url, headers=ADMIN)
    assert r.status_code == 200 and r.json()["search_limit"] == "max_respondents", r.text
    assert len(calls) == 40


class _Client:
    """The part of a request :func:`~app.core.bounded.run_bounded` reads: whether its
    client has gone. It goes once ``gone`` is set; ``asked`` is set once it was asked
    ``patience`` times."""

    def __init__(self, patience: int = 1) -> None:
        self.gone = threading.Event()
        self.asked = threading.Event()
        self.patience = patience
        self.times = 0

    async def is_disconnected(self) -> bool:
        self.times += 1
        if self.times >= self.patience:
            self.asked.set()
        return self.gone.is_set()


def _until(condition, seconds: float = 30.0) -> bool:
    """Wait for ``condition()`` (a hang guard only: it holds at once when the code works)."""
    limit = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > limit:
            return False
        time.sleep(0.001)
    return True


def _run_bounded(request, work):
    run = functools.partial(bounded.run_bounded, request, work, seconds=600, what="the plan's simulation")
    return anyio.run(run)


def test_run_bounded_stops_the_work_at_its_next_check_once_the_client_leaves(monkeypatch):
    """The disconnect watch cancels the deadline: the unit in progress finishes and the
    next check stops the work with a 503 naming the client's departure."""
    monkeypatch.setattr(bounded, "POLL_SECONDS", 0)
    request = _Client()
    done: list[int] = []

    def work(deadline) -> str:
        for unit in range(10**6):
            deadline.check()
            if unit == 1:
                request.gone.set()  # the client leaves during the second unit
                assert _until(lambda: deadline.cancelled), "the watch did not cancel the deadline"
            done.append(unit)
        return "finished"

    with pytest.raises(OutOfTime, match="the plan's simulation was cancelled: the client went away"):
        _run_bounded(request, work)
    assert done == [0, 1]


def test_run_bounded_keeps_the_work_running_while_the_client_stays(monkeypatch):
    monkeypatch.setattr(bounded, "POLL_SECONDS", 0)
    request = _Client(patience=3)

    def work(deadline) -> str:
        deadline.check()
        assert request.asked.wait(30)  # the watch looked at the connection three times
        deadline.check()
        assert not deadline.cancelled
        return "finished"

    assert _run_bounded(request, work) == "finished"


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_until_computing(pid: int, since: float) -> None:
    """Until the server has spent half a CPU second since ``since`` (its CPU time): an
    idle server spends next to none, so the plan sent is running and holds its turn."""
    assert _until(lambda: _cpu_seconds(pid) - since >= 0.5, 60), "the plan did not start"


def _send_raw(base: str, path: str) -> socket.socket:
    """A GET sent on a socket of its own, left open: closing it is the client leaving."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ADMIN_KEY}\r\n\r\n"
    sock.sendall(head.encode())
    return sock


@pytest.mark.slow
def test_a_live_plan_stops_when_its_client_leaves_and_never_holds_up_shutdown(database_url):
    """Against ``privrank serve`` with one turn for long computations: a plan of ~20
    minutes whose client leaves gives its turn back (a small plan asked next is
    answered), and SIGTERM during another one answers it 503 and stops the server
    (uvicorn waits for requests in flight: a plan that ignored the signal would hold
    the server up until its budget of an hour ran out)."""
    env = {
        "DATABASE_URL": database_url,
        "PRIVRANK_ADMIN_KEY": ADMIN_KEY,
        # Inline, as these plans would be with a higher PRIVRANK_INLINE_SECONDS (else: jobs).
        "PRIVRANK_INLINE_SECONDS": "86400",
        "PRIVRANK_ANALYSIS_SECONDS": "3600",
        "PRIVRANK_ANALYSIS_CONCURRENCY": "1",
    }
    small = PLAN.format(m=5, kp=2) + "&respondents=100&epsilon=1&replications=20"
    server = LiveServer(env)
    try:
        pid = server.proc.pid
        before = _cpu_seconds(pid)
        leaving = _send_raw(server.base, HUGE)
        _wait_until_computing(pid, before)
        leaving.close()
        # The only turn is given back within a poll and a replicate; a plan that kept
        # running would hold it for its whole hour.
        r = httpx2.get(server.base + small, headers=ADMIN, timeout=60)
        assert r.status_code == 200, r.text

        outcome: list = []

        def long_request() -> None:
            try:
                outcome.append(httpx2.get(server.base + HUGE, headers=ADMIN, timeout=120))
            except httpx2.HTTPError as exc:
                outcome.append(exc)

        before = _cpu_seconds(pid)
        thread = threading.Thread(target=long_request, daemon=True)
        thread.start()
        _wait_until_computing(pid, before)
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=60)
        thread.join(60)
    finally:
        server.stop()
    assert code in (0, -signal.SIGTERM), server.output()
    assert len(outcome) == 1 and isinstance(outcome[0], httpx2.Response), outcome
    assert outcome[0].status_code == 503 and "shutting down" in outcome[0].json()["detail"]


def test_scores_far_from_zero_but_close_together_are_fine(client):
    """Only their spread matters (log-odds are defined up to a constant)."""
    url = PLAN.format(m=5, kp=2) + "&respondents=100&epsilon=1&replications=20"
    far = client.get(url + "&scores=10000001,10000000,10000000,9999999.5,10000000", headers=ADMIN)
    near = client.get(url + "&scores=1,0,0,-0.5,0", headers=ADMIN)
    assert far.status_code == near.status_code == 200, far.text
    assert far.json()["plan"]["p_exact_top_k"] == near.json()["plan"]["p_exact_top_k"]
