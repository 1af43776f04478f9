"""Chaos under steady load: the fault suite's faults one after another while jobs arrive at a
fixed rate; prints one table and writes it as JSON to bench/results/chaos.json.

    .venv/bin/python -m bench.chaos [--quick] [--rate 200] [--workers 3] [--schedulers 3]
        [--instances 2] [--ha] [--only worker_sigterm,postgres_freeze] [--skip kafka_restart]

Needs PostgreSQL and Kafka (`infra/up.sh postgres kafka`). Starts the services, --instances
of each (two by default: the api and the worker-gateway behind a TCP balancer in front of both,
tests/helpers/lab/balancer.py, which the load, the storm and the workers use; three schedulers)
and worker processes (tests/faults/worker_proc.py: fenced, at-most-once effects in
the run's database) on a fresh database and topic prefix, with 3 s leases. Jobs are submitted
through POST /v1/jobs/batch (each batch retried with its idempotency keys until accepted), and
32 recurring every-1s jobs keep every scheduler shard busy. Faults, in order (names for --only
and --skip):

  worker_kill           kill -9 the busiest worker
  worker_pause          SIGSTOP a worker past its lease
  worker_sigterm        SIGTERM a worker holding runs longer than its shutdown grace
  worker_partition      cut a worker off the gateway (a TCP proxy between them black-holes
                        both directions) past its lease, then heal
  scheduler_kill        kill -9 the scheduler holding the most shards (three times, or
                        --scheduler-kills)
  scheduler_pause       SIGSTOP a scheduler past its shard lease
  dispatcher_kill       kill -9 the dispatcher
  gateway_kill          kill -9 the worker-gateway
  api_kill_under_batch  kill -9 the api at random moments (--api-kills) under a storm of
                        batch submissions retried by idempotency key
  instance_kill         kill -9 the first instance of every service at once (the second ones
                        carry on), then start them again
  postgres_restart      restart PostgreSQL
  postgres_freeze       SIGSTOP the postmaster and every server process (--pg-freeze s)
  kafka_freeze          SIGSTOP the Kafka broker (--kafka-freeze s)
  kafka_restart         restart Kafka

--ha (the default when OSTINATO_HA=1: `make chaos HA=1`) runs on the HA profile's servers
(`infra/up.sh postgres-ha kafka-ha`: pg_auto_failover's primary + synchronous standby through
the multi-host URL, three KRaft brokers with topics of three replicas) instead of the single
ones, without the four single-server faults above and with these:

  kafka_leader_kill     kill -9 the leader of the busiest partition of the runs topic; started
                        again once the load is back (recovery: until a new leader is elected)
  kafka_broker_down     kill -9 that partition's leader and keep it down --broker-down s (60;
                        --quick 20), then start it (recovery: throughput back while it is down)
  postgres_primary_kill kill -9 the primary node (keeper and postgres: the machine lost); the
                        standby is promoted, the node is started again as its standby
                        (recovery: throughput back)

The server faults stop or freeze the *shared* servers: other users of them see the outage
too. A freeze always ends with SIGCONT (a `finally`, plus a detached watchdog should this
process be killed). A service that exits is started again, as an orchestrator would (the fault
then counts as not survived and the crash is reported). Every process it starts is stopped at
the end, and a server it stopped is started again, also on errors, Ctrl-C and SIGTERM. Logs:
.cache/chaos/<run>/.

Each fault is judged by what the run-event log and the counts show, never by a wall-clock
window alone (waits have generous hang guards; what they wait for is an event):

- worker_kill / worker_pause: every run the worker held started again on another worker
  (figure: kill/SIGSTOP to that RunStarted);
- worker_sigterm: every run the worker held at the SIGTERM was either finished by it (an
  outcome recorded after the signal: "finished within grace") or given back (LeaseReleased by
  it, then RunStarted elsewhere: "released"); one that was neither fails the fault. The victim
  takes 0.5 to 3.5 times its grace for a run, so some of its runs outlive the grace;
- worker_partition: every attempt it held (or was given during the cut) was expired
  (LeaseExpired) and started by another worker while it was cut off; the cut lasts until then
  and until every run it held has ended in its own log (its runs take 1 to 14 s, so some reach
  their effect before the new owner, some after); after the heal its late heartbeats and
  outcomes were refused (StaleWriteRejected by it), none of its writes under a stale token was
  accepted, and each of those runs has exactly one effect row (fence + apply_once in
  worker_proc.py); then that worker is stopped;
- scheduler_kill: every recurring job of the victim's shards fired a slot due after the kill;
- scheduler_pause: every shard of the victim taken over under a higher epoch;
- api_kill_under_batch: every idempotency key of the storm has exactly one job (one row, one
  JobCreated event, the id the client was answered) and submission resumed after each kill;
- dispatcher/gateway kill, server restart or freeze: throughput back to 80 % of the baseline
  (and, for a freeze, every server process seen stopped; for Kafka, the outbox drained again).

Then the load stops, everything drains, and the fault suite's end check runs over every run,
and every idempotency key submitted (load and storm) is checked for exactly one job.

The run ends with one table, a row per fault injected: lost (jobs accepted during the fault
without a succeeded run), duplicated (effects applied twice, occurrences made twice), missed
(every-1s slots of the recurring jobs inside the fault's window without a run) and recovery
seconds (the fault's own measure, below).

Measures: scheduler failover = from the kill to the first RunScheduled of a slot due after it,
for every recurring job in the victim's shards (the slowest counts); worker lease recovery =
from kill/SIGSTOP to the run's next RunStarted on another worker; graceful release = from
SIGTERM to RunQueued after the worker's LeaseReleased; partition takeover = from the cut to the
run's RunStarted on another worker; api submission back = from the kill to the first batch
accepted by the new api; throughput back = from the restart/thaw to the end of the first 1-s
window completing >= 80% of the baseline rate.

--quick (6 to 8 minutes on 2 cores): 100 jobs/s, shorter baseline, pauses, freezes
(PostgreSQL 5 s, Kafka 8 s) and settling, 3 api kills, and no Kafka restart unless --kafka
(that one alone takes 25 to 45 s: the broker's controlled shutdown and start). The defaults
(200 jobs/s, 10 api kills, freezes of 20 s and 30 s, the Kafka restart) take several minutes
more. Exit status 1 when an invariant broke (lost, missed or duplicated work, end-check
problems, a key with more than one job) or a fault was not survived.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from bench.common import BASE_URL, KAFKA, ROOT, machine, write_result
from ostinato import eventloop
from ostinato.bus.kafka import delete_topics_with_prefixes
from ostinato.db.migrate import migrate
from ostinato.telemetry.logging import configure_logging
from tests.helpers.lab.brokers import KafkaTrio
from tests.helpers.lab.cluster import SERVICES, Cluster, service_of
from tests.helpers.lab.database import Db
from tests.helpers.lab.injection import freeze
from tests.helpers.lab.invariants import (
    FINAL,
    coverage,
    shard_epoch_order,
    verify,
    wait_settled,
)
from tests.helpers.lab.lab import FAULT_ENV, Lab
from tests.helpers.lab.load import Load, fx_job
from tests.helpers.lab.metrics import metric_total, scrape
from tests.helpers.lab.pg_ha import PRIMARY_STATES, HaPostgres
from tests.helpers.lab.processes import (
    WorkerProc,
    frozen,
    process_state,
    respawn,
    scheduler_owner,
)

LEASE_TTL = float(FAULT_ENV["OSTINATO_LEASE_TTL_SECONDS"])
SHARD_TTL = float(FAULT_ENV["OSTINATO_SHARD_LEASE_TTL_SECONDS"])
RECURRING = 32  # every-1s jobs: about two per shard
COUNTERS = (
    "ostinato_stale_writes_rejected_total", "ostinato_lease_expirations_total",
    "ostinato_duplicate_claims_total",
    "ostinato_stale_messages_dropped_total", "ostinato_dispatch_decisions_total",
    "ostinato_occurrences_missed_total",
)
GAUGES = ("ostinato_stuck_runs", "ostinato_outbox_unpublished")
FAULTS = ("worker_kill", "worker_pause", "worker_sigterm", "worker_partition", "scheduler_kill",
          "scheduler_pause", "dispatcher_kill", "gateway_kill", "api_kill_under_batch",
          "instance_kill", "postgres_restart", "postgres_freeze", "kafka_freeze",
          "kafka_restart", "kafka_leader_kill", "kafka_broker_down", "postgres_primary_kill")
SINGLE_SERVER = frozenset({"postgres_restart", "postgres_freeze", "kafka_freeze",
                           "kafka_restart"})  # the shared servers' faults: not with --ha
HA_ONLY = frozenset({"kafka_leader_kill", "kafka_broker_down", "postgres_primary_kill"})
# What ends an attempt (its RunStarted) in a run's stream; the worker reports the first four.
OUTCOMES = frozenset({"RunSucceeded", "RunFailed", "RunCancelled", "RunSuspended"})
ENDINGS = OUTCOMES | {"LeaseReleased", "LeaseExpired", "AttemptTimedOut"}


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


@dataclass
class Attempt:
    """One attempt a worker was given (its RunStarted) and what followed, from the log."""

    run_id: uuid.UUID
    token: int
    started: datetime
    ending: str | None = None  # the first of ENDINGS after the RunStarted
    ending_actor: str | None = None
    ended: datetime | None = None
    queued: datetime | None = None  # the first RunQueued after the ending
    next_start: datetime | None = None  # the run's next RunStarted, by another worker
    next_actor: str | None = None
    next_own_start: datetime | None = None  # or its next RunStarted by this same worker
    stale_rejected: list[str] = field(default_factory=list)  # its refused writes (operations)
    stale_accepted: list[str] = field(default_factory=list)  # its writes after a LeaseExpired

    def open_at(self, t: datetime) -> bool:
        """Held at `t`: started before it, not ended before it."""
        return self.started < t and (self.ended is None or self.ended >= t)


def attempts_from(rows: list[asyncpg.Record], worker: str) -> list[Attempt]:
    """The attempts of `worker` in these run events (ordered by stream and version)."""
    actor = f"worker:{worker}"
    streams: dict[uuid.UUID, list[asyncpg.Record]] = defaultdict(list)
    for r in rows:
        streams[r["stream_id"]].append(r)
    found = []
    for run_id, events in streams.items():
        for i, e in enumerate(events):
            if e["type"] != "RunStarted" or e["actor"] != actor:
                continue
            a = Attempt(run_id, int(e["epoch"]), e["recorded_at"])
            for f in events[i + 1:]:
                kind = f["type"]
                if kind == "StaleWriteRejected" and f["worker_id"] == worker \
                        and f["presented"] == a.token:
                    a.stale_rejected.append(f["operation"] or "?")
                elif a.ending is None and kind in ENDINGS:
                    a.ending, a.ending_actor, a.ended = kind, f["actor"], f["recorded_at"]
                elif a.ending is not None and kind == "RunQueued" and a.queued is None:
                    a.queued = f["recorded_at"]
                elif kind == "RunStarted" and f["actor"] != actor and a.next_start is None:
                    a.next_start, a.next_actor = f["recorded_at"], f["actor"]
                if a.ending == "LeaseExpired" and f["actor"] == actor and f["epoch"] == a.token \
                        and kind != "StaleWriteRejected" and f["recorded_at"] > a.ended:
                    a.stale_accepted.append(kind)
                if kind == "RunStarted" and f["actor"] == actor:
                    a.next_own_start = f["recorded_at"]
                    break  # its next attempt of the same run: counted on its own
            found.append(a)
    return found


class Partition:
    """A TCP proxy between one worker and the gateway. `cut()` black-holes it: nothing is
    forwarded either way, open connections stay open, new ones are accepted and held, as a
    network partition does to TCP; `heal()` delivers what was held (TCP's retransmission after
    a partition), so the worker's requests sent meanwhile reach the gateway late."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.cuts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Partition:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def cut(self) -> None:
        self.cuts += 1
        self._open.clear()

    def heal(self) -> None:
        self._open.set()

    async def close(self) -> None:
        self.heal()
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        upstream: asyncio.StreamWriter | None = None
        try:
            await self._open.wait()  # a connection made during the cut goes nowhere until healed
            up_reader, upstream = await asyncio.open_connection("127.0.0.1", self.target_port)
            self._writers.add(upstream)
            await asyncio.gather(self._pump(reader, upstream, writer),
                                 self._pump(up_reader, writer, upstream))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, upstream):
                if w is not None:
                    self._writers.discard(w)
                    w.close()
            self._tasks.discard(task)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                    back: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await src.read(65536)
                await self._open.wait()  # read during the cut: held until the heal
                if not data:
                    if dst.can_write_eof():
                        dst.write_eof()
                    return
                dst.write(data)
                await dst.drain()
        except OSError:
            dst.close()
            back.close()


class BatchStorm:
    """Batches of `size` no-op jobs, each with its own idempotency key, from `clients` senders
    as fast as the api answers; each request retried with the same body (the same keys) after
    an error, a 5xx or no answer within `timeout`, until accepted (or abandoned after
    `give_up_after` s). Records what every key was answered."""

    def __init__(self, api_url: str, api_key: str, *, size: int = 100, clients: int = 4,
                 timeout: float = 5.0, give_up_after: float = 120.0) -> None:
        self.api_url = api_url
        self.api_key = api_key
        self.size = size
        self.clients = clients
        self.timeout = timeout
        self.give_up_after = give_up_after
        self.prefix = f"storm-{uuid.uuid4().hex[:6]}-"
        self.accepted: dict[str, str] = {}  # idempotency key -> job id answered
        self.abandoned: list[str] = []
        self.requests = 0  # every POST sent, retries included
        self.failed = 0  # answered by an error, a 5xx or not at all
        self.batches_retried = 0  # accepted after at least one failed attempt
        self.answered_existing = 0  # keys answered `created: false` (an earlier try committed)
        self.in_flight = 0
        self.accepted_at: list[float] = []  # monotonic, one per accepted batch
        self._sent = 0
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def job_ids(self) -> list[str]:
        return list(self.accepted.values())

    def start(self) -> BatchStorm:
        self._tasks = [asyncio.create_task(self._sender()) for _ in range(self.clients)]
        return self

    async def stop(self) -> None:
        """Stop starting batches; returns once every batch begun is accepted or abandoned."""
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _sender(self) -> None:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        async with httpx.AsyncClient(base_url=self.api_url, timeout=self.timeout,
                                     headers=headers) as client:
            while not self._stop.is_set():
                keys = [f"{self.prefix}{self._sent + i:07d}" for i in range(self.size)]
                self._sent += self.size
                await self._batch(client, keys)

    async def _batch(self, client: httpx.AsyncClient, keys: list[str]) -> None:
        body = {"jobs": [fx_job(k, sleep=0) for k in keys]}
        deadline = time.monotonic() + self.give_up_after
        failures = 0
        while True:
            self.requests += 1
            self.in_flight += 1
            try:
                r: httpx.Response | None = await client.post("/v1/jobs/batch", json=body)
            except httpx.HTTPError:
                r = None
            finally:
                self.in_flight -= 1
            if r is not None and r.status_code == 200:
                items = r.json()["items"]
                for key, item in zip(keys, items, strict=True):
                    self.accepted[key] = str(item["id"])
                    self.answered_existing += not item["created"]
                self.batches_retried += failures > 0
                self.accepted_at.append(time.monotonic())
                return
            if r is not None and r.status_code < 500:
                raise RuntimeError(f"batch refused: {r.status_code} {r.text[:300]}")
            failures += 1
            self.failed += 1
            if time.monotonic() > deadline:
                self.abandoned += keys
                return
            await asyncio.sleep(0.2)


async def key_check(db: Db, accepted: Mapping[str, str], abandoned: list[str]
                    ) -> dict[str, Any]:
    """Every accepted idempotency key: exactly one job (the unique index holds that for rows,
    so the log is counted too: one JobCreated event), and the job the client was answered.
    Keys never accepted: how many got a job anyway (a commit whose answer was lost)."""
    jobs: dict[str, list[str]] = defaultdict(list)
    for r in await db.fetch("SELECT idempotency_key AS key, id::text AS id FROM jobs "
                            "WHERE idempotency_key IS NOT NULL", within=60):
        jobs[r["key"]].append(r["id"])
    created = Counter({r["key"]: r["n"] for r in await db.fetch(
        "SELECT data->>'idempotency_key' AS key, count(*) AS n FROM events "
        "WHERE type = 'JobCreated' GROUP BY 1", within=60)})
    more = [k for k in accepted if len(jobs.get(k, [])) > 1 or created[k] > 1]
    none = [k for k in accepted if not jobs.get(k)]
    other = [k for k, job in accepted.items() if jobs.get(k) and job not in jobs[k]]
    return {"keys_accepted": len(accepted),
            "one_job_each": sum(len(jobs.get(k, [])) == 1 and created[k] == 1 for k in accepted),
            "more_than_one_job": len(more), "no_job": len(none),
            "answered_another_job": len(other),
            "keys_abandoned": len(abandoned),
            "abandoned_with_a_job": sum(bool(jobs.get(k)) for k in abandoned),
            "examples": (more + none + other)[:5]}


def key_problems(check: Mapping[str, Any]) -> list[str]:
    return [f"idempotency keys with {what}: {check[field_]}" for what, field_ in
            (("more than one job", "more_than_one_job"), ("no job", "no_job"),
             ("a job other than the one answered", "answered_another_job"))
            if check.get(field_)]


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
        self.rng = random.Random(args.seed)
        self.load: Load | None = None
        self.storms: list[BatchStorm] = []
        self.proxies: list[Partition] = []
        self.not_ready: str | None = None  # the last service services_ready() gave up on
        self.per_fault: list[dict[str, Any]] = []

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
        """Every service answers /readyz with 200 and "ready" (not "degraded": Kafka down is a
        200 too) within `within` s; else the first that did not is kept in `not_ready` (with
        its last answer) for the fault's report."""
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(timeout=2) as client:
            for alias, proc in self.cluster.procs.items():
                answer = "no answer"
                while True:
                    if proc.poll() is not None:
                        log(f"{alias} exited: {self.cluster.tail(alias, 10)}")
                        self.not_ready = f"{alias}: exited ({proc.poll()})"
                        return False
                    try:
                        url = f"http://127.0.0.1:{self.cluster.ports[alias]}/readyz"
                        r = await client.get(url)
                        if r.status_code == 200 and r.json().get("status") == "ready":
                            break
                        answer = f"{r.status_code} {r.text[:300]}"
                    except httpx.HTTPError as exc:
                        answer = repr(exc)
                    if time.monotonic() > deadline:
                        log(f"{alias} not ready: {answer}; {self.cluster.tail(alias, 10)}")
                        self.not_ready = f"{alias}: {answer}"
                        return False
                    await asyncio.sleep(0.2)
        return True

    async def rate_back(self, since: float, within: float = 60) -> float | None:
        threshold = 0.8 * min(self.baseline, self.args.rate)
        return await self.sampler.throughput_back(since, threshold, within)

    # -- workers -------------------------------------------------------------------------------

    def live_workers(self) -> list[WorkerProc]:
        return [w for w in self.lab.workers.values() if w.alive]

    async def add_worker(self, *, grace_seconds: float = 0.0, sleep_seconds: float | None = None,
                         sleep_max_seconds: float = 0.0, gateway_url: str | None = None
                         ) -> WorkerProc:
        """One more worker process; each run takes it `sleep_seconds` (default --run-seconds:
        the load's jobs carry no `sleep` of their own), or a random time up to
        `sleep_max_seconds`."""
        self.generation += 1
        w = WorkerProc(f"w{self.generation}", gateway_url or self.cluster.gateway_url,
                       self.lab.api_key, self.cluster.database_url, self.cluster.log_dir,
                       concurrency=self.args.concurrency, grace_seconds=grace_seconds,
                       sleep_seconds=self.args.run_seconds if sleep_seconds is None
                       else sleep_seconds, sleep_max_seconds=sleep_max_seconds)
        self.lab.workers[w.name] = w
        await asyncio.to_thread(lambda: w.start().wait_ready())
        return w

    async def close(self) -> None:
        for proxy in self.proxies:
            await proxy.close()

    async def seq_mark(self) -> int:
        """The log's last seq now: what a fault reads of the log comes after it."""
        return int(await self.lab.db.fetchval("SELECT coalesce(max(seq), 0) FROM events"))

    async def attempts_of(self, worker: str, since_seq: int) -> list[Attempt]:
        """Every attempt `worker` was given after `since_seq`, with what followed it."""
        rows = await self.lab.db.fetch(
            "SELECT stream_id, version, type, actor, epoch, recorded_at, "
            "  data->>'operation' AS operation, data->>'worker_id' AS worker_id, "
            "  (data->>'presented_token')::bigint AS presented "
            "FROM events WHERE seq > $1 AND stream_id IN "
            "  (SELECT stream_id FROM events WHERE seq > $1 AND type = 'RunStarted' "
            "   AND actor = $2) "
            "ORDER BY stream_id, version", since_seq, f"worker:{worker}")
        return attempts_from(rows, worker)

    async def final_runs(self, runs: list[uuid.UUID]) -> set[uuid.UUID]:
        return {r["id"] for r in await self.lab.db.fetch(
            "SELECT id FROM runs WHERE id = ANY($1::uuid[]) AND state = ANY($2::text[])",
            runs, list(FINAL))}

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
        """A worker of its own, with a shutdown grace of --sigterm-grace s, whose runs take
        0.5 to 3.5 times that (random): at the SIGTERM some of the runs it holds can finish
        within the grace and the rest cannot. Judged per run from the log: each attempt open
        at the signal
        ended in an outcome the victim reported ("finished within grace") or in a
        LeaseReleased by it followed by a RunStarted elsewhere ("released"); anything else
        ("neither": a lease left to expire, no ending at all) fails the fault."""
        grace = self.args.sigterm_grace
        unit = grace if grace > 0 else 0.5
        hold = (0.5 * unit, 3.5 * unit)
        mark = await self.seq_mark()
        victim = await self.add_worker(grace_seconds=grace, sleep_seconds=hold[0],
                                       sleep_max_seconds=hold[1])
        actor = f"worker:{victim.name}"

        async def busy() -> bool:  # it finished runs already and holds some now
            atts = await self.attempts_of(victim.name, mark)
            return any(a.ending in OUTCOMES for a in atts) and \
                sum(a.ending is None for a in atts) >= 2

        arranged = bool(await self.until(busy, 30))
        log_mark = victim.log_mark()
        fault = Fault("worker_sigterm", time.monotonic())
        stopped_at = await self.lab.db.now()
        victim.send(signal.SIGTERM)
        # Held at the signal: every attempt it was given before the signal had surely been
        # sent (a claim answered meanwhile is in its hands as much as an older one) and that
        # had not ended before it was sent.
        signalled_at = await self.lab.db.now()
        code = await asyncio.to_thread(victim.stop, 20 + grace)  # waits for the exit

        def split(atts: list[Attempt]) -> tuple[list[Attempt], list[Attempt], list[Attempt],
                                                list[Attempt]]:
            held = [a for a in atts if a.started < signalled_at
                    and (a.ended is None or a.ended >= stopped_at)]
            done = [a for a in held if a.ending in OUTCOMES and a.ending_actor == actor]
            released = [a for a in held if a.ending == "LeaseReleased"
                        and a.ending_actor == actor]
            neither = [a for a in held if a not in done and a not in released]
            return held, done, released, neither

        async def settled() -> list[Attempt]:
            atts = await self.attempts_of(victim.name, mark)
            held, _, released, _ = split(atts)
            final = await self.final_runs([a.run_id for a in released])
            ok = all(a.ending is not None for a in held) and all(
                a.next_start is not None or a.run_id in final for a in released)
            return atts if ok else []

        atts = await self.until(settled, 30 + grace) or \
            await self.attempts_of(victim.name, mark)
        held, done, released, neither = split(atts)
        ghosts = [a for a in atts if a.started >= signalled_at]  # leased after the signal
        words = Counter(str(r.get("event")) for r in victim.records(log_mark))
        draining = next((r for r in victim.records(log_mark)
                         if r.get("event") == "worker.draining"), {})

        def ms(t: datetime | None) -> float | None:
            return None if t is None else (t - stopped_at).total_seconds() * 1000

        queued = [x for a in released if (x := ms(a.queued)) is not None]
        elsewhere = [x for a in released if (x := ms(a.next_start)) is not None]
        finished = [x for a in done if (x := ms(a.ended)) is not None]
        if neither:
            verdict = (f"product bug: {len(neither)} run(s) held at the SIGTERM neither "
                       f"finished nor released by it")
        elif released:
            verdict = (f"exercised: {len(released)} run(s) held past the grace released "
                       f"(and run elsewhere), {len(done)} finished within the grace")
        elif done:
            verdict = "not exercised: every run it held finished within the grace"
        else:
            verdict = "not exercised: it held no run at the SIGTERM"
        fault.survived = code == 0 and not neither \
            and len(elsewhere) + len(await self.final_runs(
                [a.run_id for a in released if a.next_start is None])) == len(released) \
            and await self.services_ready()
        fault.detail = {
            "worker": victim.name, "grace_s": grace, "run_takes_s": list(hold),
            "arranged": arranged, "exit_code": code, "held_at_sigterm": len(held),
            "finished_within_grace": len(done), "released": len(released),
            "neither": len(neither), "verdict": verdict,
            "neither_examples": [{"run": str(a.run_id), "ending": a.ending,
                                  "by": a.ending_actor} for a in neither[:5]],
            "finished_after_ms": spread(finished, 0),
            "queued_again_ms": spread(queued, 0),
            "restarted_elsewhere_ms": spread(elsewhere, 0),
            "leases_to_stopped_worker": len(ghosts),
            "leases_to_stopped_worker_expired": sum(a.ending == "LeaseExpired"
                                                    for a in ghosts),
            "worker_log": {"in_flight_at_signal": draining.get("in_flight"),
                           "released": words["run.released"]},
            "_queued": queued}
        return fault

    async def worker_partition(self) -> Fault:
        """A worker of its own talks to the gateway through a `Partition`; once it holds runs
        the proxy is cut until every attempt it held (and any it was given meanwhile) was
        expired and started by another worker, at least one lease TTL; then healed. Judged
        from the log and the effects table (see the module docstring)."""
        mark = await self.seq_mark()
        proxy = await Partition(self.cluster.ports["worker_gateway"]).start()
        self.proxies.append(proxy)
        # Its runs take 1 to 14 s (random, before the effect): it holds runs across its
        # heartbeats, and of the runs it holds at the cut some reach their effect before the
        # new owner (which then finds it applied: apply_once), others after the new owner
        # fenced the run (refused: LeaseLost, no outcome). The proxy stays cut until every
        # one of them has ended in the worker's own log, so both happen while cut off.
        victim = await self.add_worker(gateway_url=proxy.url, sleep_seconds=1.0,
                                       sleep_max_seconds=2 * LEASE_TTL + 8)
        actor = f"worker:{victim.name}"

        def ended_in_log() -> set[str]:
            return {str(r.get("run_id")) for r in victim.records()
                    if r.get("event") in ("run.completed", "run.outcome_withheld",
                                          "run.failed", "run.released")}

        async def holding() -> bool:
            return any(a.ending is None for a in await self.attempts_of(victim.name, mark))

        await self.until(holding, 30)
        fault = Fault("worker_partition", time.monotonic())
        log_mark = victim.log_mark()
        cut_at = await self.lab.db.now()
        proxy.cut()
        try:
            async def taken_over() -> list[Attempt]:
                held = [a for a in await self.attempts_of(victim.name, mark)
                        if a.open_at(cut_at) or a.started >= cut_at]
                ok = held and all((a.ending in OUTCOMES and a.ending_actor == actor)
                                  or (a.ending == "LeaseExpired" and a.next_start is not None)
                                  for a in held)
                done = ended_in_log()
                ok = ok and all(str(a.run_id) in done for a in held if a.open_at(cut_at))
                return held if ok else []

            await self.until(taken_over, 90)
            past = (await self.lab.db.now() - cut_at).total_seconds()
            await asyncio.sleep(max(0.0, LEASE_TTL + 0.5 - past))  # cut past its lease
        finally:
            proxy.heal()
        healed_at = await self.lab.db.now()
        cut_s = (healed_at - cut_at).total_seconds()

        def held_of(atts: list[Attempt]) -> list[Attempt]:  # at the cut, or given during it
            return [a for a in atts if a.open_at(cut_at) or cut_at <= a.started < healed_at]

        async def refused() -> list[Attempt]:  # its late writes met the gateway
            atts = await self.attempts_of(victim.name, mark)
            return atts if any(a.stale_rejected for a in held_of(atts)) else []

        await self.until(refused, 30)
        atts = await self.attempts_of(victim.name, mark)
        held = held_of(atts)
        runs = [a.run_id for a in held]

        async def all_final() -> bool:
            return len(await self.final_runs(runs)) == len(set(runs))

        await self.until(all_final, 60)
        atts = await self.attempts_of(victim.name, mark)
        held = held_of(atts)
        # expired, then started again: by another worker (while cut off, normally) or, only
        # if nobody took it before the heal, by this one under a new token
        taken = [a for a in held if a.ending == "LeaseExpired"
                 and (a.next_start is not None or a.next_own_start is not None)]
        finished = [a for a in held if a.ending in OUTCOMES and a.ending_actor == actor]
        lost = [a for a in held if a not in taken and a not in finished]
        effects = {r["run_id"]: (r["n"], r["by_victim"]) for r in await self.lab.db.fetch(
            "SELECT r.id AS run_id, count(e.id) AS n, "
            "  count(e.id) FILTER (WHERE e.worker_id = $2) AS by_victim "
            "FROM unnest($1::uuid[]) AS r(id) LEFT JOIN effects e ON e.run_id = r.id "
            "GROUP BY r.id", runs, victim.name)}
        succeeded = {r["id"] for r in await self.lab.db.fetch(
            "SELECT id FROM runs WHERE id = ANY($1::uuid[]) AND state = 'succeeded'", runs)}
        not_once = [str(r) for r in succeeded if effects.get(r, (0, 0))[0] != 1]
        rejected = Counter(op for a in held for op in a.stale_rejected)
        accepted_late = [k for a in held for k in a.stale_accepted]
        held_ids = {str(r) for r in runs}
        words = Counter(str(r.get("event")) for r in victim.records(log_mark)
                        if str(r.get("run_id")) in held_ids)
        takeover = [(a.next_start - cut_at).total_seconds() for a in taken if a.next_start]
        expiry = [(a.ended - cut_at).total_seconds() for a in taken if a.ended]
        alive = victim.alive
        # Done with it: stopped gracefully (through the healed proxy), so that what follows
        # does not depend on the harness's event loop forwarding its heartbeats in time.
        exit_code = await asyncio.to_thread(victim.stop)
        await proxy.close()
        fault.survived = bool(taken) and not lost and bool(rejected) and not accepted_late \
            and not not_once and len(succeeded) == len(set(runs)) and alive \
            and await self.services_ready()
        fault.detail = {
            "worker": victim.name, "exit_code_after": exit_code, "cut_s": round(cut_s, 2),
            "held": len(held),
            "taken_over": len(taken), "finished_before_cut": len(finished),
            "restarted_by_itself_after_heal": sum(a.next_start is None for a in taken),
            "neither": len(lost),
            "given_during_cut": sum(a.started >= cut_at for a in held),
            "lease_expired_after_s": spread(expiry), "takeover_s": spread(takeover),
            "late_writes_rejected": dict(rejected),
            "late_writes_accepted": len(accepted_late),
            "effects": {"runs": len(succeeded), "exactly_once": len(succeeded) - len(not_once),
                        "applied_by_partitioned_worker": sum(
                            effects.get(r, (0, 0))[1] for r in succeeded),
                        "not_once": not_once[:5]},
            "worker_log": {"lease_lost": words["run.lease_lost"],
                           "outcome_withheld": words["run.outcome_withheld"],
                           "outcome_rejected": words["outcome.rejected"]},
            "_takeover": takeover}
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
            # on its port: the balancer (and workers, for the gateway) know it by that
            await asyncio.to_thread(respawn, self.cluster, alias, service_of(alias))

    # -- services and servers ------------------------------------------------------------------

    async def service_kill(self, alias: str) -> Fault:
        fault = Fault(f"{alias.replace('worker_gateway', 'gateway')}_kill", time.monotonic())
        self.cluster.kill(alias)
        await asyncio.sleep(1)
        # same port: workers (and the balancer in front of several instances) know it by it
        await asyncio.to_thread(respawn, self.cluster, alias, alias)
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

    async def instance_kill(self) -> Fault:
        """kill -9 the first instance of every service at once: the other instances carry
        the load (the balancer sends new connections to them, the surviving schedulers take
        the shards, the other dispatcher decides). Recovery: throughput back from the kill,
        with the victims still down; then they are started again on their ports."""
        fault = Fault("instance_kill", time.monotonic())
        victims = [s for s in SERVICES if self.cluster.procs[s].poll() is None]
        for alias in victims:
            self.cluster.kill(alias)
        back = await self.rate_back(fault.started, 90)
        for alias in victims:
            await asyncio.to_thread(respawn, self.cluster, alias, alias)
        fault.survived = back is not None and await self.services_ready()
        fault.detail = {"killed": victims,
                        "throughput_back_s": None if back is None else round(back, 2),
                        "recovery_s": None if back is None else round(back, 2)}
        return fault

    def trio(self) -> KafkaTrio:
        """The HA profile's three brokers (infra/kafka/cluster.sh, infra/env.sh's ports)."""
        clients = [int(a.rsplit(":", 1)[1]) for a in KAFKA.split(",")]
        controllers = [int(p) for p in
                       os.environ.get("OSTINATO_KAFKA_HA_CONTROLLER_PORTS", "").split(",") if p]
        return KafkaTrio(state_dir=ROOT / ".cache" / "kafka-ha" if "OSTINATO_KAFKA_HA_DIR"
                         not in os.environ else Path(os.environ["OSTINATO_KAFKA_HA_DIR"]),
                         ports=[p for pair in zip(clients, controllers, strict=True)
                                for p in pair])

    async def kafka_leader(self, name: str, down_for: float) -> Fault:
        """kill -9 the broker leading the busiest partition of the runs topic, keep it down
        `down_for` s at least (and until the load is back), start it again and wait until it
        is back in that partition's in-sync replicas."""
        trio = self.trio()
        topic = f"{self.cluster.topic_prefix}ostinato.runs.due"
        partition, _ = await trio.busiest(topic)
        victim = (await trio.partitions(topic))[partition]["leader"]
        fault = Fault(name, time.monotonic())
        await asyncio.to_thread(trio.kill, victim)

        async def new_leader() -> int:
            leader = (await trio.partitions(topic))[partition]["leader"]
            return leader if leader not in (victim, -1) else 0

        leader = await self.until(new_leader, 120)
        elected = time.monotonic() - fault.started
        back = await self.rate_back(fault.started, 120)
        await asyncio.sleep(max(0.0, down_for - (time.monotonic() - fault.started)))
        down = time.monotonic() - fault.started
        restarted = time.monotonic()
        restart_error = None
        try:  # cluster.sh waits 120 s for every node to answer: a loaded machine may not
            await asyncio.to_thread(trio.up)
        except RuntimeError as exc:
            restart_error = str(exc)[-300:]

        async def in_sync() -> bool:
            return victim in (await trio.partitions(topic))[partition]["isr"]

        rejoined = await self.until(in_sync, 180)
        fault.survived = bool(leader) and back is not None and bool(rejoined) \
            and await self.services_ready(60)
        recovery = elected if name == "kafka_leader_kill" else back
        fault.detail = {"broker": victim, "partition": partition, "new_leader": leader,
                        "new_leader_s": round(elected, 2), "down_s": round(down, 1),
                        "throughput_back_s": None if back is None else round(back, 2),
                        "back_in_sync_s": round(time.monotonic() - restarted, 2)
                        if rejoined else None,
                        "restart_error": restart_error,
                        "recovery_s": None if recovery is None else round(recovery, 2)}
        return fault

    def ha_postgres(self) -> HaPostgres:
        """The HA profile's pg_auto_failover nodes (infra/postgres/ha-up.sh, infra/env.sh)."""
        a, b = (int(p) for p in os.environ["OSTINATO_PG_HA_PORTS"].split(","))
        return HaPostgres(base=Path(os.environ["OSTINATO_PG_HA_DIR"]),
                          monitor_port=int(os.environ["OSTINATO_PG_HA_MONITOR_PORT"]),
                          ports=(a, b))

    async def postgres_primary_kill(self) -> Fault:
        """kill -9 every process of the primary node; the monitor promotes the standby; the
        services reconnect through the multi-host URL. Then ha-up.sh starts the killed node
        again (it rejoins as the new primary's standby)."""
        ha = self.ha_postgres()
        nodes = await ha.nodes()
        [primary] = [n for n in nodes.values() if n.reported in PRIMARY_STATES]
        others = [n for n in nodes.values() if n.name != primary.name]
        fault = Fault("postgres_primary_kill", time.monotonic())
        await asyncio.to_thread(ha.kill, primary.name)

        async def promoted() -> bool:
            try:
                now = await ha.nodes()
            except (OSError, asyncpg.PostgresError):
                return False
            return any(now[n.name].reported in PRIMARY_STATES for n in others)

        ok = await self.until(promoted, 120)
        promotion = time.monotonic() - fault.started
        back = await self.rate_back(fault.started, 120)
        restart_error = None
        try:
            await asyncio.to_thread(ha.up)
        except Exception as exc:  # reported; the run goes on on one node
            restart_error = str(exc)[-300:]
        fault.survived = bool(ok) and back is not None and await self.services_ready(60)
        fault.detail = {"killed": primary.name, "promoted_s": round(promotion, 2),
                        "throughput_back_s": None if back is None else round(back, 2),
                        "restarted_as_standby": restart_error is None,
                        "restart_error": restart_error,
                        "recovery_s": None if back is None else round(back, 2)}
        return fault

    async def api_kill_under_batch(self) -> Fault:
        """A storm of batch submissions (besides the steady load), each request retried with
        its idempotency keys; the api killed with -9 at random moments while a request is in
        flight, --api-kills times, and started again on its port after each kill. Judged:
        every key of the storm has exactly one job (`key_check`), none was abandoned, and
        after each kill a batch was accepted by the new api."""
        a = self.args
        storm = BatchStorm(self.cluster.api_url, self.lab.api_key, size=a.storm_batch,
                           clients=a.storm_clients).start()
        self.storms.append(storm)
        fault = Fault("api_kill_under_batch", time.monotonic())
        back: list[float] = []
        respawned: list[float] = []
        listening: list[float] = []
        unready_answers: list[str] = []
        kills = 0

        async def accepted_since(t: float) -> bool:
            return any(x > t for x in storm.accepted_at)

        async def in_flight() -> bool:
            return storm.in_flight > 0

        try:
            await self.until(partial(accepted_since, 0.0), 30)
            for _ in range(a.api_kills):
                await asyncio.sleep(self.rng.uniform(0.3, 1.5))
                await self.until(in_flight, 10)
                await asyncio.sleep(self.rng.uniform(0.0, 0.05))  # somewhere in the request
                killed = time.monotonic()
                self.cluster.kill("api")
                kills += 1
                watch = asyncio.create_task(self.first_answer("api", killed))
                await asyncio.to_thread(respawn, self.cluster, "api", "api")
                up = time.monotonic()
                watch.cancel()
                answered, not_ready = await watch
                respawned.append(up - killed)
                if answered is not None:
                    listening.append(answered)
                if not_ready:
                    unready_answers.append(not_ready)
                if await self.until(partial(accepted_since, up), 60):
                    back.append(min(x for x in storm.accepted_at if x > up) - killed)
        finally:
            await storm.stop()
        check = await key_check(self.lab.db, storm.accepted, storm.abandoned)
        fault.survived = kills == a.api_kills and len(back) == kills \
            and not key_problems(check) and not storm.abandoned \
            and await self.services_ready()
        fault.detail = {"kills": kills, "respawn_s": spread(respawned),
                        "first_http_answer_s": spread(listening),
                        "readyz_before_ready": unready_answers[-3:],
                        "submission_back_s": spread(back),
                        "batch_requests": storm.requests,
                        "requests_failed_and_retried": storm.failed,
                        "batches_accepted_after_a_retry": storm.batches_retried,
                        "keys_answered_existing_job": storm.answered_existing,
                        "keys": check, "_back": back}
        return fault

    async def first_answer(self, alias: str, since: float) -> tuple[float | None, str | None]:
        """Until cancelled: seconds from `since` to the first HTTP answer of `alias`'s
        /readyz (any status), and the last answer that was not 200."""
        first: float | None = None
        last: str | None = None
        url = f"http://127.0.0.1:{self.cluster.ports[alias]}/readyz"
        async with httpx.AsyncClient(timeout=2) as client:
            with suppress(asyncio.CancelledError):
                while True:
                    try:
                        r = await client.get(url)
                        first = first if first is not None else time.monotonic() - since
                        if r.status_code != 200:
                            last = f"{r.status_code} {r.text[:200]}"
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.1)
        return first, last

    async def server_freeze(self, name: str) -> Fault:
        """SIGSTOP every process of the shared server for --pg-freeze / --kafka-freeze s,
        then SIGCONT (always: `processes.frozen`). Judged: every process was seen stopped
        while frozen, throughput came back, every service is ready again; for Kafka, the
        outbox (grown while the broker could not take messages) drained again."""
        seconds = self.args.pg_freeze if name == "postgres" else self.args.kafka_freeze
        assert self.load is not None
        fault = Fault(f"{name}_freeze", time.monotonic())
        failed_before = self.load.failed_requests
        outbox_before = self.sampler.outbox_peak(fault.started - 10, fault.started)
        mark = await self.seq_mark()
        states: dict[int, str | None] = {}
        with frozen(name, max_seconds=seconds + 30) as pids:
            frozen_at = time.monotonic()
            await asyncio.sleep(max(0.0, seconds - 0.3))
            # at the end of the freeze: stopped (T), or a backend that was exiting when its
            # postmaster stopped (a zombie, Z, until the postmaster reaps it; or gone)
            states = {pid: process_state(pid) for pid in pids}
            await asyncio.sleep(max(0.0, seconds - (time.monotonic() - frozen_at)))
        thawed = time.monotonic()
        seen = Counter(s or "gone" for s in states.values())
        all_stopped = bool(states) and states[pids[0]] == "T" \
            and set(seen) <= {"T", "Z", "gone"}
        back = await self.rate_back(thawed, 90)
        ready = await self.services_ready(60)
        drained_s: float | None = None
        if name == "kafka":
            level = max(2 * outbox_before, 50)

            async def drained() -> bool:
                return any(s[0] > thawed and s[2] <= level for s in self.sampler.samples)

            if await self.until(drained, 90):
                drained_s = min(s[0] for s in self.sampler.samples
                                if s[0] > thawed and s[2] <= level) - thawed
        await asyncio.sleep(2)
        counts = {r["type"]: r["n"] for r in await self.lab.db.fetch(
            "SELECT type, count(*) AS n FROM events WHERE seq > $1 AND type = ANY($2::text[]) "
            "GROUP BY 1", mark, ["LeaseExpired", "StaleWriteRejected", "RunRepublished"])}
        fault.survived = all_stopped and back is not None and ready \
            and (name != "kafka" or drained_s is not None)
        fault.detail = {
            "frozen_s": round(thawed - frozen_at, 2), "processes_frozen": len(states),
            "all_seen_stopped": all_stopped, "states_seen": dict(seen),
            "throughput_back_s": None if back is None else round(back, 2),
            "submit_requests_failed_and_retried": self.load.failed_requests - failed_before,
            "outbox_backlog_peak": self.sampler.outbox_peak(fault.started, time.monotonic()),
            "outbox_drained_s": None if drained_s is None else round(drained_s, 2),
            "leases_expired": counts.get("LeaseExpired", 0),
            "stale_writes_rejected": counts.get("StaleWriteRejected", 0),
            "runs_republished": counts.get("RunRepublished", 0)}
        return fault

    # -- the run -------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        a = self.args
        began = time.monotonic()
        log(f"starting services (logs: {self.cluster.log_dir})")
        await self.lab.start(tenant="chaos")
        for i in range(a.instances, a.schedulers):
            await asyncio.to_thread(self.cluster.spawn, f"scheduler-{i + 1}", "scheduler")
        for _ in range(a.workers):
            await self.add_worker()
        self.recurring_start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        schedule = {"every": "1s", "start_at": self.recurring_start.isoformat(),
                    "misfire": "catch_up", "catch_up_max": 1000}
        self.recurring = await self.lab.submit(
            [fx_job(f"tick-{i}", schedule=schedule) for i in range(RECURRING)])
        self.sampler.start()
        # no `sleep` in the payload: each worker's own (--run-seconds) applies, so a fault
        # can give its victim runs of another length
        load = self.load = Load(self.cluster.api_url, self.lab.api_key, rate=a.rate,
                                batch=a.batch).start()
        try:
            log(f"load: {a.rate:g} jobs/s; baseline for {a.baseline:g}s")
            await asyncio.sleep(2)  # warm-up
            t0 = time.monotonic()
            await asyncio.sleep(a.baseline)
            self.baseline = self.sampler.rate(t0, time.monotonic())
            log(f"baseline {self.baseline:.0f} runs/s")
            faults_began = time.monotonic()
            for title, inject in self.plan():
                log(f"fault: {title}")
                self.not_ready = None
                window = (await self.lab.db.now(), len(load.accepted),
                          sum(len(st.accepted) for st in self.storms))
                fault = await inject()
                fault.detail["_window"] = (*window, await self.lab.db.now(), len(load.accepted),
                                           [j for st in self.storms for j in st.job_ids])
                if self.not_ready is not None:
                    fault.detail["not_ready"] = self.not_ready
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
        storm_ids = [j for storm in self.storms for j in storm.job_ids]
        expected = load.job_ids + self.recurring + storm_ids
        missing, open_runs = await wait_settled(self.lab.db, expected, a.drain)
        await self.sampler.scrape_all()
        await self.sampler.stop()
        log(f"drained in {time.monotonic() - faults_ended:.1f}s; checking every run")
        verdict = await verify(self.lab.db, expected)
        slots, unaccounted, dup_slots, skipped = await coverage(
            self.lab.db, self.recurring, self.recurring_start)
        epochs_checked, backwards = await shard_epoch_order(self.lab.db)
        keyed = dict(load.accepted)
        abandoned = list(load.abandoned)
        for storm in self.storms:
            keyed.update(storm.accepted)
            abandoned += storm.abandoned
        keys = await key_check(self.lab.db, keyed, abandoned)
        self.per_fault = await self.fault_rows(load)
        return self.report(load, verdict, during, began, faults_began, faults_ended,
                           (missing, open_runs), (slots, unaccounted, dup_slots, skipped),
                           (epochs_checked, backwards), keys)

    async def fault_rows(self, load: Load) -> list[dict[str, Any]]:
        """One row per fault: what went wrong with the work that arrived during it. Lost:
        jobs accepted in its window (the load's, and its storm's) without a succeeded run;
        duplicated: their effects applied twice and occurrences made twice; missed: every-1s
        slots of the recurring jobs inside the window without a run."""
        ids = load.job_ids
        recurring = [uuid.UUID(j) for j in self.recurring]
        rows = []
        for f in self.faults:
            t0, n0, s0, t1, n1, storm_ids = f.detail["_window"]
            window_ids = ids[n0:n1] + storm_ids[s0:]
            verdict = await verify(self.lab.db, window_ids)
            missed = int(await self.lab.db.fetchval(
                "SELECT count(*) FROM unnest($1::uuid[]) AS j(id) CROSS JOIN generate_series("
                "  date_trunc('second', $2::timestamptz) + interval '1 second', "
                "  date_trunc('second', $3::timestamptz), interval '1 second') AS s(slot) "
                "WHERE s.slot >= $4 AND NOT EXISTS (SELECT 1 FROM runs r "
                "  WHERE r.job_id = j.id AND r.scheduled_for = s.slot)",
                recurring, t0, t1, self.recurring_start, within=60))
            twice = int(await self.lab.db.fetchval(
                "SELECT count(*) FROM (SELECT 1 FROM runs WHERE job_id = ANY($1::uuid[]) "
                "AND scheduled_for BETWEEN $2 AND $3 GROUP BY job_id, scheduled_for "
                "HAVING count(*) > 1) d", recurring, t0, t1, within=60))
            rows.append({
                "fault": f.kind, "survived": f.survived, "jobs": len(window_ids),
                "lost": len(set(verdict.jobs_without_run) | set(verdict.jobs_not_succeeded)),
                "duplicated": len(verdict.duplicate_effect_keys)
                + len(verdict.duplicate_effect_runs) + verdict.duplicate_occurrences + twice,
                "missed": missed, "recovery_s": recovery_of(f)})
        return rows

    def plan(self) -> list[tuple[str, Callable[[], Awaitable[Fault]]]]:
        """The faults to inject, in order, after --only / --skip (and --no-kafka)."""
        a = self.args
        steps: list[tuple[str, str, Callable[[], Awaitable[Fault]]]] = [
            ("worker_kill", "worker kill -9", self.worker_kill),
            ("worker_pause", "worker SIGSTOP past its lease", self.worker_pause),
            ("worker_sigterm", "worker SIGTERM holding runs past its grace",
             self.worker_sigterm),
            ("worker_partition", "worker cut off the gateway past its lease",
             self.worker_partition),
            *[("scheduler_kill", f"scheduler kill -9 #{i + 1}", self.scheduler_kill)
              for i in range(a.scheduler_kills)],
            ("scheduler_pause", "scheduler SIGSTOP past its shard lease", self.scheduler_pause),
            ("dispatcher_kill", "dispatcher kill -9", lambda: self.service_kill("dispatcher")),
            ("gateway_kill", "worker-gateway kill -9",
             lambda: self.service_kill("worker_gateway")),
            ("api_kill_under_batch", f"api kill -9 x{a.api_kills} under batch submission",
             self.api_kill_under_batch),
            ("instance_kill", "kill -9 the first instance of every service",
             self.instance_kill),
            ("postgres_restart", "PostgreSQL restart", lambda: self.server_restart("postgres")),
            ("postgres_freeze", f"PostgreSQL SIGSTOP for {a.pg_freeze:g}s",
             lambda: self.server_freeze("postgres")),
            ("kafka_freeze", f"Kafka SIGSTOP for {a.kafka_freeze:g}s",
             lambda: self.server_freeze("kafka")),
            ("kafka_restart", "Kafka restart", lambda: self.server_restart("kafka")),
            ("kafka_leader_kill", "kill -9 the leader of the busiest runs partition",
             lambda: self.kafka_leader("kafka_leader_kill", 0)),
            ("kafka_broker_down", f"a broker down for {a.broker_down:g}s",
             lambda: self.kafka_leader("kafka_broker_down", a.broker_down)),
            ("postgres_primary_kill", "kill -9 the PostgreSQL primary",
             self.postgres_primary_kill),
        ]
        return [(title, inject) for name, title, inject in steps if name in a.selected]

    def skipped(self) -> dict[str, str]:
        a = self.args

        def why(name: str) -> str:
            if name in SINGLE_SERVER and a.ha:
                return "--ha: the single servers' fault"
            if name in HA_ONLY and not a.ha:
                return "HA profile only (--ha)"
            if name == "instance_kill" and a.instances < 2:
                return "--instances 1"
            if name == "kafka_restart" and a.no_kafka and a.only is None \
                    and name not in a.skip:
                return "--no-kafka / --quick"
            return "not selected (--only / --skip)"

        return {name: why(name) for name in FAULTS if name not in a.selected}

    def report(self, load: Load, verdict: Any, during: float, began: float,
               faults_began: float, faults_ended: float, settled: tuple[int, int],
               slots: tuple[int, int, int, int], epochs: tuple[int, dict[int, Any]],
               keys: dict[str, Any]) -> dict[str, Any]:
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

        def first(kind: str) -> dict[str, Any] | None:
            found = details(kind)
            return found[0] if found else None

        api = details("api_kill_under_batch")
        return {
            "scenario": "chaos",
            "quick": self.args.quick,
            "topology": {"ha": self.args.ha, "instances_of_each_service": self.args.instances,
                         "kafka": KAFKA, "schedulers": max(self.args.schedulers,
                                                           self.args.instances)},
            "per_fault": self.per_fault,
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
            "faults_skipped": self.skipped(),
            "scheduler_failover_s": spread(failovers),
            "worker_lease_recovery_s": spread(collect("worker_kill", "_recovery")
                                              + collect("worker_pause", "_recovery")),
            "graceful_release_ms": spread(collect("worker_sigterm", "_queued"), 0),
            "worker_sigterm": [{k: d[k] for k in ("held_at_sigterm", "finished_within_grace",
                                                  "released", "neither", "verdict")}
                               for d in details("worker_sigterm")],
            "worker_partition_takeover_s": spread(collect("worker_partition", "_takeover")),
            "api_kills": {
                "kills": sum(d["kills"] for d in api),
                "submission_back_s": spread(collect("api_kill_under_batch", "_back")),
                "requests_failed_and_retried": sum(d["requests_failed_and_retried"]
                                                   for d in api),
                "keys_answered_existing_job": sum(d["keys_answered_existing_job"] for d in api),
                "keys": sum(d["keys"]["keys_accepted"] for d in api),
                "keys_with_one_job": sum(d["keys"]["one_job_each"] for d in api)},
            "idempotency_keys": keys,
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
                "stale_epoch_dropped": int(self.sampler.total(
                    "ostinato_stale_messages_dropped_total")),
                "applied_twice": len(verdict.duplicate_effect_keys)},
            "outages": {name: first(f"{name}_restart") for name in ("postgres", "kafka")},
            "freezes": {name: first(f"{name}_freeze") for name in ("postgres", "kafka")},
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


def recovery_of(f: Fault) -> float | None:
    """The fault's own recovery measure in seconds (the slowest, where it has several)."""
    d = f.detail

    def worst(values: Any) -> float | None:
        found = [float(v) for v in values or [] if v is not None]
        return round(max(found), 2) if found else None

    if "recovery_s" in d and not isinstance(d["recovery_s"], dict):
        return d["recovery_s"]
    by_kind = {
        "worker_kill": lambda: worst(d.get("_recovery")),
        "worker_pause": lambda: worst(d.get("_recovery")),
        "worker_sigterm": lambda: worst([x / 1000 for x in d.get("_queued", [])]),
        "worker_partition": lambda: worst(d.get("_takeover")),
        "scheduler_kill": lambda: d.get("failover_s"),
        "scheduler_pause": lambda: d.get("takeover_s"),
        "api_kill_under_batch": lambda: worst(d.get("_back")),
    }
    return by_kind.get(f.kind, lambda: d.get("throughput_back_s"))()


def fault_table(rows: list[dict[str, Any]]) -> str:
    """The closing table: a row per fault injected."""
    head = ("fault", "lost", "duplicated", "missed", "recovery s", "survived")
    body = [(r["fault"], str(r["lost"]), str(r["duplicated"]), str(r["missed"]),
             "n/a" if r["recovery_s"] is None else f"{r['recovery_s']:g}",
             "yes" if r["survived"] else "NO") for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([line.format(*head), line.format(*("-" * w for w in widths)),
                      *(line.format(*b) for b in body)])


def table(r: dict[str, Any]) -> str:
    def mmm(s: dict[str, Any], unit: str = "") -> str:
        if not s.get("n"):
            return "n/a"
        return f"{s['min']}{unit} / {s['median']}{unit} / {s['max']}{unit} (n={s['n']})"

    load, dup, msg, rec = r["load"], r["duplicates"], r["messages"], r["reconciler"]
    faults = r["faults"]

    def of(kind: str) -> list[dict[str, Any]]:
        return list(faults.get(kind, {}).get("details", []))

    rows: list[tuple[str, str]] = [
        ("load held: runs/s before faults", f"{load['runs_per_s_before_faults']} "
         f"(submitting {load['rate_jobs_per_s']:g} jobs/s)"),
        ("load held: runs/s during faults", f"{load['runs_per_s_during_faults']} "
         f"over {load['fault_phase_s']} s"),
    ]
    for kind, f in faults.items():
        rows.append((f"fault {kind}: injected / survived", f"{f['injected']} / {f['survived']}"))
    for kind, why in r["faults_skipped"].items():
        rows.append((f"fault {kind}: injected / survived", f"skipped ({why})"))
    kills, pause = of("worker_kill"), of("scheduler_pause")
    rows += [
        ("scheduler failover s (min/median/max)", mmm(r["scheduler_failover_s"])),
        ("scheduler pause: shards taken over s",
         ", ".join(str(p["takeover_s"]) for p in pause) or "n/a"),
        ("worker lease recovery s (min/median/max)", mmm(r["worker_lease_recovery_s"])),
        ("  leases granted to a dead/paused worker",
         str(sum(k.get("leases_to_dead_worker", 0) for k in kills)
             + sum(p.get("leases_to_paused_worker", 0) for p in of("worker_pause")))),
    ]
    for s in of("worker_sigterm"):
        rows += [
            ("worker SIGTERM: held at the signal", f"{s['held_at_sigterm']} (grace "
             f"{s['grace_s']:g} s, runs of {s['run_takes_s'][0]:g} to "
             f"{s['run_takes_s'][1]:g} s)"),
            ("  finished within grace / released / neither",
             f"{s['finished_within_grace']} / {s['released']} / {s['neither']}"),
            ("  verdict", s["verdict"]),
            ("  released: queued again ms", mmm(s["queued_again_ms"], " ms")),
            ("  released: restarted elsewhere ms", mmm(s["restarted_elsewhere_ms"], " ms")),
            ("  leased again to the stopped worker", str(s["leases_to_stopped_worker"])),
        ]
    for p in of("worker_partition"):
        e = p["effects"]
        rows += [
            ("worker partition: cut s / attempts held", f"{p['cut_s']} / {p['held']} "
             f"({p['given_during_cut']} given during the cut)"),
            ("  taken over / finished before cut / neither",
             f"{p['taken_over']} / {p['finished_before_cut']} / {p['neither']}"),
            ("  lease expired after s (min/median/max)", mmm(p["lease_expired_after_s"])),
            ("  started elsewhere after s (min/median/max)", mmm(p["takeover_s"])),
            ("  late writes rejected (StaleWriteRejected)",
             ", ".join(f"{k} {v}" for k, v in p["late_writes_rejected"].items()) or "none"),
            ("  late writes accepted (must be 0)", str(p["late_writes_accepted"])),
            ("  effects exactly once", f"{e['exactly_once']} of {e['runs']} runs "
             f"({e['applied_by_partitioned_worker']} applied by the cut-off worker; its log: "
             f"{p['worker_log']['outcome_withheld']} outcomes withheld, "
             f"{p['worker_log']['lease_lost']} leases lost)"),
        ]
    api = r["api_kills"]
    if api["kills"]:
        rows += [
            ("api kill -9 under batch: kills", str(api["kills"])),
            ("  submission back s (min/median/max)", mmm(api["submission_back_s"])),
            ("  batch requests failed and retried", f"{api['requests_failed_and_retried']} "
             f"({api['keys_answered_existing_job']} keys answered with the job an unanswered "
             "try had made)"),
            ("  storm keys with exactly one job", f"{api['keys_with_one_job']} of "
             f"{api['keys']}"),
        ]
    k = r["idempotency_keys"]
    rows += [
        ("all idempotency keys: one job each", f"{k['one_job_each']} of {k['keys_accepted']} "
         f"(more than one: {k['more_than_one_job']}, none: {k['no_job']}, another job than "
         f"answered: {k['answered_another_job']})"),
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
        ("messages applied twice",
         f"{msg['applied_twice']} (stale-epoch dropped: "
         f"{msg['stale_epoch_dropped']})"),
    ]
    for name in ("postgres", "kafka"):
        o = r["outages"].get(name)
        rows.append((f"{name} restart: down s / throughput back s / outbox peak",
                     "skipped" if o is None else
                     f"{o['outage_s']} / {o['throughput_back_s']} / {o['outbox_backlog_peak']}"))
    for name in ("postgres", "kafka"):
        z = r["freezes"].get(name)
        rows.append((f"{name} freeze: frozen s / throughput back s / outbox peak",
                     "skipped" if z is None else
                     f"{z['frozen_s']} ({z['processes_frozen']} processes, all stopped: "
                     f"{z['all_seen_stopped']}) / {z['throughput_back_s']} / "
                     f"{z['outbox_backlog_peak']}"
                     + (f" (drained after {z['outbox_drained_s']} s)" if name == "kafka"
                        else "")))
        if z is not None:
            rows.append(("  submit requests failed and retried / leases expired",
                         f"{z['submit_requests_failed_and_retried']} / {z['leases_expired']}"))
    for kind in ("dispatcher_kill", "gateway_kill"):
        rows.append((f"{kind}: throughput back s",
                     ", ".join(str(x["throughput_back_s"]) for x in of(kind)) or "n/a"))
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
    found += key_problems(r["idempotency_keys"])
    for kind, f in r["faults"].items():
        if f["survived"] < f["injected"]:
            found.append(f"{kind} not survived {f['injected'] - f['survived']} time(s)")
    for s in r["faults"].get("worker_sigterm", {}).get("details", []):
        if s["neither"]:
            found.append(f"worker_sigterm: {s['verdict']} ({s['neither_examples']})")
    for p in r["faults"].get("worker_partition", {}).get("details", []):
        if p["late_writes_accepted"]:
            found.append(f"worker_partition: {p['late_writes_accepted']} writes under a stale "
                         "token accepted")
    return found


async def until_replayed(url: str, within: float = 60) -> None:
    """Until a connection to the new database `url` opens. On the HA profile the standby
    replays CREATE DATABASE a moment after the primary committed it, and a multi-host URL whose
    first host is the standby then fails with "database does not exist" instead of moving on to
    the primary (target_session_attrs is judged only once connected)."""
    deadline = time.monotonic() + within
    while True:
        try:
            conn = await asyncpg.connect(url)
        except asyncpg.InvalidCatalogNameError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
        else:
            await conn.close()
            return


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    name = f"ostinato_chaos_{uuid.uuid4().hex[:8]}"
    admin = Db(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    # the path replaced, the query kept (the HA URL's target_session_attrs=read-write)
    url = urlunsplit(urlsplit(BASE_URL)._replace(path=f"/{name}"))
    log_dir = ROOT / ".cache" / "chaos" / time.strftime("%Y%m%d-%H%M%S")
    prefix = f"c{uuid.uuid4().hex[:8]}."
    ha_env = {"OSTINATO_KAFKA_TENANT_BOOTSTRAP": ""} if args.ha else {}  # PLAINTEXT only
    cluster = Cluster(database_url=url, kafka_bootstrap=KAFKA, topic_prefix=prefix,
                      log_dir=log_dir, instances=args.instances,
                      extra_env={**FAULT_ENV, "OSTINATO_LOG_LEVEL": "warning",
                                 "OSTINATO_DB_POOL_SIZE": "20", **ha_env})
    lab = Lab(cluster=cluster, db=Db(url))
    # SIGTERM (e.g. from make) unwinds like Ctrl-C: the finally blocks stop everything.
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    chaos = Chaos(args, lab)
    try:
        await until_replayed(url)
        await migrate(url)
        result = await chaos.run()
        return {**result, "machine": await machine(BASE_URL)}
    finally:
        try:
            await lab.close()  # workers first: one behind a partition proxy still uses it
        finally:
            await chaos.close()
            with suppress(Exception):  # the broker gone: the topics stay, nothing else is wrong
                await delete_topics_with_prefixes(KAFKA, [prefix])
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', within=60)
            await admin.close()


def names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="shorter phases: 6-8 minutes")
    parser.add_argument("--only", type=names, default=None,
                        help=f"comma-separated faults to inject, of: {', '.join(FAULTS)}")
    parser.add_argument("--skip", type=names, default=[], help="comma-separated faults not to "
                        "inject")
    parser.add_argument("--seed", type=int, default=None, help="random moments of the api kills")
    parser.add_argument("--rate", type=float, default=None,
                        help="jobs submitted per second (200; --quick: 100)")
    parser.add_argument("--batch", type=int, default=20, help="jobs per submission request")
    parser.add_argument("--run-seconds", type=float, default=0.2, help="each run's work")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64, help="per worker process")
    parser.add_argument("--schedulers", type=int, default=3)
    parser.add_argument("--instances", type=int, default=2,
                        help="instances of each service (the api and the gateway behind a "
                             "balancer)")
    parser.add_argument("--ha", action=argparse.BooleanOptionalAction,
                        default=os.environ.get("OSTINATO_HA") == "1",
                        help="on the HA profile's servers (default: OSTINATO_HA=1, as "
                             "`make chaos HA=1` sets); its faults instead of the single "
                             "servers'")
    parser.add_argument("--broker-down", type=float, default=None,
                        help="seconds a Kafka broker stays down with --ha (60; --quick: 20)")
    parser.add_argument("--scheduler-kills", type=int, default=3)
    parser.add_argument("--baseline", type=float, default=None, help="seconds of load first")
    parser.add_argument("--settle", type=float, default=None, help="seconds between faults")
    parser.add_argument("--drain", type=float, default=120.0, help="max seconds to drain")
    parser.add_argument("--pause", type=float, default=None,
                        help="seconds a worker stays frozen (lease: 3 s)")
    parser.add_argument("--scheduler-pause", type=float, default=None,
                        help="seconds a scheduler stays frozen (at least until taken over)")
    parser.add_argument("--sigterm-grace", type=float, default=1.0,
                        help="the SIGTERM victim's shutdown grace; its runs take 0.5 to 3.5 "
                             "times it")
    parser.add_argument("--api-kills", type=int, default=None,
                        help="kill -9 of the api under batch submission (10; --quick: 3)")
    parser.add_argument("--storm-clients", type=int, default=None,
                        help="concurrent batch senders during the api kills (4; --quick: 2)")
    parser.add_argument("--storm-batch", type=int, default=100, help="jobs per storm request")
    parser.add_argument("--pg-freeze", type=float, default=None,
                        help="seconds PostgreSQL stays frozen (20; --quick: 5)")
    parser.add_argument("--kafka-freeze", type=float, default=None,
                        help="seconds the Kafka broker stays frozen (30; --quick: 8)")
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
    if args.ha and (len(KAFKA.split(",")) < 3 or "target_session_attrs" not in BASE_URL):
        parser.error("--ha needs the HA profile's servers in the environment: source "
                     "infra/env.sh with OSTINATO_HA=1 set first (`make chaos HA=1` does)")
    if args.rate is None:  # the HA profile's servers take a 2-core machine's other half
        args.rate = (40.0 if args.ha else 100.0) if args.quick else 200.0
    if args.baseline is None:
        args.baseline = 5.0 if args.quick else 20.0
    if args.settle is None:
        args.settle = 0.5 if args.quick else 5.0
    if args.api_kills is None:
        args.api_kills = 3 if args.quick else 10
    if args.storm_clients is None:
        args.storm_clients = 2 if args.quick else 4
    if args.pg_freeze is None:
        args.pg_freeze = 5.0 if args.quick else 20.0
    if args.kafka_freeze is None:
        args.kafka_freeze = 8.0 if args.quick else 30.0
    if args.broker_down is None:
        args.broker_down = 20.0 if args.quick else 60.0
    unknown = sorted((set(args.only or []) | set(args.skip)) - set(FAULTS))
    if unknown:
        parser.error(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    chosen = args.only if args.only is not None else [
        f for f in FAULTS if not (f == "kafka_restart" and args.no_kafka)]
    args.selected = [f for f in FAULTS if f in chosen and f not in args.skip
                     and not (f in SINGLE_SERVER and args.ha)
                     and not (f in HA_ONLY and not args.ha)
                     and not (f == "instance_kill" and args.instances < 2)]
    configure_logging("chaos", "warning")
    result = eventloop.run(amain(args))
    print(table(result))
    print()
    print(fault_table(result["per_fault"]))
    write_result("chaos", result)
    if failures(result):
        print(f"chaos: FAILED: {'; '.join(failures(result))}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
