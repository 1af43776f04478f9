"""What every peer benchmark shares: a fresh database, worker processes that record when each
no-op job started, and scenarios 1-3 measured the same way for every peer.

A peer module defines a `Peer`: `setup(url)` (its schema), `enqueue(url, items)` (a batch of
(index, due epoch seconds or None) through the peer's own bulk API: due None = now), and
`worker_commands(url, out)` (the processes of its recommended worker setup). Each no-op job
appends "<due> <started>" (epoch seconds; due 0 when immediate) to a per-process file under
`out` (line-buffered, one write per job: the same small cost for every peer); the bench counts
the lines to know how many ran, and takes lags from them. Ostinato's lag comes from its runs
table (started_at is the claim time), the peers' from the handler's first line.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import asyncpg

from bench.common import (
    BASE_URL,
    ROOT,
    STATS_LAG_S,
    cpu_by_process_group,
    cpu_spent,
    distribution,
    log,
    rows_per_run,
    table_stats,
)

Items = Sequence[tuple[int, float | None]]


@dataclass
class Peer:
    name: str
    setup: Callable[[str], Awaitable[None]]
    enqueue: Callable[[str, Items], Awaitable[None]]
    worker_commands: Callable[[str, Path], list[list[str]]]
    workers: str  # the worker setup, as documented in bench/README.md
    enqueue_batch: int = 1000
    enqueuers: int = 2


class Recorder:
    """In a worker process: one line per job started, to <out>/<pid>.txt."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        self._file: TextIO | None = None
        self.out = Path(out)

    def __call__(self, due: float | None) -> None:
        if self._file is None:
            self._file = (self.out / f"{os.getpid()}.txt").open("a", buffering=1)
        self._file.write(f"{due or 0} {time.time()}\n")


def read_records(out: Path) -> list[tuple[float, float]]:
    records = []
    for path in out.glob("*.txt"):
        for line in path.read_text().splitlines():
            due, _, started = line.partition(" ")
            if started:
                records.append((float(due), float(started)))
    return records


def count_records(out: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in out.glob("*.txt"))


@dataclass
class Lab:
    url: str
    out: Path
    procs: list[subprocess.Popen[bytes]]


def start_workers(commands: list[list[str]], log_path: Path) -> list[subprocess.Popen[bytes]]:
    with log_path.open("ab") as log_file:
        return [subprocess.Popen(cmd, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT,
                                 start_new_session=True) for cmd in commands]


@asynccontextmanager
async def peer_lab(peer: Peer) -> AsyncIterator[Lab]:
    """Fresh database, the peer's schema, its worker processes; everything stopped after."""
    name = f"bench_{peer.name}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(BASE_URL)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = BASE_URL.rpartition("/")[0] + "/" + name
    out = ROOT / ".cache" / "bench" / f"{peer.name}-{name[-8:]}"
    out.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        await peer.setup(url)
        procs += start_workers(peer.worker_commands(url, out), out / "workers.log")
        await asyncio.sleep(2)  # workers connected and listening
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{peer.name} worker exited; see {out / 'workers.log'}")
        yield Lab(url, out, procs)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def enqueue_all(peer: Peer, url: str, items: Items) -> float:
    """Enqueue in batches with `peer.enqueuers` concurrent callers; returns seconds."""
    batches = [items[i:i + peer.enqueue_batch] for i in range(0, len(items), peer.enqueue_batch)]
    queue: asyncio.Queue[Items] = asyncio.Queue()
    for b in batches:
        queue.put_nowait(b)

    async def one() -> None:
        while not queue.empty():
            await peer.enqueue(url, queue.get_nowait())

    t = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(peer.enqueuers)))
    return time.perf_counter() - t


async def wait_count(lab: Lab, n: int, within: float, scenario: str) -> int:
    deadline = time.monotonic() + within
    said = time.monotonic()
    while (done := count_records(lab.out)) < n and time.monotonic() < deadline:
        if time.monotonic() - said > 10:
            log(scenario, f"{done}/{n} started")
            said = time.monotonic()
        await asyncio.sleep(0.25)
    return done


async def throughput(peer: Peer, n: int, within: float) -> dict[str, Any]:
    scenario = f"{peer.name} throughput"
    async with peer_lab(peer) as lab:
        await enqueue_all(peer, lab.url, [(i, None) for i in range(500)])  # warm-up
        await wait_count(lab, 500, 60, scenario)
        t0 = time.time()
        enqueue_s = await enqueue_all(peer, lab.url, [(i, None) for i in range(n)])
        done = await wait_count(lab, 500 + n, within, scenario) - 500
        last = max(s for _, s in read_records(lab.out))
    return {"jobs": n, "done": done, "enqueue_rate_per_s": round(n / enqueue_s, 1),
            "completion_rate_per_s": round(done / max(1e-9, last - t0), 1)}


async def timed(peer: Peer, dues: list[float], within: float, scenario: str
                ) -> dict[str, Any]:
    """Jobs due at the given epoch instants (enqueued before the first is due)."""
    async with peer_lab(peer) as lab:
        await enqueue_all(peer, lab.url, [(i, None) for i in range(500)])
        await wait_count(lab, 500, 60, scenario)
        enqueue_s = await enqueue_all(peer, lab.url, list(enumerate(dues)))
        ahead = dues[0] - time.time()
        workers = {f"worker-{i}": p.pid for i, p in enumerate(lab.procs)}
        await asyncio.sleep(max(0.0, dues[0] - 1.0 - time.time()))
        tables = await table_stats(lab.url)
        await asyncio.sleep(max(0.0, dues[0] - time.time()))
        cpu_before = cpu_by_process_group(workers)
        await asyncio.sleep(max(0.0, dues[-1] - time.time()))
        done = await wait_count(lab, 500 + len(dues), within, scenario) - 500
        cpu_after = cpu_by_process_group(workers)
        records = [(d, s) for d, s in read_records(lab.out) if d > 0]
        await asyncio.sleep(STATS_LAG_S)
        rows = rows_per_run(tables, await table_stats(lab.url), done)
    lags = [(s - d) * 1000 for d, s in records]
    first_due = min(dues)
    return {"jobs": len(dues), "started": done, "enqueue_seconds": round(enqueue_s, 2),
            "enqueued_ahead_s": round(ahead, 2), "start_lag_ms": distribution(lags),
            "all_started_s": round(max(s for _, s in records) - first_due, 2)
            if done >= len(dues) else None,
            # from the first due instant to the last start (as Ostinato's burst and capacity):
            # the peer's workers, PostgreSQL, this process (the enqueuer, idle by then)
            "cpu_seconds": cpu_spent(cpu_before, cpu_after), "rows_per_run": rows}


def peer_cpu(cpu_seconds: dict[str, float]) -> dict[str, float]:
    """The CPU of what a peer runs on: its workers, PostgreSQL, Redis (Celery's broker) and this
    process (the enqueuer); not Kafka, which only Ostinato uses and which idles meanwhile."""
    own = ("postgresql", "redis", "bench (client + SDK worker)")
    return {g: c for g, c in cpu_seconds.items() if g.startswith("worker-") or g in own}


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


async def run_measured(who: str, cmd: list[str], logs: Path, within: float) -> dict[str, Any]:
    """A workflow peer's measured run in its own process (its own session, so its CPU is its
    own): the figures it prints as JSON on its last line; its stderr kept in `logs`."""
    logs.parent.mkdir(parents=True, exist_ok=True)
    with logs.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), within)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise RuntimeError(f"{who} run took over {within:.0f}s; see {logs}") from None
    if proc.returncode != 0:
        tail = (await asyncio.to_thread(logs.read_text, errors="replace"))[-1500:]
        raise RuntimeError(f"{who} run exited {proc.returncode}; {logs}:\n{tail}")
    return dict(json.loads(out.decode().strip().splitlines()[-1]))
