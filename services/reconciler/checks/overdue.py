"""Overdue: an active job whose due instant is older than the grace period has not been looked
at (scheduler down, paused by SIGSTOP, crashed mid-batch). Each is reported as an
`OccurrenceMissed` (repair = "scheduler") and repaired by running the scheduler's own decision
for that job, so its misfire policy applies exactly as if the scheduler had been late.

Only where the scheduler had its chance (`scope`): a shard whose scheduler completed a pass
within the grace (a job still due from before it is a real omission: `alert=
ostinato_occurrence_missed`), or a shard nobody holds and nobody passed within the grace (the
scheduler is not deciding: taken over, said as `alert=ostinato_scheduler_frozen`). A shard
held by a scheduler that has not completed a pass within the grace is catching up (after an
outage) and is left to it; if it never does, `ostinato_oldest_due_age_seconds` grows and
OstinatoSchedulerFrozen fires.
"""


from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import decide_and_append
from ostinato.leases.shard import SHARDS, ShardPass, shard_passes, taken_over
from ostinato.stores import jobs
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger
from services.reconciler.checks.gaps import ACTOR, alert_missed


def scope(passes: Mapping[int, ShardPass], now: datetime,
          grace: timedelta) -> tuple[list[int], set[int]]:
    """The shards whose overdue jobs the check decides, and of them those taken over (nobody
    deciding them); the others were passed within the grace. A shard held but not passed
    within it is its scheduler's, catching up. Pure."""
    taken = {s for s in range(SHARDS) if s in passes and taken_over(passes[s], now, grace)}
    fresh = {s for s, p in passes.items() if p.passed_within(now, grace)}
    return sorted(taken | fresh), taken


async def check_overdue(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                        grace: timedelta, batch_size: int = 100) -> int:
    """Repair jobs the scheduler has not looked at in time; returns how many were overdue."""
    now = clock.now()
    async with pool.acquire() as conn:
        oldest = await jobs.oldest_due(conn, now, SHARDS)
    metrics.OLDEST_DUE_AGE.set(0 if oldest is None else (now - oldest).total_seconds())
    if oldest is None or now - oldest <= grace:
        return 0
    async with pool.acquire() as conn:
        shards, taken = scope(await shard_passes(conn, clock.db_now()), now, grace)
    if not shards:
        return 0
    async with pool.acquire() as conn, conn.transaction():
        rows = await jobs.claim_due(conn, now - grace, batch_size, [], shards)
        heads = {r.id: StreamHead.of(r) for r in rows}
        await store.append(conn, [heads[r.id].next(ev.OccurrenceMissed(
            scheduled_for=r.next_slot, detected_by=ACTOR, repair="scheduler"), ACTOR)
            for r in rows])
        for r in rows:
            if r.shard in taken:
                metrics.OCCURRENCES_MISSED.inc()
                get_logger("ostinato.reconciler").warning(
                    "scheduler not deciding: the reconciler decided a due job in its place",
                    tenant_id=str(r.tenant_id), job_id=str(r.id),
                    scheduled_for=r.next_slot.isoformat(), shard=r.shard,
                    alert="ostinato_scheduler_frozen")
            else:
                alert_missed(r.tenant_id, r.id, r.next_slot, "scheduler")
        # The scheduler's own decision, so the misfire policy applies as if it had been late.
        await decide_and_append(conn, store, clock, rows, actor=ACTOR, heads=heads)
    return len(rows)
