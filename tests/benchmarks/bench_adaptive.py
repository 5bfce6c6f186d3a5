"""Adaptive versus balanced assignment with the anytime-valid stop (app.stats.adaptive).

    python -m tests.benchmarks.bench_adaptive              # m ≤ 100, 10 runs per cell
    python -m tests.benchmarks.bench_adaptive --large      # adds m = 1,000 (long)
    python -m tests.benchmarks.bench_adaptive --quick      # m = 10, 2 runs (CI smoke run)
    python -m tests.benchmarks.bench_adaptive --certificate pairwise   # adds the pairwise certificate

For each number of items m, goal top-K, ε and score profile, both strategies run as
the service runs them (app.stats.adaptive.simulate_goal: new respondents, 10 pairs at
most each, from their pools) until the goal is certified at level 0.95 (checked after
every max(m, 50) answers, or every 2% of the answers so far when that is more) or a
cap of answers is reached. It prints the mean answers
(and respondents) each strategy needed, their ratio (balanced / adaptive answers: the saving), and the number
of runs whose certified set was wrong (false certification; the procedure allows
5%, judged by a one-sided binomial test at 1%: with 10 runs it only catches rates
well above 5%, so use ``--runs 200`` to check the bound itself). Cells that reach
the cap have no saving and count as misses where the top K is separated.

Profiles: *separated* — the top K within 0.5 of each other and 1 above the next
item, the rest spread down to −1.5; *crowded* — all m evenly spaced over
[−1.5, 1.5]. ``--tau`` adds respondent effects (each respondent's own scores
θ + τ·N(0, 1)).

``--certificate pairwise`` adds a column: the answers the pairwise certificate
(app.stats.pairwise_goal: one confidence sequence per pair, closed transitively, pairs
across the estimated boundary, ``--rule`` least-answered first or width-weighted)
needs with adaptive pairs, its saving against balanced Borda and its false
certifications (the targets are still judged on the Borda columns).

Targets: at least 2× fewer answers where the top-K is separated, never
more than 10% more where it is not, false certification ≤ 5%.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import binom

from app.stats.adaptive import simulate_goal
from app.stats.pairwise_goal import simulate_pairwise_goal

LEVEL = 0.95


def profile(m: int, k: int, kind: str) -> np.ndarray:
    if kind == "separated":
        top = 2.0 - 0.5 * np.arange(k) / k  # the K best within 0.5 of each other
        theta = np.concatenate([top, np.linspace(top[-1] - 1.0, -1.5, m - k)])  # 1 above the rest
    else:
        theta = np.linspace(1.5, -1.5, m)
    return theta - theta.mean()


def cell(
    m: int, k: int, eps: float, kind: str, runs: int, cap: int, tau: float, pairwise: str | None = None
) -> dict:
    theta = profile(m, k, kind)
    truth = set(range(k))
    out: dict = {"m": m, "k": k, "eps": eps, "profile": kind}
    for strategy in ("adaptive", "balanced") + (("pairwise",) if pairwise else ()):
        used, people, wrong, unmet = [], [], 0, 0
        start = time.perf_counter()
        for r in range(runs):
            rng = np.random.default_rng([m, k, int(10 * eps), r])
            if strategy == "pairwise":
                run = simulate_pairwise_goal(
                    theta, eps, LEVEL, "adaptive", rng, top_k=k, max_answers=cap, tau=tau, rule=pairwise
                )
            else:
                run = simulate_goal(theta, eps, LEVEL, strategy, rng, top_k=k, max_answers=cap, tau=tau)
            used.append(run.answers)
            people.append(run.respondents)
            if run.certified is None:
                unmet += 1
            elif set(run.certified.tolist()) != truth:
                wrong += 1
        out[strategy] = {
            "answers": float(np.mean(used)),
            "respondents": float(np.mean(people)),
            "unmet": unmet,
            "false": wrong,
            "seconds": time.perf_counter() - start,
        }
    a, b = out["adaptive"], out["balanced"]
    out["saving"] = b["answers"] / a["answers"] if not (a["unmet"] or b["unmet"]) else float("nan")
    if pairwise:
        p = out["pairwise"]
        out["pw_saving"] = b["answers"] / p["answers"] if not (p["unmet"] or b["unmet"]) else float("nan")
    return out


def _answers(s: dict, cap: int) -> str:
    return f"{s['answers']:10.0f}" if not s["unmet"] else f"{'>' + str(cap):>10}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="m = 10, ε ≥ 1, 2 runs; targets not evaluated")
    parser.add_argument("--large", action="store_true", help="also m = 1,000")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--tau", type=float, default=0.0)
    parser.add_argument("--sizes", type=int, nargs="+", help="numbers of items (instead of the defaults)")
    parser.add_argument("--epsilons", type=float, nargs="+", help="ε values (instead of 0.5 1 2)")
    parser.add_argument("--profiles", nargs="+", choices=("separated", "crowded"), default=None)
    parser.add_argument("--ks", type=int, nargs="+", help="goals top-K (instead of 1 3 10)")
    parser.add_argument("--certificate", choices=("borda", "pairwise"), default="borda")
    parser.add_argument("--rule", choices=("least", "width"), default="least", help="pairwise: pair order")
    args = parser.parse_args()
    sizes = args.sizes or ([10] if args.quick else [10, 30, 100] + ([1000] if args.large else []))
    levels = args.epsilons or ((1.0, 2.0) if args.quick else (0.5, 1.0, 2.0))
    profiles = args.profiles or ("separated", "crowded")
    runs = args.runs or (2 if args.quick else 10)
    print(f"level {LEVEL}, {runs} runs per cell, tau {args.tau}")
    columns = ("adaptive", "balanced")
    pairwise = args.rule if args.certificate == "pairwise" else None
    extra = f" {'pairwise':>10}  saving false {'resp.':>8}" if pairwise else ""
    head = f"{'m':>5} {'K':>3} {'eps':>4} {'profile':>9} {columns[0]:>10} {columns[1]:>10}"
    print(f"{head}  saving false a/b {'resp. a':>8} {'resp. b':>8}{extra}")
    misses = []
    for m in sizes:
        for k in args.ks or (1, 3, 10):
            if k >= m:
                continue
            for eps in levels:
                for kind in profiles:
                    cap = (40_000 if kind == "separated" else 20_000) * m // (4 if args.quick else 1)
                    c = cell(m, k, eps, kind, runs, cap, args.tau, pairwise)
                    a, b = c["adaptive"], c["balanced"]
                    more = ""
                    if pairwise:
                        p = c["pairwise"]
                        more = f" {_answers(p, cap)} {c['pw_saving']:7.2f} {p['false']:>5}"
                        more += f" {p['respondents']:8.0f}"
                    print(
                        f"{m:5d} {k:3d} {eps:4.1f} {kind:>9} {_answers(a, cap)} {_answers(b, cap)} "
                        f"{c['saving']:7.2f} {a['false']:>4}/{b['false']:<4} {a['respondents']:8.0f} "
                        f"{b['respondents']:8.0f}{more}",
                        flush=True,
                    )
                    known = c["saving"] == c["saving"]  # both met the goal within the cap
                    where = f"m={m} K={k} eps={eps} {kind}"
                    # One-sided binomial test of "false certification ≤ 1 − level" at 1%.
                    if binom.sf(a["false"] - 1, runs, 1 - LEVEL) < 0.01:
                        misses.append(f"false certification {a['false']}/{runs} at {where}")
                    if kind == "separated" and not known:
                        misses.append(f"cap reached at {where}")
                    elif kind == "separated" and c["saving"] < 2.0:
                        misses.append(f"saving {c['saving']:.2f} < 2 at {where}")
                    if known and c["saving"] < 1 / 1.1:
                        misses.append(f"adaptive more than 10% worse at {where}")
    if args.quick:
        print("(quick run: targets not evaluated)")
    else:
        print("targets: " + ("met" if not misses else "MISSED: " + "; ".join(misses)))


if __name__ == "__main__":
    main()
