"""Throughput of one against two ``privrank serve`` instances on this machine, with the
CPU each component spends per answer: the figures behind the sizing table of docs/benchmarks.md and the
capacity model of docs/how-to/scale.md.

    python -m tests.benchmarks.bench_instances            # 15 s per configuration
    python -m tests.benchmarks.bench_instances --quick    # 4 s (CI smoke run)

Each configuration starts its instances (one uvicorn worker each) on a fresh
PostgreSQL database (``PRIVRANK_TEST_POSTGRES``) with Redis for the shared rate limits
(``PRIVRANK_TEST_REDIS``), then drives them with single-comparison answers
(:mod:`tests.benchmarks.loadgen`, closed loop, 16 respondents per instance, each
instance getting its share as a proxy would spread them). CPU time is read from
/proc for three parts: the instances' processes, PostgreSQL's processes, and this
process (the load generator); divided by the answers acknowledged, it gives the CPU
each part spends per answer — on a machine whose 2 cores all three share, the
throughput is bounded by their sum, and the instance count cannot raise it much:
that is what the per-core figures show. ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid

import numpy as np

from tests.benchmarks.docs_page import command_line, write_block
from tests.benchmarks.loadgen import create_survey, percentiles, run_load

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"
ADMIN_KEY = "bench-instances-" + uuid.uuid4().hex[:8]
TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()  # the fields after the name
    except OSError:
        return None


def _tree(root: int) -> list[int]:
    """``root`` and its live descendants."""
    out = [root]
    try:
        with open(f"/proc/{root}/task/{root}/children") as f:
            for child in f.read().split():
                out += _tree(int(child))
    except OSError:
        pass
    return out


def _cpu_seconds(root: int) -> float:
    """CPU seconds of a process tree, including its children that have exited: each live
    process's utime + stime + cutime + cstime (a child reaped moves its total into its
    parent's cutime/cstime, so backends that come and go are counted once)."""
    total = 0
    for pid in _tree(root):
        fields = _stat(pid)
        if fields is not None:
            total += sum(int(x) for x in fields[11:15])
    return total / TICKS


def _postmaster() -> int:
    """The PostgreSQL server's root process (a postgres whose parent is not one)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() not in ("postgres", "postmaster"):
                    continue
            with open(f"/proc/{_stat(int(entry))[1]}/comm") as f:  # type: ignore[index]
                if f.read().strip() not in ("postgres", "postmaster"):
                    return int(entry)
        except (OSError, TypeError):
            continue
    raise RuntimeError("no PostgreSQL server process found on this machine")


def measure(n_instances: int, seconds: float, postgres: str, redis_url: str) -> dict:
    import redis

    from tests.helpers.api import fresh_postgres_database
    from tests.helpers.live import LiveServer

    url, drop = fresh_postgres_database(postgres)
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    env = {"DATABASE_URL": url, "PRIVRANK_ADMIN_KEY": ADMIN_KEY, "REDIS_URL": redis_url}
    servers = []
    try:
        for _ in range(n_instances):
            servers.append(LiveServer(env))
        survey = create_survey(servers[0].base, ADMIN_KEY, 50, f"{n_instances} instances")
        for s in servers:  # warm-up: connections, imports, caches
            run_load(s.base, survey, users=4, seconds=1.5, batch=1)
        postmaster = _postmaster()

        def cpu() -> tuple[float, float, float]:
            api = sum(_cpu_seconds(s.proc.pid) for s in servers)
            return api, _cpu_seconds(postmaster), time.process_time()

        before = cpu()
        results: list = [None] * n_instances

        def drive(k: int) -> None:
            results[k] = run_load(servers[k].base, survey, users=16, seconds=seconds, batch=1)

        start = time.perf_counter()
        threads = [threading.Thread(target=drive, args=(k,)) for k in range(n_instances)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        after = cpu()
        answers = sum(len(r.acknowledged()) for r in results)
        bad = {k: v for r in results for k, v in r.statuses().items() if k != 201}
        if bad:
            raise RuntimeError(f"unexpected statuses: {bad}")
        lat = percentiles(np.concatenate([r.latencies(after=1.0) for r in results]))
        api, pg, gen = (a - b for a, b in zip(after, before, strict=True))
        return {
            "instances": n_instances,
            "answers": answers,
            "req_per_s": answers / wall,
            "p50_ms": lat["p50"] * 1e3,
            "p99_ms": lat["p99"] * 1e3,
            "cpu_ms_per_answer": {
                "api": 1e3 * api / answers,
                "postgres": 1e3 * pg / answers,
                "load_generator": 1e3 * gen / answers,
            },
            "cores_busy": (api + pg + gen) / wall,
        }
    finally:
        for s in servers:
            s.stop()
        drop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="also write the figures into docs/benchmarks.md (its bench_instances block); not with --quick",
    )
    args = parser.parse_args(argv)
    if args.write_docs and args.quick:
        parser.error("--write-docs writes a full run's figures, not a quick run's")
    seconds = 4.0 if args.quick else 15.0
    postgres = os.environ.get("PRIVRANK_TEST_POSTGRES", DEFAULT_POSTGRES)
    redis_url = os.environ.get("PRIVRANK_TEST_REDIS_BENCH", DEFAULT_REDIS)
    rows = [measure(n, seconds, postgres, redis_url) for n in (1, 2)]
    cores = os.cpu_count() or 1
    print(f"single-comparison answers, closed loop, 16 respondents per instance; {cores} cores shared by all")
    header = f"{'instances':>9} {'answers/s':>10} {'p50 ms':>7} {'p99 ms':>7} {'cores busy':>10}"
    print(header + "  CPU ms per answer")
    for r in rows:
        c = r["cpu_ms_per_answer"]
        print(
            f"{r['instances']:9d} {r['req_per_s']:10.0f} {r['p50_ms']:7.1f} {r['p99_ms']:7.1f} "
            f"{r['cores_busy']:10.2f}  API {c['api']:.2f}, PostgreSQL {c['postgres']:.2f}, "
            f"load generator {c['load_generator']:.2f}"
        )
    one, two = rows
    scaling = (
        f"2 instances / 1: {two['req_per_s'] / one['req_per_s']:.2f}× the throughput; per busy core "
        f"{one['req_per_s'] / one['cores_busy']:.0f} and {two['req_per_s'] / two['cores_busy']:.0f} answers/s"
    )
    print(scaling)
    if args.write_docs:
        table = [
            (
                f"{r['instances']} instance{'s' if r['instances'] > 1 else ''}",
                f"{r['req_per_s']:.0f} answers/s, p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
                f"{r['cores_busy']:.2f} cores busy; CPU ms per answer: "
                f"API {r['cpu_ms_per_answer']['api']:.2f}, "
                f"PostgreSQL {r['cpu_ms_per_answer']['postgres']:.2f}, "
                f"load generator {r['cpu_ms_per_answer']['load_generator']:.2f}",
                "reported",
                None,
            )
            for r in rows
        ]
        write_block(
            "bench_instances",
            table,
            command_line("tests.benchmarks.bench_instances", argv),
            [
                f"Single-comparison answers, closed loop, 16 respondents per instance; {cores} cores "
                f"shared by all. {scaling}."
            ],
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
