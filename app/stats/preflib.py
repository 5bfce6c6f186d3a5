"""PrefLib ranking files (``.soc``: complete strict orders; ``.soi``: incomplete
strict orders) and the pairwise comparisons a ballot implies.

Format (PrefLib 2022): ``#`` header lines (``# ALTERNATIVE NAME k: …``), then one
line per distinct ballot, ``COUNT: a,b,c`` — COUNT voters ranked alternative a
first, then b, then c (1-based). Alternatives a ballot leaves out are unranked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = ["Ballots", "ballot_comparisons", "read_preflib"]

_NAME = re.compile(r"#\s*ALTERNATIVE NAME\s+(\d+)\s*:\s*(.*)")
_COUNT = re.compile(r"#\s*NUMBER ALTERNATIVES\s*:\s*(\d+)")


@dataclass(frozen=True)
class Ballots:
    """Distinct ballots (0-based item indices, best first) and how many voters cast each."""

    names: list[str]
    orders: list[tuple[int, ...]]
    counts: list[int]

    @property
    def n_items(self) -> int:
        return len(self.names)

    @property
    def n_voters(self) -> int:
        return int(sum(self.counts))

    def expand(self) -> list[tuple[int, ...]]:
        """One order per voter."""
        return [order for order, c in zip(self.orders, self.counts, strict=True) for _ in range(c)]


def read_preflib(source: str | Path) -> Ballots:
    """Parse a PrefLib ``.soc``/``.soi`` file (a path, or the text itself).

    Parameters
    ----------
    source : str or Path
        A path, or the file's text.

    Returns
    -------
    Ballots
        The alternatives' names and the distinct ballots with their counts.

    Raises
    ------
    ValueError
        On fewer than two alternatives, ballots outside them, ties, an alternative ranked
        twice, or a malformed line.
    """
    text = Path(source).read_text() if isinstance(source, Path) or "\n" not in str(source) else str(source)
    names: dict[int, str] = {}
    declared = None
    orders: list[tuple[int, ...]] = []
    counts: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if m := _NAME.match(line):
                names[int(m.group(1))] = m.group(2).strip()
            elif m := _COUNT.match(line):
                declared = int(m.group(1))
            continue
        count, sep, body = line.partition(":")
        try:
            order = tuple(int(x) - 1 for x in body.split(",") if x.strip())
            if not sep or int(count) < 1 or not order:
                raise ValueError
        except ValueError:
            raise ValueError(f"line {number}: expected 'COUNT: a,b,c'") from None
        if "{" in body:
            raise ValueError(f"line {number}: ties are not supported (use .soc or .soi files)")
        if len(set(order)) != len(order):
            raise ValueError(f"line {number}: an alternative is ranked twice")
        orders.append(order)
        counts.append(int(count))
    n = declared if declared is not None else max(names, default=0)
    if n < 2:
        raise ValueError("a ranking file needs at least two alternatives")
    if any(not 0 <= x < n for order in orders for x in order):
        raise ValueError(f"ballots rank alternatives outside 1..{n}")
    return Ballots([names.get(k + 1, f"alternative {k + 1}") for k in range(n)], orders, counts)


def ballot_comparisons(
    ballots: Ballots, unranked: str = "below"
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int8]]:
    """The pairwise comparisons implied by each voter's ballot: (voter, i, j, y).

    Parameters
    ----------
    ballots : Ballots
        Parsed ballots.
    unranked : {"below", "ignore"}, default "below"
        ``"below"`` (Debian's convention for its own votes): every ranked item also beats
        every unranked item, while unranked items are not compared with each other.
        ``"ignore"`` compares ranked items only.

    Returns
    -------
    tuple of numpy.ndarray
        (voter, i, j, y) with i < j and y = 1 when i won; every ranked item beats every
        item ranked below it.

    Raises
    ------
    ValueError
        If ``unranked`` is neither ``"below"`` nor ``"ignore"``.
    """
    if unranked not in ("below", "ignore"):
        raise ValueError("unranked must be 'below' or 'ignore'")
    n = ballots.n_items
    voters, rows_i, rows_j, rows_y = [], [], [], []
    voter = 0
    for order, count in zip(ballots.orders, ballots.counts, strict=True):
        winners, losers = [], []
        ranked = list(order)
        rest = [x for x in range(n) if x not in set(order)] if unranked == "below" else []
        for a_pos, a in enumerate(ranked):
            for b in ranked[a_pos + 1 :] + rest:
                winners.append(a)
                losers.append(b)
        w = np.array(winners, dtype=np.int64)
        lo_ = np.array(losers, dtype=np.int64)
        i, j = np.minimum(w, lo_), np.maximum(w, lo_)
        y = (w == i).astype(np.int8)
        for _ in range(count):
            voters.append(np.full(i.size, voter, dtype=np.int64))
            rows_i.append(i)
            rows_j.append(j)
            rows_y.append(y)
            voter += 1
    return (np.concatenate(voters), np.concatenate(rows_i), np.concatenate(rows_j), np.concatenate(rows_y))
