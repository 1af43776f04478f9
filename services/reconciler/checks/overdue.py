"""Overdue: an active job whose due instant is older than the grace period has not been looked
at (scheduler down, paused by SIGSTOP, crashed mid-batch). Each is reported as an
`OccurrenceMissed` (repair = "scheduler") and repaired by running the scheduler's own decision
for that job, so its misfire policy applies exactly as if the scheduler had been late.
"""


from __future__ import annotations

from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import decide_and_append
from ostinato.leases.shard import SHARDS
from ostinato.stores import jobs
from ostinato.telemetry import metrics
from services.reconciler.checks.gaps import ACTOR, alert_missed


async def check_overdue(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                        grace: timedelta, batch_size: int = 100) -> int:
    """Repair jobs the scheduler has not looked at in time; returns how many were overdue."""
    now = clock.now()
    async with pool.acquire() as conn:
        oldest = await jobs.oldest_due(conn, now, SHARDS)
    metrics.OLDEST_DUE_AGE.set(0 if oldest is None else (now - oldest).total_seconds())
    if oldest is None or now - oldest <= grace:
        return 0
    async with pool.acquire() as conn, conn.transaction():
        rows = await jobs.claim_due(conn, now - grace, batch_size, [], range(SHARDS))
        heads = {r.id: StreamHead.of(r) for r in rows}
        await store.append(conn, [heads[r.id].next(ev.OccurrenceMissed(
            scheduled_for=r.next_slot, detected_by=ACTOR, repair="scheduler"), ACTOR)
            for r in rows])
        for r in rows:
            alert_missed(r.tenant_id, r.id, r.next_slot, "scheduler")
        # The scheduler's own decision, so the misfire policy applies as if it had been late.
        await decide_and_append(conn, store, clock, rows, actor=ACTOR, heads=heads)
    return len(rows)
