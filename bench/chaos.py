"""Chaos under steady load: the fault suite's faults one after another while jobs arrive at a
fixed rate; prints one table and writes it as JSON to bench/results/chaos.json.

    .venv/bin/python bench/chaos.py [--quick] [--rate 200] [--workers 3] [--schedulers 3]

Needs PostgreSQL and Kafka (`infra/up.sh postgres kafka`). Starts the services (three
schedulers) and worker processes (tests/faults/worker_proc.py: fenced, at-most-once effects in
the run's database) on a fresh database and topic prefix, with 3 s leases. Jobs are submitted
through POST /v1/jobs/batch (each batch retried with its idempotency keys until accepted), and
32 recurring every-1s jobs keep every scheduler shard busy. Faults, in order: kill -9 a worker,
SIGSTOP a worker past its lease, SIGTERM a worker (graceful release), kill -9 the scheduler
holding the most shards (three times, or --scheduler-kills), SIGSTOP a scheduler past its
shard lease, kill -9 the dispatcher, kill -9 the worker-gateway, restart PostgreSQL, restart
Kafka (the last two stop the *shared* servers: other users of them see the outage too). Then
the load stops, everything drains, and the fault suite's end check runs over every run.

A service that exits is started again, as an orchestrator would (the fault then counts as not
survived and the crash is reported). Every process it starts is stopped at the end, and a
server it stopped is started again, also on errors, Ctrl-C and SIGTERM. Logs:
.cache/chaos/<run>/.

Measures: scheduler failover = from the kill to the first RunScheduled of a slot due after it,
for every recurring job in the victim's shards (the slowest counts); worker lease recovery =
from kill/SIGSTOP to the run's next RunStarted on another worker; graceful release = from
SIGTERM to RunQueued after the worker's LeaseReleased; throughput back = from the restart to
the end of the first 1-s window completing >= 80% of the baseline rate.

Defaults take 3 to 5 minutes (200 jobs/s). --quick (under 2 minutes): 100 jobs/s, shorter
baseline, pauses and settling, and no Kafka restart unless --kafka (that one alone takes 25 to
45 s: the broker's controlled shutdown and start). Exit status 1 when an invariant broke (lost,
missed or duplicated work, end-check problems) or a fault was not survived.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx

from bench.common import BASE_URL, KAFKA, ROOT, machine, write_result
from ostinato import eventloop
from ostinato.db.migrate import migrate
from ostinato.telemetry.logging import configure_logging
from ostinato.testing.cluster import Cluster
from ostinato.testing.database import Db
from ostinato.testing.injection import freeze
from ostinato.testing.invariants import coverage, shard_epoch_order, verify, wait_settled
from ostinato.testing.lab import FAULT_ENV, Lab
from ostinato.testing.load import Load, fx_job
from ostinato.testing.metrics import metric_total, scrape
from ostinato.testing.processes import WorkerProc, respawn, scheduler_owner

LEASE_TTL = float(FAULT_ENV["OSTINATO_LEASE_TTL_SECONDS"])
SHARD_TTL = float(FAULT_ENV["OSTINATO_SHARD_LEASE_TTL_SECONDS"])
RECURRING = 32  # every-1s jobs: about two per shard
COUNTERS = (
    "ostinato_stale_writes_rejected_total", "ostinato_lease_expirations_total",
    "ostinato_duplicate_claims_total", "ostinato_duplicate_messages_total",
    "ostinato_stale_messages_dropped_total", "ostinato_dispatch_decisions_total",
    "ostinato_occurrences_missed_total",
)
GAUGES = ("ostinato_stuck_runs", "ostinato_outbox_unpublished")


def log(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def spread(values: list[float], digits: int = 2) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None}
    return {"n": len(values), "min": round(min(values), digits),
            "median": round(statistics.median(values), digits), "max": round(max(values), digits)}


# -- observation -------------------------------------------------------------------------------


class Sampler:
    """Succeeded runs and outbox rows every 0.5 s (nothing while PostgreSQL is down), and every
    service's metrics every second, kept per process incarnation (a killed process's counters
    are not lost: its last scrape counts)."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.samples: list[tuple[float, int, int]] = []  # (monotonic, succeeded, outbox rows)
        self.counters: dict[tuple[str, int], dict[str, float]] = {}
        self.gauge_peaks: dict[str, float] = dict.fromkeys(GAUGES, 0.0)
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._runs()), asyncio.create_task(self._metrics())]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _tick(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return True
        return False

    async def _runs(self) -> None:
        while await self._tick(0.5):
            try:
                row = (await self.lab.db.fetch(
                    "SELECT (SELECT count(*) FROM runs WHERE state = 'succeeded') AS done, "
                    "(SELECT count(*) FROM outbox) AS outbox", within=0))[0]
            except Exception:  # the server is restarting: no sample
                continue
            self.samples.append((time.monotonic(), row["done"], row["outbox"]))

    async def _metrics(self) -> None:
        while await self._tick(1.0):
            await self.scrape_all()

    async def scrape_all(self) -> None:
        cluster = self.lab.cluster
        for alias, proc in list(cluster.procs.items()):
            if proc.poll() is not None:
                continue
            try:
                samples = await scrape(cluster.ports[alias])
            except (httpx.HTTPError, OSError, ValueError):
                continue
            self.counters[(alias, proc.pid)] = {n: metric_total(samples, n) for n in COUNTERS}
            for g in GAUGES:
                if alias == "reconciler":
                    self.gauge_peaks[g] = max(self.gauge_peaks[g], metric_total(samples, g))

    def total(self, name: str, alias_prefix: str = "") -> float:
        return sum(c[name] for (alias, _), c in self.counters.items()
                   if alias.startswith(alias_prefix))

    def succeeded_at(self, t: float) -> float:
        """Succeeded runs at monotonic `t`, interpolated between samples."""
        before = [s for s in self.samples if s[0] <= t]
        after = [s for s in self.samples if s[0] >= t]
        if not before:
            return float(after[0][1]) if after else 0.0
        if not after:
            return float(before[-1][1])
        (t0, n0, _), (t1, n1, _) = before[-1], after[0]
        return float(n0) if t1 == t0 else n0 + (n1 - n0) * (t - t0) / (t1 - t0)

    def rate(self, t0: float, t1: float) -> float:
        return (self.succeeded_at(t1) - self.succeeded_at(t0)) / max(1e-9, t1 - t0)

    def outbox_peak(self, t0: float, t1: float) -> int:
        return max((s[2] for s in self.samples if t0 <= s[0] <= t1), default=0)

    async def throughput_back(self, since: float, threshold: float, within: float
                              ) -> float | None:
        """Seconds from `since` (monotonic) to the end of the first 1-s window after it that
        completed at least `threshold` runs/s; None if not within `within` seconds."""
        deadline = since + within
        while time.monotonic() < deadline:
            points = [s for s in self.samples if s[0] >= since]
            for i, (t1, n1, _) in enumerate(points):
                earlier = [p for p in points[:i] if t1 - p[0] >= 1.0]
                if earlier and (n1 - earlier[-1][1]) / (t1 - earlier[-1][0]) >= threshold:
                    return t1 - since
            await asyncio.sleep(0.25)
        return None


@dataclass
class Fault:
    kind: str
    started: float  # monotonic
    survived: bool = False
    detail: dict[str, Any] = field(default_factory=dict)


# -- the chaos run -----------------------------------------------------------------------------


class Chaos:
    def __init__(self, args: argparse.Namespace, lab: Lab) -> None:
        self.args = args
        self.lab = lab
        self.sampler = Sampler(lab)
        self.faults: list[Fault] = []
        self.recurring: list[str] = []
        self.recurring_start = datetime.now(UTC)
        self.baseline = 0.0
        self.generation = 0

    @property
    def cluster(self) -> Cluster:
        return self.lab.cluster

    async def until(self, probe: Callable[[], Awaitable[Any]], within: float) -> Any:
        deadline = time.monotonic() + within
        while True:
            found = await probe()
            if found or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.2)

    async def services_ready(self, within: float = 30) -> bool:
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(timeout=2) as client:
            for alias, proc in self.cluster.procs.items():
                while True:
                    if proc.poll() is not None:
                        log(f"{alias} exited: {self.cluster.tail(alias, 10)}")
                        return False
                    try:
                        url = f"http://127.0.0.1:{self.cluster.ports[alias]}/readyz"
                        if (await client.get(url)).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        log(f"{alias} not ready: {self.cluster.tail(alias, 10)}")
                        return False
                    await asyncio.sleep(0.2)
        return True

    async def rate_back(self, since: float, within: float = 60) -> float | None:
        threshold = 0.8 * min(self.baseline, self.args.rate)
        return await self.sampler.throughput_back(since, threshold, within)

    # -- workers -------------------------------------------------------------------------------

    def live_workers(self) -> list[WorkerProc]:
        return [w for w in self.lab.workers.values() if w.alive]

    async def add_worker(self) -> WorkerProc:
        self.generation += 1
        return await self.lab.worker(f"w{self.generation}", concurrency=self.args.concurrency,
                                     grace_seconds=0)

    async def busiest_worker(self) -> tuple[WorkerProc, list[uuid.UUID]]:
        live = {w.name: w for w in self.live_workers()}
        rows = await self.lab.db.fetch(
            "SELECT worker_id, array_agg(id) AS runs FROM runs WHERE state = 'running' "
            "AND worker_id = ANY($1::text[]) GROUP BY worker_id ORDER BY count(*) DESC",
            list(live))
        if not rows:
            return next(iter(live.values())), []
        return live[rows[0]["worker_id"]], list(rows[0]["runs"])

    async def restarts_after(self, runs: list[uuid.UUID], victim: str, since: datetime
                             ) -> tuple[dict[uuid.UUID, float], int]:
        """Per run: seconds from `since` to its first RunStarted by another worker; and how
        many RunStarted went to the victim itself after `since` (leases to a gone worker)."""
        rows = await self.lab.db.fetch(
            "SELECT stream_id, actor, recorded_at FROM events WHERE stream_id = ANY($1::uuid[]) "
            "AND type = 'RunStarted' AND recorded_at > $2 ORDER BY recorded_at", runs, since)
        first: dict[uuid.UUID, float] = {}
        ghosts = 0
        for r in rows:
            if r["actor"] == f"worker:{victim}":
                ghosts += 1
            else:
                first.setdefault(r["stream_id"], (r["recorded_at"] - since).total_seconds())
        return first, ghosts

    async def recovered(self, runs: list[uuid.UUID], victim: str, since: datetime,
                        within: float) -> bool:
        """Every run restarted on another worker (or finished: an outcome the victim sent
        just before the fault may still have been recorded)."""
        async def probe() -> bool:
            restarted, _ = await self.restarts_after(runs, victim, since)
            finished = {r["id"] for r in await self.lab.db.fetch(
                "SELECT id FROM runs WHERE id = ANY($1::uuid[]) AND state = 'succeeded'", runs)}
            return len(set(restarted) | finished) >= len(runs)

        return bool(await self.until(probe, within))

    async def worker_kill(self) -> Fault:
        victim, _ = await self.busiest_worker()
        fault = Fault("worker_kill", time.monotonic())
        killed_at = datetime.now(UTC)
        victim.kill()
        held = [r["id"] for r in await self.lab.db.fetch(
            "SELECT id FROM runs WHERE state = 'running' AND worker_id = $1", victim.name)]
        await self.add_worker()
        ok = await self.recovered(held, victim.name, killed_at, 30)
        restarted, ghosts = await self.restarts_after(held, victim.name, killed_at)
        recovery = list(restarted.values())
        fault.survived = ok and await self.services_ready()
        fault.detail = {"worker": victim.name, "runs_in_flight": len(held),
                        "recovery_s": spread(recovery), "leases_to_dead_worker": ghosts,
                        "_recovery": recovery}
        return fault

    async def worker_pause(self) -> Fault:
        victim, _ = await self.busiest_worker()
        fault = Fault("worker_pause", time.monotonic())
        paused_at = datetime.now(UTC)
        victim.send(signal.SIGSTOP)
        try:
            held = [r["id"] for r in await self.lab.db.fetch(
                "SELECT id FROM runs WHERE state = 'running' AND worker_id = $1", victim.name)]
            await asyncio.sleep(self.args.pause)
        finally:
            victim.send(signal.SIGCONT)
        woke_at = datetime.now(UTC)
        await asyncio.sleep(3)
        stale = await self.lab.db.fetchval(
            "SELECT count(*) FROM events WHERE type = 'StaleWriteRejected' AND actor = $1 "
            "AND recorded_at >= $2", f"worker:{victim.name}", woke_at)
        ok = await self.recovered(held, victim.name, paused_at, 30)
        restarted, ghosts = await self.restarts_after(held, victim.name, paused_at)
        recovery = list(restarted.values())
        fault.survived = ok and victim.alive and await self.services_ready()
        fault.detail = {"worker": victim.name, "paused_s": self.args.pause,
                        "runs_in_flight": len(held), "stale_writes_rejected": stale,
                        "recovery_s": spread(recovery), "leases_to_paused_worker": ghosts,
                        "_recovery": recovery}
        return fault

    async def worker_sigterm(self) -> Fault:
        victim, in_flight = await self.busiest_worker()
        fault = Fault("worker_sigterm", time.monotonic())
        stopped_at = datetime.now(UTC)
        code = await asyncio.to_thread(victim.stop)
        await self.add_worker()

        async def released() -> list[asyncpg.Record]:
            rows = await self.lab.db.fetch(
                "SELECT r.stream_id, r.recorded_at AS released, "
                "  (SELECT min(q.recorded_at) FROM events q WHERE q.stream_id = r.stream_id "
                "   AND q.type = 'RunQueued' AND q.version > r.version) AS queued, "
                "  (SELECT min(s.recorded_at) FROM events s WHERE s.stream_id = r.stream_id "
                "   AND s.type = 'RunStarted' AND s.version > r.version AND s.actor <> $2) "
                "   AS restarted "
                "FROM events r WHERE r.type = 'LeaseReleased' AND r.actor = $2 "
                "AND r.recorded_at >= $1", stopped_at, f"worker:{victim.name}")
            return rows if rows and all(r["restarted"] for r in rows) else []

        rows = (await self.until(released, 30) if in_flight else []) or await released()
        queued = [(r["queued"] - stopped_at).total_seconds() * 1000 for r in rows if r["queued"]]
        restarted = [(r["restarted"] - stopped_at).total_seconds() * 1000
                     for r in rows if r["restarted"]]
        _, ghosts = await self.restarts_after([r["stream_id"] for r in rows], victim.name,
                                              stopped_at)
        fault.survived = code == 0 and bool(rows) and await self.services_ready()
        fault.detail = {"worker": victim.name, "exit_code": code, "runs_released": len(rows),
                        "queued_again_ms": spread(queued, 0),
                        "restarted_elsewhere_ms": spread(restarted, 0),
                        "leases_to_stopped_worker": ghosts, "_queued": queued}
        return fault

    # -- schedulers ----------------------------------------------------------------------------

    async def shard_counts(self) -> dict[str, int]:
        """Shards held per scheduler alias (live leases)."""
        owners = {scheduler_owner(self.cluster, a): a for a in self.scheduler_aliases()}
        counts = dict.fromkeys(owners.values(), 0)
        for r in await self.lab.db.fetch(
                "SELECT owner FROM shard_leases WHERE expires_at > now()"):
            if r["owner"] in owners:
                counts[owners[r["owner"]]] += 1
        return counts

    def scheduler_aliases(self) -> list[str]:
        return [a for a, p in self.cluster.procs.items()
                if a.startswith("scheduler") and p.poll() is None]

    async def balanced(self, within: float = 20, *, everyone: bool = True) -> bool:
        """All 16 shards leased by live schedulers (`everyone`: each of them holding some)."""
        async def probe() -> bool:
            counts = await self.shard_counts()
            return sum(counts.values()) == 16 and (all(counts.values()) or not everyone)

        return bool(await self.until(probe, within))

    async def scheduler_kill(self) -> Fault:
        await self.balanced(everyone=False)
        counts = await self.shard_counts()
        alias = max(counts, key=lambda a: counts[a])
        owner = scheduler_owner(self.cluster, alias)
        jobs = [r["id"] for r in await self.lab.db.fetch(
            "SELECT j.id FROM jobs j JOIN shard_leases s ON s.shard = j.shard "
            "WHERE s.owner = $1 AND j.id = ANY($2::uuid[])", owner,
            [uuid.UUID(j) for j in self.recurring])]
        fault = Fault("scheduler_kill", time.monotonic())
        killed_at = datetime.now(UTC)
        self.cluster.kill(alias)

        async def fired_again() -> list[asyncpg.Record]:
            rows = await self.lab.db.fetch(
                "SELECT job_id, min(scheduled_at) AS first FROM runs WHERE job_id = ANY($1) "
                "AND scheduled_for > $2 GROUP BY job_id", jobs, killed_at)
            return rows if len(rows) == len(jobs) else []

        rows = await self.until(fired_again, 6 * SHARD_TTL) if jobs else []
        failover = max(((r["first"] - killed_at).total_seconds() for r in rows), default=None)
        await asyncio.to_thread(self.cluster.spawn, alias, "scheduler")
        fault.survived = bool(rows) and await self.balanced(everyone=False) \
            and await self.services_ready()
        fault.detail = {"scheduler": alias, "shards": counts[alias], "jobs_watched": len(jobs),
                        "failover_s": None if failover is None else round(failover, 2)}
        return fault

    async def scheduler_pause(self) -> Fault:
        await self.balanced()
        counts = await self.shard_counts()
        alias = max(counts, key=lambda a: counts[a])
        owner = scheduler_owner(self.cluster, alias)
        before = {r["shard"]: r["epoch"] for r in await self.lab.db.fetch(
            "SELECT shard, epoch FROM shard_leases WHERE owner = $1", owner)}
        pid = self.cluster.procs[alias].pid
        fault = Fault("scheduler_pause", time.monotonic())
        await freeze(self.lab.db, pid)
        frozen_at = time.monotonic()
        try:
            async def taken_over() -> bool:
                rows = await self.lab.db.fetch(
                    "SELECT shard, owner, epoch FROM shard_leases WHERE shard = ANY($1::int[]) "
                    "AND expires_at > now()", list(before))
                return len(rows) == len(before) and all(
                    r["owner"] != owner and r["epoch"] > before[r["shard"]] for r in rows)

            took = await self.until(taken_over, 4 * SHARD_TTL)
            takeover = time.monotonic() - frozen_at
            await asyncio.sleep(max(0.0, self.args.scheduler_pause - takeover))
        finally:
            os.kill(pid, signal.SIGCONT)
        await asyncio.sleep(2)
        samples = await scrape(self.cluster.ports[alias])
        fault.survived = bool(took) and await self.balanced() and await self.services_ready()
        fault.detail = {"scheduler": alias, "shards": len(before),
                        "takeover_s": round(takeover, 2),
                        "stale_writes_refused_by_woken_scheduler": metric_total(
                            samples, "ostinato_stale_writes_rejected_total")}
        return fault

    async def supervise(self, fault: Fault) -> None:
        """Like an orchestrator: a service process that exited is started again (the fault
        then counts as not survived, and the crash is recorded)."""
        for alias, proc in list(self.cluster.procs.items()):
            code = proc.poll()
            if code is None:
                continue
            lines = self.cluster.tail(alias, 60).splitlines()
            last = [line for line in lines if "background task failed" in line][-1:] or \
                [line for line in lines if '"level":"error"' in line][-1:]
            fault.survived = False
            fault.detail.setdefault("crashed", []).append(
                {"service": alias, "exit_code": code, "error": last[0][:400] if last else None})
            log(f"  {alias} exited ({code}); starting it again")
            service = "scheduler" if alias.startswith("scheduler") else alias
            if alias == "worker_gateway":
                await asyncio.to_thread(respawn, self.cluster, alias, service)
            else:
                await asyncio.to_thread(self.cluster.spawn, alias, service)

    # -- services and servers ------------------------------------------------------------------

    async def service_kill(self, alias: str) -> Fault:
        fault = Fault(f"{alias.replace('worker_gateway', 'gateway')}_kill", time.monotonic())
        self.cluster.kill(alias)
        await asyncio.sleep(1)
        if alias == "worker_gateway":  # same port: workers know it by its URL
            await asyncio.to_thread(respawn, self.cluster, alias, alias)
        else:
            await asyncio.to_thread(self.cluster.spawn, alias, alias)
        restarted = time.monotonic()
        back = await self.rate_back(restarted)
        fault.survived = back is not None and await self.services_ready()
        fault.detail = {"down_s": round(restarted - fault.started, 2),
                        "throughput_back_s": None if back is None else round(back, 2)}
        return fault

    async def server_restart(self, name: str) -> Fault:
        fault = Fault(f"{name}_restart", time.monotonic())
        down_s = await self.lab.server_down(name)
        await asyncio.sleep(1)
        up_s = await self.lab.server_up(name)
        up_at = time.monotonic()
        back = await self.rate_back(up_at, 90)
        ready = await self.services_ready(60)
        await asyncio.sleep(2)
        fault.survived = back is not None and ready
        fault.detail = {"outage_s": round(up_at - fault.started, 2),
                        "stop_s": round(down_s, 2), "start_s": round(up_s, 2),
                        "throughput_back_s": None if back is None else round(back, 2),
                        "outbox_backlog_peak": self.sampler.outbox_peak(fault.started,
                                                                        time.monotonic())}
        return fault

    # -- the run -------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        a = self.args
        began = time.monotonic()
        log(f"starting services (logs: {self.cluster.log_dir})")
        await self.lab.start(tenant="chaos")
        for i in range(1, a.schedulers):
            await asyncio.to_thread(self.cluster.spawn, f"scheduler-{i + 1}", "scheduler")
        for _ in range(a.workers):
            await self.add_worker()
        self.recurring_start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        schedule = {"every": "1s", "start_at": self.recurring_start.isoformat(),
                    "misfire": "catch_up", "catch_up_max": 1000}
        self.recurring = await self.lab.submit(
            [fx_job(f"tick-{i}", schedule=schedule) for i in range(RECURRING)])
        self.sampler.start()
        load = Load(self.cluster.api_url, self.lab.api_key, rate=a.rate, batch=a.batch,
                    payload={"sleep": a.run_seconds}).start()
        try:
            log(f"load: {a.rate:g} jobs/s; baseline for {a.baseline:g}s")
            await asyncio.sleep(2)  # warm-up
            t0 = time.monotonic()
            await asyncio.sleep(a.baseline)
            self.baseline = self.sampler.rate(t0, time.monotonic())
            log(f"baseline {self.baseline:.0f} runs/s")
            faults_began = time.monotonic()
            plan: list[tuple[str, Callable[[], Awaitable[Fault]]]] = [
                ("worker kill -9", self.worker_kill),
                ("worker SIGSTOP past its lease", self.worker_pause),
                ("worker SIGTERM", self.worker_sigterm),
                *[(f"scheduler kill -9 #{i + 1}", self.scheduler_kill)
                  for i in range(a.scheduler_kills)],
                ("scheduler SIGSTOP past its shard lease", self.scheduler_pause),
                ("dispatcher kill -9", lambda: self.service_kill("dispatcher")),
                ("worker-gateway kill -9", lambda: self.service_kill("worker_gateway")),
                ("PostgreSQL restart", lambda: self.server_restart("postgres")),
                ("Kafka restart", lambda: self.server_restart("kafka")),
            ]
            plan = [(t, f) for t, f in plan if not (t.startswith("Kafka") and a.no_kafka)]
            for title, inject in plan:
                log(f"fault: {title}")
                fault = await inject()
                await self.supervise(fault)
                self.faults.append(fault)
                shown = {k: v for k, v in fault.detail.items() if not k.startswith("_")}
                log(f"  survived={fault.survived} in {time.monotonic() - fault.started:.1f}s "
                    f"{shown}")
                await asyncio.sleep(a.settle)
            faults_ended = time.monotonic()
        finally:
            await load.stop()
        during = self.sampler.rate(faults_began, faults_ended)
        log(f"load stopped ({len(load.job_ids)} jobs accepted); draining")
        async with self.lab.client() as client:
            for job_id in self.recurring:
                await client.delete(f"/v1/jobs/{job_id}")
        expected = load.job_ids + self.recurring
        missing, open_runs = await wait_settled(self.lab.db, expected, a.drain)
        await self.sampler.scrape_all()
        await self.sampler.stop()
        log(f"drained in {time.monotonic() - faults_ended:.1f}s; checking every run")
        verdict = await verify(self.lab.db, expected)
        slots, unaccounted, dup_slots, skipped = await coverage(
            self.lab.db, self.recurring, self.recurring_start)
        epochs_checked, backwards = await shard_epoch_order(self.lab.db)
        return self.report(load, verdict, during, began, faults_began, faults_ended,
                           (missing, open_runs), (slots, unaccounted, dup_slots, skipped),
                           (epochs_checked, backwards))

    def report(self, load: Load, verdict: Any, during: float, began: float,
               faults_began: float, faults_ended: float, settled: tuple[int, int],
               slots: tuple[int, int, int, int], epochs: tuple[int, dict[int, Any]]
               ) -> dict[str, Any]:
        by_kind: dict[str, list[Fault]] = {}
        for f in self.faults:
            by_kind.setdefault(f.kind, []).append(f)

        def details(kind: str) -> list[dict[str, Any]]:
            return [{k: v for k, v in f.detail.items() if not k.startswith("_")}
                    for f in by_kind.get(kind, [])]

        def collect(kind: str, key: str) -> list[float]:
            return [x for f in by_kind.get(kind, []) for x in f.detail.get(key, [])]

        failovers = [f.detail["failover_s"] for f in by_kind.get("scheduler_kill", [])
                     if f.detail.get("failover_s") is not None]
        lost = len(verdict.jobs_not_succeeded)
        stale_events = verdict.events.get("StaleWriteRejected", 0)
        return {
            "scenario": "chaos",
            "quick": self.args.quick,
            "load": {"rate_jobs_per_s": self.args.rate, "run_seconds": self.args.run_seconds,
                     "jobs_accepted": len(load.job_ids), "jobs_abandoned": len(load.abandoned),
                     "submit_errors_retried": load.failed_requests,
                     "recurring_jobs": RECURRING, "workers": self.args.workers,
                     "schedulers": self.args.schedulers,
                     "runs_per_s_before_faults": round(self.baseline, 1),
                     "runs_per_s_during_faults": round(during, 1),
                     "fault_phase_s": round(faults_ended - faults_began, 1)},
            "faults": {kind: {"injected": len(fs), "survived": sum(f.survived for f in fs),
                              "details": details(kind)} for kind, fs in by_kind.items()},
            "faults_skipped": ["kafka_restart"] if self.args.no_kafka else [],
            "scheduler_failover_s": spread(failovers),
            "worker_lease_recovery_s": spread(collect("worker_kill", "_recovery")
                                              + collect("worker_pause", "_recovery")),
            "graceful_release_ms": spread(collect("worker_sigterm", "_queued"), 0),
            "stale_writes_rejected": {
                "events": stale_events,
                "metric": int(self.sampler.total("ostinato_stale_writes_rejected_total"))},
            "lost_accepted_jobs": lost,
            "missed_occurrences": slots[1],
            "occurrences": {"expected": slots[0], "unaccounted": slots[1],
                            "duplicated": slots[2], "skipped": slots[3],
                            "repaired_by_reconciler": int(self.sampler.total(
                                "ostinato_occurrences_missed_total"))},
            "duplicates": {
                "occurrences": verdict.duplicate_occurrences + slots[2],
                "claims": verdict.duplicate_claims + int(self.sampler.total(
                    "ostinato_duplicate_claims_total")),
                "effects": len(verdict.duplicate_effect_keys)
                + len(verdict.duplicate_effect_runs)},
            "messages": {
                "delivered_twice": int(self.sampler.total("ostinato_duplicate_messages_total")),
                "stale_epoch_dropped": int(self.sampler.total(
                    "ostinato_stale_messages_dropped_total")),
                "applied_twice": len(verdict.duplicate_effect_keys)},
            "outages": {name: details(f"{name}_restart")[0] if by_kind.get(f"{name}_restart")
                        else None for name in ("postgres", "kafka")},
            "reconciler": {
                "stuck_runs_found_peak": int(self.sampler.gauge_peaks["ostinato_stuck_runs"]),
                "dispatch_decisions": int(self.sampler.total(
                    "ostinato_dispatch_decisions_total")),
                "lease_expirations": int(self.sampler.total(
                    "ostinato_lease_expirations_total")),
                "outbox_peak": int(self.sampler.gauge_peaks["ostinato_outbox_unpublished"])},
            "shard_epochs": {"run_scheduled_checked": epochs[0],
                             "went_backwards": {str(k): v for k, v in epochs[1].items()}},
            "end_check": {"settled": {"jobs_without_run": settled[0], "runs_open": settled[1]},
                          "runs": verdict.runs, "succeeded": verdict.succeeded,
                          "effects": verdict.effects, "problems": verdict.problems()},
            "runtime_s": round(time.monotonic() - began, 1),
            "log_dir": str(self.cluster.log_dir),
        }


def table(r: dict[str, Any]) -> str:
    def mmm(s: dict[str, Any], unit: str = "") -> str:
        if not s.get("n"):
            return "n/a"
        return f"{s['min']}{unit} / {s['median']}{unit} / {s['max']}{unit} (n={s['n']})"

    load, dup, msg, rec = r["load"], r["duplicates"], r["messages"], r["reconciler"]
    rows: list[tuple[str, str]] = [
        ("load held: runs/s before faults", f"{load['runs_per_s_before_faults']} "
         f"(submitting {load['rate_jobs_per_s']:g} jobs/s)"),
        ("load held: runs/s during faults", f"{load['runs_per_s_during_faults']} "
         f"over {load['fault_phase_s']} s"),
    ]
    for kind, f in r["faults"].items():
        rows.append((f"fault {kind}: injected / survived", f"{f['injected']} / {f['survived']}"))
    for kind in r["faults_skipped"]:
        rows.append((f"fault {kind}: injected / survived", "skipped (--no-kafka / --quick)"))
    kills = r["faults"].get("worker_kill", {}).get("details", [])
    sigterm = r["faults"].get("worker_sigterm", {}).get("details", [])
    pause = r["faults"].get("scheduler_pause", {}).get("details", [])
    rows += [
        ("scheduler failover s (min/median/max)", mmm(r["scheduler_failover_s"])),
        ("scheduler pause: shards taken over s",
         ", ".join(str(p["takeover_s"]) for p in pause) or "n/a"),
        ("worker lease recovery s (min/median/max)", mmm(r["worker_lease_recovery_s"])),
        ("  leases granted to a dead/paused worker",
         str(sum(k.get("leases_to_dead_worker", 0) for k in kills)
             + sum(p.get("leases_to_paused_worker", 0) for p in
                   r["faults"].get("worker_pause", {}).get("details", [])))),
        ("graceful release ms (min/median/max)", mmm(r["graceful_release_ms"], " ms")),
        ("  released runs restarted elsewhere ms",
         "; ".join(mmm(s["restarted_elsewhere_ms"], " ms") for s in sigterm) or "n/a"),
        ("  released runs leased again to the stopped worker",
         str(sum(s.get("leases_to_stopped_worker", 0) for s in sigterm))),
        ("stale writes rejected (events / metric)",
         f"{r['stale_writes_rejected']['events']} / {r['stale_writes_rejected']['metric']}"),
        ("lost accepted jobs (must be 0)", f"{r['lost_accepted_jobs']} of "
         f"{load['jobs_accepted']} (+{RECURRING} recurring); never accepted: "
         f"{load['jobs_abandoned']}"),
        ("missed occurrences (must be 0)", f"{r['missed_occurrences']} of "
         f"{r['occurrences']['expected']} (reconciler repairs: "
         f"{r['occurrences']['repaired_by_reconciler']})"),
        ("duplicate occurrences / claims / effects", f"{dup['occurrences']} / {dup['claims']} / "
         f"{dup['effects']}"),
        ("messages delivered twice / applied twice",
         f"{msg['delivered_twice']} / {msg['applied_twice']} (stale-epoch dropped: "
         f"{msg['stale_epoch_dropped']})"),
    ]
    for name in ("postgres", "kafka"):
        o = r["outages"].get(name)
        rows.append((f"{name} outage: down s / throughput back s / outbox peak",
                     "skipped" if o is None else
                     f"{o['outage_s']} / {o['throughput_back_s']} / {o['outbox_backlog_peak']}"))
    for kind in ("dispatcher_kill", "gateway_kill"):
        d = r["faults"].get(kind, {}).get("details", [])
        rows.append((f"{kind}: throughput back s",
                     ", ".join(str(x["throughput_back_s"]) for x in d) or "n/a"))
    rows += [
        ("reconciler stuck runs found (peak)", str(rec["stuck_runs_found_peak"])),
        ("dispatcher decisions", str(rec["dispatch_decisions"])),
        ("shard epochs going backwards", str(len(r["shard_epochs"]["went_backwards"]))),
        ("end check", "OK" if not r["end_check"]["problems"] else
         "; ".join(r["end_check"]["problems"])),
        ("runtime s", str(r["runtime_s"])),
    ]
    width = max(len(k) for k, _ in rows) + 2
    lines = [f"{'chaos':<{width}}{'quick' if r['quick'] else 'full'} run",
             "-" * (width + 40)]
    lines += [f"{k:<{width}}{v}" for k, v in rows]
    return "\n".join(lines)


def failures(r: dict[str, Any]) -> list[str]:
    """What makes the run fail (exit status 1): a broken invariant or a fault not survived."""
    found = list(r["end_check"]["problems"])
    for key, value in (("lost accepted jobs", r["lost_accepted_jobs"]),
                       ("missed occurrences", r["missed_occurrences"]),
                       *((f"duplicate {k}", v) for k, v in r["duplicates"].items()),
                       ("shard epochs going backwards", len(r["shard_epochs"]["went_backwards"]))):
        if value:
            found.append(f"{key}: {value}")
    for kind, f in r["faults"].items():
        if f["survived"] < f["injected"]:
            found.append(f"{kind} not survived {f['injected'] - f['survived']} time(s)")
    return found


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    name = f"ostinato_chaos_{uuid.uuid4().hex[:8]}"
    admin = Db(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    log_dir = ROOT / ".cache" / "chaos" / time.strftime("%Y%m%d-%H%M%S")
    cluster = Cluster(database_url=url, kafka_bootstrap=KAFKA,
                      topic_prefix=f"c{uuid.uuid4().hex[:8]}.", log_dir=log_dir,
                      extra_env={**FAULT_ENV, "OSTINATO_LOG_LEVEL": "warning",
                                 "OSTINATO_DB_POOL_SIZE": "20"})
    lab = Lab(cluster=cluster, db=Db(url))
    # SIGTERM (e.g. from make) unwinds like Ctrl-C: the finally blocks stop everything.
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    try:
        await migrate(url)
        result = await Chaos(args, lab).run()
        return {**result, "machine": await machine(BASE_URL)}
    finally:
        try:
            await lab.close()
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', within=60)
            await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="shorter phases: about 2 minutes")
    parser.add_argument("--rate", type=float, default=None,
                        help="jobs submitted per second (200; --quick: 100)")
    parser.add_argument("--batch", type=int, default=20, help="jobs per submission request")
    parser.add_argument("--run-seconds", type=float, default=0.2, help="each run's work")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64, help="per worker process")
    parser.add_argument("--schedulers", type=int, default=3)
    parser.add_argument("--scheduler-kills", type=int, default=3)
    parser.add_argument("--baseline", type=float, default=None, help="seconds of load first")
    parser.add_argument("--settle", type=float, default=None, help="seconds between faults")
    parser.add_argument("--drain", type=float, default=120.0, help="max seconds to drain")
    parser.add_argument("--pause", type=float, default=None,
                        help="seconds a worker stays frozen (lease: 3 s)")
    parser.add_argument("--scheduler-pause", type=float, default=None,
                        help="seconds a scheduler stays frozen (at least until taken over)")
    kafka = parser.add_mutually_exclusive_group()
    kafka.add_argument("--no-kafka", action="store_true", default=None,
                       help="skip the Kafka restart (the default with --quick: it alone takes "
                            "about 45 s)")
    kafka.add_argument("--kafka", dest="no_kafka", action="store_false",
                       help="restart Kafka also with --quick")
    args = parser.parse_args()
    if args.no_kafka is None:
        args.no_kafka = args.quick
    if args.pause is None:
        args.pause = LEASE_TTL + (1.5 if args.quick else 3)
    if args.scheduler_pause is None:
        args.scheduler_pause = SHARD_TTL + 1.5 if args.quick else 2 * SHARD_TTL + 1
    if args.rate is None:
        args.rate = 100.0 if args.quick else 200.0
    if args.baseline is None:
        args.baseline = 5.0 if args.quick else 20.0
    if args.settle is None:
        args.settle = 0.5 if args.quick else 5.0
    configure_logging("chaos", "warning")
    result = eventloop.run(amain(args))
    print(table(result))
    write_result("chaos", result)
    if failures(result):
        print(f"chaos: FAILED: {'; '.join(failures(result))}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
