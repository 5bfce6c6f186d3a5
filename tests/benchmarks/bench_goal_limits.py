"""Why a large top set misses the 2× target: two other designs for K = 10 of 30.

    python -m tests.benchmarks.bench_goal_limits            # 4 surveys per cell (~5 min)
    python -m tests.benchmarks.bench_goal_limits --runs 10

With the top 10 of 30 *separated* (bench_adaptive's profile), adaptive assignment with
the Borda certificate needs about 1.7× fewer answers than balanced, and the pairwise
certificate more than balanced (docs/uncertainty.md §9). This prints, in the same run
and with the same simulated respondents (level 0.95, checks every max(m, 50) answers
or 2% of the answers so far), the answers two other designs need:

* *oracle reference* — a Borda score against a fixed reference set of opponents, the
  true K-th and (K+1)-th items, known in advance (which no real survey knows): each
  item in doubt is compared with a uniformly drawn reference item, and the certificate
  is the Borda one on those scores (any fixed opponent distribution orders items as θ
  under BTL). Its saving bounds what choosing the opponents could gain.
* *stages* — adaptive Borda that, each time the items in doubt fall to half of the
  items it is certifying among, starts a fresh Borda certificate among those items
  only (where the score gaps are wider and both items of a pair count), at α/2^s for
  stage s; earlier stages' certified items are kept.

Both are prototypes for this measurement only, not served.
"""

from __future__ import annotations

import argparse

import numpy as np

from app.stats.adaptive import (
    BordaSequences,
    draw_for_respondents,
    goal_status,
    simulate_goal,
    simulated_answers,
)
from app.stats.mechanisms import debias, privatize
from tests.benchmarks.bench_adaptive import LEVEL, profile


def oracle_reference(theta, eps, k, reference, rng, cap) -> tuple[int, set | None]:
    """Items in doubt against a uniformly drawn item of ``reference`` (P(i beats i) = ½)."""
    m = theta.size
    seqs = BordaSequences(m)
    status = goal_status(seqs, LEVEL, k)
    used = 0
    while not status.met and used < cap:
        step = max(max(m, 50), used // 50)
        i = rng.choice(np.flatnonzero(status.active), size=step)
        opp = np.asarray(reference)[rng.integers(0, len(reference), size=step)]
        y = (rng.random(step) < 1.0 / (1.0 + np.exp(theta[opp] - theta[i]))).astype(np.int8)
        z = debias(privatize(y, eps, rng), eps)
        z[opp == i] = 0.5  # an item against itself: exactly ½
        seqs.add(i, np.where(opp == i, (i + 1) % m, opp), z, eps, True, False)
        used += step
        status = goal_status(seqs, LEVEL, k, previous=status)
    return used, set(status.certified.tolist()) if status.met else None


def stages(theta, eps, k, rng, cap, pairs=10) -> tuple[int, set | None]:
    """Adaptive Borda restarted among the items in doubt whenever they halve."""
    universe, top, used, stage, inside = np.arange(theta.size), k, 0, 1, []
    while 0 < top < universe.size:
        n, level = universe.size, 1.0 - (1.0 - LEVEL) / 2**stage
        seqs = BordaSequences(n)
        status = goal_status(seqs, level, top)
        while not status.met and used < cap and not 2 <= status.active.sum() <= n // 2:
            step = max(max(theta.size, 50), used // 50)
            per = max(1, min(pairs, int(status.active.sum()) // 2))
            i, j, ci, cj, who = draw_for_respondents(status.active, -(-step // per), pairs, rng)
            z = simulated_answers(theta[universe], i, j, who, int(who.max()) + 1, eps, 0.0, rng)
            seqs.add(i, j, z, eps, ci, cj)
            used += i.size
            status = goal_status(seqs, level, top, previous=status)
        inside += universe[status.certified].tolist()
        if status.met or used >= cap:
            return used, set(inside) if status.met else None
        top -= status.certified.size
        universe, stage = universe[status.active], stage + 1
    return used, set(inside + (universe.tolist() if top else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    m, k = 30, 10
    theta, truth, cap = profile(m, k, "separated"), set(range(k)), 40_000 * m
    print(f"m = {m}, top {k}, separated; level {LEVEL}; {args.runs} surveys per design")
    print(f"{'eps':>4} {'balanced':>9}  {'Borda adaptive':>15}  {'oracle reference':>17}  {'stages':>15}")
    for eps in (1.0, 2.0):
        seeds = [np.random.default_rng([m, k, int(10 * eps), r]) for r in range(args.runs)]
        balanced = np.mean(
            [simulate_goal(theta, eps, LEVEL, "balanced", s, top_k=k, max_answers=cap).answers for s in seeds]
        )
        cells = []
        for design in ("adaptive", "oracle", "stages"):
            runs = []
            for r in range(args.runs):
                rng = np.random.default_rng([m, k, int(10 * eps), r, 1])
                if design == "adaptive":
                    run = simulate_goal(theta, eps, LEVEL, "adaptive", rng, top_k=k, max_answers=cap)
                    runs.append(
                        (run.answers, set(run.certified.tolist()) if run.certified is not None else None)
                    )
                elif design == "oracle":
                    runs.append(oracle_reference(theta, eps, k, [k - 1, k], rng, cap))
                else:
                    runs.append(stages(theta, eps, k, rng, cap))
            wrong = sum(c is not None and c != truth for _, c in runs)
            mean = np.mean([u for u, _ in runs])
            cells.append(f"{mean:7.0f} {balanced / mean:4.2f}× {wrong}✗")
        print(f"{eps:4.1f} {balanced:9.0f}  " + "  ".join(f"{c:>15}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
