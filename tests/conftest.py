"""Suite-wide configuration. Helpers live in ``tests.helpers``.

Tiers. The directories mark their own tests (``browser``, ``postgres``, ``faults``,
``fuzz``); a test that takes more than a couple of seconds is marked ``slow`` where it
is written, and a Monte Carlo study that checks a paper's claim is marked
``validation`` (it runs at a reduced size unless ``PRIVRANK_VALIDATION=full``, see
``tests.helpers.stats.size``). The fast loop, ``--fast``, leaves the tiers out:

    .venv/bin/pytest --fast

A test of the fast loop that takes longer than :data:`SLOW_SECONDS` (setup, call and
teardown) fails the run at its end: mark it ``slow`` or make it cheaper.

Randomness. Every test, and every fixture, draws the service's randomness
(:mod:`app.stats.entropy`: the server's randomized response, the Mallows mechanism,
the pairs served, Monte Carlo draws, new ids) from a generator seeded by its own id, so
an outcome that depends on randomized data is the same on every run, in any order and
on any xdist worker. A test that must see the OS CSPRNG itself (that privatization
reads ``os.urandom``, or OpenDP's own samplers) is marked ``os_random`` and states the
probability that its assertions fail by chance.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.stats import entropy

_HERE = Path(__file__).parent
_BY_DIRECTORY = {"browser": "browser", "postgres": "postgres", "faults": "faults"}

#: Marks of the tiers the fast loop leaves out; a test with none of them must stay fast.
TIERS = ("slow", "validation", "browser", "postgres", "faults", "fuzz")

#: How long a request of a test to a live server may wait for its answer unless the test
#: says otherwise: a hang guard, not a bound on speed (httpx's 5 s default fails on a
#: busy machine; a test that bounds a latency does so explicitly).
HTTP_TIMEOUT_SECONDS = 120.0


def _patient_http_clients() -> None:
    import httpx2

    patient = httpx2.Timeout(HTTP_TIMEOUT_SECONDS)
    verbs = ("request", "get", "post", "put", "patch", "delete", "head", "options")
    for f in (
        *(getattr(httpx2, verb) for verb in verbs),
        httpx2.Client.__init__,
        httpx2.AsyncClient.__init__,
    ):
        if f.__kwdefaults__ and "timeout" in f.__kwdefaults__:
            f.__kwdefaults__["timeout"] = patient


_patient_http_clients()

#: The most a fast-loop test may take (setup + call + teardown, seconds) before the run
#: fails. Fast-loop tests take well under a second; the margin keeps a busy machine from
#: failing the check (``PRIVRANK_SLOW_SECONDS`` overrides it).
SLOW_SECONDS = float(os.environ.get("PRIVRANK_SLOW_SECONDS") or 10.0)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A reachable Redis (tests.helpers.redis): skipped without one, failed under CI."""
    from tests.helpers.redis import redis_server_url

    return redis_server_url()


def pytest_configure(config) -> None:
    if not hasattr(config, "workerinput"):
        # Every live server, CLI process and xdist worker the run starts imports the
        # service: compiled once here, they load its bytecode even where the environment
        # sets PYTHONDONTWRITEBYTECODE (each would otherwise compile it again).
        import compileall

        compileall.compile_dir(str(_HERE.parent / "app"), quiet=1)


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast loop: leave out the tests marked " + ", ".join(TIERS),
    )


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        path = Path(item.path)
        # Doctest items (app/stats/*.py) are collected too: only tests/ has marks by place.
        parts = path.relative_to(_HERE).parts if path.is_relative_to(_HERE) else ()
        if parts and parts[0] in _BY_DIRECTORY:
            item.add_marker(_BY_DIRECTORY[parts[0]])
        if parts and parts[-1] == "test_fuzz.py":
            item.add_marker(pytest.mark.fuzz)
    if config.getoption("fast"):
        kept = [item for item in items if not any(item.get_closest_marker(t) for t in TIERS)]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


# -- seeded randomness -------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    # A fixture's draws depend on the fixture and its scope's node, not on which test
    # happened to set it up first on this worker.
    entropy.seed(f"{request.node.nodeid}::{fixturedef.argname}")
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if item.get_closest_marker("os_random"):
        entropy.unseed()
    else:
        entropy.seed(item.nodeid)
    yield
    entropy.unseed()


# -- the fast loop stays fast ------------------------------------------------------

_durations: dict[str, float] = {}
_untiered: set[str] = set()


def pytest_runtest_logreport(report) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    if report.when == "call" and not any(t in report.keywords for t in TIERS):
        _untiered.add(report.nodeid)


def _too_slow() -> list[tuple[str, float]]:
    return sorted(
        ((n, _durations[n]) for n in _untiered if _durations[n] > SLOW_SECONDS), key=lambda x: -x[1]
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller sees every report and checks
    if _too_slow() and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    slow = _too_slow()
    if slow and not hasattr(config, "workerinput"):
        terminalreporter.section("tests too slow for the fast loop", red=True)
        terminalreporter.write_line(
            f"{len(slow)} test(s) with no tier mark took more than {SLOW_SECONDS:g} s: "
            "mark them @pytest.mark.slow where they are written, or make them cheaper."
        )
        for nodeid, seconds in slow:
            terminalreporter.write_line(f"  {seconds:6.1f} s  {nodeid}")
