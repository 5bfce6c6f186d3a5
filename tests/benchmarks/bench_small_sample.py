"""Intervals for surveys with few respondents: the cluster covariances compared.

    python -m tests.benchmarks.bench_small_sample            # full table, 300 surveys per cell (~25 min)
    python -m tests.benchmarks.bench_small_sample -r 600     # more surveys per cell
    python -m tests.benchmarks.bench_small_sample --quick    # 8 cells, 40 surveys each (CI smoke run)
    python -m tests.benchmarks.bench_small_sample --only CEMS  # the populations whose label starts so

Surveys of G = 2, 3, 5, 10, 20, 30 and 50 respondents are drawn from a finite
population (app.stats.resampling: real Debian ballots, the CEMS students' paired
comparisons, or simulated respondents with random effects τ), every answer privatized
at ε, and each method's nominal 95% intervals are checked against the population's own
BTL scores (docs/uncertainty.md §3).
Methods (``confidence(..., cluster_variance=...)``):

* ``model``  the model-based sandwich (answers independent), normal quantiles;
* ``bound``  the worst-case-correlation bound (Cauchy–Schwarz), normal quantiles;
* ``CR1``    G/(G−1)·Σ u_g u_gᵀ, floored at the model meat, Student t(G − 1);
* ``CR2``    the bias-reduced meat of Bell & McCaffrey (2002) floored at the model
             meat, Student t with their degrees of freedom (smallest over the items);
* ``CR2raw`` the same without the floor.

Per cell and method: coverage (share of items covered, averaged over the surveys that
got intervals) ± its Monte Carlo se (from the per-survey shares, as
``resampling.Coverage.mc_se``), the mean ratio of the interval's width to the
model-based width on the same survey, and the share of surveys refused (no
intervals, or a disconnected design). ``auto`` is the service's choice
(``cluster_variance="auto"``); the last column says which covariances it chose, with
their shares of its intervals.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from app.stats import fit_debiased_mle_stats
from app.stats.inference import Clusters, IntervalsUnavailable, confidence
from app.stats.pairs import pair_stats
from app.stats.resampling import Population, heterogeneous_population
from app.stats.simulation import uniform_theta
from tests.helpers.real_data import cems_population, debian_population

METHODS = (
    ("model", None),
    ("bound", "bound"),
    ("CR1", "cr1"),
    ("CR2", "cr2"),
    ("CR2raw", "cr2_unfloored"),
    ("auto", "auto"),
)
SIZES = (2, 3, 5, 10, 20, 30, 50)
LEVEL = 0.95


@dataclass
class Cell:
    """Per-survey coverage shares and width ratios of each method, and refusals."""

    shares: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k, _ in METHODS})
    ratios: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k, _ in METHODS})
    refused: dict[str, int] = field(default_factory=lambda: {k: 0 for k, _ in METHODS})
    chosen: dict[str, int] = field(default_factory=dict)
    surveys: int = 0


def run_cell(pop: Population, g: int, eps: float, pairs: int | None, reps: int, seed: list[int]) -> Cell:
    rng = np.random.default_rng(seed)
    truth = pop.estimand(pairs)
    m = pop.n_items
    cell = Cell()
    for _ in range(reps):
        cell.surveys += 1
        s = pop.sample(g, eps, rng, pairs)
        fit = fit_debiased_mle_stats(pair_stats(m, s.i, s.j, s.y_tilde, s.epsilon))
        if np.unique(fit.component).size > 1:
            for name, _ in METHODS:
                cell.refused[name] += 1
            continue
        clusters = Clusters.from_answers(m, s.i, s.j, s.y_tilde, s.epsilon, s.respondent)
        widths: dict[str, np.ndarray] = {}
        for name, choice in METHODS:
            try:
                if choice is None:
                    conf = confidence(fit, LEVEL)
                else:
                    conf = confidence(fit, LEVEL, clusters=clusters, cluster_variance=choice)
            except IntervalsUnavailable:
                cell.refused[name] += 1
                continue
            cell.shares[name].append(float(np.mean((conf.lower <= truth) & (truth <= conf.upper))))
            if name == "auto":
                cell.chosen[conf.method] = cell.chosen.get(conf.method, 0) + 1
            widths[name] = conf.upper - conf.lower
        if "model" in widths:
            for name, wd in widths.items():
                cell.ratios[name].append(float(np.mean(wd / widths["model"])))
    return cell


def _fmt(cell: Cell, name: str) -> str:
    x = np.asarray(cell.shares[name])
    if x.size == 0:
        return f"{'—':>6} {'':6} {'':5} {cell.refused[name] / cell.surveys:4.2f}"
    se = float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else math.nan
    ratio = float(np.mean(cell.ratios[name])) if cell.ratios[name] else math.nan
    return f"{x.mean():6.3f} ±{se:5.3f} {ratio:5.2f} {cell.refused[name] / cell.surveys:4.2f}"


_SHORT = {"cluster": "CR1", "cluster_cr2": "CR2", "cluster_bound": "bound"}


def _chosen(cell: Cell) -> str:
    """The covariances "auto" chose, with their shares of its intervals."""
    total = sum(cell.chosen.values())
    parts = sorted(cell.chosen.items(), key=lambda kv: -kv[1])
    return " ".join(f"{_SHORT.get(k, k)} {v / total:.2f}" for k, v in parts) or "—"


def _header() -> str:
    cols = "  ".join(f"{name:>6} {'(±se)':>6} {'width':>5} {'ref':>4}" for name, _ in METHODS)
    return f"{'cell':34} {'G':>3}  {cols}  auto chose"


def populations(quick: bool) -> list[tuple[str, Population, list[int | None]]]:
    """(label, population, designs): None = every comparison a respondent has, k = k random pairs."""
    out: list[tuple[str, Population, list[int | None]]] = []
    ballots = (
        (("00002-00000006.soi", "Debian 2010 leader"),)
        if quick
        else (
            ("00002-00000001.soi", "Debian 2002 leader"),
            ("00002-00000006.soi", "Debian 2010 leader"),
            ("00002-00000008.soi", "Debian logo"),
        )
    )
    for name, title in ballots:
        pop = debian_population(name)
        out.append((f"{title} ({pop.n_items}×{pop.n_respondents})", pop, [None, 3]))
    if not quick:
        out.append(("CEMS schools (6×303)", cems_population(), [None, 3]))
    sims = ((6, 1.0),) if quick else ((3, 0.0), (3, 1.0), (6, 0.0), (6, 1.0), (6, 2.0), (10, 0.0), (10, 1.0))
    for m, tau in sims:
        theta = uniform_theta(m, np.random.default_rng(m), -1.0, 1.0)
        full = m * (m - 1) // 2
        pop = heterogeneous_population(theta, 5_000, full, tau, np.random.default_rng([m, int(tau * 10)]))
        out.append((f"sim m={m} τ={tau:g}", pop, [None, 3]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", "-r", type=int, default=300, help="surveys per cell")
    parser.add_argument("--quick", action="store_true", help="a few cells, 40 surveys each")
    parser.add_argument("--only", default="", help="only the populations whose label starts with this")
    args = parser.parse_args(argv)
    threadpool_limits(limits=1, user_api="blas")  # one core, as the service (app.main)
    reps = 40 if args.quick else args.replications
    sizes = (3, 10) if args.quick else SIZES
    epsilons = (4.0,) if args.quick else (1.0, 4.0, math.inf)
    start = time.perf_counter()
    print(f"Nominal {LEVEL:.0%} intervals with few respondents, {reps} surveys per cell")
    print("per method: coverage, its Monte Carlo se, mean width / model-based width, share refused")
    print(_header())
    for label, pop, designs in populations(args.quick):
        if not label.startswith(args.only):
            continue
        for pairs in designs:
            for eps in epsilons:
                if math.isinf(eps) and not (label.startswith("Debian 2010") or "m=6 τ=1" in label):
                    continue  # ε = ∞ (no privacy) on two populations only
                design = "all" if pairs is None else f"{pairs}pr"
                for g in sizes:
                    cell = run_cell(
                        pop, g, eps, pairs, reps, [g, int(min(eps, 99) * 10), pairs or 0, len(label)]
                    )
                    cols = "  ".join(_fmt(cell, name) for name, _ in METHODS)
                    name = f"{label[:22]} {design} ε={eps:g}"
                    print(f"{name:34} {g:>3}  {cols}  {_chosen(cell)}", flush=True)
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
