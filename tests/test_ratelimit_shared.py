"""Rate limits shared through Redis (app.core.ratelimit): one bucket for every process,
atomic under concurrent takes, no client address in Redis, and a Redis outage that
falls back to per-process limits without failing a request."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid

from app.core.ratelimit import RateLimiter

#: The salt every instance reads from the database (here: one per test run).
SALT = uuid.uuid4().bytes


def _salt() -> bytes:
    return SALT


def _client() -> str:
    """A client address no other test (or earlier run) has used."""
    return f"198.51.100.{uuid.uuid4().int % 250}-{uuid.uuid4().hex[:8]}"


def _refilled(elapsed: float, per_minute: int) -> int:
    """The most tokens a bucket can have gained back in ``elapsed`` seconds (Redis's clock
    refills it as the test runs)."""
    return math.ceil(elapsed * per_minute / 60)


def test_two_limiters_on_one_redis_share_one_bucket(redis_url):
    a = RateLimiter({"register": 30, "once": 1}, redis_url=redis_url, salt=_salt)
    b = RateLimiter({"register": 30, "once": 1}, redis_url=redis_url, salt=_salt)
    ip = _client()
    started = time.monotonic()
    waits = [(a if k % 2 else b).take("register", ip) for k in range(40)]
    elapsed = time.monotonic() - started
    granted = [w is None for w in waits]
    assert all(granted[:30])
    # 30 in all (and what refilled meanwhile), not 30 per limiter.
    assert 30 <= sum(granted) <= 30 + _refilled(elapsed, 30), (sum(granted), elapsed)
    refused = [w for w in waits if w is not None]
    assert refused and all(0 < w <= 2.0 for w in refused)  # 30 a minute: a token every 2 s
    # One a minute: a token taken through one limiter is missing from the other's view.
    assert a.take("once", ip) is None
    wait = b.retry_after("once", ip)
    assert wait is not None and 0 < wait <= 60
    assert a.take("register", _client()) is None  # per client
    assert not a.degraded and not b.degraded
    a.close()
    b.close()


def test_a_per_hour_limit_refills_over_an_hour_in_redis(redis_url):
    """Suggestions (``per_hour``): 3 an hour for every limiter on the Redis, a token back
    every 20 minutes — not every 20 seconds, as a per-minute bucket of 3 would."""
    a = RateLimiter({}, per_hour={"suggestions": 3}, redis_url=redis_url, salt=_salt)
    b = RateLimiter({}, per_hour={"suggestions": 3}, redis_url=redis_url, salt=_salt)
    ip = _client()
    assert [(a if k % 2 else b).take("suggestions", ip) for k in range(3)] == [None] * 3
    wait = a.take("suggestions", ip)
    assert wait is not None and 1200 - 5 <= wait <= 1200, wait  # Redis's clock ran a little
    assert b.take("suggestions", _client()) is None  # per client
    assert not a.degraded and not b.degraded
    a.close()
    b.close()


def test_a_token_given_back_in_redis_is_shared_and_never_overfills(redis_url):
    a = RateLimiter({}, per_hour={"suggestions": 2}, redis_url=redis_url, salt=_salt)
    b = RateLimiter({}, per_hour={"suggestions": 2}, redis_url=redis_url, salt=_salt)
    ip = _client()
    assert a.take("suggestions", ip) is None and b.take("suggestions", ip) is None
    assert a.take("suggestions", ip) is not None
    b.give_back("suggestions", ip)  # another instance refused the request it took for
    assert a.take("suggestions", ip) is None
    assert b.take("suggestions", ip) is not None
    fresh = _client()
    for _ in range(5):
        a.give_back("suggestions", fresh)  # a bucket Redis does not hold is full
    assert [b.take("suggestions", fresh) is None for _ in range(3)] == [True, True, False]
    assert not a.degraded and not b.degraded
    a.close()
    b.close()


def test_concurrent_takes_from_many_threads_never_overdraw(redis_url):
    """8 threads on each of 3 limiters race for a bucket of 50: exactly 50 succeed, and
    at most what refilled while they raced (a read-then-write outside one atomic script
    would let several take the last token)."""
    limiters = [RateLimiter({"x": 50}, redis_url=redis_url, salt=_salt) for _ in range(3)]
    ip = _client()
    granted = []
    lock = threading.Lock()
    start = threading.Barrier(24)

    def worker(lim: RateLimiter) -> None:
        start.wait()
        mine = sum(lim.take("x", ip) is None for _ in range(20))
        with lock:
            granted.append(mine)

    threads = [threading.Thread(target=worker, args=(lim,)) for lim in limiters for _ in range(8)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    assert 50 <= sum(granted) <= 50 + _refilled(elapsed, 50), (sum(granted), elapsed)
    assert not any(lim.degraded for lim in limiters)
    for lim in limiters:
        lim.close()


def test_redis_holds_no_client_address(redis_url):
    import redis

    lim = RateLimiter({"register": 5}, redis_url=redis_url, salt=_salt)
    ip = f"203.0.113.{uuid.uuid4().int % 250}"
    lim.take("register", ip)
    client = redis.Redis.from_url(redis_url)
    keys = [k.decode() for k in client.scan_iter("privrank:ratelimit:*")]
    assert any(k.startswith("privrank:ratelimit:register:") for k in keys)
    assert not [k for k in keys if ip in k]
    # The key is the HMAC under the salt the database holds (not one kept in Redis).
    import hashlib
    import hmac

    expected = hmac.new(SALT, f"register\0{ip}".encode(), hashlib.sha256).hexdigest()[:32]
    assert f"privrank:ratelimit:register:{expected}" in keys
    for key in keys:
        if client.type(key) != b"hash":
            continue
        assert ip.encode() not in b"".join(client.hgetall(key).values())
        # Gone once the bucket would be full again: a minute, an hour for suggestions.
        hourly = key.startswith("privrank:ratelimit:suggestions:")
        assert 0 < client.pttl(key) <= (3_601_000 if hourly else 61_000)
    client.close()
    lim.close()


def test_unreachable_redis_falls_back_to_per_process_limits_with_one_warning(caplog):
    lim = RateLimiter({"register": 3}, redis_url="redis://127.0.0.1:1/0", salt=_salt)  # nothing listens there
    ip = _client()
    with caplog.at_level(logging.WARNING, logger="privrank.ratelimit"):
        results = [lim.take("register", ip) for _ in range(5)]
    assert [r is None for r in results] == [True, True, True, False, False]  # still limited
    assert lim.degraded
    warnings = [r for r in caplog.records if "Redis unavailable" in r.getMessage()]
    assert len(warnings) == 1  # one warning per outage, not one per request
    lim.close()


def test_redis_that_comes_back_is_used_again(redis_url, monkeypatch, caplog):
    from app.core import ratelimit

    lim = RateLimiter({"register": 100}, redis_url=redis_url, salt=_salt)
    assert lim.shared is not None
    real = lim.shared.take
    broken = [True]

    def flaky(*args):
        if broken[0]:
            raise ConnectionError("down")
        return real(*args)

    monkeypatch.setattr(lim.shared, "take", flaky)
    now = [1000.0]
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: now[0])
    ip = _client()
    with caplog.at_level(logging.WARNING, logger="privrank.ratelimit"):
        assert lim.take("register", ip) is None  # served from this process's bucket
        assert lim.degraded
        broken[0] = False
        now[0] += ratelimit.RETRY_SECONDS / 2
        assert lim.take("register", ip) is None and lim.degraded  # not retried yet
        now[0] += ratelimit.RETRY_SECONDS
        assert lim.take("register", ip) is None and not lim.degraded  # Redis again
    messages = [r.getMessage() for r in caplog.records]
    assert sum("Redis unavailable" in m for m in messages) == 1
    assert sum("Redis is back" in m for m in messages) == 1
    lim.close()


def test_a_disabled_limit_never_calls_redis():
    lim = RateLimiter({"register": 0}, redis_url="redis://127.0.0.1:1/0", salt=_salt)
    assert all(lim.take("register", "x") is None for _ in range(100))
    assert not lim.degraded
    lim.close()


def test_shared_buckets_need_a_salt():
    import pytest

    with pytest.raises(ValueError, match="salt"):
        RateLimiter({"register": 5}, redis_url="redis://127.0.0.1:1/0")


def test_the_salt_is_created_once_and_shared_through_the_database(tmp_path):
    import threading

    from app.core.db.migrate import upgrade
    from app.core.db.session import make_engine, make_session_factory
    from app.core.secrets import service_secret

    url = f"sqlite:///{tmp_path}/s.db"
    upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    got: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: got.append(service_secret(factory, "ratelimit"))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1 and len(got[0]) == 32  # one salt, whoever asked first
    assert service_secret(factory, "other") != got[0]
    engine.dispose()
