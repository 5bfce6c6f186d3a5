"""Where the service's random bits come from: the operating system's CSPRNG.

Every draw the service makes goes through here — randomized response and the Mallows
mechanism, the Monte Carlo draws behind intervals and P(top-K), the pairs served, the
ids of new rows (which seed an analysis's reproducible draws). The service never seeds
it: :func:`random_bytes` is :func:`os.urandom`, :func:`randbelow` is
:func:`secrets.randbelow`. A test suite may install a seeded source with :func:`seed`
(:func:`unseed` restores the OS); nothing in the service, its settings or environment
does. Secrets (tokens, keys, tickets, secure-aggregation masks) always use
:mod:`secrets` directly, and OpenDP draws central noise itself (:mod:`app.stats.central`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
from collections import Counter

import numpy as np

__all__ = ["generator", "randbelow", "random_bytes", "seed", "unseed"]

_lock = threading.Lock()
_seeded: np.random.Generator | None = None
_installs: Counter[str] = Counter()


def random_bytes(n: int) -> bytes:
    """``n`` random bytes: :func:`os.urandom` unless a test installed a seeded source.

    Parameters
    ----------
    n : int
        Number of bytes.

    Returns
    -------
    bytes
        The bytes.
    """
    gen = _seeded
    if gen is None:
        return os.urandom(n)
    with _lock:
        return gen.bytes(n)


def randbelow(n: int) -> int:
    """A uniform integer in ``[0, n)``: :func:`secrets.randbelow` unless a test seeded.

    Parameters
    ----------
    n : int
        The bound, > 0.

    Returns
    -------
    int
        The draw.
    """
    gen = _seeded
    if gen is None:
        return secrets.randbelow(n)
    with _lock:
        return int(gen.integers(n))


def generator() -> np.random.Generator:
    """A new NumPy generator seeded with 128 bits from :func:`random_bytes`.

    Returns
    -------
    numpy.random.Generator
        For draws that are not a privacy mechanism (tie-breaks, Monte Carlo, the pairs
        served).
    """
    return np.random.default_rng(int.from_bytes(random_bytes(16), "little"))


def seed(label: str) -> None:
    """Install a seeded source for tests, derived from ``label`` (e.g. a test's id).

    Parameters
    ----------
    label : str
        The seed's label.

    Notes
    -----
    Installing the same label again gives a different stream (the n-th install of a label
    is seeded by ``label#n``), so a fixture set up twice in one process does not draw the
    same ids twice; the sequence of installs decides every draw.
    """
    global _seeded
    with _lock:
        _installs[label] += 1
        digest = hashlib.sha256(f"{label}#{_installs[label]}".encode()).digest()
        _seeded = np.random.default_rng(int.from_bytes(digest[:16], "little"))


def unseed() -> None:
    """Draw from the OS CSPRNG again."""
    global _seeded
    with _lock:
        _seeded = None
