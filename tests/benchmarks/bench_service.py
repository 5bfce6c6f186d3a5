"""Benchmark of the service on PostgreSQL, printed as one table.

    python -m tests.benchmarks.bench_service          # full sizes (about five minutes)
    python -m tests.benchmarks.bench_service --quick  # small sizes, a smoke run (CI)
    python -m tests.benchmarks.bench_service --ingestion  # rows 1-2 only (about a minute)
    python -m tests.benchmarks.bench_service --write-docs # also write the table into docs/benchmarks.md

Everything runs in this one process against a fresh database on the PostgreSQL
server of ``PRIVRANK_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
and a ``privrank serve`` with ``--workers`` processes on loopback; the load comes
from this process — the answer batches from :mod:`tests.benchmarks.batchload` (bodies
built before the clock starts, as the COPY client builds its rows), every other request
from :mod:`tests.benchmarks.loadgen` (asyncio + httpx2) — so the load generator, the
workers and PostgreSQL share the machine's cores, as they would in a one-box
deployment. Figures are ratios against a reference measured in the same run wherever
the target is one. Each measured phase starts from a settled
database (``VACUUM ANALYZE`` + ``CHECKPOINT``), so that the maintenance one phase's
rows trigger is not billed to the next.

Rows:
1. **Raw ceiling**: psycopg COPYing the same rows (500 per COPY + commit) into the same
   ``comparisons`` table, with the faster of one and two connections per worker (a
   trial of each picks it).
2. **500-comparison batches through the API** (``POST /responses``, server-side
   randomized response, 8 concurrent respondents per worker): comparisons
   acknowledged per second; targets ≥ 60% of the raw ceiling and ≥ 20,000/s. Rows 1
   and 2 are measured alternately, :data:`INGESTION_ROUNDS` rounds of each (about 5 s
   each: the COPY rounds sized from the trial's rate), each from a settled database,
   and each figure sums its rounds, so that a drift in the machine's speed weighs on
   both. The full run then
   keeps loading until ≥ 1,000,000 comparisons are stored (its sustained rate is
   printed too), for row 5. Under the table, the CPU time of rows 1 and 2 per 1,000
   answers, split into the load (this process), the server and the rest of the
   machine (PostgreSQL): :class:`CpuSplit`.
3. **Single-comparison requests**: peak requests/s (closed loop), then p50/p99
   latency under open-loop Poisson arrivals at half that rate, after a two-second
   ramp-up (reported too); target p99 < 100 ms.
4-5. **ranking** (``GET /ranking``: debiased MLE, sandwich intervals) over 50 items:
   p50 warm, and p50 of the first request after 10,000 new answers, with
   ~10% and 100% of the stored comparisons (1,000,000 in the full run); targets
   warm p50 < 100 ms and a cost that does not grow with the stored answers.
6. The estimator against choix, and the planner (in this process).
7. **GET …/pairs of an adaptive survey** (goal: top 10 at 0.95), m = 1,000 with
   1,000,000 stored answers and m = 10,000 with 100,000 (50,000 and 20,000 in the quick
   run), filled through the API by virtual respondents answering the pairs they are
   served (with their tickets; coin-flip answers, so every item stays in doubt and
   every request draws from the largest pool). Timed twice: *quiet* — after the
   database is settled, 200 new respondents ask for 10 pairs one after another;
   *with answers arriving* —
   respondents arrive at about 20 per second (8 threads with exponential pauses) for
   20 s, each registering, asking for 10 pairs (timed) and answering them (a request
   that finds answers pending starts a background fold and does not wait for it).
   Reference: the same for a balanced survey without a goal (m = 1,000, 100,000
   stored answers). Target at m = 1,000: quiet p99 < 20 ms. Also reported: a goal
   certified pairwise (top 3, m = 300, the most that certificate takes: its state is
   C(m, 2) = 44,850 sequences and each check closes a 300 × 300 relation) with 20,000
   stored answers (5,000 quick); filling it is slow (a respondent gets only the few
   disjoint pairs across the boundary), and its cost per request does not grow with the
   answers (the state has a fixed size).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import threading
import time
import uuid
from datetime import UTC, datetime

import numpy as np

from tests.benchmarks.batchload import run_batches
from tests.benchmarks.docs_page import command_line, write_block
from tests.benchmarks.loadgen import create_survey, percentiles, run_load

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
ADMIN_KEY = "bench-admin-" + uuid.uuid4().hex[:8]
#: Row 2's target: API batches at this fraction of the raw COPY ceiling or more.
INGESTION_RATIO = 0.6
#: Seconds at the start of the half-rate run left out of its steady-state latency.
RAMP_UP = 2.0


def _conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def settle(url: str) -> None:
    """Start a measured phase from a settled database: the previous phase's dirty pages
    written (CHECKPOINT) and its new rows vacuumed and analyzed, so that autovacuum and
    checkpoints triggered by one phase's load are not billed to the next."""
    import psycopg

    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


class CpuSplit:
    """Where the machine's CPU time went while the block ran (Linux ``/proc``): this
    process (the load: the COPY client or the load generator), the server's processes,
    and the rest of the machine — PostgreSQL's backends on a machine left to the
    benchmark. ``per_thousand(rows)``: milliseconds of each per 1,000 rows stored, which
    says which part of the path a change to the ingestion ratio has to come from."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid
        self.spent: dict[str, float] = {}

    @staticmethod
    def _machine() -> float:
        with open("/proc/stat") as fh:
            ticks = [int(v) for v in fh.readline().split()[1:9]]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # not idle, not iowait

    def _server(self) -> float:
        if self.server_pid is None:
            return 0.0
        parents = {self.server_pid}
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited meanwhile
            if int(entry) in parents or int(fields[1]) in parents:  # uvicorn's workers are its children
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def _read(self) -> tuple[float, float, float]:
        own = os.times()
        return self._machine(), own.user + own.system, self._server()

    def __enter__(self) -> CpuSplit:
        self._start = self._read()
        return self

    def __exit__(self, *exc) -> None:
        machine, load, server = (b - a for a, b in zip(self._start, self._read(), strict=True))
        self.spent = {"load": load, "server": server, "rest": max(machine - load - server, 0.0)}

    def per_thousand(self, rows: int) -> dict[str, float]:
        return {k: 1e6 * v / rows for k, v in self.spent.items()}


def _cpu_line(ref: dict, api: dict) -> str:
    """The CPU split of the COPY reference and of the API batches, per 1,000 answers."""
    copy, batches = ref["cpu_ms_per_1000"], api

    def parts(d: dict, server: bool) -> str:
        named = [f"load {d['load']:.1f}"] + ([f"server {d['server']:.1f}"] if server else [])
        return (
            ", ".join([*named, f"PostgreSQL and the rest {d['rest']:.1f}"])
            + f" (total {sum(d.values()):.1f})"
        )

    return f"CPU ms per 1,000 answers: COPY: {parts(copy, False)}; API: {parts(batches, True)}"


def copy_reference(url: str, survey: dict, connections: int, target_rows: int, batch: int = 500) -> dict:
    """psycopg COPYing comparison rows straight into ``comparisons`` (the raw ceiling).

    Respondents are inserted first (the foreign key needs them; not timed); each
    connection then COPYs its respondents' answers ``batch`` rows at a time, one
    transaction per COPY, exactly the shape of a 500-comparison API request.
    """
    import psycopg

    settle(url)
    n_items = len(survey["items"])
    pairs = list(itertools.combinations(range(n_items), 2))
    n_resp = -(-target_rows // len(pairs))
    now = datetime.now(UTC)
    ids = [f"r_bench_{uuid.uuid4().hex}" for _ in range(n_resp)]
    with psycopg.connect(_conninfo(url)) as conn:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO respondents (id, survey_id, token_hash, epsilon, epsilon_spent, n_comparisons, "
                "created_at) VALUES (%s, %s, NULL, 1.0, 0, 0, %s)",
                [(rid, survey["id"], now) for rid in ids],
            )
        conn.commit()
    rng = random.Random(3)
    chunks = []  # (respondent, rows) — built before the clock starts
    for rid in ids:
        order = pairs[:]
        rng.shuffle(order)
        for s in range(0, len(order), batch):
            chunks.append(
                [
                    (survey["id"], rid, a, b, rng.randrange(2), 1.0, "server", now)
                    for a, b in order[s : s + batch]
                ]
            )
    columns = "survey_id, respondent_id, i, j, y_tilde, epsilon, source, created_at"
    errors: list[BaseException] = []

    def worker(mine: list) -> None:
        try:
            with psycopg.connect(_conninfo(url)) as conn:
                for rows in mine:
                    with conn.cursor() as cur, cur.copy(f"COPY comparisons ({columns}) FROM STDIN") as copy:
                        for row in rows:
                            copy.write_row(row)
                    conn.commit()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(chunks[k::connections],)) for k in range(connections)]
    with CpuSplit() as cpu:
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    rows = sum(len(c) for c in chunks)
    return {
        "rows": rows,
        "seconds": wall,
        "rows_per_s": rows / wall,
        "connections": connections,
        "cpu_ms_per_1000": cpu.per_thousand(rows),
    }


#: Rounds of row 1 then row 2, each from a settled database: the two are measured
#: alternately so that a drift in the machine's speed (a shared virtual machine's
#: neighbours) weighs on both alike.
INGESTION_ROUNDS = 3


def ingestion_rounds(
    base: str, url: str, server_pid: int, survey: dict, workers: int, users: int, quick: bool
) -> tuple[dict, float, int, float, dict]:
    """Rows 1 and 2, alternately over :data:`INGESTION_ROUNDS` rounds, after a trial of one
    and of two COPY connections per worker picks the faster count (the ceiling) and a
    warm-up of the API. Returns the COPY reference summed over its rounds (rows, seconds,
    rows/s, connections, CPU per 1,000 rows) and the API's rate, answers acknowledged,
    seconds and CPU per 1,000 answers, each summed over the rounds."""
    trial = 10_000 if quick else 50_000
    counts = (workers, 2 * workers)
    trials = [
        copy_reference(url, create_survey(base, ADMIN_KEY, 50, f"copy trial {n}"), n, trial) for n in counts
    ]
    best = max(trials, key=lambda r: r["rows_per_s"])
    connections, seconds_each = best["connections"], 2 if quick else 5
    # Each COPY round as long as an API round: the machine's speed varies over seconds too.
    per_round = max(10_000, round(best["rows_per_s"] * seconds_each / 500) * 500)
    settle(url)
    run_batches(base, survey, users=users, seconds=2)  # warm-up
    copies, acked, wall = [], 0, 0.0
    spent = {"load": 0.0, "server": 0.0, "rest": 0.0}
    for k in range(INGESTION_ROUNDS):
        reference = create_survey(base, ADMIN_KEY, 50, f"copy reference {k}")
        copies.append(copy_reference(url, reference, connections, per_round))
        settle(url)
        with CpuSplit(server_pid) as cpu:
            measured = run_batches(base, survey, users=users, seconds=seconds_each)
        acked += measured.comparisons_acknowledged()
        wall += measured.wall
        for part, seconds in cpu.spent.items():
            spent[part] += seconds
    rows, seconds = sum(c["rows"] for c in copies), sum(c["seconds"] for c in copies)
    ref = {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "connections": connections,
        "cpu_ms_per_1000": {
            part: sum(c["cpu_ms_per_1000"][part] * c["rows"] for c in copies) / rows
            for part in copies[0]["cpu_ms_per_1000"]
        },
    }
    return ref, acked / wall, acked, wall, {part: 1e6 * v / acked for part, v in spent.items()}


def post_answers(client, sid: str, n_items_ids: list[str], n: int, batch: int = 500) -> None:
    """Store ``n`` new answers through the API (new respondents, ``batch`` per request)."""
    pairs_all = list(itertools.combinations(n_items_ids, 2))
    rng = random.Random(n)
    left = n
    while left > 0:
        r = client.post(f"/v1/surveys/{sid}/respondents", json={"epsilon": 1.0})
        r.raise_for_status()
        token = r.json()["token"]
        pairs = pairs_all[:]
        rng.shuffle(pairs)
        pairs = pairs[: min(left, len(pairs))]
        for s in range(0, len(pairs), batch):
            chunk = pairs[s : s + batch]
            body = {
                "privatized": False,
                "comparisons": [{"a": a, "b": b, "winner": a if rng.random() < 0.5 else b} for a, b in chunk],
            }
            r = client.post(
                f"/v1/surveys/{sid}/responses",
                json=body,
                headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex},
            )
            r.raise_for_status()
        left -= len(pairs)


def ranking_latency(client, survey: dict, warm_repeats: int, rounds: int, new_answers: int) -> dict:
    """p50 of warm ``GET /ranking`` and of the first request after ``new_answers`` new answers."""
    sid = survey["id"]
    ids = [it["id"] for it in survey["items"]]
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}

    def timed() -> tuple[float, dict]:
        t0 = time.perf_counter()
        r = client.get(f"/v1/surveys/{sid}/ranking", headers=headers)
        seconds = time.perf_counter() - t0
        r.raise_for_status()
        return seconds, r.json()

    for _ in range(4):  # every worker has fitted this version
        timed()
    warm = [timed()[0] for _ in range(warm_repeats)]
    after = []
    for _ in range(rounds):
        post_answers(client, sid, ids, new_answers)
        seconds, body = timed()
        after.append(seconds)
    stored = body["diagnostics"]["comparisons"]
    return {
        "stored": stored,
        "warm_p50_s": statistics.median(warm),
        "warm_p99_s": float(np.percentile(warm, 99)),
        "after_new_p50_s": statistics.median(after),
        "after_new_max_s": max(after),
    }


def fill(base: str, survey: dict, target: int, users: int, seconds: float) -> tuple[int, float]:
    """500-comparison batches until ``target`` comparisons are acknowledged; (acked, wall seconds)."""
    acked, wall = 0, 0.0
    while acked < target:
        res = run_batches(base, survey, users=users, seconds=seconds)
        acked += res.comparisons_acknowledged()
        wall += res.wall
    return acked, wall


def single_requests(base: str, survey: dict, seconds: float) -> dict:
    peak, peak_users, closed = 0.0, 0, []
    for users in (8, 16, 32):
        res = run_load(base, survey, users=users, seconds=seconds, batch=1)
        rate = len(res.acknowledged()) / res.wall
        closed.append({"users": users, "req_per_s": rate, **percentiles(res.latencies(after=RAMP_UP))})
        if rate > peak:
            peak, peak_users = rate, users
    half = run_load(base, survey, users=64, seconds=seconds * 2, batch=1, rate=peak / 2)
    # Steady state: the first two seconds, when all 64 respondents register at once and
    # every connection is opened, are reported separately.
    lat = percentiles(half.latencies(after=RAMP_UP))
    everything = percentiles(half.latencies())
    return {
        "peak_req_per_s": peak,
        "peak_users": peak_users,
        "half_rate": peak / 2,
        "achieved_rate": len(half.acknowledged()) / half.wall,
        "p50_s": lat["p50"],
        "p99_s": lat["p99"],
        "p99_with_ramp_up_s": everything["p99"],
        "statuses": {str(k): v for k, v in half.statuses().items()},
        "closed_loop": closed,
    }


#: Items of the pairwise-certificate survey of row 7 (that certificate's maximum).
PAIRWISE_ITEMS = 300


def _respondent_round(client, sid: str, count: int, rng: random.Random, timings: list | None) -> int:
    """One virtual respondent: register, ask for ``count`` pairs (timed into ``timings``),
    answer them with their tickets (coin flips); the answers stored."""
    r = client.post(f"/v1/surveys/{sid}/respondents", json={})
    r.raise_for_status()
    headers = {"Authorization": f"Bearer {r.json()['token']}"}
    t0 = time.perf_counter()
    r = client.get(f"/v1/surveys/{sid}/pairs", params={"count": count}, headers=headers)
    elapsed = time.perf_counter() - t0
    r.raise_for_status()
    if timings is not None:
        timings.append(elapsed)
    pairs = r.json()["pairs"]
    if not pairs:
        return 0
    body = {
        "privatized": False,
        "comparisons": [
            {
                "a": p["a"],
                "b": p["b"],
                "winner": p["a"] if rng.random() < 0.5 else p["b"],
                "ticket": p["ticket"],
            }
            for p in pairs
        ],
    }
    client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers).raise_for_status()
    return len(pairs)


def pairs_latency(
    base: str,
    url: str,
    n_items: int,
    stored: int,
    seconds: float,
    threads: int = 8,
    rate: float = 20.0,
    adaptive: bool = True,
    goal: dict | None = None,
) -> dict:
    """Row 7: an adaptive survey of ``n_items`` (goal: ``goal``, default the top 10 at 0.95,
    Borda) filled with ``stored`` answers through the API, then GET …/pairs timed while
    respondents arrive at about ``rate`` per second (each registers, asks for 10 pairs
    and answers them: three requests)."""
    import httpx2

    goal = goal or {"top_k": 10, "level": 0.95}

    r = httpx2.post(
        f"{base}/v1/surveys",
        json={
            "title": f"{'adaptive' if adaptive else 'balanced'} {n_items}",
            "items": [f"item {k}" for k in range(n_items)],
            # The fill's respondents answer 100 pairs each: no cap on their total, explicitly.
            "privacy": {"respondent_budget": "unlimited"},
            **({"assignment": "adaptive", "goal": goal} if adaptive else {}),
        },
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        timeout=60,
    )
    r.raise_for_status()
    sid = r.json()["id"]
    certificate = (r.json()["goal"] or {}).get("certificate")
    lock = threading.Lock()
    filled = [0]

    def fill_worker(seed: int) -> None:
        rng = random.Random(seed)
        with httpx2.Client(base_url=base, timeout=60) as client:
            while True:
                with lock:
                    if filled[0] >= stored:
                        return
                got = _respondent_round(client, sid, 100, rng, None)
                with lock:
                    filled[0] += got

    t0 = time.perf_counter()
    workers = [threading.Thread(target=fill_worker, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    fill_s = time.perf_counter() - t0
    # Quiet: new respondents ask one after another, nothing else running — not even the
    # vacuum and checkpoint that the fill's rows trigger (settled first, like every phase).
    settle(url)
    quiet: list[float] = []
    with httpx2.Client(base_url=base, timeout=60) as client:
        tokens = [client.post(f"/v1/surveys/{sid}/respondents", json={}).json()["token"] for _ in range(200)]
        for token in tokens:
            t1 = time.perf_counter()
            client.get(
                f"/v1/surveys/{sid}/pairs", params={"count": 10}, headers={"Authorization": f"Bearer {token}"}
            ).raise_for_status()
            quiet.append(time.perf_counter() - t1)
    timings: list[float] = []
    deadline = time.monotonic() + seconds

    def timed_worker(seed: int) -> None:
        rng = random.Random(1000 + seed)
        with httpx2.Client(base_url=base, timeout=60) as client:
            while time.monotonic() < deadline:
                time.sleep(rng.expovariate(rate / threads))  # arrivals ≈ Poisson at ``rate``
                _respondent_round(client, sid, 10, rng, timings)

    workers = [threading.Thread(target=timed_worker, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {
        "n_items": n_items,
        "certificate": certificate,
        "stored": filled[0],
        "fill_s": fill_s,
        "quiet": percentiles(np.asarray(quiet)),
        "loaded": percentiles(np.asarray(timings)),
        "requests": len(timings),
        "respondents_per_s": len(timings) / seconds,
    }


def _ingestion_row(ref: dict, rate: float, acked: int, wall: float, users: int, workers: int) -> tuple:
    """Row 2's name, figure, target and verdict (without the sustained fill's rate)."""
    ratio = rate / ref["rows_per_s"]
    return (
        f"API, 500-comparison batches, {users} clients, {workers} workers",
        f"{rate:,.0f} comparisons/s = {ratio:.0%} of COPY ({acked:,} in {wall:.0f} s",
        f"≥ {INGESTION_RATIO:.0%} and ≥ 20,000/s",
        ratio >= INGESTION_RATIO and rate >= 20_000,
    )


def _ingestion_rows(
    ref: dict, rate: float, acked: int, wall: float, users: int, cpu: dict, args, quick: bool, command: str
) -> int:
    """``--ingestion``: print rows 1-2 (and write them to ``--json``); the exit status."""
    name, figure, target, ok = _ingestion_row(ref, rate, acked, wall, users, args.workers)
    rows = [
        (
            f"raw ceiling: psycopg COPY, 500 rows/transaction, {ref['connections']} connections",
            f"{ref['rows_per_s']:,.0f} rows/s ({ref['rows']:,} rows)",
            "reference",
            True,
        ),
        (name, figure + ")", target, ok),
    ]
    width = max(len(r[0]) for r in rows)
    for name, figure, target, ok in rows:
        verdict = "(quick run)" if quick else ("met" if ok else "MISSED")
        print(f"{name.ljust(width)}  {figure}  [target {target}: {verdict}]")
    print(_cpu_line(ref, cpu))
    if args.write_docs:
        write_block("bench_service_ingestion", rows, command, [_cpu_line(ref, cpu) + "."])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "copy": ref,
                    "batches": {"acked": acked, "seconds": wall, "per_s": rate, "cpu_ms_per_1000": cpu},
                },
                fh,
                indent=2,
            )
    return 0 if quick or ok else 1


def main(argv: list[str] | None = None) -> int:
    import httpx2

    from app.stats.planner import plan
    from tests.benchmarks.bench_stats import versus_choix
    from tests.helpers.api import fresh_postgres_database
    from tests.helpers.live import LiveServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; targets not evaluated")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes (default 2)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--ingestion", action="store_true", help="rows 1-2 only: the raw COPY ceiling and the API batches"
    )
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="also write the figures into docs/benchmarks.md (its bench_service block; "
        "bench_service_ingestion with --ingestion); not with --quick",
    )
    args = parser.parse_args(argv)
    if args.write_docs and args.quick:
        parser.error("--write-docs writes a full run's figures, not a quick run's")
    command = command_line("tests.benchmarks.bench_service", argv)
    quick = args.quick
    server = os.environ.get("PRIVRANK_TEST_POSTGRES", DEFAULT_POSTGRES)

    stored_target = 50_000 if quick else 1_000_000
    url, drop = fresh_postgres_database(server)
    live = None
    try:
        live = LiveServer({"DATABASE_URL": url, "PRIVRANK_ADMIN_KEY": ADMIN_KEY}, workers=args.workers)
        base = live.base
        survey = create_survey(base, ADMIN_KEY, 50, "batches")
        # Concurrent respondents: with few keep-alive connections uvicorn's workers share
        # them unevenly (one may hold most), so the load needs several per worker.
        users = 8 * args.workers
        ref, batch_rate, batch_acked, batch_wall, batch_cpu = ingestion_rounds(
            base, url, live.proc.pid, survey, args.workers, users, quick
        )
        if args.ingestion:
            return _ingestion_rows(
                ref, batch_rate, batch_acked, batch_wall, users, batch_cpu, args, quick, command
            )
        # Single answers next, on the same (still small) database: after the fill below
        # PostgreSQL's autovacuum and checkpoints work through a million new rows for a
        # while, which is the bulk load's cost, not the single requests'.
        settle(url)
        single = single_requests(base, create_survey(base, ADMIN_KEY, 50, "singles"), 3 if quick else 10)
        settle(url)
        with httpx2.Client(base_url=base, timeout=60) as client:
            early = ranking_latency(client, survey, 10 if quick else 30, 2 if quick else 5, 10_000)
            to_add = max(stored_target - early["stored"], stored_target // 5)
            acked, wall = fill(base, survey, to_add, users, 5 if quick else 20)
            settle(url)
            late = ranking_latency(client, survey, 10 if quick else 30, 2 if quick else 5, 10_000)
        settle(url)
        pairs_1k = pairs_latency(base, url, 1000, 50_000 if quick else 1_000_000, 3 if quick else 20)
        settle(url)
        pairs_10k = pairs_latency(base, url, 10_000, 20_000 if quick else 100_000, 3 if quick else 20)
        settle(url)
        pairs_pw = pairs_latency(
            base,
            url,
            PAIRWISE_ITEMS,
            5_000 if quick else 20_000,
            3 if quick else 20,
            goal={"top_k": 3, "level": 0.95, "certificate": "pairwise"},
        )
        settle(url)
        pairs_ref = pairs_latency(
            base, url, 1000, 20_000 if quick else 100_000, 3 if quick else 20, adaptive=False
        )
    finally:
        if live is not None:
            live.stop()
        drop()

    cx = versus_choix(20_000 if quick else 200_000)
    plan(20, 500, 20, 1.0, 5, replications=20)  # warm-up
    t0 = time.perf_counter()
    plan(20, 500, 20, 1.0, 5, replications=200)
    plan_s = time.perf_counter() - t0

    growth = late["after_new_p50_s"] / early["after_new_p50_s"]
    batch = _ingestion_row(ref, batch_rate, batch_acked, batch_wall, users, args.workers)
    rows = [
        (
            f"raw ceiling: psycopg COPY, 500 rows/transaction, {ref['connections']} connections",
            f"{ref['rows_per_s']:,.0f} rows/s ({ref['rows']:,} rows)",
            "reference",
            True,
        ),
        (
            batch[0],
            f"{batch[1]}; {acked / wall:,.0f}/s sustained over the next {acked:,})",
            *batch[2:],
        ),
        (
            "API, single-comparison requests: peak (closed loop)",
            f"{single['peak_req_per_s']:,.0f} req/s ({single['peak_users']} clients)",
            "reported",
            True,
        ),
        (
            f"  latency at half the peak ({single['half_rate']:.0f} req/s open loop, "
            f"achieved {single['achieved_rate']:.0f})",
            f"p50 {single['p50_s'] * 1e3:.1f} ms, p99 {single['p99_s'] * 1e3:.1f} ms "
            f"(p99 {single['p99_with_ramp_up_s'] * 1e3:.0f} ms counting the first {RAMP_UP:.0f} s)",
            "p99 < 100 ms",
            single["p99_s"] < 0.1,
        ),
        (
            f"ranking, 50 items, {early['stored']:,} stored comparisons",
            f"warm p50 {early['warm_p50_s'] * 1e3:.1f} ms; after 10,000 new answers p50 "
            f"{early['after_new_p50_s'] * 1e3:.1f} ms",
            "warm p50 < 100 ms",
            early["warm_p50_s"] < 0.1,
        ),
        (
            f"ranking, 50 items, {late['stored']:,} stored comparisons",
            f"warm p50 {late['warm_p50_s'] * 1e3:.1f} ms; after 10,000 new answers p50 "
            f"{late['after_new_p50_s'] * 1e3:.1f} ms ({growth:.2f}× the smaller store)",
            "warm p50 < 100 ms; no growth (< 2×)",
            late["warm_p50_s"] < 0.1 and growth < 2,
        ),
        (
            f"estimator vs choix, m={cx['n_items']}, N={cx['n_comparisons']:,}",
            f"ours {cx['ours_s'] * 1e3:.1f} ms; choix ilsr {cx['choix_ilsr_s']:.2f} s → "
            f"{cx['speedup_vs_fastest_choix']:.0f}× faster",
            "≥ 100×",
            cx["speedup_vs_fastest_choix"] >= 100,
        ),
        ("planner: m=20, 500 respondents, 200 simulated surveys", f"{plan_s:.2f} s", "reported", True),
    ]
    for p, what, target in (
        (pairs_1k, "adaptive", 0.020),
        (pairs_10k, "adaptive", None),
        (pairs_pw, "adaptive, pairwise certificate (top 3)", None),
        (pairs_ref, "balanced (reference)", None),
    ):
        q, lo = p["quiet"], p["loaded"]
        rows.append(
            (
                f"GET pairs (10), {what}, m={p['n_items']:,}, {p['stored']:,} stored answers",
                f"quiet p50 {q['p50'] * 1e3:.1f} ms, p99 {q['p99'] * 1e3:.1f} ms; with "
                f"{p['respondents_per_s']:.0f} respondents/s answering: p50 {lo['p50'] * 1e3:.1f} ms, p99 "
                f"{lo['p99'] * 1e3:.1f} ms ({p['requests']:,} requests)",
                "quiet p99 < 20 ms" if target else "reported",
                target is None or q["p99"] < target,
            )
        )
    width = max(len(r[0]) for r in rows)
    for name, figure, target, ok in rows:
        verdict = "(quick run)" if quick else ("met" if ok else "MISSED")
        print(f"{name.ljust(width)}  {figure}  [target {target}: {verdict}]")
    print(_cpu_line(ref, batch_cpu))
    print("\nload test, single-comparison requests (closed loop: each client waits for its answer):")
    for c in single["closed_loop"]:
        print(
            f"  {c['users']:3d} clients: {c['req_per_s']:6.0f} req/s, p50 {c['p50'] * 1e3:6.1f} ms, "
            f"p95 {c['p95'] * 1e3:6.1f} ms, p99 {c['p99'] * 1e3:6.1f} ms"
        )
    if args.write_docs:
        load = "; ".join(
            f"{c['users']} clients: {c['req_per_s']:.0f} req/s, p50 {c['p50'] * 1e3:.1f} ms, "
            f"p95 {c['p95'] * 1e3:.1f} ms, p99 {c['p99'] * 1e3:.1f} ms"
            for c in single["closed_loop"]
        )
        notes = [_cpu_line(ref, batch_cpu) + ".", f"Load test, closed loop: {load}."]
        write_block("bench_service", rows, command, notes)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "copy": ref,
                    "batches": {
                        "acked": batch_acked,
                        "seconds": batch_wall,
                        "per_s": batch_rate,
                        "cpu_ms_per_1000": batch_cpu,
                    },
                    "fill": {"acked": acked, "seconds": wall, "per_s": acked / wall},
                    "single": single,
                    "ranking_early": early,
                    "ranking_late": late,
                    "choix": cx,
                    "planner_s": plan_s,
                    "pairs": {
                        "adaptive_1k": pairs_1k,
                        "adaptive_10k": pairs_10k,
                        "pairwise_300": pairs_pw,
                        "balanced_1k": pairs_ref,
                    },
                },
                fh,
                indent=2,
            )
    return 0 if quick or all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
