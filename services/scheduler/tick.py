"""The scheduler's duty: turn due occurrences into runs (or recorded skips), and hand runs whose
retry is due back to the dispatcher.

One tick holds the shard leases still current in its transaction, locks a small batch of due
jobs of those shards (`FOR UPDATE SKIP LOCKED` over the partial index on `next_run_at`) and
hands them to `ostinato.jobs.materialise.decide_and_append`, which decides and appends in the
same transaction, each write under the shard's epoch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg

from ostinato.clock import Clock
from ostinato.db.sqlstate import TRANSIENT_ERRORS
from ostinato.domain import events as ev
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import Waiting, decide_and_append
from ostinato.leases.shard import SHARDS, ShardLeases, ShardOwnership, hold
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

ACTOR = "scheduler"
log = get_logger("ostinato.scheduler")


async def fire_due(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, batch_size: int = 100,
    actor: str = ACTOR, waiting: Waiting | None = None,
    ownership: ShardOwnership | None = None,
) -> list[ev.RunScheduled]:
    """Decide one batch of due jobs (of the leased shards, when `ownership` is given: writes
    happen only under leases still current in this transaction); returns the runs created."""
    waiting = waiting or Waiting()
    async with pool.acquire() as conn, conn.transaction():
        shards = list(range(SHARDS))  # no ownership (tests, one scheduler): every shard
        if ownership is not None:
            shards = (await hold(conn, ownership, clock)).shards()
            if not shards:
                return []
        due = await conn.fetch(Q["claim_due_jobs"], clock.now(), batch_size,
                               waiting.ids(clock.monotonic()), shards)
        created = await decide_and_append(conn, store, clock, due, actor=actor, waiting=waiting,
                                          epochs=None if ownership is None
                                          else ownership.epochs)
    metrics.RUNS_CREATED.inc(len(created))
    return created


async def release_retries(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                          batch_size: int = 500, actor: str = ACTOR) -> int:
    """Hand runs whose retry is due to the dispatcher (`RetryDue` on `runs.due`)."""
    async with pool.acquire() as conn, conn.transaction():
        rows = await conn.fetch(Q["claim_due_retries"], clock.now(), batch_size)
        await store.append(conn, [
            NewEvent(r["id"], r["version"] + 1, r["tenant_id"], ev.RetryDue(pool=r["pool"]),
                     actor, traceparent=r["traceparent"])
            for r in rows])
    return len(rows)


async def run_scheduler(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, batch_size: int,
    poll_seconds: float, stopping: asyncio.Event, on_created: Callable[[], None],
    leases: ShardLeases | None = None,
) -> None:
    """Fire due occurrences until `stopping` is set: back to back while batches are full,
    otherwise once per `poll_seconds`. With `leases`, only on the shards this instance leases,
    renewed every third of their time to live and handed back on stop. A database error is
    logged and retried, never fatal."""
    waiting = Waiting()
    renew_every = leases.ttl.total_seconds() / 3 if leases else 0.0
    renewed_at = float("-inf")
    while not stopping.is_set():
        try:
            if leases is not None and clock.monotonic() - renewed_at >= renew_every:
                await leases.refresh()
                renewed_at = clock.monotonic()
            with metrics.SCHEDULER_TICK_SECONDS.time():
                created = await fire_due(pool, store, clock, batch_size=batch_size,
                                         waiting=waiting,
                                         ownership=leases.ownership if leases else None)
                retries = await release_retries(pool, store, clock)
        except TRANSIENT_ERRORS as exc:
            log.warning("scheduler tick failed; retrying", error=repr(exc))
            created, retries = [], 0
            await asyncio.sleep(1.0)
        if created or retries:
            on_created()
        if created:
            log.info("runs created", count=len(created))
        if len(created) < batch_size:
            try:
                await asyncio.wait_for(stopping.wait(), poll_seconds)
            except TimeoutError:
                pass
    if leases is not None:
        await leases.release_all()
