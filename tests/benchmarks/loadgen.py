"""A bounded load generator for privrank (asyncio + httpx2): respondents registering and answering.

Used by the service benchmark, the load test and the fault tests. Each virtual
respondent registers, then posts its answers (1 comparison per request, or batches),
never answering a pair twice; every request carries an Idempotency-Key. The
generator records, per request: when it started, how long it took, its status (or
the exception's type), the comparisons it carried and its Idempotency-Key — so that
a test can compare what was acknowledged (201) with what the database holds. A
``stop`` event (set from another thread) ends a run before its ``seconds``.

Command line (against a running server)::

    python -m tests.benchmarks.loadgen --url http://127.0.0.1:8000 --admin-key K \\
        --users 16 --seconds 20 --batch 1
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import threading
import time
import uuid
from dataclasses import dataclass, field

import httpx2
import numpy as np

#: Seconds between the arrivals of the virtual respondents at the start of a run. Real
#: respondents do not all connect in the same millisecond, and a burst would be accepted
#: whole by whichever server worker woke first (its event loop takes every pending
#: connection), leaving the other workers without keep-alive connections for the run.
STAGGER = 0.01

__all__ = ["LoadResult", "Record", "create_survey", "percentiles", "run_load"]


@dataclass
class Record:
    start: float
    seconds: float
    status: int | str
    respondent: str
    pairs: list[tuple[str, str]]
    kind: str = "responses"
    key: str = ""  # the Idempotency-Key (shared by the attempts of one request)


@dataclass
class LoadResult:
    records: list[Record] = field(default_factory=list)
    wall: float = 0.0

    def acknowledged(self) -> list[Record]:
        return [r for r in self.records if r.kind == "responses" and r.status == 201]

    def comparisons_acknowledged(self) -> int:
        return sum(len(r.pairs) for r in self.acknowledged())

    def latencies(self, kind: str = "responses", status: int | None = 201, after: float = 0.0) -> np.ndarray:
        """Durations of the matching requests that started ``after`` seconds or more into the run
        (to leave out the ramp-up, when every virtual respondent registers at once)."""
        t0 = min((r.start for r in self.records), default=0.0)
        return np.array(
            [
                r.seconds
                for r in self.records
                if r.kind == kind and (status is None or r.status == status) and r.start - t0 >= after
            ]
        )

    def statuses(self) -> dict:
        out: dict = {}
        for r in self.records:
            out[r.status] = out.get(r.status, 0) + 1
        return out


def percentiles(x: np.ndarray) -> dict[str, float]:
    if x.size == 0:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "max": float("nan")}
    q = np.percentile(x, [50, 95, 99])
    return {"p50": float(q[0]), "p95": float(q[1]), "p99": float(q[2]), "max": float(x.max())}


def create_survey(base: str, admin_key: str, n_items: int = 50, title: str = "load") -> dict:
    r = httpx2.post(
        f"{base}/v1/surveys",
        # Load users answer batch after batch: no cap on a respondent's total, explicitly.
        json={
            "title": title,
            "items": [f"item {k}" for k in range(n_items)],
            "privacy": {"respondent_budget": "unlimited"},
        },
        headers={"Authorization": f"Bearer {admin_key}"},
        timeout=30,
    )
    r.raise_for_status()
    return r.json()


async def _user(
    client: httpx2.AsyncClient,
    survey: dict,
    batch: int,
    deadline: float,
    result: LoadResult,
    rng: random.Random,
    pace: asyncio.Queue | None,
    privatized: bool,
    stop: threading.Event | None = None,
    delay: float = 0.0,
) -> None:
    ids = [it["id"] for it in survey["items"]]
    sid = survey["id"]
    await asyncio.sleep(delay)

    def done() -> bool:
        return time.monotonic() >= deadline or (stop is not None and stop.is_set())

    while not done():
        t0 = time.monotonic()
        try:
            r = await client.post(f"/v1/surveys/{sid}/respondents", json={"epsilon": 1.0})
            status = r.status_code
        except Exception as exc:
            status = type(exc).__name__
        result.records.append(Record(t0, time.monotonic() - t0, status, "", [], kind="register"))
        if status != 201:
            await asyncio.sleep(0.05)
            continue
        data = r.json()
        headers = {"Authorization": f"Bearer {data['token']}"}
        pairs = list(itertools.combinations(ids, 2))
        rng.shuffle(pairs)
        for start in range(0, len(pairs), batch):
            if done():
                return
            if pace is not None:
                await pace.get()
                if done():  # the token that woke us was the end of the run
                    return
            chunk = pairs[start : start + batch]
            body = {
                "privatized": privatized,
                "comparisons": [{"a": a, "b": b, "winner": a if rng.random() < 0.5 else b} for a, b in chunk],
            }
            if privatized:
                body["epsilon"] = 1.0
            key = uuid.uuid4().hex
            for _attempt in range(3):  # retry network failures and 5xx with the same key
                t0 = time.monotonic()
                try:
                    r = await client.post(
                        f"/v1/surveys/{sid}/responses", json=body, headers={**headers, "Idempotency-Key": key}
                    )
                    status = r.status_code
                except Exception as exc:
                    status = type(exc).__name__
                result.records.append(
                    Record(t0, time.monotonic() - t0, status, data["respondent_id"], chunk, key=key)
                )
                if isinstance(status, int) and status < 500:
                    break
                await asyncio.sleep(0.2)
            if status != 201:
                break  # a new respondent


async def _pacer(
    queue: asyncio.Queue, rate: float, deadline: float, stop: threading.Event | None = None, users: int = 0
) -> None:
    """Open-loop arrivals: a token every 1/rate seconds (Poisson spacing)."""
    rng = random.Random(7)
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        await asyncio.sleep(rng.expovariate(rate))
        queue.put_nowait(None)
    for _ in range(users):  # wake every user waiting for a token: each then sees the run is over
        queue.put_nowait(None)


async def _run(
    base: str,
    survey: dict,
    users: int,
    seconds: float,
    batch: int,
    rate: float | None,
    privatized: bool,
    timeout: float,
    stop: threading.Event | None = None,
    result: LoadResult | None = None,
) -> LoadResult:
    result = LoadResult() if result is None else result
    limits = httpx2.Limits(max_connections=users + 4, max_keepalive_connections=users + 4)
    async with httpx2.AsyncClient(base_url=base, timeout=timeout, limits=limits) as client:
        start = time.monotonic()
        deadline = start + seconds
        pace = asyncio.Queue() if rate else None
        tasks = [
            asyncio.create_task(
                _user(
                    client,
                    survey,
                    batch,
                    deadline,
                    result,
                    random.Random(k),
                    pace,
                    privatized,
                    stop,
                    k * STAGGER,
                )
            )
            for k in range(users)
        ]
        if pace is not None:
            tasks.append(asyncio.create_task(_pacer(pace, rate, deadline, stop, users)))
        await asyncio.wait(tasks, timeout=seconds + timeout + 5)
        for t in tasks:
            t.cancel()
        result.wall = time.monotonic() - start
    return result


def run_load(
    base: str,
    survey: dict,
    users: int = 16,
    seconds: float = 10.0,
    batch: int = 1,
    rate: float | None = None,
    privatized: bool = False,
    timeout: float = 30.0,
    stop: threading.Event | None = None,
    result: LoadResult | None = None,
) -> LoadResult:
    """Drive the server for ``seconds``: ``users`` concurrent respondents, ``batch`` comparisons
    per request; ``rate`` (requests/s) makes arrivals open-loop instead of as-fast-as-possible.
    Setting ``stop`` (e.g. from another thread) ends the run early: no new request starts
    after it (the retries of one under way still do). Records go to ``result`` when given
    (and it is returned): another thread may watch its ``records`` fill as the run goes on."""
    return asyncio.run(_run(base, survey, users, seconds, batch, rate, privatized, timeout, stop, result))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--admin-key", required=True)
    p.add_argument("--items", type=int, default=50)
    p.add_argument("--users", type=int, default=16)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--rate", type=float, help="requests per second (open loop); default: as fast as possible")
    args = p.parse_args(argv)
    survey = create_survey(args.url, args.admin_key, args.items)
    res = run_load(args.url, survey, args.users, args.seconds, args.batch, args.rate)
    lat = percentiles(res.latencies())
    ok = len(res.acknowledged())
    print(f"{ok} acknowledged requests ({res.comparisons_acknowledged()} comparisons) in {res.wall:.1f} s")
    print(
        f"throughput {ok / res.wall:.0f} req/s, {res.comparisons_acknowledged() / res.wall:.0f} comparisons/s"
    )
    print("latency (201s): " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in lat.items()))
    print(f"statuses: {res.statuses()}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
