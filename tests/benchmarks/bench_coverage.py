"""Coverage study of the confidence intervals, printed as a table.

    python -m tests.benchmarks.bench_coverage               # 1,000 replicates per cell (a few minutes)
    python -m tests.benchmarks.bench_coverage -r 4000       # tighter
    python -m tests.benchmarks.bench_coverage --quick       # 100 replicates (CI smoke run)

For m = 10 items, L ∈ {200, 800} respondents, ε ∈ {0.5, 1, 2}, complete designs
and incomplete ones (15 random pairs per respondent), homogeneous ε and
heterogeneous ε (each respondent ε/2, ε or 2ε), it reports the share of nominal
95% intervals that cover the true score for

* the service's intervals (sandwich covariance with Lemma 2's privacy variance,
  centred on the bias-corrected estimate),
* θ̂ ± 1.96·se(θ̂) (the sandwich around the ridge estimate, no bias correction),
* naive intervals (inverse Fisher information, ignoring the privacy noise),

with the Monte Carlo standard error of the first column (treating intervals as
independent; those of one replicate are mildly correlated). Answers are drawn
independently there, as the model assumes.

Then the same intervals under **respondent resampling** (app.stats.resampling),
where one person's answers are correlated: real Debian ballots as a finite
population (each ballot split into the pairs it implies; the estimand is the
population's own unpenalized BTL fit), simulated populations with respondent
random effects τ, and small surveys (2-50 respondents, 3-10 items) with the share of
surveys that get intervals at all. Columns: the cluster-robust intervals (the
service's default), the model-based ones (answers taken as independent), naive.

A last table checks the calibration of P(item in top-3), a line times the
planner, and the last table checks the planner that starts from a survey's own
design and fit against a direct, answer-by-answer simulation of that survey.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.special import ndtri

from app.stats import fit_debiased_mle_stats
from app.stats.inference import IntervalsUnavailable, confidence, laplacian, laplacian_pinv, rank_confidence
from app.stats.planner import plan
from app.stats.resampling import coverage, heterogeneous_population
from app.stats.simulation import (
    complete_design,
    random_pairs_design,
    simulate_pair_stats,
    simulate_survey,
    uniform_theta,
)
from tests.helpers.real_data import cems_population, debian_population

M = 10
Z = float(ndtri(0.975))
ELECTIONS = (
    ("00002-00000001.soi", "Debian 2002 leader"),
    ("00002-00000006.soi", "Debian 2010 leader"),
    ("00002-00000008.soi", "Debian logo"),
)


def coverage_cell(design: str, hetero: bool, L: int, eps: float, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    ours = ridge = naive = refused = 0
    width = 0.0
    for _ in range(reps):
        theta = uniform_theta(M, rng)
        if design == "complete" and not hetero:
            stats = simulate_pair_stats(theta, L, eps, rng)
        else:
            d = complete_design(M, L) if design == "complete" else random_pairs_design(M, L, 15, rng)
            e = rng.choice([eps / 2, eps, 2 * eps], size=L) if hetero else eps
            stats = simulate_survey(theta, d, e, rng).stats()
        fit = fit_debiased_mle_stats(stats)
        try:
            conf = confidence(fit)
        except IntervalsUnavailable:
            refused += 1
            continue
        ours += np.sum((conf.lower <= theta) & (theta <= conf.upper))
        width += float(np.mean(conf.upper - conf.lower))
        ridge += np.sum(np.abs(fit.theta - theta) <= Z * fit.se)
        dd = fit.data
        s = 1 / (1 + np.exp(-(fit.theta[dd.i] - fit.theta[dd.j])))
        naive_se = np.sqrt(
            np.diag(laplacian_pinv(laplacian(M, dd.i, dd.j, dd.n * s * (1 - s)), fit.component))
        )
        naive += np.sum(np.abs(conf.estimate - theta) <= Z * naive_se)
    n = max((reps - refused) * M, 1)
    cov = ours / n
    return {
        "ours": cov,
        "se": math.sqrt(cov * (1 - cov) / n),
        "ridge": ridge / n,
        "naive": naive / n,
        "width": width / max(reps - refused, 1),
        "refused": refused / reps,
    }


def calibration(reps: int, seed: int) -> list[tuple[str, int, float, float]]:
    rng = np.random.default_rng(seed)
    probs, truth = [], []
    for _ in range(reps):
        theta = uniform_theta(M, rng)
        fit = fit_debiased_mle_stats(simulate_pair_stats(theta, 100, 1.0, rng))
        try:
            conf = confidence(fit)
        except IntervalsUnavailable:
            continue
        r = rank_confidence(conf.estimate, conf.cov, k=3, rng=rng, n_draws=1000)
        probs.append(r.p_top_k)
        truth.append(np.argsort(np.argsort(-theta)) < 3)
    p, t = np.concatenate(probs), np.concatenate(truth)
    rows = []
    for a, b in ((0, 0.05), (0.05, 0.3), (0.3, 0.7), (0.7, 0.95), (0.95, 1.0001)):
        sel = (p >= a) & (p < b)
        rows.append(
            (f"[{a:.2f}, {min(b, 1):.2f})", int(sel.sum()), float(p[sel].mean()), float(t[sel].mean()))
        )
    return rows


def _row(label: str, c) -> str:
    return (
        f"{label:54} {c.cluster:6.3f} ±{c.se:.3f}  {c.model:6.3f}  {c.naive:6.3f}  "
        f"{1 - c.refused:9.3f}  {c.mean_width:8.2f}  {c.method}"
    )


def resampling_tables(reps: int, quick: bool) -> tuple[float, float]:
    """Coverage of the population's scores under respondent resampling; returns
    the range of cluster-robust coverage over the informative cells (ε ≥ 1, L ≥ 100)."""
    head = (
        f"{'population, design':54} {'cluster':>6} {'(±se)':>7}  {'model':>6}  {'naive':>6}  "
        f"{'available':>9}  {'width':>8}  method"
    )
    informative: list[float] = []
    print(
        f"\nRespondent resampling of real ballots and the CEMS paired comparisons, {reps} surveys per row "
        "(L = the population's size)"
    )
    print(head)
    epsilons = (0.5, 2.0) if quick else (0.5, 1.0, 2.0)
    populations = [
        (title, debian_population(name)) for name, title in (ELECTIONS[1:] if quick else ELECTIONS)
    ]
    populations.append(("CEMS schools", cems_population()))
    for title, pop in populations:
        for k in (None, 3):
            for eps in epsilons:
                rng = np.random.default_rng([pop.n_respondents, int(eps * 10), k or 0])
                c = coverage(pop, pop.n_respondents, eps, reps, rng, k)
                design = "all pairs" if k is None else f"{k} random pairs"
                label = f"{title} ({pop.n_items}×{pop.n_respondents}), {design}, ε={eps:g}"
                print(_row(label, c))
                if eps >= 1:
                    informative.append(c.cluster)
    print(f"\nSimulated population (20,000 respondents, m = {M}, 15 random pairs each, scores on (−1, 1),")
    print(f"respondent effects θ + τ·N(0, I)); L = 200 drawn, {reps} surveys per row")
    print(head)
    theta = uniform_theta(M, np.random.default_rng(0), -1.0, 1.0)
    for tau in (0.0, 1.0) if quick else (0.0, 0.5, 1.0):
        pop = heterogeneous_population(theta, 20_000, 15, tau, np.random.default_rng(1))
        for eps in epsilons:
            c = coverage(pop, 200, eps, reps, np.random.default_rng([int(tau * 10), int(eps * 10)]))
            print(_row(f"τ = {tau:g}, ε = {eps:g}", c))
            if eps >= 1:
                informative.append(c.cluster)
    print(f"\nSmall surveys (population with τ = 0.5, up to 6 pairs each, ε = 1), {reps} surveys per row")
    print(head)
    for m in (3, 5) if quick else (3, 5, 10):
        th = uniform_theta(m, np.random.default_rng(m), -1.0, 1.0)
        pop = heterogeneous_population(th, 5_000, min(6, m * (m - 1) // 2), 0.5, np.random.default_rng(3))
        for L in (2, 10, 50) if quick else (2, 5, 10, 20, 50):
            c = coverage(pop, L, 1.0, reps, np.random.default_rng([m, L]))
            print(_row(f"m = {m}, L = {L}", c))
    return min(informative), max(informative)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", "-r", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="100 replicates per cell")
    args = parser.parse_args(argv)
    reps = 100 if args.quick else args.replications
    print(f"Coverage of nominal 95% intervals for θ*, m = {M}, {reps} replicates per row")
    print(
        f"{'design':10} {'ε per respondent':17} {'L':>4} {'ε':>4}  {'ours':>6} {'(±se)':>7}  "
        f"{'θ̂±1.96se':>9}  {'naive':>6}  {'mean width':>10}  {'refused':>7}"
    )
    worst = (1.0, 0.0)
    seed = 0
    for design in ("complete", "incomplete"):
        for hetero in (False, True):
            for L in (200, 800):
                for eps in (0.5, 1.0, 2.0):
                    seed += 1
                    c = coverage_cell(design, hetero, L, eps, reps, seed)
                    worst = (min(worst[0], c["ours"]), max(worst[1], c["ours"]))
                    kind = "ε/2, ε, 2ε" if hetero else "all ε"
                    print(
                        f"{design:10} {kind:17} {L:>4} {eps:>4}  {c['ours']:6.3f} ±{c['se']:.3f}  "
                        f"{c['ridge']:9.3f}  {c['naive']:6.3f}  {c['width']:10.3f}  {c['refused']:7.3f}"
                    )
    print(f"range of our coverage: {worst[0]:.3f} – {worst[1]:.3f} (target 0.93 – 0.97)")
    lo, hi = resampling_tables(max(reps // 2, 40) if args.quick else min(reps, 400), args.quick)
    print(
        f"\nrange of cluster-robust coverage under resampling, ε ≥ 1: {lo:.3f} – {hi:.3f} "
        "(target 0.93 – 0.97)\n"
    )
    print("Calibration of P(item in top-3) (L = 100, ε = 1):")
    print(f"{'p_top_k bin':14} {'items':>6} {'mean p':>7} {'share in top-3':>15}")
    for name, n, mp, share in calibration(max(reps // 2, 50), 99):
        print(f"{name:14} {n:>6} {mp:7.3f} {share:15.3f}")
    start = time.perf_counter()
    p = plan(20, 500, 20, 1.0, 5, replications=200)
    print(
        f"\nplanner: m = 20, L = 500, 20 pairs each, 200 simulated surveys in "
        f"{time.perf_counter() - start:.2f} s (P(exact top-5) = {p.p_exact_top_k.mean:.3f} ± "
        f"{p.p_exact_top_k.se:.3f})"
    )
    planner_prediction_check(args.quick)
    survey_planner_check(100 if args.quick else 600)
    return 0


def planner_prediction_check(quick: bool) -> None:
    """The planner's run-time prediction (what GET /v1/plan refuses on) against the run time
    measured here: it must not under-predict by much (a refusal would then be missed and
    left to the deadline) nor over-predict by much (it would refuse plans that fit)."""
    from app.stats.planner import plan_seconds

    sizes = [  # m, L, k pairs, ε levels
        (10, 100, 3, 1),
        (50, 1_000, 10, 1),
        (100, 100_000, 10, 1),
        (100, 100_000, 10, 32),
        (200, 1_000, 10, 1),
        (500, 1_000, 10, 1),
        (500, 100_000, 10, 1),
        (500, 100_000, 10, 8),
    ]
    reps = 10 if quick else 40
    print(f"\nplanner run time, predicted (plan_seconds) against measured, {reps} replicates:")
    print(f"{'m':>4} {'L':>8} {'levels':>6}  {'predicted s':>11}  {'measured s':>10}  measured/predicted")
    for m, L, kp, levels in sizes:
        eps = np.linspace(0.5, 3.0, levels)
        start = time.perf_counter()
        plan(m, L, kp, eps, 2, replications=reps, seed=1)
        measured = time.perf_counter() - start
        predicted = plan_seconds(m, L * kp, levels, reps)
        print(f"{m:>4} {L:>8} {levels:>6}  {predicted:11.3f}  {measured:10.3f}  {measured / predicted:.2f}")


def survey_planner_check(reps: int) -> None:
    """The survey planner against the direct, answer-by-answer simulation of the same survey.

    The design: 30 respondents × 4 pairs over 6 items at ε ∈ {1, 2}, half of them
    only ever asked about items 0–3; 500 respondents added. Both estimate
    P(the survey's own intervals certify the top 2); the ratio of their run
    times is the planner's speed-up.
    """
    from app.stats.survey_plan import plan_survey
    from tests.helpers.survey_plan import direct_simulation as _direct
    from tests.helpers.survey_plan import unbalanced_design as _unbalanced_design

    design = _unbalanced_design(np.random.default_rng(7))
    theta = np.array([1.2, 0.6, 0.1, -0.2, -0.6, -1.1])
    print(f"\nplanning from a survey (6 items, 30 respondents, +500), {reps} simulated surveys each:")
    print(f"{'τ':>5}  {'planner':>15}  {'direct':>15}  {'z':>6}  {'planner s':>9}  {'direct s':>8}  speed-up")
    for tau in (0.0, 0.8):
        start = time.perf_counter()
        p = plan_survey(design, theta, 2, 500, tau=tau, replications=reps, seed=1)
        t_plan = time.perf_counter() - start
        start = time.perf_counter()
        certified, _ = _direct(design, theta, 2, 500, tau, reps, seed=2)
        t_direct = time.perf_counter() - start
        se_direct = certified.std(ddof=1) / math.sqrt(reps)
        z = (p.p_certified.mean - certified.mean()) / math.hypot(p.p_certified.se, se_direct)
        print(
            f"{tau:5.1f}  {p.p_certified.mean:.3f} ± {p.p_certified.se:.3f}  "
            f"{certified.mean():.3f} ± {se_direct:.3f}  {z:6.2f}  {t_plan:9.2f}  {t_direct:8.2f}  "
            f"{t_direct / t_plan:.1f}×"
        )


if __name__ == "__main__":
    raise SystemExit(main())
