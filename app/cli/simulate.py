"""`privrank simulate`: run the paper's Scenarios I–V, print tables, draw figures.

The numbers come from :mod:`app.stats.scenarios`; this module only presents them
(matplotlib, imported lazily with the non-interactive Agg backend).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..stats.scenarios import METRICS, PARAM_NAMES, SCENARIOS, SCHEME_LABELS, ScenarioResult, run_scenario

__all__ = ["plot_scenario", "run"]


def _label(key: str, value) -> str:
    if key == "metric":
        return METRICS[value][0]
    if key == "scheme":
        return SCHEME_LABELS[value]
    names = {"epsilon": "ε", "delta": "Δ", "method": "", **PARAM_NAMES}
    prefix = names.get(key, key)
    return f"{prefix} = {value}" if prefix else str(value)


def plot_scenario(result: ScenarioResult, path: Path) -> Path:
    """Draw the scenario's panels (mean ± 1.96·se against n_pair, one line per series)."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(
            "drawing the figures needs matplotlib, an optional extra: pip install 'privrank[plots]' "
            "(or add --no-figures for the tables only)"
        ) from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sc = result.scenario

    def axis_values(key: str) -> tuple:
        return sc.metrics if key == "metric" else sc.grid[key]

    rows, cols = axis_values(sc.panel_rows), axis_values(sc.panel_cols)
    fig, axes = plt.subplots(
        len(rows),
        len(cols),
        figsize=(4.2 * len(cols), 3.3 * len(rows)),
        squeeze=False,
        constrained_layout=True,
    )
    letters = iter("abcdefghijklmnop")
    for r, row_value in enumerate(rows):
        for c, col_value in enumerate(cols):
            ax = axes[r][c]
            fixed = {}
            metric = None
            for key, value in ((sc.panel_rows, row_value), (sc.panel_cols, col_value)):
                if key == "metric":
                    metric = value
                else:
                    fixed[key] = value
            assert metric is not None
            styles = zip("osD^v", ("-", "--", ":", "-."), strict=False)
            for series_value, (marker, line) in zip(sc.grid[sc.series], styles, strict=False):
                pts = [
                    row
                    for row in result.rows
                    if row[sc.series] == series_value and all(row[k] == v for k, v in fixed.items())
                ]
                xs = [p["L"] for p in pts]
                ys = [p[metric] for p in pts]
                err = [1.96 * p[metric + "_se"] for p in pts]
                # Distinct markers and dashes keep overlapping series (classic and
                # debiased RR rank identically in Scenario V) and greyscale prints readable.
                ax.errorbar(
                    xs,
                    ys,
                    yerr=err,
                    marker=marker,
                    linestyle=line,
                    ms=4,
                    capsize=3,
                    label=_label(sc.series, series_value),
                )
            ax.set_xscale("log", base=2)
            ax.set_xticks(sc.grid["L"], [str(x) for x in sc.grid["L"]])
            ax.set_xlabel("n_pair (comparisons of each pair)")
            ax.set_ylabel(METRICS[metric][0])
            title = ", ".join(_label(k, v) for k, v in fixed.items())
            ax.set_title(f"({next(letters)}) {title}".strip(), fontsize=10)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(
        f"{sc.title} — cf. {sc.figure} of Xu, Sun & Cheng ({result.replications} replicates, 95% CI)",
        fontsize=11,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(
    scenarios: list[str], replications: int | None, seed: int, out: Path | None, stream=None
) -> list[ScenarioResult]:
    """Run, print (to ``stream``, default the current ``sys.stdout``) and, when ``out`` is
    given, plot each requested scenario."""
    stream = sys.stdout if stream is None else stream
    results = []
    for key in scenarios:
        started = time.perf_counter()
        result = run_scenario(key, replications=replications, seed=seed)
        elapsed = time.perf_counter() - started
        print(result.format_table(), file=stream)
        line = f"[{key}: {elapsed:.1f} s"
        if out is not None:
            png = plot_scenario(result, out / f"scenario_{key}.png")
            line += f"; figure {png}"
        print(line + "]\n", file=stream)
        results.append(result)
    return results


def available() -> list[str]:
    return list(SCENARIOS)
