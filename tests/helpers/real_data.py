"""Real paired-comparison populations for resampling studies (tests and benchmarks).

Debian ballots (``tests/data/preflib-debian``) imply each voter's pairwise answers; the
CEMS data (``tests/data/cems``) are pairwise answers as given, by 303 students about
six schools. Both become :class:`~app.stats.resampling.Population` objects: a finite
population whose respondents are resampled with all their answers.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from app.stats.preflib import read_preflib
from app.stats.resampling import Population

DATA = Path(__file__).resolve().parents[1] / "data"
DEBIAN = DATA / "preflib-debian"
CEMS = DATA / "cems" / "comparisons.csv"


def debian_population(name: str) -> Population:
    """The pairwise answers implied by the ballots of one Debian election file."""
    return Population.from_ballots(read_preflib(DEBIAN / name))


def cems_population(seed: int = 0) -> Population:
    """The CEMS students' answers: 303 respondents, 6 schools, up to 15 answers each.

    A tie ("no preference") becomes the answer of a forced choice made without a
    preference: a fair coin, drawn once with ``seed``, so that the population is fixed.
    """
    with CEMS.open(newline="") as f:
        rows = list(csv.DictReader(f))
    schools = sorted({r["school1"] for r in rows} | {r["school2"] for r in rows})
    code = {s: n for n, s in enumerate(schools)}
    students = sorted({int(r["student"]) for r in rows})
    who = {s: n for n, s in enumerate(students)}
    a = np.array([code[r["school1"]] for r in rows])
    b = np.array([code[r["school2"]] for r in rows])
    pref = np.array([r["preferred"] for r in rows])
    first = np.where(pref == "tie", np.random.default_rng(seed).random(pref.size) < 0.5, pref == "first")
    i, j = np.minimum(a, b), np.maximum(a, b)
    y = np.where(a < b, first, ~first).astype(np.int8)  # 1 when the lower-numbered school won
    return Population(len(schools), np.array([who[int(r["student"])] for r in rows]), i, j, y)
