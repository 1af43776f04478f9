"""The dispatcher's duty: move due runs to the ready topic of their pool.

A batch from `runs.due` is handled in one transaction: ledger rows first (a redelivered message
is skipped), then the runs are locked, checked against the state machine, and `RunQueued` is
appended; the outbox carries it to `runs.ready.<pool>`. Fairness (priority classes, weighted
fair queueing, limits, backpressure) plugs in between the lock and the append in the
fair-dispatch issue; today every due run is queued in arrival order.
"""

from __future__ import annotations

import asyncpg

from ostinato.bus.consumer import Delivered
from ostinato.domain import events as ev
from ostinato.domain.states import RunState, can_transition
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore, mark_processed
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import get_logger

CONSUMER = "dispatcher"
ACTOR = "dispatcher"
log = get_logger("ostinato.dispatcher")


async def queue_due_runs(
    pool: asyncpg.Pool, store: EventStore, delivered: list[Delivered]
) -> int:
    """Handle one batch of `runs.due` messages; returns how many runs were queued."""
    async with pool.acquire() as conn, conn.transaction():
        fresh = await mark_processed(conn, CONSUMER, [d.envelope.event_id for d in delivered])
        duplicates = len(delivered) - len(fresh)
        if duplicates:
            metrics.DUPLICATE_MESSAGES.labels(consumer=CONSUMER).inc(duplicates)
        due = {d.envelope.stream_id: d for d in delivered if d.envelope.event_id in fresh
               and isinstance(d.envelope.event, ev.RunScheduled | ev.RetryDue)}
        if not due:
            return 0
        rows = await conn.fetch(Q["lock_runs"], list(due))
        events = []
        for row in rows:
            if not can_transition(RunState(row["state"]), RunState.QUEUED):
                continue
            with tracing.run_span("dispatch run", due[row["id"]].envelope.traceparent,
                                  tenant_id=row["tenant_id"], job_id=row["job_id"],
                                  run_id=row["id"]) as tp:
                reason = "retry" if isinstance(due[row["id"]].envelope.event, ev.RetryDue) \
                    else "dispatched"
                events.append(NewEvent(row["id"], row["version"] + 1, row["tenant_id"],
                                       ev.RunQueued(pool=row["pool"], reason=reason), ACTOR,
                                       traceparent=tp))
        await store.append(conn, events)
    for e in events:
        log.debug("run queued", tenant_id=str(e.tenant_id), run_id=str(e.stream_id))
    metrics.RUNS_QUEUED.inc(len(events))
    return len(events)
