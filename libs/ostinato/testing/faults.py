"""Fault injection with real processes, shared by tests/faults and bench/chaos.py: worker
processes (`tests/faults/worker_proc.py`) that record fenced, at-most-once effects in the test
database, a steady load of jobs over the public API, signals to services and workers, restarts
of the shared PostgreSQL and Kafka servers, and the end-of-run checks:

- every accepted job ran: each has a run and all its runs `succeeded`;
- no effect applied twice: one `effects` row per idempotency key and one per run;
- every run is in a final state;
- each run's story is consistent: versions 1..n in seq order, it starts with `RunScheduled`,
  every event is a move the state machine allows from the state before it (so a run is never
  claimed while another attempt holds it), every `RunStarted` carries a higher fencing token
  (its epoch) than the one before, and nothing but `StaleWriteRejected` follows `RunSucceeded`.

Wall-clock time is read only by the callers (tests, bench); here everything is monotonic or
the database's clock.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from prometheus_client.parser import text_string_to_metric_families

from ostinato.db.pool import create_pool
from ostinato.eventlog.readmodels import Q
from ostinato.schedules import expected_slots, from_document
from ostinato.testing.cluster import ROOT, SERVICES, Cluster

__all__ = [
    "DB_ERRORS",
    "FAULT_ENV",
    "RETRY",
    "Db",
    "Lab",
    "Load",
    "Verdict",
    "WorkerProc",
    "coverage",
    "create_tenant",
    "freeze",
    "fx_job",
    "metric_total",
    "respawn",
    "scheduler_owner",
    "scrape",
    "server",
    "shard_epoch_order",
    "stream_problem",
    "submit",
    "verify",
    "wait_settled",
]

WORKER_SCRIPT = ROOT / "tests" / "faults" / "worker_proc.py"
# Short leases so that faults resolve within seconds.
FAULT_ENV = {
    "OSTINATO_LEASE_TTL_SECONDS": "3",
    "OSTINATO_SHARD_LEASE_TTL_SECONDS": "3",
    "OSTINATO_RECONCILE_INTERVAL_SECONDS": "0.5",
    "OSTINATO_SCHEDULER_POLL_SECONDS": "0.05",
    "OSTINATO_MISSED_GRACE_SECONDS": "15",
    "OSTINATO_STUCK_AFTER_SECONDS": "10",
    "OSTINATO_REPUBLISH_AFTER_SECONDS": "10",
}
# The jobs' own policy: a fault may cost a run several attempts (lease expiries, the effects
# database restarting); it must never cost the run itself.
RETRY = {"max_attempts": 30, "initial_delay": "1s", "multiplier": 1.0, "max_delay": "1s"}
# What a restarting server looks like to a client (not: errors in the SQL itself).
DB_ERRORS = (OSError, TimeoutError, asyncpg.exceptions.PostgresConnectionError,
             asyncpg.exceptions.OperatorInterventionError, asyncpg.InterfaceError)
FINAL = ("succeeded", "dead_lettered", "cancelled")


# -- the test database -------------------------------------------------------------------------


class Db:
    """A small pool on one database whose calls are retried while the server restarts."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._pool: asyncpg.Pool | None = None

    async def _call(self, method: str, sql: str, *args: Any, within: float) -> Any:
        deadline = time.monotonic() + within
        while True:
            try:
                if self._pool is None:
                    self._pool = await asyncio.wait_for(
                        create_pool(self.url, min_size=0, max_size=4), 5)
                async with self._pool.acquire(timeout=5) as conn:
                    return await getattr(conn, method)(sql, *args)
            except DB_ERRORS:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def fetch(self, sql: str, *args: Any, within: float = 30) -> list[asyncpg.Record]:
        return await self._call("fetch", sql, *args, within=within)

    async def fetchval(self, sql: str, *args: Any, within: float = 30) -> Any:
        return await self._call("fetchval", sql, *args, within=within)

    async def execute(self, sql: str, *args: Any, within: float = 30) -> str:
        return await self._call("execute", sql, *args, within=within)

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), 5)
            except (*DB_ERRORS, asyncio.CancelledError):
                pool.terminate()


# -- worker processes --------------------------------------------------------------------------


@dataclass
class WorkerProc:
    """One `worker_proc.py` process; its RunStarted events carry `worker:<name>`."""

    name: str
    gateway_url: str
    api_key: str
    effects_url: str
    log_dir: Path
    concurrency: int = 16
    grace_seconds: float = 0.0
    sleep_seconds: float = 0.0
    claim_wait_seconds: float = 10.0
    proc: subprocess.Popen[bytes] | None = None
    _log_offset: int = 0

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"worker-{self.name}.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> WorkerProc:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        env = {**os.environ, "OSTINATO_GATEWAY_URL": self.gateway_url,
               "OSTINATO_API_KEY": self.api_key, "OSTINATO_EFFECTS_DATABASE_URL": self.effects_url,
               "OSTINATO_WORKER_ID": self.name,
               "OSTINATO_WORKER_CONCURRENCY": str(self.concurrency),
               "OSTINATO_WORKER_GRACE_SECONDS": str(self.grace_seconds),
               "OSTINATO_WORKER_SLEEP_SECONDS": str(self.sleep_seconds),
               "OSTINATO_WORKER_CLAIM_WAIT_SECONDS": str(self.claim_wait_seconds)}
        self.proc = subprocess.Popen([sys.executable, str(WORKER_SCRIPT)], cwd=ROOT, env=env,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def wait_ready(self, seconds: float = 30) -> WorkerProc:
        deadline = time.monotonic() + seconds
        marker = f"worker_proc ready {self.name}".encode()
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"worker {self.name} exited: {self.tail()}")
            with self.log_path.open("rb") as f:
                f.seek(self._log_offset)
                if marker in f.read():
                    return self
            time.sleep(0.05)
        raise TimeoutError(f"worker {self.name} not ready: {self.tail()}")

    def send(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """kill -9, reaped."""
        if self.alive:
            self.send(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 20) -> int | None:
        """Graceful stop (SIGCONT first: a frozen process cannot handle SIGTERM); -9 after
        `timeout`. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.send(signal.SIGCONT)
            self.send(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


# -- the public API ----------------------------------------------------------------------------


async def create_tenant(api_url: str, admin_key: str, name: str, within: float = 30) -> str:
    """A tenant's API key (retried while the api is not reachable)."""
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(base_url=api_url, timeout=10) as client:
        while True:
            try:
                r = await client.post("/v1/tenants", json={"name": name},
                                      headers={"Authorization": f"Bearer {admin_key}"})
                if r.status_code == 201:
                    return str(r.json()["api_key"])
                if r.status_code < 500:
                    raise RuntimeError(f"tenant refused: {r.status_code} {r.text[:300]}")
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("could not create a tenant")
            await asyncio.sleep(0.3)


def fx_job(key: str, *, schedule: Mapping[str, Any] | None = None, **payload: Any
           ) -> dict[str, Any]:
    """An `fx` job (see worker_proc.py for the payload) with a job idempotency key."""
    job: dict[str, Any] = {"name": key, "task": "fx", "idempotency_key": key,
                           "payload": payload, "retry": RETRY}
    if schedule is not None:
        job["schedule"] = dict(schedule)
    return job


async def submit(client: httpx.AsyncClient, jobs: Sequence[Mapping[str, Any]], *,
                 within: float = 60, on_error: Any = None) -> list[str]:
    """POST /v1/jobs/batch, retried with the same idempotency keys until accepted (an outage
    answers 5xx or not at all); returns the job ids. A 4xx is a bug: raised at once."""
    deadline = time.monotonic() + within
    while True:
        try:
            r = await client.post("/v1/jobs/batch", json={"jobs": list(jobs)})
            if r.status_code == 200:
                return [str(item["id"]) for item in r.json()["items"]]
            if r.status_code < 500:
                raise RuntimeError(f"batch refused: {r.status_code} {r.text[:500]}")
            error: Any = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            error = exc
        if on_error is not None:
            on_error(error)
        if time.monotonic() > deadline:
            raise TimeoutError(f"batch not accepted within {within}s: {error!r}")
        await asyncio.sleep(0.3)


class Load:
    """`rate` jobs/s as batches of `batch` through POST /v1/jobs/batch. Each batch is retried
    with the same idempotency keys until the api accepts it, so a job is either accepted (and
    must run) or reported as abandoned; batches are not held back by a slow predecessor."""

    def __init__(self, api_url: str, api_key: str, *, rate: float = 200.0, batch: int = 20,
                 payload: Mapping[str, Any] | None = None, give_up_after: float = 120.0,
                 max_in_flight: int = 32) -> None:
        self.api_url = api_url
        self.api_key = api_key
        self.rate = rate
        self.batch = batch
        self.payload = dict(payload or {})
        self.give_up_after = give_up_after
        self.prefix = f"load-{uuid.uuid4().hex[:6]}-"
        self.accepted: dict[str, str] = {}  # job idempotency key -> job id
        self.timeline: list[tuple[float, int]] = []  # (monotonic, accepted so far)
        self.failed_requests = 0
        self.abandoned: list[str] = []
        self.sent = 0
        self._sem = asyncio.Semaphore(max_in_flight)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Load:
        self._task = asyncio.create_task(self._run(), name="load")
        return self

    async def stop(self) -> None:
        """Stop submitting; returns once every batch already made is accepted or abandoned."""
        self._stop.set()
        if self._task is not None:
            await self._task

    @property
    def job_ids(self) -> list[str]:
        return list(self.accepted.values())

    def _failed(self, _error: Any) -> None:
        self.failed_requests += 1

    async def _send(self, client: httpx.AsyncClient, keys: list[str]) -> None:
        async with self._sem:
            jobs = [fx_job(k, **self.payload) for k in keys]
            try:
                ids = await submit(client, jobs, within=self.give_up_after,
                                   on_error=self._failed)
            except (TimeoutError, RuntimeError):
                self.abandoned += keys
                return
        self.accepted.update(zip(keys, ids, strict=True))
        self.timeline.append((time.monotonic(), len(self.accepted)))

    async def _run(self) -> None:
        interval = self.batch / self.rate
        limits = httpx.Limits(max_connections=64)
        headers = {"Authorization": f"Bearer {self.api_key}"}
        pending: set[asyncio.Task[None]] = set()
        async with httpx.AsyncClient(base_url=self.api_url, timeout=10, limits=limits,
                                     headers=headers) as client:
            next_at = time.monotonic()
            while not self._stop.is_set():
                keys = [f"{self.prefix}{self.sent + i:07d}" for i in range(self.batch)]
                self.sent += self.batch
                t = asyncio.create_task(self._send(client, keys))
                pending.add(t)
                t.add_done_callback(pending.discard)
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    try:
                        await asyncio.wait_for(self._stop.wait(), delay)
                    except TimeoutError:
                        pass
            if pending:
                await asyncio.gather(*pending)


# -- services and servers ----------------------------------------------------------------------


def respawn(cluster: Cluster, alias: str, service: str) -> None:
    """Start `service` again under `alias` on the port it had, so clients configured with its
    URL (workers and their gateway) find it again; `Cluster.spawn` would pick a new port."""
    port_var = {"api": "API", "worker_gateway": "GATEWAY"}.get(service, service.upper())
    env = {**cluster.env(), f"OSTINATO_{port_var}_PORT": str(cluster.ports[alias])}
    with (cluster.log_dir / f"{alias}.log").open("ab") as log:
        cluster.procs[alias] = subprocess.Popen(
            [sys.executable, "-m", f"services.{service}"], cwd=ROOT, env=env,
            stdout=log, stderr=subprocess.STDOUT)
    cluster.wait_ready(alias)


def server(name: str, action: str) -> float:
    """`infra/<postgres|kafka>/<down|up>.sh` (they stop/start the shared servers); returns the
    seconds it took. Raises if the script fails."""
    started = time.monotonic()
    script = ROOT / "infra" / name / f"{action}.sh"
    done = subprocess.run([str(script)], cwd=ROOT, capture_output=True, timeout=240, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}): "
                           f"{done.stdout.decode(errors='replace')[-1500:]}"
                           f"{done.stderr.decode(errors='replace')[-1500:]}")
    return time.monotonic() - started


def scheduler_owner(cluster: Cluster, alias: str) -> str:
    """The shard-lease owner id of a scheduler process (`<hostname>-<pid>`)."""
    return f"{socket.gethostname()}-{cluster.procs[alias].pid}"


def _tcp_ports(pid: int) -> set[int]:
    """Local TCP ports of a process's sockets (from /proc; Linux)."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


async def freeze(db: Db, pid: int, *, in_transaction: bool = False,
                 last_query_like: str | None = None, attempts: int = 1000) -> int:
    """SIGSTOP a process at a moment it has no open PostgreSQL transaction, or, with
    `in_transaction`, one where it has (and, with `last_query_like`, whose last statement
    matches that LIKE pattern); it is woken and frozen again until so. Returns the attempts it
    took. Between transactions the freeze models a pause between writes; inside one, the
    process holds its row locks until idle_in_transaction_session_timeout."""
    for attempt in range(1, attempts + 1):
        os.kill(pid, signal.SIGSTOP)
        ports = await asyncio.to_thread(_tcp_ports, pid)
        open_txns = await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY($1::int[]) "
            "AND xact_start IS NOT NULL AND query LIKE $2", sorted(ports),
            last_query_like or "%")
        if (open_txns > 0) == in_transaction:
            return attempt
        os.kill(pid, signal.SIGCONT)
        await asyncio.sleep(0.002 if in_transaction else 0.02)
    where = "inside" if in_transaction else "outside"
    raise RuntimeError(f"process {pid} was never {where} a transaction in {attempts} attempts")


# -- metrics -----------------------------------------------------------------------------------


async def scrape(port: int) -> list[tuple[str, dict[str, str], float]]:
    """The samples of a service's /metrics: (name, labels, value)."""
    async with httpx.AsyncClient(timeout=3) as client:
        r = await client.get(f"http://127.0.0.1:{port}/metrics")
    r.raise_for_status()
    return [(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(r.text) for s in family.samples]


def metric_total(samples: Iterable[tuple[str, dict[str, str], float]], name: str,
                 **labels: str) -> float:
    """Sum of a metric's samples whose labels include `labels`."""
    return sum(v for n, lbl, v in samples
               if n == name and all(lbl.get(k) == x for k, x in labels.items()))


# -- checks ------------------------------------------------------------------------------------

# event type -> (states it may follow, state it leads to; None: unchanged)
_NON_FINAL = frozenset({"scheduled", "queued", "running", "failed", "retry_scheduled"})
_ANY = frozenset({*_NON_FINAL, *FINAL})
_MOVES: dict[str, tuple[frozenset[str | None], str | None]] = {
    "RunScheduled": (frozenset({None}), "scheduled"),
    "RunQueued": (frozenset({"scheduled", "retry_scheduled"}), "queued"),
    "RunStarted": (frozenset({"queued"}), "running"),
    "RunSucceeded": (frozenset({"running"}), "succeeded"),
    "RunFailed": (frozenset({"running"}), "failed"),
    "LeaseExpired": (frozenset({"running"}), "failed"),
    "AttemptTimedOut": (frozenset({"running"}), "failed"),
    "RetryScheduled": (frozenset({"failed"}), "retry_scheduled"),
    "LeaseReleased": (frozenset({"running"}), "retry_scheduled"),
    "RetryDue": (frozenset({"retry_scheduled"}), None),
    "RunRepublished": (frozenset({"scheduled", "retry_scheduled"}), None),
    "RunDeadLettered": (frozenset({"failed", "scheduled", "queued", "retry_scheduled"}),
                        "dead_lettered"),
    "RunCancelled": (_NON_FINAL, "cancelled"),
    "QueueWaitExpired": (frozenset({"scheduled", "queued", "retry_scheduled"}), None),
    "CancelRequested": (_NON_FINAL, None),
    "StaleWriteRejected": (_ANY, None),
}
_AUDIT = frozenset({"StaleWriteRejected"})


def stream_problem(events: Sequence[Mapping[str, Any]]) -> str | None:
    """What is wrong with one run's events (dicts with version, seq, type, epoch, token),
    ordered by version; None when the story is consistent and ends in success."""
    if not events:
        return "no events"
    versions = [e["version"] for e in events]
    if versions != list(range(1, len(events) + 1)):
        return f"versions {versions} are not 1..{len(events)}"
    seqs = [e["seq"] for e in events]
    if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
        return "seq order differs from version order"
    if events[0]["type"] != "RunScheduled":
        return f"starts with {events[0]['type']}"
    state: str | None = None
    last_epoch = 0
    last_change = ""
    for e in events:
        kind = e["type"]
        move = _MOVES.get(kind)
        if move is None:
            return f"unexpected event {kind} at version {e['version']}"
        allowed, target = move
        if state not in allowed:
            return f"{kind} at version {e['version']} after state {state}"
        if kind == "RunStarted":
            epoch = e["epoch"]
            if epoch is None or epoch <= last_epoch:
                return f"RunStarted epoch {epoch} not above the previous {last_epoch}"
            if e.get("token") is not None and int(e["token"]) != epoch:
                return f"RunStarted epoch {epoch} differs from its fencing token {e['token']}"
            last_epoch = epoch
        if target is not None:
            state = target
        if kind not in _AUDIT:
            last_change = kind
    if state != "succeeded" or last_change != "RunSucceeded":
        return f"ends in state {state} (last change {last_change})"
    return None


@dataclass
class Verdict:
    """What the end check found; `problems()` is empty when everything holds."""

    jobs: int = 0
    runs: int = 0
    succeeded: int = 0
    effects: int = 0
    jobs_without_run: list[str] = field(default_factory=list)
    jobs_not_succeeded: list[str] = field(default_factory=list)  # accepted, some run not done
    not_succeeded: dict[str, str] = field(default_factory=dict)  # run id -> state
    not_final: int = 0
    duplicate_effect_keys: list[str] = field(default_factory=list)
    duplicate_effect_runs: list[str] = field(default_factory=list)
    runs_without_effect: list[str] = field(default_factory=list)
    stream_errors: dict[str, str] = field(default_factory=dict)
    duplicate_claims: int = 0
    duplicate_occurrences: int = 0
    events: Counter[str] = field(default_factory=Counter)  # event type -> count (run streams)

    def problems(self) -> list[str]:
        found = []
        if self.jobs_without_run:
            found.append(f"{len(self.jobs_without_run)} accepted jobs have no run, e.g. "
                         f"{self.jobs_without_run[:3]}")
        if self.not_succeeded:
            sample = dict(list(self.not_succeeded.items())[:5])
            found.append(f"{len(self.not_succeeded)} runs did not succeed ({self.not_final} "
                         f"not final): {sample}")
        if self.duplicate_effect_keys or self.duplicate_effect_runs:
            found.append(f"effects applied twice: keys {self.duplicate_effect_keys[:5]}, "
                         f"runs {self.duplicate_effect_runs[:5]}")
        if self.runs_without_effect:
            found.append(f"{len(self.runs_without_effect)} succeeded runs have no effect, e.g. "
                         f"{self.runs_without_effect[:3]}")
        if self.stream_errors:
            sample = dict(list(self.stream_errors.items())[:5])
            found.append(f"{len(self.stream_errors)} inconsistent run streams: {sample}")
        if self.duplicate_claims:
            found.append(f"{self.duplicate_claims} claims of a run already running")
        if self.duplicate_occurrences:
            found.append(f"{self.duplicate_occurrences} occurrences scheduled twice")
        return found


async def wait_settled(db: Db, job_ids: Sequence[str], within: float) -> tuple[int, int]:
    """Wait until every job in `job_ids` has a run and every run is final; returns
    (jobs without a run, runs not final) at the end (0, 0 when settled in time)."""
    deadline = time.monotonic() + within
    ids = [uuid.UUID(j) for j in job_ids]
    while True:
        row = (await db.fetch(
            "SELECT (SELECT count(*) FROM unnest($1::uuid[]) AS j(id) WHERE NOT EXISTS "
            "        (SELECT 1 FROM runs r WHERE r.job_id = j.id)) AS missing, "
            "       (SELECT count(*) FROM runs WHERE state <> ALL($2::text[])) AS open",
            ids, list(FINAL)))[0]
        if (row["missing"] == 0 and row["open"] == 0) or time.monotonic() > deadline:
            return row["missing"], row["open"]
        await asyncio.sleep(0.25)


async def verify(db: Db, job_ids: Iterable[str] = ()) -> Verdict:
    """The end check over every run of the database (see the module docstring)."""
    v = Verdict()
    accepted = {uuid.UUID(j) for j in job_ids}
    v.jobs = len(accepted)
    runs = await db.fetch("SELECT id, job_id, state FROM runs")
    v.runs = len(runs)
    with_run = {r["job_id"] for r in runs}
    v.jobs_without_run = sorted(str(j) for j in accepted - with_run)
    unfinished_jobs = set()
    for r in runs:
        if r["state"] == "succeeded":
            v.succeeded += 1
        else:
            v.not_succeeded[str(r["id"])] = r["state"]
            unfinished_jobs.add(r["job_id"])
            if r["state"] not in FINAL:
                v.not_final += 1
    v.jobs_not_succeeded = sorted(str(j) for j in (accepted & unfinished_jobs)
                                  | (accepted - with_run))
    effects = await db.fetch(
        "SELECT idempotency_key, run_id FROM effects") if await db.fetchval(
        "SELECT to_regclass('effects') IS NOT NULL") else []
    v.effects = len(effects)
    keys = Counter(e["idempotency_key"] for e in effects)
    per_run = Counter(e["run_id"] for e in effects)
    v.duplicate_effect_keys = sorted(k for k, n in keys.items() if n > 1)
    v.duplicate_effect_runs = sorted(str(k) for k, n in per_run.items() if n > 1)
    v.runs_without_effect = sorted(str(r["id"]) for r in runs
                                   if r["state"] == "succeeded" and r["id"] not in per_run)
    streams: dict[uuid.UUID, list[dict[str, Any]]] = defaultdict(list)
    for e in await db.fetch(
            "SELECT stream_id, version, seq, type, epoch, data->>'fencing_token' AS token "
            "FROM events WHERE stream_type = 'run' ORDER BY stream_id, version", within=60):
        streams[e["stream_id"]].append(dict(e))
        v.events[e["type"]] += 1
    for r in runs:
        problem = stream_problem(streams.get(r["id"], []))
        if problem is not None:
            v.stream_errors[str(r["id"])] = problem
        state: str | None = None
        for e in streams.get(r["id"], []):
            if e["type"] == "RunStarted" and state == "running":
                v.duplicate_claims += 1
            move = _MOVES.get(e["type"])
            if move is not None and move[1] is not None:
                state = move[1]
    v.duplicate_occurrences = await db.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM events WHERE type = 'RunScheduled' "
        "GROUP BY data->>'job_id', data->>'scheduled_for' HAVING count(*) > 1) AS d")
    return v


async def coverage(db: Db, job_ids: Iterable[str], start: datetime
                   ) -> tuple[int, int, int, int]:
    """Recurring jobs: (slots expected from `start` to each job's next slot, slots with
    neither a run nor a recorded skip, slots with more than one run, slots skipped)."""
    expected_total = missing = duplicated = skipped = 0
    for job_id in job_ids:
        jid = uuid.UUID(job_id)
        job = (await db.fetch("SELECT schedule, next_slot FROM jobs WHERE id = $1", jid))[0]
        runs = Counter(r["scheduled_for"] for r in await db.fetch(
            "SELECT scheduled_for FROM runs WHERE job_id = $1", jid))
        skips = [(r["first_slot"], r["last_slot"]) for r in await db.fetch(
            Q["skips_of_job_between"], jid, start, job["next_slot"])]
        expected = expected_slots(from_document(job["schedule"]), start, job["next_slot"])
        expected_total += len(expected)
        for slot in expected:
            if any(a <= slot <= b for a, b in skips):
                skipped += 1
            elif slot not in runs:
                missing += 1
        duplicated += sum(1 for n in runs.values() if n > 1)
    return expected_total, missing, duplicated, skipped


async def shard_epoch_order(db: Db) -> tuple[int, dict[int, list[tuple[int, int]]]]:
    """Per shard, the RunScheduled events written under a shard epoch, in seq order; returns
    (events checked, shard -> [(seq, epoch) where the epoch went *down*])."""
    rows = await db.fetch(
        "SELECT j.shard, e.seq, e.epoch FROM events e "
        "JOIN jobs j ON j.id = (e.data->>'job_id')::uuid "
        "WHERE e.type = 'RunScheduled' AND e.epoch IS NOT NULL ORDER BY e.seq")
    highest: dict[int, int] = {}
    backwards: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in rows:
        if r["epoch"] < highest.get(r["shard"], 0):
            backwards[r["shard"]].append((r["seq"], r["epoch"]))
        highest[r["shard"]] = max(highest.get(r["shard"], 0), r["epoch"])
    return len(rows), dict(backwards)


# -- one lab: a cluster, its database, a tenant and worker processes ---------------------------


@dataclass
class Lab:
    """A `Cluster` plus what a fault scenario needs around it; `close()` stops every process
    it started and restarts the shared servers a scenario stopped."""

    cluster: Cluster
    db: Db
    api_key: str = ""
    workers: dict[str, WorkerProc] = field(default_factory=dict)
    stopped_servers: set[str] = field(default_factory=set)

    async def start(self, services: tuple[str, ...] = SERVICES, tenant: str = "faults") -> None:
        await asyncio.to_thread(self.cluster.start, services)
        if "api" in services:
            self.api_key = await create_tenant(self.cluster.api_url, self.cluster.admin_key,
                                               tenant)

    async def worker(self, name: str, **options: Any) -> WorkerProc:
        """Start a worker process and wait until it takes work."""
        w = WorkerProc(name, self.cluster.gateway_url, self.api_key, self.cluster.database_url,
                       self.cluster.log_dir, **options)
        self.workers[name] = w
        await asyncio.to_thread(lambda: w.start().wait_ready())
        return w

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.cluster.api_url, timeout=10,
                                 headers={"Authorization": f"Bearer {self.api_key}"})

    async def submit(self, jobs: Sequence[Mapping[str, Any]]) -> list[str]:
        async with self.client() as client:
            return await submit(client, jobs)

    async def server_down(self, name: str) -> float:
        self.stopped_servers.add(name)
        return await asyncio.to_thread(server, name, "down")

    async def server_up(self, name: str) -> float:
        seconds = await asyncio.to_thread(server, name, "up")
        self.stopped_servers.discard(name)
        return seconds

    def alive(self) -> dict[str, bool]:
        return {name: p.poll() is None for name, p in self.cluster.procs.items()}

    async def close(self) -> dict[str, int]:
        """Workers first (they need the gateway to release), then servers back, then the
        services. Returns the services' exit codes."""
        for w in self.workers.values():
            await asyncio.to_thread(w.stop)
        errors = []
        for name in sorted(self.stopped_servers):
            try:
                await self.server_up(name)
            except Exception as exc:  # keep stopping the rest; report at the end
                errors.append(exc)
        codes = await asyncio.to_thread(self.cluster.stop)
        await self.db.close()
        if errors:
            raise errors[0]
        return codes
