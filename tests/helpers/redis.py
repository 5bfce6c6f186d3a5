"""The Redis server the shared-state tests use.

``PRIVRANK_TEST_REDIS`` names it (default: this project's CI server,
``redis://127.0.0.1:6379/15``, database 15, which the tests share with nothing else).
When it is unreachable the tests are skipped on a developer machine but fail under CI
(``CI`` set): a missing service must never pass silently in CI.
"""

from __future__ import annotations

import os

import pytest

DEFAULT = "redis://127.0.0.1:6379/15"


def redis_server_url() -> str:
    import redis

    url = os.environ.get("PRIVRANK_TEST_REDIS", DEFAULT)
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
