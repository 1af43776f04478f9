"""A rolling restart under load (issue 39), shared by tests/faults/test_rolling_restart.py and
bench/rolling_restart.py: every instance of every service, one at a time, is stopped as an
orchestrator stops it (SIGTERM, the drain, the exit) and started again on its port, while
`ClientLoad` submits jobs and reads them back with the Python client (`ostinato.client`, its
own retries, one URL: the balancer in front of the api instances) and counts what it saw on
the wire (`WireCounts`: 503s, connections lost, calls sent again) and what reached the caller
(`errors`: none may)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ostinato.client import AsyncClient
from ostinato.client.errors import ApiError, ApiUnreachable
from tests.helpers.lab.cluster import ROOT, SERVICES, Cluster
from tests.helpers.lab.invariants import Queries
from tests.helpers.lab.load import RETRY

__all__ = ["ClientLoad", "Restart", "WireCounts", "restart_instance", "rolling_restart"]


@dataclass
class WireCounts:
    """What the client's transport met, below its retries."""

    requests: int = 0
    unavailable: int = 0  # 503 answers (a drain, or the database away)
    lost: int = 0  # connections refused, reset or closed before an answer

    @property
    def retries(self) -> int:
        """Requests sent again: every 503 and lost connection was followed by one (or else
        reached the caller as an error, counted there)."""
        return self.unavailable + self.lost


class CountingTransport(httpx.AsyncBaseTransport):
    def __init__(self, counts: WireCounts) -> None:
        self.counts = counts
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.counts.requests += 1
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError:
            self.counts.lost += 1
            raise
        if response.status_code == 503:
            self.counts.unavailable += 1
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def job(key: str, kind: str, steps: int) -> dict[str, Any]:
    """An `fx` run (one fenced effect) or a `wf` workflow of `steps` steps (worker_proc.py)."""
    payload: dict[str, Any] = {"steps": steps} if kind == "wf" else {}
    return {"name": key, "task": kind, "payload": payload, "retry": RETRY}


@dataclass
class ClientLoad:
    """Submits a job every `every` seconds (fx and wf in turn) with `AsyncClient.jobs.create`
    (an idempotency key of the client's own: sent again after a 503 or a lost connection) and
    reads each back with `jobs.get`; `errors`: whatever reached the caller."""

    api_url: str
    api_key: str
    every: float = 0.1
    steps: int = 3
    counts: WireCounts = field(default_factory=WireCounts)
    accepted: dict[str, str] = field(default_factory=dict)  # job id -> task
    errors: list[str] = field(default_factory=list)
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (started, seconds)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    def start(self) -> ClientLoad:
        self._task = asyncio.create_task(self._run(), name="client-load")
        return self

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        # A generous read timeout: a timeout is not retried (the answer may have been lost after
        # the work was done), and what is judged here is the drain, not the speed of a machine
        # other suites load (there, 30 s answers were seen during a restart).
        async with AsyncClient(self.api_url, self.api_key, timeout=120,
                               transport=CountingTransport(self.counts)) as client:
            n = 0
            pending: set[asyncio.Task[None]] = set()
            while not self._stop.is_set():
                kind = "wf" if n % 2 else "fx"
                task = asyncio.create_task(self._one(client, f"roll-{n}", kind))
                pending.add(task)
                task.add_done_callback(pending.discard)
                n += 1
                await asyncio.sleep(self.every)
            if pending:
                await asyncio.wait(pending)

    async def _one(self, client: AsyncClient, key: str, kind: str) -> None:
        started = time.monotonic()
        try:
            created = await client.jobs.create(job(key, kind, self.steps))
            self.accepted[str(created.id)] = kind
            read = await client.jobs.get(created.id)
            assert str(read.id) == str(created.id)
        except (ApiError, ApiUnreachable) as exc:
            self.errors.append(f"{key}: {exc!r}")
            return
        self.latencies.append((started, time.monotonic() - started))


@dataclass
class Restart:
    alias: str
    exit_code: int
    stop_seconds: float  # SIGTERM → exit (the drain, the duties' last ticks)
    ready_seconds: float  # SIGTERM → /readyz 200 again
    started_at: float  # monotonic, at SIGTERM
    ready_at: float


def restart_instance(cluster: Cluster, alias: str, service: str,
                     ready_within: float = 300) -> Restart:
    """SIGTERM `alias`, wait for its exit, start it again on its port, wait for /readyz (up to
    `ready_within` seconds: a start on a machine other suites load takes long)."""
    proc = cluster.procs[alias]
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    stopped = time.monotonic()
    port_var = {"api": "API", "worker_gateway": "GATEWAY"}.get(service, service.upper())
    env = {**cluster.env(service), f"OSTINATO_{port_var}_PORT": str(cluster.ports[alias])}
    with (cluster.log_dir / f"{alias}.log").open("ab") as log:
        cluster.procs[alias] = subprocess.Popen(
            [sys.executable, "-m", f"services.{service}"], cwd=ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT)
    cluster.wait_ready(alias, ready_within)
    ready = time.monotonic()
    return Restart(alias, code, stopped - began, ready - began, began, ready)


async def rolling_restart(cluster: Cluster, *, pause: float = 1.0,
                          on_restart: Callable[[Restart], None] | None = None,
                          services: tuple[str, ...] = SERVICES) -> list[Restart]:
    """Every instance of every service, one at a time, `pause` seconds apart."""
    done = []
    for service in services:
        for alias in cluster.aliases(service):
            r = await asyncio.to_thread(restart_instance, cluster, alias, service)
            done.append(r)
            if on_restart is not None:
                on_restart(r)
            await asyncio.sleep(pause)
    return done


def added_latency(load: ClientLoad, restarts: list[Restart]) -> Mapping[str, float]:
    """Per restart, the slowest client call that overlapped it, minus the median call."""
    if not load.latencies:
        return {}
    ordered = sorted(s for _, s in load.latencies)
    median = ordered[len(ordered) // 2]
    out = {}
    for r in restarts:
        during = [s for t0, s in load.latencies if t0 <= r.ready_at and t0 + s >= r.started_at]
        out[r.alias] = max(0.0, max(during, default=median) - median)
    return out


async def effect_problems(db: Queries, accepted: Mapping[str, str], steps: int) -> list[str]:
    """What the load's effects say is wrong: each `fx` job's run applied its fenced effect
    exactly once, each `wf` job's run each of its `steps` step effects exactly once (they are
    not deduplicated, so a step run twice shows). Empty: nothing."""
    fx = {k for k, kind in accepted.items() if kind == "fx"}
    wf = {k for k, kind in accepted.items() if kind == "wf"}
    per_run = {row["job"]: row["n"] for row in await db.fetch(
        "SELECT r.job_id::text AS job, count(e.*) AS n FROM runs r "
        "LEFT JOIN effects e ON e.run_id = r.id GROUP BY r.job_id") if row["job"] in fx}
    seqs = {row["job"]: [s for s in row["seqs"] if s is not None] for row in await db.fetch(
        "SELECT r.job_id::text AS job, array_agg(s.seq ORDER BY s.seq) AS seqs FROM runs r "
        "LEFT JOIN step_effects s ON s.run_id = r.id GROUP BY r.job_id") if row["job"] in wf}
    found = [f"fx job {job}: {per_run.get(job, 0)} effects" for job in sorted(fx)
             if per_run.get(job, 0) != 1]
    found += [f"wf job {job}: step effects {seqs.get(job, [])}" for job in sorted(wf)
              if seqs.get(job, []) != list(range(steps))]
    return found
