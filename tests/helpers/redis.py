"""The Redis server the shared-state tests use.

``PRIVRANK_TEST_REDIS`` names it (default: this project's CI server,
``redis://127.0.0.1:6379/15``, database 15, which the tests share with nothing else).
Each xdist worker takes its own database below that one (worker ``gw1``: 14), so
workers never see each other's keys. When the server is unreachable the tests are
skipped on a developer machine but fail under CI (``CI`` set): a missing service must
never pass silently in CI.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

DEFAULT = "redis://127.0.0.1:6379/15"


def worker_index() -> int:
    """0 for the first xdist worker (or a run without xdist), 1 for the next, …"""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def redis_server_url() -> str:
    import redis

    given = urlsplit(os.environ.get("PRIVRANK_TEST_REDIS", DEFAULT))
    first = int(given.path.strip("/") or 0)
    number = first - worker_index()
    if number < 0:
        pytest.fail(f"no Redis database left for xdist worker {worker_index()} below {first}")
    url = urlunsplit(given._replace(path=f"/{number}"))
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3)
        client.ping()
        client.close()
    except redis.RedisError:
        message = f"Redis is not reachable at {url}"
        if os.environ.get("CI"):
            pytest.fail(message + " (required in CI)")
        pytest.skip(message)
    return url
