"""Benchmark of the statistical core, printed as one table.

    python -m tests.benchmarks.bench_stats          # full sizes (about a minute)
    python -m tests.benchmarks.bench_stats --quick  # small sizes, a smoke run (CI)

Rows:
1. The debiased MLE (statistics building included) against ``choix.ilsr_pairwise``
   and ``choix.opt_pairwise`` on the same 200,000 non-private comparisons over
   100 items, timed in this run; target ≥ 100× faster than choix's fastest.
2. m = 1,000 items, complete design (all 499,500 pairs, ~1M comparisons, ε = 1):
   fit time, target < 0.5 s.
3. m = 10,000 items, 1,000,000 comparisons on random pairs (sparse), ε = 1:
   statistics + fit time, target < 5 s; peak memory in a fresh process, target
   < 1 GiB (no dense m×m matrix: that alone would be 800 MB).

Timings are medians of repeated runs after one warm-up; the machine reference
line (a 1000×1000 matmul and a pure-Python loop) lets runs on different machines
be compared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

from tests.benchmarks.docs_page import command_line, write_block


def _median_time(fn, repeats: int) -> tuple[float, object]:
    result = fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def machine_reference() -> dict:
    a = np.random.default_rng(0).random((1000, 1000))
    matmul, _ = _median_time(lambda: a @ a, 5)

    def loop():
        total = 0
        for k in range(1_000_000):
            total += k
        return total

    py, _ = _median_time(loop, 3)
    return {"matmul_1000_s": matmul, "python_loop_1e6_s": py}


def versus_choix(n_comparisons: int, n_items: int = 100) -> dict:
    import choix

    from app.stats import fit_debiased_mle
    from app.stats.simulation import sparse_design, uniform_theta

    rng = np.random.default_rng(1)
    theta = uniform_theta(n_items, rng)
    d = sparse_design(n_items, n_comparisons, rng)
    y = (rng.random(d.i.size) < 1 / (1 + np.exp(theta[d.j] - theta[d.i]))).astype(np.int8)
    winners = np.where(y == 1, d.i, d.j)
    losers = np.where(y == 1, d.j, d.i)
    data = np.column_stack((winners, losers))
    lam = 1.0

    ours, fit = _median_time(lambda: fit_debiased_mle(n_items, d.i, d.j, y, np.inf, lam=lam), 7)
    ours_mle, fit0 = _median_time(lambda: fit_debiased_mle(n_items, d.i, d.j, y, np.inf, lam=0.0), 7)
    start = time.perf_counter()
    ilsr = choix.ilsr_pairwise(n_items, data)
    t_ilsr = time.perf_counter() - start
    start = time.perf_counter()
    opt = choix.opt_pairwise(n_items, data, alpha=lam)
    t_opt = time.perf_counter() - start
    fastest = min(t_ilsr, t_opt)
    return {
        "n_items": n_items,
        "n_comparisons": n_comparisons,
        "ours_s": ours,
        "ours_lambda0_s": ours_mle,
        "choix_ilsr_s": t_ilsr,
        "choix_opt_s": t_opt,
        "speedup_vs_fastest_choix": fastest / ours,
        "max_abs_diff_vs_opt_same_objective": float(np.abs(fit.theta - opt).max()),
        "max_abs_diff_lambda0_vs_ilsr": float(np.abs(fit0.theta - (ilsr - ilsr.mean())).max()),
        "iterations": fit.iterations,
    }


def complete_design_fit(n_items: int) -> dict:
    from app.stats import fit_debiased_mle_stats
    from app.stats.simulation import simulate_pair_stats, uniform_theta

    rng = np.random.default_rng(2)
    theta = uniform_theta(n_items, rng)
    stats = simulate_pair_stats(theta, 2, 1.0, rng)
    t_fit, fit = _median_time(lambda: fit_debiased_mle_stats(stats), 3)
    return {
        "n_items": n_items,
        "pairs": stats.n_pairs,
        "comparisons": stats.n_comparisons,
        "fit_s": t_fit,
        "iterations": fit.iterations,
        "solver": fit.solver,
        "converged": fit.converged,
    }


_SPARSE_CHILD = """
import json, resource, sys, time, tracemalloc
import numpy as np
from app.stats import fit_debiased_mle_stats, pair_stats, l2_error
from app.stats.simulation import simulate_survey, sparse_design, uniform_theta
m, n = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(3)
theta = uniform_theta(m, rng)
survey = simulate_survey(theta, sparse_design(m, n, rng), 1.0, rng)
i, j, y = survey.i, survey.j, survey.y_tilde
del survey
rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
fit_debiased_mle_stats(pair_stats(m, i[:1000], j[:1000], y[:1000], 1.0))  # import/warm-up
tracemalloc.start()
t0 = time.perf_counter()
stats = pair_stats(m, i, j, y, 1.0)
t1 = time.perf_counter()
fit = fit_debiased_mle_stats(stats)
t2 = time.perf_counter()
peak_traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({
    "n_items": m, "comparisons": n, "pairs": stats.n_pairs,
    "stats_s": t1 - t0, "fit_s": t2 - t1, "total_s": t2 - t0,
    "iterations": fit.iterations, "solver": fit.solver, "converged": fit.converged,
    "l2_error": l2_error(fit.theta, theta),
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "rss_before_mib": rss_before / 1024,
    "peak_traced_mib": peak_traced / 2**20,
}))
"""


def sparse_large(n_items: int, n_comparisons: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _SPARSE_CHILD, str(n_items), str(n_comparisons)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; targets not evaluated")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="also write the figures into docs/benchmarks.md (its bench_stats block); not with --quick",
    )
    args = parser.parse_args(argv)
    if args.write_docs and args.quick:
        parser.error("--write-docs writes a full run's figures, not a quick run's")
    quick = args.quick

    ref = machine_reference()
    cx = versus_choix(20_000 if quick else 200_000)
    complete = complete_design_fit(200 if quick else 1000)
    sparse = sparse_large(2_000 if quick else 10_000, 100_000 if quick else 1_000_000)

    rows = [
        (
            f"debiased MLE vs choix, m={cx['n_items']}, N={cx['n_comparisons']:,} (non-private)",
            f"ours {cx['ours_s'] * 1e3:.1f} ms (stats + fit); "
            f"choix ilsr {cx['choix_ilsr_s']:.2f} s, "
            f"opt {cx['choix_opt_s']:.2f} s → {cx['speedup_vs_fastest_choix']:.0f}× faster",
            "≥ 100×",
            cx["speedup_vs_fastest_choix"] >= 100,
        ),
        (
            f"complete design, m={complete['n_items']}, {complete['pairs']:,} pairs, "
            f"{complete['comparisons']:,} comparisons",
            f"fit {complete['fit_s']:.3f} s ({complete['iterations']} Newton steps, {complete['solver']})",
            "< 0.5 s",
            complete["fit_s"] < 0.5,
        ),
        (
            f"sparse design, m={sparse['n_items']:,}, "
            f"N={sparse['comparisons']:,} ({sparse['pairs']:,} pairs)",
            f"stats {sparse['stats_s']:.2f} s + fit {sparse['fit_s']:.2f} s = {sparse['total_s']:.2f} s "
            f"({sparse['iterations']} Newton steps, {sparse['solver']})",
            "< 5 s",
            sparse["total_s"] < 5,
        ),
        (
            "  peak memory of that process",
            f"RSS {sparse['peak_rss_mib']:.0f} MiB (data alone {sparse['rss_before_mib']:.0f} MiB); "
            f"NumPy allocations during stats + fit {sparse['peak_traced_mib']:.0f} MiB",
            "< 1 GiB",
            sparse["peak_rss_mib"] < 1024,
        ),
    ]
    notes = [
        f"Machine reference: 1000×1000 matmul {ref['matmul_1000_s'] * 1e3:.1f} ms, "
        f"Python loop of 10⁶ additions {ref['python_loop_1e6_s'] * 1e3:.0f} ms.",
        f"Accuracy: |θ_ours − θ_choix.opt| ≤ {cx['max_abs_diff_vs_opt_same_objective']:.1e} "
        f"(same objective; choix's default tolerance), "
        f"λ=0 vs ilsr ≤ {cx['max_abs_diff_lambda0_vs_ilsr']:.1e}.",
    ]
    for note in notes:
        print(note)
    width = max(len(r[0]) for r in rows)
    for name, figure, target, ok in rows:
        verdict = "(quick run)" if quick else ("met" if ok else "MISSED")
        print(f"{name.ljust(width)}  {figure}  [target {target}: {verdict}]")
    if args.write_docs:
        write_block("bench_stats", rows, command_line("tests.benchmarks.bench_stats", argv), notes)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"reference": ref, "choix": cx, "complete": complete, "sparse": sparse}, fh, indent=2)
    return 0 if quick or all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
