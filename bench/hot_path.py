"""What each hop of a run costs the process that runs it, in process and without the services'
plumbing (HTTP, Kafka, the duty loop): the Python a run pays in the scheduler, the dispatcher
and the worker-gateway, hop by hop, measured apart so a change to one is seen alone (issue 44).

No services: a fresh migrated database, one tenant, `--runs` one-off no-op jobs due now
(20,000; `--quick` 5,000), submitted through `ostinato.jobs.submit_jobs`; then each hop is the
services' own code, called until it has moved every run:

- `schedule`: `services.scheduler.tick.fire_due` (the scheduler's batch, 400), due job -> run;
- `dispatch`: `Dispatcher.run_round` (ample capacity), scheduled -> queued;
- `claim`: `Attempts.claim` (200 a claim, as the SDK worker asks), queued -> running;
- `complete`: `Attempts.record` (200 outcomes a request, the SDK's batch), running -> succeeded.

Figures per hop, µs a run: this process's CPU (`time.process_time`: our Python, asyncpg's
encoding and decoding, the event loop), the wall time, and the server's (the backend's CPU from
`/proc` when PostgreSQL runs here); medians over `--repeat` fresh databases. `--profile` adds
cProfile's costliest functions of each hop (the last repetition; cProfile slows Python, so its
repetition is not in the figures).

    .venv/bin/python -m bench.hot_path [--quick] [--runs 20000] [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from bench.append_cost import backend_cpu
from bench.common import log, machine, migrated_database, table, write_result
from ostinato.bus.topics import Topics
from ostinato.clock import SystemClock
from ostinato.db.pool import create_pool
from ostinato.eventlog.store import EventStore
from ostinato.jobs import submit_jobs
from ostinato.jobs.request import JobRequest
from ostinato.policy.fairness import DEFAULT_CLASSES
from ostinato.telemetry.logging import configure_logging
from ostinato.tenancy import create_tenant
from ostinato.wire import worker as p
from services.dispatcher.dispatcher import Dispatcher, fixed_capacity
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts, Outcome

SCENARIO = "hot_path"
HOPS = ("schedule", "dispatch", "claim", "complete")
SCHEDULER_BATCH = 400  # Settings.scheduler_batch_size
CLAIM_BATCH = 200
OUTCOME_BATCH = 200  # the SDK reporter's max_items


async def _prepared(pool: asyncpg.Pool, store: EventStore, runs: int) -> uuid.UUID:
    clock = SystemClock()
    async with pool.acquire() as conn:
        tenant_id, _ = await create_tenant(conn, store, f"hot-{uuid.uuid4().hex[:6]}",
                                           actor="bench")
        for start in range(0, runs, 1000):
            requests = [JobRequest(name=f"j{i}", task="noop")
                        for i in range(start, min(runs, start + 1000))]
            await submit_jobs(conn, store, clock, tenant_id=tenant_id, requests=requests,
                              pools=("default",), max_payload_bytes=1 << 20, actor="bench")
    return tenant_id


async def _timed(pool: asyncpg.Pool, step: Callable[[], Awaitable[int]], runs: int,
                 profile: cProfile.Profile | None) -> dict[str, Any]:
    backend = await pool.fetchval("SELECT pg_backend_pid()")  # max_size=1: the one backend
    server0 = backend_cpu(backend)
    cpu0, wall0, moved, calls = time.process_time(), time.perf_counter(), 0, 0
    if profile is not None:
        profile.enable()
    while moved < runs:
        n = await step()
        calls += 1
        if n == 0:
            raise RuntimeError(f"stalled after {moved} of {runs} runs")
        moved += n
    if profile is not None:
        profile.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    server1 = backend_cpu(backend)
    return {"runs": moved, "calls": calls,
            "cpu_us": round(cpu / moved * 1e6, 1), "wall_us": round(wall / moved * 1e6, 1),
            "server_us": None if server0 is None or server1 is None
            else round((server1 - server0) / moved * 1e6, 1)}


async def one(url: str, runs: int, profile: bool) -> tuple[dict[str, Any], dict[str, str]]:
    clock = SystemClock()
    store = EventStore(clock, Topics())
    pool = await create_pool(url, max_size=1)
    profiles: dict[str, str] = {}
    try:
        tenant_id = await _prepared(pool, store, runs)
        dispatcher = Dispatcher(pool, store, clock, classes=DEFAULT_CLASSES,
                                capacity=fixed_capacity(runs * 2, ("default",)))
        attempts = Attempts(pool, store, clock, lease_ttl_seconds=300)
        claimed: list[p.ClaimedRun] = []

        async def schedule() -> int:
            return len(await fire_due(pool, store, clock, batch_size=SCHEDULER_BATCH))

        async def claim() -> int:
            got = await attempts.claim(tenant_id, p.ClaimRequest(worker_id="w1",
                                                                 max_runs=CLAIM_BATCH))
            claimed.extend(got)
            return len(got)

        async def complete() -> int:
            batch = [claimed.pop() for _ in range(min(OUTCOME_BATCH, len(claimed)))]
            results = await attempts.record(tenant_id, "w1", [
                Outcome(uuid.UUID(c.run_id), c.run_id, c.fencing_token, "complete", output=None)
                for c in batch])
            assert all(r.status == 200 for r in results), results[:3]
            return len(batch)

        figures = {}
        for hop, step in (("schedule", schedule), ("dispatch", dispatcher.run_round),
                          ("claim", claim), ("complete", complete)):
            prof = cProfile.Profile() if profile else None
            figures[hop] = await _timed(pool, step, runs, prof)
            if prof is not None:
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
                profiles[hop] = out.getvalue()
        return figures, profiles
    finally:
        await pool.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    configure_logging(SCENARIO, "info")  # as the services log: their debug lines filtered
    result: dict[str, Any] = {"scenario": SCENARIO, "machine": await machine(),
                              "runs": args.runs, "repetitions": []}
    for i in range(args.repeat + (1 if args.profile else 0)):
        profiled = args.profile and i == args.repeat
        async with migrated_database() as url:
            log(SCENARIO, f"#{i}: {args.runs} runs{' (profiled)' if profiled else ''}")
            figures, profiles = await one(url, args.runs, profiled)
        if profiled:
            result["profiles"] = profiles
        else:
            result["repetitions"].append(figures)
            log(SCENARIO, "  " + ", ".join(f"{h} {f['cpu_us']} µs" for h, f in figures.items()))
    reps = result["repetitions"]
    result["median"] = {hop: {k: statistics.median(r[hop][k] for r in reps)
                              if all(r[hop][k] is not None for r in reps) else None
                              for k in ("cpu_us", "wall_us", "server_us")} for hop in HOPS}
    med = result["median"]
    rows = [(f"{hop}: client CPU / wall / server µs a run",
             f"{med[hop]['cpu_us']} / {med[hop]['wall_us']} / {med[hop]['server_us']}", "")
            for hop in HOPS]
    total = round(sum(med[h]["cpu_us"] for h in HOPS), 1)
    rows.append(("client CPU µs a run, the four hops", total, "issue 44: ≤ 80 (3 services)"))
    print(table(f"Hot path in process, {args.runs} runs, median of {len(reps)}", rows))
    for hop, text in result.get("profiles", {}).items():
        print(f"\n== {hop} (cProfile, by own time) ==\n{text}")
    write_result(SCENARIO, result)
    return result


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 5_000 if args.quick else 20_000
    if args.quick and args.repeat == 3:
        args.repeat = 1
    return args


if __name__ == "__main__":
    from ostinato.eventloop import run

    run(main(parse()))
