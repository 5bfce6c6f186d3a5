"""Per-client rate limits: respondent registration, failed authentication and suggestions.

Token buckets per (limit, client address), holding up to ``per_minute`` tokens refilled
at ``per_minute`` a minute (or ``per_hour`` an hour). Registration takes a token per
request (an integration key's from its own bucket, ``integration``, keyed by the key's
id); a failed authentication takes one per failure, and a client whose failure bucket
is empty is refused (429) before its credentials are checked, so a key cannot be
guessed faster than the limit; a suggestion takes one per request (``suggestions``, per
hour) before anything is stored. The client is the peer, or the trusted proxy's
``X-Forwarded-For``; IPv6 by its /64 (:func:`client_address`). Buckets: :class:`RateLimiter`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from fastapi import Request

from .cache import ByteLRU
from .errors import TooMany

__all__ = ["LocalBuckets", "RateLimiter", "RedisBuckets", "TooManyRequests", "client_address", "client_key"]

log = logging.getLogger("privrank.ratelimit")

#: Seconds before Redis is tried again after it failed.
RETRY_SECONDS = 5.0
#: Seconds a call to Redis may take (connect, or the script) before the fallback.
REDIS_TIMEOUT = 0.25


class TooManyRequests(TooMany):
    """Over a rate limit of this client address (429 with ``Retry-After``)."""


#: The IPv6 prefix length a client is counted by: one subscriber, household or host is
#: normally given a whole /64 (RFC 6177, RFC 7421), and picks addresses in it at will
#: (privacy extensions, RFC 8981).
IPV6_CLIENT_PREFIX = 64


def client_key(host: str) -> str:
    """What a limit counts a client by: an IPv4 address as it is (an IPv4-mapped IPv6
    address as its IPv4), an IPv6 address by its /64 network — else one client could
    take a fresh address for every request — and anything else (a test client's name)
    as it is."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(address)


def client_address(request: Request) -> str:
    """The client a per-address limit counts (:func:`client_key` of the peer's address).
    The peer is the connection's, or the proxy's ``X-Forwarded-For`` when uvicorn trusts
    that proxy (``--forwarded-allow-ips``)."""
    return client_key(request.client.host) if request.client else "unknown"


class Buckets(Protocol):
    def take(self, name: str, client: str, cap: int, consume: bool, period: float = 60.0) -> float | None:
        """With ``consume``, take a token if there is one (the bucket holds ``cap`` and
        refills ``cap`` every ``period`` seconds); either way, None when one was (or is)
        available, else the seconds until one is (nothing taken)."""

    def give_back(self, name: str, client: str, cap: int, period: float = 60.0) -> None:
        """Return one token taken from the bucket (never above ``cap``)."""


#: What one bucket is counted as (its key and two floats).
_BUCKET_BYTES = 256


class LocalBuckets:
    """Token buckets in this process, at most ``max_clients`` of them (least recently
    used dropped first)."""

    def __init__(self, max_clients: int = 100_000) -> None:
        # The service's one bounded cache class: every bucket counts the same bytes.
        self._buckets = ByteLRU(max_clients * _BUCKET_BYTES)
        self._lock = threading.Lock()  # a take is a read and a write of one bucket

    def take(self, name: str, client: str, cap: int, consume: bool, period: float = 60.0) -> float | None:
        with self._lock:
            now = time.monotonic()
            tokens, stamp = self._buckets.get((name, client)) or (float(cap), now)
            tokens = min(float(cap), tokens + (now - stamp) * cap / period)
            if tokens < 1.0:
                return (1.0 - tokens) * period / cap
            if consume:
                self._buckets.put((name, client), (tokens - 1.0, now), _BUCKET_BYTES)
        return None

    def give_back(self, name: str, client: str, cap: int, period: float = 60.0) -> None:
        with self._lock:
            found = self._buckets.get((name, client))
            if found is None:
                return  # dropped or never taken from: full
            now = time.monotonic()
            tokens = min(float(cap), found[0] + (now - found[1]) * cap / period + 1.0)
            self._buckets.put((name, client), (tokens, now), _BUCKET_BYTES)


# KEYS[1]: the bucket. ARGV: capacity (tokens), 1 to take a token, the seconds over
# which the bucket refills from empty.
# Returns nil when a token was (or is) available, else the seconds to wait (a string:
# Redis turns Lua numbers into integers).
_TAKE = """
local cap = tonumber(ARGV[1])
local rate = cap / tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local b = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(b[1]) or cap
local stamp = tonumber(b[2]) or now
tokens = math.min(cap, tokens + math.max(0, now - stamp) * rate)
if tokens < 1 then
  return tostring((1 - tokens) / rate)
end
if ARGV[2] == '1' then
  tokens = tokens - 1
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now))
  redis.call('PEXPIRE', KEYS[1], math.ceil((cap - tokens) / rate * 1000) + 1000)
end
return nil
"""

# KEYS[1]: the bucket. ARGV: capacity, the seconds over which it refills from empty.
# Adds back one token (never above the capacity); a bucket that expired is full.
_GIVE_BACK = """
local cap = tonumber(ARGV[1])
local rate = cap / tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
if not b[1] then
  return nil
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local tokens = math.min(cap, tonumber(b[1]) + math.max(0, now - tonumber(b[2])) * rate + 1)
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((cap - tokens) / rate * 1000) + 1000)
return nil
"""


class RedisBuckets:
    """Token buckets in Redis, shared by every process that uses the same Redis and
    the same ``salt`` (read once, when first needed).

    One bucket per (limit, client) for every worker and instance. A take is one Lua
    script, run atomically by Redis on Redis's clock (``TIME``), so concurrent takes from
    any number of processes never overdraw a bucket and the instances' clocks need not
    agree. Bucket keys carry no address: an HMAC of it under a random salt kept in the
    database (not in Redis: whoever reads Redis cannot test the 2³² IPv4 addresses
    against the keys), and each bucket expires once it would be full again (within a
    minute, or an hour for a per-hour limit)."""

    def __init__(self, url: str, salt: Callable[[], bytes], timeout: float = REDIS_TIMEOUT) -> None:
        import redis

        self._client: Any = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=30
        )
        self._script = self._client.register_script(_TAKE)
        self._give_back = self._client.register_script(_GIVE_BACK)
        self._salt_source = salt
        self._salt: bytes | None = None

    def _key(self, name: str, client: str) -> str:
        if self._salt is None:
            self._salt = self._salt_source()
        mac = hmac.new(self._salt, f"{name}\0{client}".encode(), hashlib.sha256).hexdigest()[:32]
        return f"privrank:ratelimit:{name}:{mac}"

    def take(self, name: str, client: str, cap: int, consume: bool, period: float = 60.0) -> float | None:
        wait = self._script(keys=[self._key(name, client)], args=[cap, 1 if consume else 0, period])
        return None if wait is None else float(wait)

    def give_back(self, name: str, client: str, cap: int, period: float = 60.0) -> None:
        self._give_back(keys=[self._key(name, client)], args=[cap, period])

    def close(self) -> None:
        self._client.close()


class RateLimiter:
    """Token buckets keyed by (name, client), each limit given per minute (``per_minute``)
    or per hour (``per_hour``); 0 disables a limit.

    With ``redis_url``, the buckets are shared through Redis (their keys salted with
    ``salt()``, the same for every instance: :class:`RedisBuckets`). Without it the
    buckets live in this process: with W workers on H hosts the service admits up to
    W·H times the configured rate. When Redis cannot be reached (or answers with an
    error) the limiter falls back to this process's buckets, logs one warning, and tries
    Redis again after :data:`RETRY_SECONDS`: a Redis outage loosens the limits to
    per-process ones for its duration; it never fails a request."""

    def __init__(
        self,
        per_minute: dict[str, int],
        max_clients: int = 100_000,
        redis_url: str | None = None,
        salt: Callable[[], bytes] | None = None,
        per_hour: dict[str, int] | None = None,
    ) -> None:
        self.per_minute = dict(per_minute)
        self.per_hour = dict(per_hour or {})
        if self.per_minute.keys() & self.per_hour.keys():
            raise ValueError("a limit is per minute or per hour, not both")
        self.local = LocalBuckets(max_clients)
        if redis_url and salt is None:
            raise ValueError("shared buckets need the salt every instance shares")
        self.shared: RedisBuckets | None = RedisBuckets(redis_url, salt) if redis_url and salt else None
        self._down_until = 0.0  # monotonic time before which Redis is not tried again
        self._failing = False
        self._state = threading.Lock()

    @property
    def degraded(self) -> bool:
        """True while Redis is configured but failing (the limits are per process)."""
        return self.shared is not None and time.monotonic() < self._down_until

    def _limit(self, name: str) -> tuple[int, float]:
        """The bucket's capacity and the seconds over which it refills (capacity 0: no limit)."""
        if name in self.per_hour:
            return self.per_hour[name], 3600.0
        return self.per_minute.get(name, 0), 60.0

    def _take(self, name: str, client: str, consume: bool) -> float | None:
        cap, period = self._limit(name)
        if cap <= 0:
            return None
        if self.shared is not None and time.monotonic() >= self._down_until:
            try:
                wait = self.shared.take(name, client, cap, consume, period)
            except Exception as exc:  # any Redis failure: connection, timeout, script error
                with self._state:
                    first, self._failing = not self._failing, True
                    self._down_until = time.monotonic() + RETRY_SECONDS
                if first:
                    log.warning(
                        "Redis unavailable for rate limits (%s); limits are per process until it is back",
                        type(exc).__name__,
                    )
            else:
                if self._failing:
                    with self._state:
                        back, self._failing = self._failing, False
                    if back:
                        log.warning("Redis is back: rate limits are shared again")
                return wait
        return self.local.take(name, client, cap, consume, period)

    def retry_after(self, name: str, client: str) -> float | None:
        """Seconds until a token is available, or None when one is (nothing is taken)."""
        return self._take(name, client, consume=False)

    def take(self, name: str, client: str) -> float | None:
        """Take a token; None when allowed, else the seconds to wait (nothing taken)."""
        return self._take(name, client, consume=True)

    def give_back(self, name: str, client: str) -> None:
        """Return a token :meth:`take` took for a request that was then refused, so that a
        refusal costs the client address nothing (to the buckets it was taken from: Redis,
        or this process's while Redis is down)."""
        cap, period = self._limit(name)
        if cap <= 0:
            return
        if self.shared is not None and time.monotonic() >= self._down_until:
            try:
                self.shared.give_back(name, client, cap, period)
                return
            except Exception:  # Redis failing: the token came from, or goes to, this process
                pass
        self.local.give_back(name, client, cap, period)

    def close(self) -> None:
        if self.shared is not None:
            self.shared.close()
