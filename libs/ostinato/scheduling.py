"""The scheduler's duty: turn due occurrences into runs.

One tick locks a small batch of due jobs (`FOR UPDATE SKIP LOCKED` over the partial index on
`next_run_at`), and for each appends `RunScheduled` to the occurrence's run stream (version 1:
the run id is derived from the occurrence, so a second creation is a version conflict) and
`OccurrenceFired` to the job's stream, all in one transaction. The outbox carries RunScheduled
to `runs.due`. Shard leases with epochs (several schedulers owning disjoint shards) arrive with
the fault-tolerance issue; SKIP LOCKED already keeps concurrent schedulers from sharing a job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg

from ostinato import schedules
from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain.ids import run_id_for
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

ACTOR = "scheduler"
log = get_logger("ostinato.scheduler")


async def fire_due(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, batch_size: int = 100,
    actor: str = ACTOR,
) -> list[ev.RunScheduled]:
    """Create the runs of one batch of due occurrences; returns what was created."""
    async with pool.acquire() as conn, conn.transaction():
        due = await conn.fetch(Q["claim_due_jobs"], clock.db_now(), batch_size)
        if not due:
            return []
        events: list[NewEvent] = []
        created: list[ev.RunScheduled] = []
        for job in due:
            scheduled_for = job["next_run_at"]
            run_id = run_id_for(job["id"], scheduled_for)
            run = ev.RunScheduled(
                job_id=job["id"], task=job["task"], pool=job["pool"], priority=job["priority"],
                payload_ref=job["payload_ref"], scheduled_for=scheduled_for,
            )
            fired = ev.OccurrenceFired(
                scheduled_for=scheduled_for, run_id=run_id,
                next_run_at=schedules.next_after(job["schedule"], scheduled_for),
            )
            events.append(NewEvent(run_id, 1, job["tenant_id"], run, actor,
                                   traceparent=job["traceparent"]))
            events.append(NewEvent(job["id"], job["version"] + 1, job["tenant_id"], fired, actor,
                                   traceparent=job["traceparent"]))
            created.append(run)
            log.debug("run scheduled", tenant_id=str(job["tenant_id"]), job_id=str(job["id"]),
                      run_id=str(run_id), scheduled_for=scheduled_for.isoformat())
        await store.append(conn, events)
    metrics.RUNS_CREATED.inc(len(created))
    return created


async def run_scheduler(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, batch_size: int,
    poll_seconds: float, stopping: asyncio.Event, on_created: Callable[[], None],
) -> None:
    """Fire due occurrences until `stopping` is set: back to back while batches are full,
    otherwise once per `poll_seconds`. A database error is logged and retried, never fatal."""
    while not stopping.is_set():
        try:
            with metrics.SCHEDULER_TICK_SECONDS.time():
                created = await fire_due(pool, store, clock, batch_size=batch_size)
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("scheduler tick failed; retrying", error=repr(exc))
            created = []
            await asyncio.sleep(1.0)
        if created:
            on_created()
            log.info("runs created", count=len(created))
        if len(created) < batch_size:
            try:
                await asyncio.wait_for(stopping.wait(), poll_seconds)
            except TimeoutError:
                pass
