"""Keeps the worker registry (`ostinato.workers`) fresh from the gateway's own traffic.

A claim upserts the worker with its pools and declared slots (`ClaimRequest.slots`, else
`max_runs`); a batch or single-run report refreshes `seen_at` only. Writes are throttled in
memory to one per half second per (worker, scope) and gateway process, so a busy worker costs at
most two small upserts a second, whatever its request rate, while every one of the SDK's pings
(one a second while it holds runs) lands: the reconciler judges a pinging worker silent for
`OSTINATO_WORKER_DEAD_AFTER_SECONDS` dead (`ostinato.policy.liveness`), so `seen_at` must not
trail the last ping by more than about a second.

Liveness while blocked in a long poll: nothing is written during the wait. The registry's TTL
(`OSTINATO_WORKER_TTL_SECONDS`) is longer than the longest claim wait instead, so the touch at
the start of a poll keeps the worker live until the next poll starts. Rejected: refreshing from
inside the wait loop (a write a second per idle worker, for nothing).
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.runtime.duties import Duty
from ostinato.telemetry.logging import get_logger
from ostinato.wire import worker as p
from ostinato.workers import registry

MIN_INTERVAL_SECONDS = 0.5  # half the SDK's ping interval: every ping is recorded
FORGET_AFTER = timedelta(hours=1)  # registry rows of workers gone this long are deleted
_HOUSEKEEPING_SECONDS = 60.0
log = get_logger("ostinato.gateway")

Key = tuple[str, uuid.UUID | None]  # (worker id, tenant id or None for a shared worker)


class WorkerPresence:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, *,
                 min_interval: float = MIN_INTERVAL_SECONDS) -> None:
        self.pool = pool
        self.clock = clock
        self.min_interval = min_interval
        self._written: dict[Key, float] = {}  # monotonic time of the last write
        self._housekept = clock.monotonic()

    def _due(self, key: Key) -> bool:
        """Claim the right to write now (set before awaiting, so concurrent requests skip)."""
        now = self.clock.monotonic()
        last = self._written.get(key)
        if last is not None and now - last < self.min_interval:
            return False
        self._written[key] = now
        return True

    async def claimed(self, tenant_id: uuid.UUID | None, req: p.ClaimRequest) -> None:
        """A claim: the worker is alive, in `req.pools`, with its declared slots."""
        if not self._due((req.worker_id, tenant_id)):
            return
        slots = req.slots if req.slots is not None else req.max_runs
        async with self.pool.acquire() as conn:
            await registry.touch(conn, req.worker_id, tenant_id, req.pools, slots,
                                 self.clock.db_now(), versions=req.versions,
                                 payload_versions=req.payload_versions,
                                 liveness_seconds=req.liveness_seconds)
            await self._housekeeping(conn)

    async def reported(self, tenant_id: uuid.UUID | None, worker_id: str) -> None:
        """A heartbeat or outcome: refresh liveness of a worker registered by a claim."""
        key = (worker_id, tenant_id)
        if not self._due(key):
            return
        async with self.pool.acquire() as conn:
            if not await registry.seen(conn, worker_id, tenant_id, self.clock.db_now()):
                self._written.pop(key, None)  # not registered: its next claim writes at once

    async def goodbye(self, tenant_id: uuid.UUID | None, worker_id: str) -> bool:
        """A graceful stop: forget the worker now; its slots stop counting at once."""
        self._written.pop((worker_id, tenant_id), None)
        async with self.pool.acquire() as conn:
            forgotten = await registry.forget(conn, worker_id, tenant_id)
        log.info("worker said goodbye", worker_id=worker_id, forgotten=forgotten,
                 scope=str(tenant_id) if tenant_id else "*")
        return forgotten

    async def _housekeeping(self, conn: asyncpg.Connection) -> None:
        """Once a minute: bound the throttle's memory and delete long-gone workers' rows."""
        now = self.clock.monotonic()
        if now - self._housekept < _HOUSEKEEPING_SECONDS:
            return
        self._housekept = now
        self._written = {k: t for k, t in self._written.items()
                         if now - t < _HOUSEKEEPING_SECONDS}
        gone = await registry.forget_stale(conn, self.clock.db_now(), FORGET_AFTER)
        if gone:
            log.info("forgot workers not seen for long", count=gone,
                     after_seconds=FORGET_AFTER.total_seconds())


INSTANCE_SECONDS = 1.0  # how often a gateway instance says it is alive


def instance_duty(pool: asyncpg.Pool, clock: Clock) -> Duty:
    """This gateway instance, alive in storage every second; a graceful stop counts as a
    restart (`registry.gateway_gone`). The reconciler counts a worker's silence only while a
    gateway was there to hear it, and from the latest start of one
    (`ostinato.policy.liveness`), so a rolling restart is not taken for its workers' death."""
    instance = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    async def run_once(now: datetime) -> int:
        async with pool.acquire() as conn:
            await registry.gateway_seen(conn, instance, clock.db_now())
        return 0

    async def gone() -> None:
        async with pool.acquire() as conn:
            await registry.gateway_gone(conn, instance, clock.db_now())

    return Duty("gateway_instance", INSTANCE_SECONDS, run_once, on_stop=gone)
