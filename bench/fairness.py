"""Fair dispatch under a mixed load of tenants, classes and pools: per tenant throughput share
versus weight, p50/p99 wait per class, and dispatch decisions per second.

    .venv/bin/python -m bench.fairness [--quick] [--base 500] [--slots 20] [--long-seconds 0.2]

Needs PostgreSQL only (`infra/up.sh postgres`; no Kafka, no service processes). On a fresh
database it drives the library code each service runs, in one process: jobs submitted with
`jobs.submit_jobs`, runs created by the scheduler's `fire_due`, real `Dispatcher.run_round()`
decisions over PostgreSQL with `fixed_capacity(slots, pools)`, and one simulated shared worker
per pool that claims through `gateway.attempts.Attempts` (tenant None, as with the admin key)
and records completions. Then the pure `decide()` alone on a large synthetic snapshot.
Writes bench/results/fairness.json. Figures, never assertions.

The load: four backlogged tenants with weights 1, 1, 2, 4 submit, before dispatch starts,
`base x weight` jobs each (so all stay backlogged about equally long), 10 % critical, 70 %
default, 20 % bulk as the product default classes reserve, a quarter of them in pool `long`
(each run takes --long-seconds there; in `default` a run completes as soon as the worker sees
it). A fifth tenant, `trickle` (weight 1), submits one job every 0.3 s during the drain,
cycling through the classes, less than its fair share of any class: its wait is what a light
tenant sees behind the others' backlog. Shares are measured over the dispatches made while
every backlogged (tenant, pool, class) queue still had runs waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from bench.common import BASE_URL, machine, percentile, write_result
from ostinato import eventloop
from ostinato.bus.topics import Topics
from ostinato.clock import SystemClock
from ostinato.db.migrate import migrate
from ostinato.db.pool import create_pool
from ostinato.eventlog.store import EventStore, read_all_after
from ostinato.jobs import submit_jobs
from ostinato.jobs.request import JobRequest
from ostinato.policy.fairness import (
    DEFAULT_CLASSES,
    FairState,
    Limits,
    PoolState,
    Waiting,
    decide,
)
from ostinato.policy.limits import Buckets
from ostinato.telemetry.logging import configure_logging
from ostinato.tenancy import create_tenant
from ostinato.wire import worker as p
from services.dispatcher.dispatcher import Dispatcher, fixed_capacity
from services.scheduler.tick import fire_due
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.reports import Outcome

POOLS = ("default", "long")
CLASSES = [c.name for c in DEFAULT_CLASSES]
BACKLOGGED = {"alpha": 1, "beta": 1, "gamma": 2, "delta": 4}
TRICKLE = "trickle"
TRICKLE_EVERY = 0.3


def mix(i: int) -> tuple[str, str]:
    """(class, pool) of a tenant's i-th job: 1/10 critical, 7/10 default, 2/10 bulk (the
    product default classes' reserved shares); 1/4 in pool long."""
    klass = ("critical", "default", "default", "default", "default", "default", "default",
             "default", "bulk", "bulk")[i % 10]
    return klass, "long" if (i // 10) % 4 == 3 else "default"


def pct(values: list[float], q: float) -> float:
    """`bench.common.percentile` of unsorted values, q in 0..1 (nan when there are none)."""
    return percentile(sorted(values), q * 100) if values else float("nan")


class Bench:
    def __init__(self, pool: asyncpg.Pool, args: argparse.Namespace) -> None:
        self.pool = pool
        self.args = args
        self.clock = SystemClock()
        self.store = EventStore(self.clock, Topics(pools=POOLS))
        self.tenants: dict[str, uuid.UUID] = {}
        self.queued = asyncio.Event()  # the dispatcher queued runs: workers look
        self.freed = asyncio.Event()  # a worker finished runs or new runs exist: dispatcher looks
        self.dispatcher = Dispatcher(pool, self.store, self.clock, classes=DEFAULT_CLASSES,
                                     capacity=fixed_capacity(args.slots, POOLS),
                                     on_queued=self.queued.set)
        self.attempts = Attempts(pool, self.store, self.clock, lease_ttl_seconds=300,
                                 on_finished=self.freed.set)
        self.rounds: list[tuple[float, int]] = []  # (seconds, runs queued) per decision
        self.done = False
        self.trickled = 0
        self.drain_started = datetime.now(UTC)

    async def submit(self, tenant: str, requests: list[JobRequest]) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await submit_jobs(conn, self.store, self.clock, tenant_id=self.tenants[tenant],
                              requests=requests, pools=POOLS, max_payload_bytes=1 << 20,
                              actor="bench", classes=CLASSES)

    async def schedule_all(self) -> int:
        created = 0
        while runs := await fire_due(self.pool, self.store, self.clock, batch_size=1000):
            created += len(runs)
        return created

    async def setup(self) -> int:
        async with self.pool.acquire() as conn:
            for name, weight in [*BACKLOGGED.items(), (TRICKLE, 1)]:
                self.tenants[name], _ = await create_tenant(conn, self.store, name, actor="bench",
                                                            weight=weight)
        for name, weight in BACKLOGGED.items():
            n = self.args.base * weight
            for lo in range(0, n, 1000):
                await self.submit(name, [
                    JobRequest(name=f"{name}-{i}", task="noop", priority=mix(i)[0],
                               pool=mix(i)[1]) for i in range(lo, min(n, lo + 1000))])
        return await self.schedule_all()

    async def dispatch_loop(self) -> None:
        while not self.done:
            started = time.perf_counter()
            n = await self.dispatcher.run_round()
            self.rounds.append((time.perf_counter() - started, n))
            if n == 0:
                try:
                    await asyncio.wait_for(self.freed.wait(), timeout=0.05)
                except TimeoutError:
                    pass
                self.freed.clear()

    async def worker_loop(self, pool: str, seconds: float) -> None:
        """A shared worker of `slots` slots in `pool`: claims queued runs of every tenant and
        completes each `seconds` after claiming it."""
        worker_id = f"bench-{pool}"
        held: list[tuple[float, p.ClaimedRun]] = []
        while not self.done:
            free = self.args.slots - len(held)
            claimed = []
            if free > 0:
                claimed = await self.attempts.claim(None, p.ClaimRequest(
                    worker_id=worker_id, pools=[pool], max_runs=free, slots=self.args.slots))
                at = time.monotonic() + seconds
                held += [(at, r) for r in claimed]
            now = time.monotonic()
            finished = [r for at, r in held if at <= now]
            if finished:
                held = [(at, r) for at, r in held if at > now]
                await self.attempts.record(None, worker_id, [
                    Outcome(run_id=uuid.UUID(r.run_id), raw_run_id=r.run_id,
                            fencing_token=r.fencing_token, kind="complete")
                    for r in finished])
            if not claimed and not finished:
                wait = min((at for at, _ in held), default=now + 0.05) - now
                try:
                    await asyncio.wait_for(self.queued.wait(), timeout=max(0.001, wait))
                except TimeoutError:
                    pass
                self.queued.clear()

    async def trickle_loop(self) -> None:
        while not self.done:
            klass = CLASSES[self.trickled % len(CLASSES)]
            await self.submit(TRICKLE, [JobRequest(name=f"trickle-{self.trickled}", task="noop",
                                                   priority=klass)])
            self.trickled += 1
            await fire_due(self.pool, self.store, self.clock, batch_size=1000)
            self.freed.set()
            await asyncio.sleep(TRICKLE_EVERY)

    async def drain(self, backlog: int) -> float:
        tasks = [asyncio.create_task(self.dispatch_loop()),
                 asyncio.create_task(self.trickle_loop()),
                 *(asyncio.create_task(self.worker_loop(pool, s))
                   for pool, s in (("default", 0.0), ("long", self.args.long_seconds)))]
        started = time.perf_counter()
        self.drain_started = self.clock.now()
        try:
            async with self.pool.acquire() as conn:
                while True:
                    left = await conn.fetchval(
                        "SELECT count(*) FROM runs r JOIN tenants t ON t.id = r.tenant_id "
                        "WHERE t.name <> $1 AND r.state <> 'succeeded'", TRICKLE)
                    if left == 0:
                        break
                    if time.perf_counter() - started > self.args.timeout:
                        raise TimeoutError(f"{left}/{backlog} backlogged runs still unfinished")
                    await asyncio.sleep(0.25)
            elapsed = time.perf_counter() - started
        finally:
            self.done = True
            self.freed.set()
            self.queued.set()
            await asyncio.gather(*tasks)
        # the trickle's last runs: let them finish for their waits
        await self.finish_trickle()
        return elapsed

    async def finish_trickle(self) -> None:
        self.done = False
        tasks = [asyncio.create_task(self.dispatch_loop()),
                 *(asyncio.create_task(self.worker_loop(pool, s))
                   for pool, s in (("default", 0.0), ("long", self.args.long_seconds)))]
        try:
            async with self.pool.acquire() as conn:
                for _ in range(300):  # up to 30 s
                    if not await conn.fetchval(
                            "SELECT count(*) FROM runs WHERE state <> 'succeeded'"):
                        break
                    await asyncio.sleep(0.1)
        finally:
            self.done = True
            self.freed.set()
            self.queued.set()
            await asyncio.gather(*tasks)

    async def shares(self) -> dict[str, Any]:
        """Dispatch order from the log: per tenant share of the runs queued while every
        backlogged (tenant, pool, class) queue still had runs, and the fair-queueing error per
        queue: max over pairs of |W_i/w_i - W_j/w_j| (FAIRNESS.md bounds it by 1/w_i + 1/w_j)."""
        names = {v: k for k, v in self.tenants.items()}
        group_of: dict[uuid.UUID, tuple[str, str]] = {}
        order: list[tuple[int, str, tuple[str, str]]] = []
        async with self.pool.acquire() as conn:
            after = 0
            while page := await read_all_after(conn, after, 10_000):
                for e in page:
                    if e.type == "RunScheduled":
                        group_of[e.stream_id] = (e.event.pool, e.event.priority)
                    elif e.type == "RunQueued" and names[e.tenant_id] in BACKLOGGED:
                        order.append((e.seq, names[e.tenant_id], group_of[e.stream_id]))
                after = page[-1].seq
        last: dict[tuple[str, tuple[str, str]], int] = {}
        for seq, tenant, group in order:
            last[(tenant, group)] = seq
        window_end = min(last.values())
        in_window = [(t, g) for seq, t, g in order if seq <= window_end]
        counts = Counter(t for t, _ in in_window)
        total, weights = sum(counts.values()), sum(BACKLOGGED.values())
        per_queue: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for t, g in in_window:
            per_queue[g][t] += 1
        errors = {}
        for (pool, klass), c in sorted(per_queue.items()):
            norm = [c[t] / w for t, w in BACKLOGGED.items()]
            errors[f"{pool}/{klass}"] = round(max(norm) - min(norm), 2)
        return {
            "window_dispatches": total,
            "tenants": {t: {"weight": w, "share": round(counts[t] / total, 4),
                            "weight_share": round(w / weights, 4), "runs": counts[t]}
                        for t, w in BACKLOGGED.items()},
            "max_normalized_gap_per_queue": errors,
            "gap_bound": round(2 / min(BACKLOGGED.values()), 2),
        }

    async def waits(self) -> dict[str, Any]:
        """Seconds from due to start (started_at - due_at) and to queued per class, backlog and
        trickle. The backlog was due before dispatch began: its waits count from the drain's
        start (the time spent submitting it is not the dispatcher's)."""
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT t.name, r.priority, "
                "extract(epoch FROM r.started_at - greatest(r.due_at, $1))::float8 AS wait, "
                "extract(epoch FROM r.queued_at - greatest(r.due_at, $1))::float8 AS to_queue "
                "FROM runs r JOIN tenants t ON t.id = r.tenant_id "
                "WHERE r.started_at IS NOT NULL", self.drain_started)
        out: dict[str, Any] = {}
        for who in ("backlog", "trickle"):
            for klass in CLASSES:
                sel = [r for r in rows if r["priority"] == klass
                       and (r["name"] == TRICKLE) == (who == "trickle")]
                w = [r["wait"] for r in sel]
                q = [r["to_queue"] for r in sel]
                out[f"{who}/{klass}"] = {
                    "runs": len(sel), "p50_s": round(pct(w, 0.5), 3),
                    "p99_s": round(pct(w, 0.99), 3), "queued_p50_s": round(pct(q, 0.5), 3),
                    "queued_p99_s": round(pct(q, 0.99), 3)}
        return out


def pure_decide(tenants: int, candidates: int, slots: int, repeat: int) -> dict[str, Any]:
    """`decide()` alone on a synthetic snapshot: `tenants` x 3 classes x 2 pools x
    `candidates` waiting runs; once with free pools (it admits `slots` per pool), once with
    saturated pools (it admits nothing and only explains why every run waits). The median of
    `repeat` calls."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    waiting = [
        Waiting(run_id=uuid.UUID(int=(t << 32) + (ci << 24) + (pi << 16) + i),
                tenant=f"t{t}", klass=klass, pool=pool, job_type=f"t{t}/noop",
                concurrency_key=None, resource=None,
                enqueued_at=t0 + timedelta(milliseconds=i * 7 + t))
        for t in range(tenants) for ci, klass in enumerate(CLASSES)
        for pi, pool in enumerate(POOLS) for i in range(candidates)]
    limits = Limits(tenant_weights={f"t{t}": float(1 + t % 4) for t in range(tenants)})
    result: dict[str, Any] = {"waiting": len(waiting), "slots_per_pool": slots}
    shares = {"critical": 0.2, "default": 0.6, "bulk": 0.2}
    for label, busy in (("free", {}), ("saturated", {c: round(slots * s)
                                                      for c, s in shares.items()})):
        pools = {pool: PoolState(pool, slots, busy) for pool in POOLS}
        state = FairState()
        admitted = 0
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            d = decide(waiting, pools, DEFAULT_CLASSES, limits, Buckets(), state, t0)
            times.append(time.perf_counter() - started)
            state = d.state
            admitted = len(d.admit)
        seconds = statistics.median(times)
        result[label] = {"admitted_per_decision": admitted,
                         "ms_per_decision": round(seconds * 1e3, 2),
                         "decisions_per_s": round(1 / seconds, 1)}
    return result


async def main(args: argparse.Namespace) -> dict[str, Any]:
    name = f"ostinato_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    pool = None
    try:
        await migrate(url)
        pool = await create_pool(url, max_size=10)
        bench = Bench(pool, args)
        backlog = await bench.setup()
        elapsed = await bench.drain(backlog)
        shares = await bench.shares()
        waits = await bench.waits()
    finally:
        if pool is not None:
            await pool.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    seconds = [s for s, _ in bench.rounds]
    queued = sum(n for _, n in bench.rounds)
    busy = [s for s, n in bench.rounds if n > 0]
    return {
        "scenario": "fairness",
        "load": {"backlogged_tenants": BACKLOGGED, "jobs_per_weight": args.base,
                 "backlog_runs": backlog, "trickle_runs": bench.trickled,
                 "pools": {"default": 0.0, "long": args.long_seconds},
                 "slots_per_pool": args.slots, "classes": {c.name: c.reserved_share
                                                           for c in DEFAULT_CLASSES}},
        "drain_seconds": round(elapsed, 2),
        "dispatcher": {
            "decisions": len(seconds),
            "decisions_per_s_wall": round(len(seconds) / elapsed, 1),
            "decisions_per_s_busy": round(len(seconds) / sum(seconds), 1),
            "runs_queued": queued,
            "runs_queued_per_s": round(queued / elapsed, 1),
            "round_ms_p50": round(pct(seconds, 0.5) * 1e3, 2),
            "round_ms_p99": round(pct(seconds, 0.99) * 1e3, 2),
            "runs_per_admitting_round": round(queued / len(busy), 2) if busy else 0,
        },
        "shares": shares,
        "waits": waits,
        "pure_decide": pure_decide(10, 256, args.slots * 4, args.repeat),
        "machine": await machine(BASE_URL),
    }


def report(r: dict[str, Any]) -> None:
    d, s = r["dispatcher"], r["shares"]
    print(f"backlog {r['load']['backlog_runs']} runs + {r['load']['trickle_runs']} trickle, "
          f"{r['load']['slots_per_pool']} slots per pool, drained in {r['drain_seconds']} s")
    print(f"\nshares over the {s['window_dispatches']} dispatches while all were backlogged")
    print(f"{'tenant':<10}{'weight':>8}{'share':>9}{'weight share':>14}{'runs':>7}")
    for t, v in s["tenants"].items():
        print(f"{t:<10}{v['weight']:>8}{v['share']:>9.1%}{v['weight_share']:>14.1%}"
              f"{v['runs']:>7}")
    print(f"max |W_i/w_i - W_j/w_j| per queue (bound {s['gap_bound']} for unit costs): "
          + ", ".join(f"{k} {v}" for k, v in s["max_normalized_gap_per_queue"].items()))
    print(f"\n{'wait (due→start)':<20}{'runs':>6}{'p50 s':>9}{'p99 s':>9}"
          f"{'queued p50':>12}{'queued p99':>12}")
    for k, v in r["waits"].items():
        print(f"{k:<20}{v['runs']:>6}{v['p50_s']:>9.3f}{v['p99_s']:>9.3f}"
              f"{v['queued_p50_s']:>12.3f}{v['queued_p99_s']:>12.3f}")
    print(f"\ndispatcher: {d['decisions']} decisions, {d['decisions_per_s_wall']}/s wall, "
          f"{d['decisions_per_s_busy']}/s back to back; {d['runs_queued_per_s']} runs queued/s; "
          f"round p50 {d['round_ms_p50']} ms, p99 {d['round_ms_p99']} ms; "
          f"{d['runs_per_admitting_round']} runs per admitting round")
    pd = r["pure_decide"]
    print(f"decide() alone, {pd['waiting']} waiting runs, {pd['slots_per_pool']} slots × 2 pools: "
          + "; ".join(f"{k}: {pd[k]['decisions_per_s']}/s ({pd[k]['ms_per_decision']} ms, "
                      f"admits {pd[k]['admitted_per_decision']})" for k in ("free", "saturated")))
    m = r["machine"]
    print(f"machine: {m['cores']} cores, {m['memory_gib']} GiB, Python {m['python']}, "
          f"PostgreSQL {m['postgresql']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=500, help="backlog jobs per unit of weight")
    parser.add_argument("--slots", type=int, default=20, help="worker slots per pool")
    parser.add_argument("--long-seconds", type=float, default=0.2,
                        help="how long a run takes in pool long")
    parser.add_argument("--repeat", type=int, default=20, help="decide() calls to time")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--quick", action="store_true", help="a smaller backlog (--base 200)")
    configure_logging("bench", "warning")
    args = parser.parse_args()
    if args.quick:
        args.base = min(args.base, 200)
    result = eventloop.run(main(args))
    report(result)
    write_result("fairness", result)
