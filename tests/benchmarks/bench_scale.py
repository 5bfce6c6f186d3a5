"""The default ranking as stored answers grow: latency, memory and ingestion, as one table.

    python -m tests.benchmarks.bench_scale          # 100,000, 1,000,000 and 10,000,000 answers
    python -m tests.benchmarks.bench_scale --quick  # 20,000 and 200,000 answers (CI smoke run)
    python -m tests.benchmarks.bench_scale --write-docs  # also write the table into docs/benchmarks.md

A ``privrank serve --workers 2`` on a fresh database of the PostgreSQL server of
``PRIVRANK_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``), as in
:mod:`tests.benchmarks.bench_service`. Two surveys of 50 items, one per shape: 10 answers
per respondent (many small clusters) and 1,000 per respondent. Each is built through the
API with the CSV import (``POST …/comparisons/import?privatized=true``: BTL answers
randomized at ε = 1 with :func:`app.stats.mechanisms.privatize` and a seeded generator,
respondents as pseudonyms, at most :data:`CHUNK_ROWS` rows per request, each respondent's
answers in one request, two requests at a time), folded after each request (``GET
…/coverage``), and grown from one size to the next. At each size, after settling the
database and restarting the server:

1. **first read after start** — ``GET …/ranking`` (default: debiased MLE, cluster-robust
   sandwich with respondents as clusters) on a fresh server, which builds the
   cluster-robust sums from the answer log (docs/capacity.md §5); both workers' first
   reads are timed (the second on a new connection that lands on the other worker);
2. **fresh read after new answers** — one new respondent registers and posts one batch
   (10 answers for the first shape, 500 for the second), then ``GET …/ranking`` is timed;
   5 times, the median printed. Targets: ≤ 300 ms at 1,000,000, ≤ 1 s at 10,000,000, and
   ≤ 1.5× the 100,000 figure at 1,000,000, for both shapes. The same with
   ``covariance=model`` and with ``uncertainty=none`` are printed as references;
3. the resident memory (RSS) of both workers, the import's answers per second, and
   the database's bytes per stored answer (``comparisons`` + ``answer_log`` +
   ``pending_batches``, tables and indexes) after the 1,000,000 size.

The largest size is skipped, with the reason printed, when the database would not fit
on the disk (bytes per answer measured at 1,000,000, times :data:`DISK_HEADROOM`) or
when its predicted build time (at the measured import rate) would pass ``--time-box``.
All requests of one shape's measurement share one keep-alive connection, so they are
served by one worker (the one whose file descriptors hold the server side of that
connection). Options: ``--time-box MINUTES``, ``--cache-mb`` (the server's
PRIVRANK_ANALYSIS_CACHE_MB; the table says when a survey's state is over it),
``--workers``, ``--rounds``, ``--keep`` (keep the database, to profile on it), ``--json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import threading
import time
import uuid

import numpy as np
from scipy.special import expit

from tests.benchmarks.bench_service import DEFAULT_POSTGRES, settle
from tests.benchmarks.docs_page import command_line, write_block
from tests.benchmarks.loadgen import create_survey

ADMIN_KEY = "bench-admin-" + uuid.uuid4().hex[:8]
N_ITEMS = 50
EPSILON = 1.0
#: Answers per respondent in the import (the two shapes) and in each fresh batch.
SHAPES = (10, 1_000)
FRESH_BATCH = {10: 10, 1_000: 500}
SIZES = (100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (20_000, 200_000)
ROUNDS = 5
#: Rows per import request: a fifth of what the endpoint takes on PostgreSQL (1,000,000
#: rows, and a body within PRIVRANK_MAX_IMPORT_BYTES), so that a worker stages a fifth of
#: the largest import's memory.
CHUNK_ROWS = 200_000
#: Import requests in flight at once (one per worker).
UPLOADERS = 2
#: Free disk needed per byte the largest size adds (write-ahead log, vacuum, the
#: pending batches before each fold).
DISK_HEADROOM = 1.5
#: Fraction of the predicted build time added for the measurements at the largest size.
MEASURE_SHARE = 0.3
TABLES = ("comparisons", "answer_log", "pending_batches")


def _conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


# -- the worker processes ------------------------------------------------------


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def worker_pids(server_pid: int) -> list[int]:
    """The uvicorn worker processes of ``privrank serve`` (spawned children; not the
    multiprocessing resource tracker)."""
    pids = []
    for pid in _children(server_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        if b"spawn_main" in cmd:
            pids.append(pid)
    return sorted(pids)


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` (psutil if installed, else /proc/<pid>/status VmRSS)."""
    try:
        import psutil
    except ImportError:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0
    return int(psutil.Process(pid).memory_info().rss)


def _server_sockets(port: int) -> set[str]:
    """Inodes of the established TCP connections whose local port is ``port`` (the
    server's side of each client connection)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                next(fh)
                for line in fh:
                    f = line.split()
                    if f[3] == "01" and int(f[1].rsplit(":", 1)[1], 16) == port:
                        found.add(f[9])
        except OSError:
            continue
    return found


class Workers:
    """The server's workers: which one holds a client's connection (the worker whose
    file descriptors include the server side of it) and their memory."""

    def __init__(self, server_pid: int, port: int, expected: int) -> None:
        self.port = port
        deadline = time.monotonic() + 30
        while True:
            self.pids = worker_pids(server_pid)
            if len(self.pids) >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.1)

    def connections(self) -> dict[str, int]:
        """Server-side connection socket inode → index of the worker holding it."""
        mine = _server_sockets(self.port)
        out = {}
        for k, pid in enumerate(self.pids):
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:[") and link[8:-1] in mine:
                    out[link[8:-1]] = k
        return out

    def rss(self) -> list[int]:
        return [rss_bytes(p) for p in self.pids]


# -- building a survey through the import --------------------------------------


class Shape:
    """One survey and how its respondents answer: ``per`` distinct random pairs each."""

    def __init__(self, survey: dict, per: int, seed: int) -> None:
        self.survey = survey
        self.id = survey["id"]
        self.per = per
        self.item_ids = [it["id"] for it in survey["items"]]
        self.labels = [it["label"] for it in survey["items"]]
        self.rng = np.random.default_rng(seed)
        self.theta = np.sort(self.rng.normal(0.0, 1.0, N_ITEMS))[::-1]
        self.respondents = 0  # imported so far (pseudonyms s<per>-<k>)
        self.stored = 0

    def answers(self, n_resp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, winner) of ``n_resp`` respondents × ``per`` distinct pairs, a < b."""
        from app.stats.clusters import pair_ends
        from app.stats.mechanisms import privatize

        n_pairs = N_ITEMS * (N_ITEMS - 1) // 2
        picks = []
        block = max(1, 4_000_000 // n_pairs)
        for start in range(0, n_resp, block):
            keys = self.rng.random((min(block, n_resp - start), n_pairs))
            picks.append(np.argpartition(keys, self.per - 1, axis=1)[:, : self.per])
        index = np.concatenate(picks).ravel()
        a, b = pair_ends(index)
        y = (self.rng.random(index.size) < expit(self.theta[a] - self.theta[b])).astype(np.int8)
        # A simulation: seeded randomized response (real answers use the OS CSPRNG).
        y_tilde = privatize(y, EPSILON, rng=self.rng)
        return a, b, np.where(y_tilde == 1, a, b)

    def csv_chunks(self, n_answers: int) -> list[tuple[bytes, int]]:
        """The CSV bodies importing ``n_answers`` more answers (whole respondents, at most
        :data:`CHUNK_ROWS` rows each) and their row counts."""
        per_chunk = max(1, CHUNK_ROWS // self.per)
        left = -(-n_answers // self.per)
        chunks = []
        labels = self.labels
        while left > 0:
            n_resp = min(per_chunk, left)
            a, b, w = self.answers(n_resp)
            refs = [f"s{self.per}-{self.respondents + k}" for k in range(n_resp)]
            who = np.repeat(np.arange(n_resp), self.per)
            lines = [
                f"{refs[r]},{labels[x]},{labels[z]},{labels[v]},1\n"
                for r, x, z, v in zip(who.tolist(), a.tolist(), b.tolist(), w.tolist(), strict=True)
            ]
            body = "respondent,item_a,item_b,winner,epsilon\n" + "".join(lines)
            chunks.append((body.encode(), a.size))
            self.respondents += n_resp
            left -= n_resp
        return chunks


def import_chunks(base: str, shape: Shape, chunks: list[tuple[bytes, int]]) -> dict:
    """POST the chunks, :data:`UPLOADERS` at a time, each followed by a fold (``GET
    …/coverage``); answers per second over the wall time."""
    import httpx2

    headers = {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "text/csv"}
    todo = list(enumerate(chunks))
    lock = threading.Lock()
    errors: list[BaseException] = []
    import_s = [0.0] * len(chunks)

    def uploader() -> None:
        try:
            with httpx2.Client(base_url=base, timeout=600) as client:
                while True:
                    with lock:
                        if not todo or errors:
                            return
                        k, (body, _) = todo.pop(0)
                    t0 = time.perf_counter()
                    r = client.post(
                        f"/v1/surveys/{shape.id}/comparisons/import",
                        params={"privatized": "true"},
                        content=body,
                        headers=headers,
                    )
                    import_s[k] = time.perf_counter() - t0
                    if r.status_code != 200 and r.status_code != 201:
                        raise RuntimeError(f"import: {r.status_code} {r.text[:300]}")
                    client.get(f"/v1/surveys/{shape.id}/coverage", headers=headers).raise_for_status()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=uploader) for _ in range(UPLOADERS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    rows = sum(n for _, n in chunks)
    shape.stored += rows
    return {"answers": rows, "seconds": wall, "per_s": rows / wall, "requests": len(chunks)}


# -- the reads -----------------------------------------------------------------


def timed_ranking(
    client, shape: Shape, params: dict | None = None, errors: list | None = None
) -> tuple[float, dict]:
    """Seconds and body of one ``GET …/ranking``; a 503 (the analysis time budget,
    PRIVRANK_ANALYSIS_SECONDS) is appended to ``errors`` with its time, other errors raise."""
    t0 = time.perf_counter()
    r = client.get(
        f"/v1/surveys/{shape.id}/ranking",
        params=params or {},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    seconds = time.perf_counter() - t0
    if r.status_code == 503 and errors is not None:
        errors.append(f"503 after {seconds:.0f} s")
        return seconds, {}
    r.raise_for_status()
    return seconds, r.json()


def post_fresh(client, shape: Shape, rng: np.random.Generator) -> None:
    """A new respondent registers and posts one batch (server-side randomized response)."""
    r = client.post(f"/v1/surveys/{shape.id}/respondents", json={"epsilon": EPSILON})
    r.raise_for_status()
    token = r.json()["token"]
    n = FRESH_BATCH[shape.per]
    pairs = list(itertools.combinations(range(N_ITEMS), 2))
    picks = rng.choice(len(pairs), size=n, replace=False)
    ids = shape.item_ids
    comparisons = []
    for p in picks.tolist():
        a, b = pairs[p]
        won = rng.random() < expit(shape.theta[a] - shape.theta[b])
        comparisons.append({"a": ids[a], "b": ids[b], "winner": ids[a] if won else ids[b]})
    r = client.post(
        f"/v1/surveys/{shape.id}/responses",
        json={"privatized": False, "comparisons": comparisons},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": uuid.uuid4().hex},
    )
    r.raise_for_status()
    shape.stored += n


READS = {
    "default": {},
    "covariance=model": {"covariance": "model"},
    "uncertainty=none": {"uncertainty": "none"},
}


def measure(base: str, workers: Workers, shape: Shape, rounds: int) -> dict:
    """The first reads after start (both workers) and the fresh reads after new answers,
    all of the latter on one keep-alive connection (one worker)."""
    import httpx2

    rng = np.random.default_rng(shape.per * 7919 + shape.stored)
    errors: list[str] = []
    out: dict = {"stored": shape.stored, "errors": errors}
    with httpx2.Client(base_url=base, timeout=600) as client:
        before = workers.connections()
        first, body = timed_ranking(client, shape, errors=errors)
        new = set(workers.connections().items()) - set(before.items())
        mine = next(iter(new))[1] if len(new) == 1 else None
        out["first_read_s"] = [first]
        # The other worker's first read: new connections until one is accepted by it.
        for _ in range(20 if mine is not None and len(workers.pids) > 1 else 0):
            with httpx2.Client(base_url=base, timeout=600) as other:
                before = workers.connections()
                other.get("/readyz").raise_for_status()
                new = set(workers.connections().items()) - set(before.items())
                if len(new) == 1 and next(iter(new))[1] != mine:
                    out["first_read_s"].append(timed_ranking(other, shape, errors=errors)[0])
                    break
        for name, params in READS.items():
            times = []
            for _ in range(rounds):
                post_fresh(client, shape, rng)
                seconds, found = timed_ranking(client, shape, params, errors)
                times.append(seconds)
                body = found or body
                if name == "default" and found:
                    out["method"] = found["uncertainty"]["method"]
            out[name] = times
    out.setdefault("method", "no answer")
    out["respondents"] = body.get("diagnostics", {}).get("respondents", 0)
    out["stored_after"] = body.get("diagnostics", {}).get("comparisons", shape.stored)
    return out


# -- the database --------------------------------------------------------------


def database_bytes(url: str) -> tuple[int, int]:
    """(bytes of comparisons + answer_log + pending_batches with their indexes, rows of
    comparisons)."""
    import psycopg

    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        size = sum(int(conn.execute(f"SELECT pg_total_relation_size('{t}')").fetchone()[0]) for t in TABLES)
        rows = int(conn.execute("SELECT count(*) FROM comparisons").fetchone()[0])
    return size, rows


def free_disk(url: str) -> tuple[int, str]:
    """Free bytes where the server keeps its data (its data directory when this machine can
    see it, else the root file system), and that path."""
    import psycopg

    path = "/"
    try:
        with psycopg.connect(_conninfo(url), autocommit=True) as conn:
            found = conn.execute("SHOW data_directory").fetchone()[0]
        if found and os.path.exists(found):
            path = found
    except Exception:  # not a superuser: the root file system
        pass
    try:
        return shutil.disk_usage(path).free, path
    except OSError:
        return shutil.disk_usage("/").free, "/"


def state_bytes(stored: int, respondents: int) -> int:
    """Bytes :class:`app.analysis.answer_log.AnswerLogStore` holds for one survey's state
    (docs/capacity.md §4)."""
    from app.analysis.answer_log import state_bytes as of

    return of(N_ITEMS, stored, respondents)


# -- the table -----------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f} ms" if seconds >= 0.01 else f"{seconds * 1e3:.1f} ms"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def table(results: dict, sizes: tuple[int, ...], quick: bool, skipped: str | None, extra: dict) -> list:
    """Rows (what, figure, target, met or None when only reported)."""
    rows: list[tuple[str, str, str, bool | None]] = []
    small, middle = sizes[0], sizes[1]
    targets = {1_000_000: 0.3, 10_000_000: 1.0}
    for size in sizes:
        if size not in results:
            continue
        for per in SHAPES:
            r = results[size]["shapes"][per]
            label = f"{size:,} answers, {per:,}/respondent ({r['respondents']:,} respondents)"
            fresh = statistics.median(r["default"])
            limit = None if quick else targets.get(size)
            rows.append(
                (
                    f"{label}: fresh read after {FRESH_BATCH[per]} new answers "
                    f"(median of {len(r['default'])})",
                    f"{_ms(fresh)} (max {_ms(max(r['default']))}; {r['method']})"
                    + (f"; {len(r['errors'])} unanswered: {r['errors'][0]}" if r["errors"] else ""),
                    f"≤ {_ms(limit)}" if limit else "reported",
                    None if limit is None else fresh <= limit,
                )
            )
            if size == middle and small in results:
                ratio = fresh / statistics.median(results[small]["shapes"][per]["default"])
                rows.append(
                    (
                        f"{label}: fresh read, {size:,} / {small:,}",
                        f"{ratio:.2f}×",
                        "≤ 1.5×" if not quick else "reported",
                        None if quick else ratio <= 1.5,
                    )
                )
            firsts = ", ".join(_ms(s) for s in r["first_read_s"])
            rows.append((f"{label}: first read after start (each worker)", firsts, "reported", None))
            for name in ("covariance=model", "uncertainty=none"):
                rows.append(
                    (
                        f"{label}: fresh read, {name} (reference)",
                        f"{_ms(statistics.median(r[name]))}",
                        "reported",
                        None,
                    )
                )
            state = state_bytes(r["stored_after"], r["respondents"])
            over = state > extra["cache_mb"] * 2**20
            rows.append(
                (
                    f"{label}: answer-log state (cache budget {extra['cache_mb']} MiB per worker)",
                    _mib(state) + (" — over the budget: not kept, every read rebuilds it" if over else ""),
                    "reported",
                    None,
                )
            )
        rss = results[size]["rss"]
        rows.append(
            (
                f"{size:,} answers per survey: RSS of the {len(rss)} workers",
                " and ".join(_mib(x) for x in rss),
                "reported",
                None,
            )
        )
        for per in SHAPES:
            g = results[size]["growth"][per]
            rows.append(
                (
                    f"{size:,} answers, {per:,}/respondent: import (+{g['answers']:,} answers, "
                    f"{g['requests']} requests, {UPLOADERS} at a time, each folded)",
                    f"{g['per_s']:,.0f} answers/s ({g['seconds']:.0f} s)",
                    "reported",
                    None,
                )
            )
    if "bytes_per_answer" in extra:
        rows.append(
            (
                f"bytes per stored answer ({' + '.join(TABLES)}, with indexes) "
                f"at {extra['bytes_rows']:,} rows",
                f"{extra['bytes_per_answer']:.0f} B",
                "reported",
                None,
            )
        )
    if skipped:
        rows.append((f"{sizes[-1]:,} answers", "skipped: " + skipped, "—", None))
    return rows


def print_table(rows: list, quick: bool) -> None:
    width = max(len(r[0]) for r in rows)
    for name, figure, target, ok in rows:
        verdict = "" if ok is None else ": (quick run)" if quick else ": met" if ok else ": MISSED"
        print(f"{name.ljust(width)}  {figure}  [target {target}{verdict}]", flush=True)


# -- the run -------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    from tests.helpers.api import fresh_postgres_database
    from tests.helpers.live import LiveServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="20,000 and 200,000 answers; targets not evaluated"
    )
    parser.add_argument("--workers", type=int, default=2, help="server worker processes (default 2)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="fresh reads per figure (default 5)")
    parser.add_argument("--time-box", type=float, help="minutes: skip the largest size if it would end later")
    parser.add_argument(
        "--cache-mb", type=int, help="PRIVRANK_ANALYSIS_CACHE_MB of the server (default: its own)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database (its URL is printed)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="also write the figures into docs/benchmarks.md (its bench_scale block); not with --quick",
    )
    args = parser.parse_args(argv)
    if args.write_docs and args.quick:
        parser.error("--write-docs writes a full run's figures, not a quick run's")
    started = time.monotonic()
    sizes = QUICK_SIZES if args.quick else SIZES
    server = os.environ.get("PRIVRANK_TEST_POSTGRES", DEFAULT_POSTGRES)
    env = {"PRIVRANK_ADMIN_KEY": ADMIN_KEY}
    if args.cache_mb:
        env["PRIVRANK_ANALYSIS_CACHE_MB"] = str(args.cache_mb)
    from app.core.config import Settings

    cache_mb = args.cache_mb or Settings().analysis_cache_mb
    url, drop = fresh_postgres_database(server)
    env["DATABASE_URL"] = url
    results: dict = {}
    extra: dict = {"cache_mb": cache_mb}
    skipped = None
    live = None
    try:
        live = LiveServer(env, workers=args.workers)
        shapes = {
            per: Shape(create_survey(live.base, ADMIN_KEY, N_ITEMS, f"scale {per}/respondent"), per, seed=per)
            for per in SHAPES
        }
        for size in sizes:
            if size == sizes[-1] and len(sizes) > 2:
                last = results[sizes[-2]]["growth"].values()
                rate = sum(g["answers"] for g in last) / sum(g["seconds"] for g in last)
                skipped = _too_big(url, shapes, size, extra, started, args.time_box, rate)
                if skipped:
                    print(f"skipping {size:,} answers: {skipped}", flush=True)
                    break
            growth = {}
            for per, shape in shapes.items():
                chunks = shape.csv_chunks(size - shape.stored)
                growth[per] = import_chunks(live.base, shape, chunks)
                del chunks
                print(
                    f"{size:,} answers, {per}/respondent: imported {growth[per]['answers']:,} at "
                    f"{growth[per]['per_s']:,.0f}/s",
                    flush=True,
                )
            settle(url)
            live.stop()
            live = LiveServer(env, workers=args.workers)
            workers = Workers(live.proc.pid, live.port, args.workers)
            measured = {per: measure(live.base, workers, shape, args.rounds) for per, shape in shapes.items()}
            results[size] = {"growth": growth, "shapes": measured, "rss": workers.rss()}
            if size == sizes[1]:
                size_bytes, rows = database_bytes(url)
                extra.update(bytes_per_answer=size_bytes / rows, bytes_rows=rows)
            print_table(table({size: results[size]}, sizes, args.quick, None, extra), args.quick)
            print(flush=True)
    finally:
        if live is not None:
            live.stop()
        if args.keep:
            print(f"database kept: {url}")
        else:
            drop()
    rows = table(results, sizes, args.quick, skipped, extra)
    print(f"\nprivrank serve --workers {args.workers}, {N_ITEMS} items, ε = {EPSILON:g}; all sizes:")
    print_table(rows, args.quick)
    print(f"({(time.monotonic() - started) / 60:.0f} minutes in all)")
    if args.write_docs:
        write_block(
            "bench_scale",
            rows,
            command_line("tests.benchmarks.bench_scale", argv),
            [f"`privrank serve --workers {args.workers}`, {N_ITEMS} items, ε = {EPSILON:g}."],
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"results": {str(k): v for k, v in results.items()}, **extra, "skipped": skipped},
                fh,
                indent=2,
            )
    return 0 if args.quick or all(r[3] is not False for r in rows) else 1


def _too_big(
    url: str, shapes: dict, size: int, extra: dict, started: float, time_box: float | None, rate: float
) -> str | None:
    """Why the largest size cannot run here (disk; the time box at the import ``rate``,
    answers per second), or None."""
    more = sum(size - s.stored for s in shapes.values())
    per_answer = extra.get("bytes_per_answer")
    if per_answer:
        need = more * per_answer * DISK_HEADROOM
        free, path = free_disk(url)
        extra.update(disk_needed=need, disk_free=free)
        if need > free:
            return (
                f"the database would need ~{need / 2**30:.1f} GiB more "
                f"({more:,} answers × {per_answer:.0f} B × "
                f"{DISK_HEADROOM}) and {path} has {free / 2**30:.1f} GiB free"
            )
    if time_box is not None and rate:
        predicted = more / rate * (1 + MEASURE_SHARE)
        left = time_box * 60 - (time.monotonic() - started)
        extra.update(predicted_s=predicted, time_left_s=left)
        if predicted > left:
            return (
                f"building it would take ~{predicted / 60:.0f} min at the measured import rate "
                f"({rate:,.0f} answers/s) and {max(left, 0) / 60:.0f} min of the "
                f"{time_box:g}-min time box are left"
            )
    return None


if __name__ == "__main__":
    sys.exit(main())
