"""Per-client rate limits: respondent registration and failed authentication.

Token buckets per (limit, client address) in this process: a bucket holds up to
``per_minute`` tokens and refills at ``per_minute`` per minute. Registration takes
a token per request; a failed authentication takes one per failure, and a client
whose failure bucket is empty is refused (429) before its credentials are even
checked — a key cannot be guessed faster than the limit. The client address is
the connection's peer, or the proxy's ``X-Forwarded-For`` when uvicorn trusts that
proxy (``--forwarded-allow-ips``). Limits are per worker process: with W workers
the service admits up to W times the configured rate.
"""

from __future__ import annotations

import threading
import time

from fastapi import Request

from ..services.cache import ByteLRU
from ..services.errors import TooMany

__all__ = ["RateLimiter", "TooManyRequests", "client_address"]


class TooManyRequests(TooMany):
    """Over a rate limit of this client address (429 with ``Retry-After``)."""


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


#: What one bucket is counted as (its key and two floats).
_BUCKET_BYTES = 256


class RateLimiter:
    """Token buckets keyed by (name, client); ``per_minute=0`` disables a limit."""

    def __init__(self, per_minute: dict[str, int], max_clients: int = 100_000) -> None:
        self.per_minute = dict(per_minute)
        # The service's one bounded cache class: every bucket counts the same bytes, so the
        # budget holds ``max_clients`` buckets, the least recently used dropped first.
        self._buckets = ByteLRU(max_clients * _BUCKET_BYTES)
        self._lock = threading.Lock()  # a take is a read and a write of one bucket

    def _level(self, name: str, client: str, now: float) -> float:
        cap = self.per_minute[name]
        tokens, stamp = self._buckets.get((name, client)) or (float(cap), now)
        return min(float(cap), tokens + (now - stamp) * cap / 60.0)

    def _store(self, name: str, client: str, tokens: float, now: float) -> None:
        self._buckets.put((name, client), (tokens, now), _BUCKET_BYTES)

    def retry_after(self, name: str, client: str) -> float | None:
        """Seconds until a token is available, or None when one is (nothing is taken)."""
        cap = self.per_minute.get(name, 0)
        if cap <= 0:
            return None
        with self._lock:
            tokens = self._level(name, client, time.monotonic())
        return None if tokens >= 1.0 else (1.0 - tokens) * 60.0 / cap

    def take(self, name: str, client: str) -> float | None:
        """Take a token; None when allowed, else the seconds to wait (nothing taken)."""
        cap = self.per_minute.get(name, 0)
        if cap <= 0:
            return None
        with self._lock:
            now = time.monotonic()
            tokens = self._level(name, client, now)
            if tokens < 1.0:
                return (1.0 - tokens) * 60.0 / cap
            self._store(name, client, tokens - 1.0, now)
        return None
