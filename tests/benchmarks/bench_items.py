"""Benchmark of the ranking's uncertainty at many items, printed as one table.

    OMP_NUM_THREADS=1 python -m tests.benchmarks.bench_items          # m = 2,000 and 10,000
    OMP_NUM_THREADS=1 python -m tests.benchmarks.bench_items --quick  # m = 300 (CI smoke run)

Rows (docs/uncertainty.md §6, "Cost"):
1. m = 2,000 items, 50,000 comparisons (2,000 respondents × 25, ε = 1) in a balanced
   design without adaptivity (every item in 50 comparisons), stored in SQLite and
   ranked through ``analysis.ranking`` with a fresh cache: the first ranking with
   intervals (k = 10; target ≤ 3 s), another confidence level (target ≤ 0.3 s),
   another k (target ≤ 0.3 s), and the process's peak RSS.
2. m = 10,000 items, 1,000,000 comparisons (statistics layer: fit and what the
   intervals give at that size).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time

import numpy as np


def balanced_answers(m: int, respondents: int, per: int, epsilon: float, rng: np.random.Generator):
    """Respondents × per comparisons in which every item appears equally often (rounds of
    random perfect matchings), answered under BTL(θ*) with θ* uniform on [−2, 2] and
    privatized at ``epsilon``: (respondent, i, j, ỹ, θ*)."""
    from app.stats.mechanisms import privatize
    from app.stats.simulation import uniform_theta

    n = respondents * per
    rounds = -(-2 * n // m)
    pairs = [rng.permutation(m).reshape(-1, 2) for _ in range(rounds)]
    ij = np.concatenate(pairs)[:n]
    ij = ij[rng.permutation(n)]
    resp = np.repeat(np.arange(respondents), per)
    while True:  # one respondent answers a pair once: swap repeats with random rows
        key = resp * (m * m) + np.minimum(ij[:, 0], ij[:, 1]) * m + np.maximum(ij[:, 0], ij[:, 1])
        _, first = np.unique(key, return_index=True)
        again = np.setdiff1d(np.arange(n), first)
        if again.size == 0:
            break
        other = rng.integers(0, n, again.size)
        ij[again], ij[other] = ij[other].copy(), ij[again].copy()
    i, j = ij[:, 0].astype(np.int64), ij[:, 1].astype(np.int64)
    theta = uniform_theta(m, rng)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(theta[j] - theta[i]))).astype(np.int8)
    return resp, i, j, privatize(y, epsilon, rng=rng), theta


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def service_row(m: int, respondents: int, per: int) -> dict:
    from fastapi.testclient import TestClient

    from app.analysis import service as analysis
    from app.analysis.fits import FitCache
    from app.core.db.migrate import upgrade
    from app.surveys.service import get_survey
    from tests.helpers.api import ADMIN, create_survey, make_app

    rng = np.random.default_rng(2026)
    resp, i, j, y, _ = balanced_answers(m, respondents, per, 1.0, rng)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        upgrade(url)
        app = make_app(url, PRIVRANK_SQLITE_MAX_IMPORT_ROWS=10 * i.size)
        with TestClient(app) as client:
            s = create_survey(client, items=[f"x{k}" for k in range(m)], respondent_budget="unlimited")
            lines = ["respondent,item_a,item_b,winner,epsilon"]
            lines += [
                f"r{r},x{a},x{b},x{a if w else b},1.0" for r, a, b, w in zip(resp, i, j, y, strict=True)
            ]
            r = client.post(
                f"/v1/surveys/{s['id']}/comparisons/import?privatized=true",
                content=("\n".join(lines) + "\n").encode(),
                headers={**ADMIN, "Content-Type": "text/csv"},
            )
            assert r.status_code == 201, r.text
            cache = FitCache()
            with app.state.session_factory() as session:
                survey = get_survey(session, s["id"])
                analysis.ranking(session, survey, cache, uncertainty="none")  # fit and rows: not timed
                start = time.perf_counter()
                first = analysis.ranking(session, survey, cache, k=10)
                t_first = time.perf_counter() - start
                start = time.perf_counter()
                analysis.ranking(session, survey, cache, k=10, level=0.9)
                t_level = time.perf_counter() - start
                start = time.perf_counter()
                analysis.ranking(session, survey, cache, k=25, level=0.9)
                t_k = time.perf_counter() - start
        app.state.engine.dispose()
    u = first.uncertainty
    reasons = [it.interval_reason for it in first.items if it.interval_reason]
    return {
        "m": m,
        "comparisons": int(i.size),
        "available": u.available,
        "reason": u.reason,
        "method": u.method,
        "set_aside": len(reasons),
        "first_s": t_first,
        "level_s": t_level,
        "k_s": t_k,
        "peak_rss_mb": _peak_rss_mb(),
    }


def stats_row(m: int, respondents: int, per: int) -> dict:
    from app.stats import pair_stats
    from app.stats.inference import Clusters, IntervalsUnavailable, confidence
    from app.stats.mle import fit_debiased_mle_stats

    rng = np.random.default_rng(7)
    resp, i, j, y, _ = balanced_answers(m, respondents, per, 1.0, rng)
    start = time.perf_counter()
    fit = fit_debiased_mle_stats(pair_stats(m, i, j, y, 1.0))
    t_fit = time.perf_counter() - start
    try:
        confidence(fit, clusters=Clusters.from_answers(m, i, j, y, 1.0, resp))
        given = "intervals"
    except IntervalsUnavailable as exc:
        given = f"refused: {exc.reason}"
    return {
        "m": m,
        "comparisons": int(i.size),
        "fit_s": t_fit,
        "intervals": given,
        "peak_rss_mb": _peak_rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = 300 only (a smoke run)")
    args = parser.parse_args(argv)
    m, respondents = (300, 300) if args.quick else (2000, 2000)
    row = service_row(m, respondents, 25)
    print(
        f"m = {row['m']}, {row['comparisons']} comparisons: intervals {row['available']} ({row['method']}"
        f"{', ' + str(row['reason']) if row['reason'] else ''}), {row['set_aside']} items set aside"
    )
    print(f"  first ranking   {row['first_s']:7.2f} s   (target ≤ 3 s)")
    print(f"  another level   {row['level_s']:7.3f} s   (target ≤ 0.3 s)")
    print(f"  another k       {row['k_s']:7.3f} s   (target ≤ 0.3 s)")
    print(f"  peak RSS        {row['peak_rss_mb']:7.0f} MB")
    if not args.quick:
        big = stats_row(10_000, 40_000, 25)
        print(
            f"m = {big['m']}, {big['comparisons']} comparisons: fit {big['fit_s']:.2f} s; "
            f"{big['intervals']}; "
            f"peak RSS {big['peak_rss_mb']:.0f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
