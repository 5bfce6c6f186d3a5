"""A cache bounded by bytes: every per-process cache of the service is one of these.

Values are plain data shared between requests and threads (arrays, tuples, frozen
dataclasses; never ORM rows or sessions). Their size is estimated by :func:`nbytes`
(NumPy buffers exactly, every other Python object at :data:`OBJECT_BYTES`, strings
at their real size), and the least recently used go first once the total passes the
budget.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import fields, is_dataclass

import numpy as np

__all__ = ["OBJECT_BYTES", "ByteLRU", "nbytes"]

#: Bytes counted per Python object in a cached value besides its arrays' buffers
#: (object headers, dict slots, boxed numbers: ~50–100 bytes each in CPython).
OBJECT_BYTES = 100


def nbytes(value: object, seen: set[int] | None = None) -> int:
    """Approximate memory held by a cached value: its NumPy buffers' ``nbytes`` plus
    ``OBJECT_BYTES`` per Python object reached (containers, dataclasses, scalars).
    Objects shared within one value count once."""
    seen = set() if seen is None else seen
    if id(value) in seen or value is None:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return OBJECT_BYTES + (value.nbytes if value.base is None or id(value.base) not in seen else 0)
    if isinstance(value, (str, bytes)):
        return sys.getsizeof(value)
    if isinstance(value, (int, float, bool, np.generic)):
        return OBJECT_BYTES
    if isinstance(value, dict):
        return OBJECT_BYTES + sum(nbytes(k, seen) + nbytes(v, seen) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return OBJECT_BYTES + sum(nbytes(v, seen) for v in value)
    total = OBJECT_BYTES
    if is_dataclass(value):
        total += sum(nbytes(getattr(value, f.name, None), seen) for f in fields(value))
    if hasattr(value, "__dict__"):  # e.g. values computed on first use (functools.cached_property)
        total += sum(nbytes(v, seen) for v in vars(value).values())
    return total


class ByteLRU:
    """Values with a size in bytes; the least recently used go first once the total
    exceeds ``max_bytes``. A value may depend on others (a summary on its fit): when
    one is removed, whatever depends on it goes too, so nothing it references stays
    in memory uncounted. A value larger than the whole budget is not kept."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self.bytes = 0
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._children: dict[Hashable, set[Hashable]] = {}
        self._parents: dict[Hashable, tuple[Hashable, ...]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get(self, key: Hashable):
        """The value (None: not cached), now the most recently used with what it depends on:
        a summary in use keeps its fit (its parents) from going first."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._touch(key, set())
            return found[0]

    def _touch(self, key: Hashable, seen: set) -> None:
        for parent in self._parents.get(key, ()):
            if parent in self._items and parent not in seen:
                seen.add(parent)
                self._touch(parent, seen)
        self._items.move_to_end(key)

    def pop(self, key: Hashable):
        with self._lock:
            found = self._items.get(key)
            self._remove(key)
            return None if found is None else found[0]

    def put(self, key: Hashable, value: object, size: int, parents: tuple[Hashable, ...] = ()) -> bool:
        """Keep ``value`` (``size`` bytes); False when it was not kept (too large, or a
        value it depends on is no longer cached)."""
        with self._lock:
            self._remove(key)
            if size > self.max_bytes or any(p not in self._items for p in parents):
                return False
            self._items[key] = (value, int(size))
            self.bytes += int(size)
            self._parents[key] = parents
            for p in parents:
                self._children.setdefault(p, set()).add(key)
            while self.bytes > self.max_bytes:
                self._remove(next(iter(self._items)))
            return key in self._items

    def resize(self, key: Hashable, size: int) -> None:
        """A cached value grew (or shrank) in place."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return
            self._items[key] = (found[0], int(size))
            self.bytes += int(size) - found[1]
            while self.bytes > self.max_bytes:
                self._remove(next(iter(self._items)))

    def _remove(self, key: Hashable) -> None:
        found = self._items.pop(key, None)
        if found is None:
            return
        self.bytes -= found[1]
        for p in self._parents.pop(key, ()):
            siblings = self._children.get(p)
            if siblings is not None:
                siblings.discard(key)
        for child in list(self._children.pop(key, ())):
            self._remove(child)
