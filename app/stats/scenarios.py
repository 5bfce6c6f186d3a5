"""The simulation study of Xu, Sun & Cheng, Scenarios I–V (paper §5; docs/estimator.md §9).

Each scenario is a grid of cells, each replicated with fresh θ* and data, reporting the
mean of each metric with its Monte Carlo standard error. The paper gives settings but
only figures, so these runs are the reproduction; where it is silent the choice is
stated in :data:`SCENARIOS` (``notes``). Pure NumPy: plotting and printing live in
:mod:`app.cli.simulate`. Homogeneous-ε cells draw each pair's sufficient statistics from one
binomial (:func:`~app.stats.simulation.simulate_pair_stats`, exact in distribution);
Scenario V simulates every answer because its three mechanisms privatize the same ones.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from .btl import BTLFit
from .mechanisms import laplace_privatize, privatize
from .metrics import kendall_tau_error, l2_error, linf_error, top_k_error
from .mle import fit_debiased_mle_stats, fit_laplace_mle, fit_naive_mle_stats
from .pairs import pair_stats
from .simulation import all_pairs, evenly_spaced_theta, simulate_pair_stats, uniform_theta
from .theory import SCHEMES, scheme_epsilon

__all__ = ["METRICS", "PARAM_NAMES", "SCENARIOS", "Scenario", "ScenarioResult", "run_scenario"]

#: Metric key → (label, function(theta_hat, theta_true, k)).
METRICS: dict[str, tuple[str, Callable[[np.ndarray, np.ndarray, int], float]]] = {
    "linf": ("‖θ̂−θ*‖∞", lambda a, b, k: linf_error(a, b)),
    "l2": ("‖θ̂−θ*‖₂/√m", lambda a, b, k: l2_error(a, b)),
    "H_K": ("H_K (top-K error)", lambda a, b, k: top_k_error(a, b, k)),
    "K": ("K (Kendall error)", lambda a, b, k: kendall_tau_error(a, b)),
}

SCHEME_LABELS = {
    "log_over_sqrt": "ε ∝ log(m·n_pair)/√(m·n_pair)",
    "inv_sqrt": "ε ∝ 1/√(m·n_pair)",
    "inv_sqrt_log": "ε ∝ 1/(√(m·n_pair)·log(m·n_pair))",
}

#: How the tables and figures name a grid parameter: the grids keep the paper's symbols,
#: the output says n_pair for its L (the comparisons of each pair: every pair is answered
#: by n_pair respondents in the complete design).
PARAM_NAMES = {"L": "n_pair"}
#: The line under each table's title that says what n_pair is.
N_PAIR = "n_pair: the comparisons of each pair (every pair answered by n_pair respondents; the paper's L)"


@dataclass(frozen=True)
class Scenario:
    """A scenario's grid and how to lay out its figure."""

    key: str
    title: str
    figure: str
    grid: dict[str, tuple]
    metrics: tuple[str, ...]
    replications: int
    series: str  # one line per value of this parameter
    panel_rows: str  # "metric" or a parameter
    panel_cols: str  # "metric" or a parameter
    notes: str = ""
    #: A parameter whose values are evaluated on the same simulated data in
    #: each replicate (Scenario V's mechanisms), instead of on fresh data.
    shared: str | None = None

    def cells(self) -> Iterator[dict]:
        """Grid points that get their own data (the shared parameter excluded)."""
        keys = [k for k in self.grid if k != self.shared]
        for values in itertools.product(*(self.grid[k] for k in keys)):
            yield dict(zip(keys, values, strict=True))


SCENARIOS: dict[str, Scenario] = {
    "I": Scenario(
        "I",
        "Scenario I: consistency at constant ε",
        "Figure 2",
        {"epsilon": (1.0, 2.0, 3.0), "m": (10, 20, 40), "L": (100, 200, 400, 800)},
        ("linf", "l2"),
        50,
        series="m",
        panel_rows="metric",
        panel_cols="epsilon",
        notes="θ*~U(−2,2) centered, redrawn per replicate; λ = G(ε) (λ_paper = G/n_pair).",
    ),
    "II": Scenario(
        "II",
        "Scenario II: the dividing line for estimation",
        "Figure 3",
        {"m": (10, 20, 30), "scheme": tuple(SCHEMES), "L": (100, 200, 400, 800, 1600)},
        ("linf", "l2"),
        50,
        series="scheme",
        panel_rows="metric",
        panel_cols="m",
        notes="ε = 1 at n_pair = 100 for every scheme; schemes named by formula "
        "(the paper's text swaps Schemes 1 and 3); the paper does not state its number of replicates.",
    ),
    "III": Scenario(
        "III",
        "Scenario III: top-K and full-ranking recovery",
        "Figure 4",
        {"m": (10, 20, 30), "delta": (0.05, 0.1, 0.15, 0.2), "L": (50, 100, 200, 400)},
        ("H_K", "K"),
        100,
        series="delta",
        panel_rows="metric",
        panel_cols="m",
        notes="θ* evenly spaced with gap Δ, centered; ε = 1; K = m/2.",
    ),
    "IV": Scenario(
        "IV",
        "Scenario IV: the dividing line for ranking",
        "Figure 5",
        {"m": (10, 20, 30), "scheme": tuple(SCHEMES), "L": (50, 100, 200, 400)},
        ("K",),
        100,
        series="scheme",
        panel_rows="metric",
        panel_cols="m",
        notes="θ* evenly spaced with Δ = 0.1 (unstated in the paper).",
    ),
    "V": Scenario(
        "V",
        "Scenario V: debiased RR vs classic RR vs Laplace",
        "Figure 6",
        {"m": (10, 20), "method": ("debiased_rr", "classic_rr", "laplace"), "L": (50, 100, 200, 400)},
        ("linf", "l2", "K"),
        100,
        series="method",
        panel_rows="m",
        panel_cols="metric",
        notes="ε = 2; θ*~U(−2,2); the three mechanisms privatize the same answers; "
        "Laplace = y + Lap(1/ε) per comparison, unbiased, not clipped; same λ = G(ε).",
        shared="method",
    ),
}


@dataclass
class ScenarioResult:
    """Per-cell means and standard errors of each metric."""

    scenario: Scenario
    replications: int
    rows: list[dict] = field(default_factory=list)

    def value(self, metric: str, **params) -> tuple[float, float]:
        """(mean, standard error) of ``metric`` in the cell matching ``params``."""
        for row in self.rows:
            if all(row[k] == v for k, v in params.items()):
                return row[metric], row[metric + "_se"]
        raise KeyError(params)

    def format_table(self) -> str:
        sc = self.scenario
        params = list(sc.grid)
        head = [*(PARAM_NAMES.get(p, p) for p in params), *(f"{m} (±1.96·se)" for m in sc.metrics)]
        lines = []
        for row in self.rows:
            cells = [_fmt_param(k, row[k]) for k in params]
            cells += [f"{row[m]:.4f} ±{1.96 * row[m + '_se']:.4f}" for m in sc.metrics]
            lines.append(cells)
        widths = [max(len(h), *(len(r[c]) for r in lines)) for c, h in enumerate(head)]
        out = [
            f"{sc.title} ({sc.figure} of the paper; {self.replications} replicates per cell)",
            N_PAIR,
            "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
            "  ".join("-" * w for w in widths),
        ]
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in lines]
        if sc.notes:
            out.append(f"notes: {sc.notes}")
        return "\n".join(out)


def _fmt_param(key: str, value) -> str:
    if key == "scheme":
        return SCHEME_LABELS[value]
    return str(value)


def run_scenario(
    key: str,
    replications: int | None = None,
    seed: int = 20241121,
    progress: Callable[[dict], None] | None = None,
    cells: Iterable[dict] | None = None,
) -> ScenarioResult:
    """Run scenario ``key`` ("I" … "V") of the paper's simulation study.

    Parameters
    ----------
    key : str
        The scenario, "I" … "V" (:data:`SCENARIOS`).
    replications : int, optional
        Replicates per cell, at least 2; None uses the paper's count.
    seed : int, default 20241121
        Seed of the whole grid.
    progress : callable, optional
        Called with each finished cell's row.
    cells : iterable of dict, optional
        Runs part of the grid: the cells matching any of the given dicts on the parameters
        it names (``{"L": 100}`` selects every cell at L = 100; the shared parameter,
        Scenario V's ``method``, is always evaluated whole), with the numbers the whole
        grid gives them.

    Returns
    -------
    ScenarioResult
        Per-cell means and Monte Carlo standard errors of each metric.

    Raises
    ------
    ValueError
        With fewer than 2 replications, or ``cells`` naming a parameter or cell the
        scenario does not have.

    Notes
    -----
    Each cell draws from its own stream, ``SeedSequence(seed).spawn`` by cell position in
    the whole grid, so a cell's numbers do not depend on which other cells ran
    (docs/estimator.md §9).
    """
    sc = SCENARIOS[key]
    reps = sc.replications if replications is None else int(replications)
    if reps < 2:
        raise ValueError("need at least 2 replications for a standard error")
    grid_cells = list(sc.cells())
    streams = np.random.SeedSequence([seed, *key.encode()]).spawn(len(grid_cells))
    chosen = _select(sc, grid_cells, cells)
    result = ScenarioResult(sc, reps)
    shared_values = sc.grid[sc.shared] if sc.shared else (None,)
    for cell, stream in zip(grid_cells, streams, strict=True):
        if not chosen(cell):
            continue
        rng = np.random.default_rng(stream)
        # samples[r, s, c]: replicate r, shared value s, metric c.
        samples = np.array([_replicate(key, cell, rng) for _ in range(reps)])
        for s_index, s_value in enumerate(shared_values):
            row = dict(cell)
            if sc.shared:
                row[sc.shared] = s_value
            for col, metric in enumerate(sc.metrics):
                column = samples[:, s_index, col]
                row[metric] = float(column.mean())
                row[metric + "_se"] = float(column.std(ddof=1) / np.sqrt(reps))
            result.rows.append(row)
            if progress is not None:
                progress(row)
    order = list(sc.grid)
    result.rows.sort(key=lambda r: tuple(sc.grid[k].index(r[k]) for k in order))
    return result


def _select(sc: Scenario, grid_cells: list[dict], cells: Iterable[dict] | None) -> Callable[[dict], bool]:
    """The predicate of :func:`run_scenario`'s ``cells`` filter (every cell when None)."""
    if cells is None:
        return lambda cell: True
    wanted = [dict(c) for c in cells]
    for want in wanted:
        unknown = set(want) - (set(sc.grid) - {sc.shared})
        if unknown:
            raise ValueError(f"scenario {sc.key} has no cell parameter {sorted(unknown)}")
        if not any(all(cell[k] == v for k, v in want.items()) for cell in grid_cells):
            raise ValueError(f"scenario {sc.key} has no cell {want}")
    return lambda cell: any(all(cell[k] == v for k, v in want.items()) for want in wanted)


def _replicate(key: str, cell: dict, rng: np.random.Generator) -> list[list[float]]:
    """One replicate's metrics: a list per shared-parameter value (one list if none)."""
    sc = SCENARIOS[key]
    m, L = cell["m"], cell["L"]
    k = m // 2
    if key == "V":
        theta = uniform_theta(m, rng)
        fits = _scenario_v_fits(theta, L, 2.0, rng)
        return [[METRICS[n][1](fits[meth].theta, theta, k) for n in sc.metrics] for meth in sc.grid["method"]]
    if key == "I":
        theta = uniform_theta(m, rng)
        eps = cell["epsilon"]
    elif key == "II":
        theta = uniform_theta(m, rng)
        eps = scheme_epsilon(cell["scheme"], m, L)
    else:  # III, IV
        theta = evenly_spaced_theta(m, cell["delta"] if key == "III" else 0.1)
        eps = 1.0 if key == "III" else scheme_epsilon(cell["scheme"], m, L)
    fit = fit_debiased_mle_stats(simulate_pair_stats(theta, L, eps, rng))
    return [[METRICS[n][1](fit.theta, theta, k) for n in sc.metrics]]


def _scenario_v_fits(
    theta: np.ndarray, L: int, epsilon: float, rng: np.random.Generator
) -> dict[str, BTLFit]:
    """The three Scenario V estimators on one set of true answers (complete design)."""
    m = theta.size
    pi, pj = all_pairs(m)
    i, j = np.tile(pi, L), np.tile(pj, L)
    y = (rng.random(i.size) < 1.0 / (1.0 + np.exp(theta[j] - theta[i]))).astype(np.int8)
    stats = pair_stats(m, i, j, privatize(y, epsilon, rng=rng), epsilon)
    return {
        "debiased_rr": fit_debiased_mle_stats(stats),
        "classic_rr": fit_naive_mle_stats(stats),
        "laplace": fit_laplace_mle(m, i, j, laplace_privatize(y, epsilon, rng=rng), epsilon),
    }
