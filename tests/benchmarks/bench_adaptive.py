"""Adaptive versus balanced assignment with the anytime-valid stop (app.stats.adaptive).

    python -m tests.benchmarks.bench_adaptive              # m ≤ 100, 10 runs per cell
    python -m tests.benchmarks.bench_adaptive --large      # adds m = 1,000 (long)
    python -m tests.benchmarks.bench_adaptive --quick      # m = 10, 2 runs (CI smoke run)
    python -m tests.benchmarks.bench_adaptive --certificate pairwise   # adds the pairwise certificate
    python -m tests.benchmarks.bench_adaptive --estimands  # non-BTL populations, 200 runs each

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
(app.stats.pairwise_goal: one confidence sequence per pair, certified directly, pairs
across the estimated boundary, ``--rule`` least-answered first or width-weighted)
needs with adaptive pairs, its saving against balanced Borda and its false
certifications (the targets are still judged on the Borda columns; under BTL its
majority estimand is the Borda one).

``--estimands`` runs populations beyond BTL instead (top-1 of 6 items, level 0.95,
ε = 2, a cap of 10,000 answers, ``--runs`` surveys per row, 200 by default), each
certificate judged against its own estimand (docs/uncertainty.md §9): *cycle* — P(0 >
1) = .65, P(1 > 2) = .80, P(2 > 0) = .55, each of 0, 1, 2 beating each of 3, 4, 5 with
.8: no majority top-1 exists (any pairwise certification is false), Borda top-1 {1}
(0.71 against 0.70: practically never certified); *polarized* — 60% rank 0 > 1 > … >
5, 40% rank 1 > … > 5 > 0: majority top-1 {0}, Borda {1}; *mixture τ = 1* — two BTL
groups (70% θ = 3·(5, 4, 3, 2, 1, 0), 30% 3·(0, 5, 4, 3, 2, 1)) with respondent effects:
majority {0}, Borda {1}; *BTL τ = 1* — θ = (1, 0.5, 0, −0.5, −1, −1.5) with respondent
effects: both {0}. Columns: Borda adaptive, pairwise (direct, the service's) and
pairwise closed transitively (``transitive=True``, assuming WST). It prints the
surveys that met the goal, the false certifications, their rate with its Monte Carlo
standard error sqrt(p(1 − p)/R) and the one-sided 95% Clopper–Pearson upper bound.

Targets: at least 2× fewer answers where the top-K is separated, never
more than 10% more where it is not, false certification ≤ 5%.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import beta, binom

from app.stats.adaptive import simulate_goal
from app.stats.pairwise_goal import simulate_pairwise_goal
from app.stats.simulation import Population, borda_top_k, majority_top_k

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


def _cycle() -> Population:
    p = np.full((6, 6), 0.5)
    p[:3, 3:], p[3:, :3] = 0.8, 0.2
    for a, b, q in ((0, 1, 0.65), (1, 2, 0.80), (2, 0, 0.55)):
        p[a, b], p[b, a] = q, 1 - q
    return Population.matrix(p)


#: The ``--estimands`` scenarios: (name, population, respondent effects τ).
ESTIMAND_SCENARIOS = (
    ("cycle", _cycle(), 0.0),
    ("polarized", Population.rankings([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]], [0.6, 0.4]), 0.0),
    (
        "mixture τ=1",
        Population.btl([3.0 * np.array([5, 4, 3, 2, 1, 0]), 3.0 * np.array([0, 5, 4, 3, 2, 1])], [0.7, 0.3]),
        1.0,
    ),
    ("BTL τ=1", Population.btl([[1.0, 0.5, 0.0, -0.5, -1.0, -1.5]]), 1.0),
)


def estimand_study(runs: int, eps: float = 2.0, cap: int = 10_000) -> None:
    """False certification of each certificate against its own estimand (``--estimands``)."""
    print(f"top-1 of 6, level {LEVEL}, eps {eps}, cap {cap}, {runs} surveys per row")
    head = f"{'population':>12} {'certificate':>18} {'estimand':>10} {'met':>5} {'false':>5}"
    print(f"{head} {'rate':>7} {'MC se':>7} {'CP95 up':>7} {'answers':>8} {'sec':>6}")
    for name, pop, tau in ESTIMAND_SCENARIOS:
        p = pop.pairwise(tau)
        columns = (
            ("borda", borda_top_k(p, 1)),
            ("pairwise", majority_top_k(p, 1)),
            ("pairwise closed", majority_top_k(p, 1)),
        )
        for column, truth in columns:
            start = time.perf_counter()
            met = wrong = 0
            used = []
            for r in range(runs):
                rng = np.random.default_rng([len(name), r, len(column)])
                if column == "borda":
                    run = simulate_goal(pop, eps, LEVEL, "adaptive", rng, top_k=1, max_answers=cap, tau=tau)
                else:
                    closed = column == "pairwise closed"
                    run = simulate_pairwise_goal(
                        pop, eps, LEVEL, "adaptive", rng, top_k=1, max_answers=cap, tau=tau, transitive=closed
                    )
                used.append(run.answers)
                if run.certified is not None:
                    met += 1
                    wrong += truth is None or set(run.certified.tolist()) != truth
            rate = wrong / runs
            se = np.sqrt(rate * (1 - rate) / runs)
            upper = 1.0 if wrong == runs else float(beta.ppf(0.95, wrong + 1, runs - wrong))
            shown = "none" if truth is None else str(sorted(truth))
            print(
                f"{name:>12} {column:>18} {shown:>10} {met:5d} {wrong:5d} {rate:7.3f} {se:7.3f} {upper:7.3f} "
                f"{np.mean(used):8.0f} {time.perf_counter() - start:6.1f}",
                flush=True,
            )


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
    parser.add_argument("--estimands", action="store_true", help="non-BTL populations, each estimand (only)")
    args = parser.parse_args()
    if args.estimands:
        estimand_study(args.runs or 200)
        return
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
