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
from ostinato.leases.shard import shard_of
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import get_logger

CONSUMER = "dispatcher"


class EpochFence:
    """Kafka-side fencing: per scheduler shard, the highest epoch seen so far. A message from a
    scheduler writing under an older epoch than one already seen is dropped (and counted); the
    database already refused such writes, so this only guards against a stale producer's
    in-flight messages. A run whose message was dropped stays `scheduled` and the reconciler
    republishes it (without an epoch), so nothing is lost."""

    def __init__(self) -> None:
        self.highest: dict[int, int] = {}

    def admit(self, shard: int, epoch: int | None) -> bool:
        if epoch is None:
            return True
        if epoch < self.highest.get(shard, 0):
            return False
        self.highest[shard] = epoch
        return True
ACTOR = "dispatcher"
log = get_logger("ostinato.dispatcher")


async def queue_due_runs(
    pool: asyncpg.Pool, store: EventStore, delivered: list[Delivered],
    fence: EpochFence | None = None,
) -> int:
    """Handle one batch of `runs.due` messages; returns how many runs were queued."""
    if fence is not None:
        delivered = [d for d in delivered if _admitted(fence, d)]
    async with pool.acquire() as conn, conn.transaction():
        fresh = await mark_processed(conn, CONSUMER, [d.envelope.event_id for d in delivered])
        duplicates = len(delivered) - len(fresh)
        if duplicates:
            metrics.DUPLICATE_MESSAGES.labels(consumer=CONSUMER).inc(duplicates)
        due = {d.envelope.stream_id: d for d in delivered if d.envelope.event_id in fresh
               and isinstance(d.envelope.event, ev.RunScheduled | ev.RetryDue
                              | ev.RunRepublished)}
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


def _admitted(fence: EpochFence, d: Delivered) -> bool:
    event = d.envelope.event
    if not isinstance(event, ev.RunScheduled):
        return True
    shard = shard_of(event.job_id)
    if fence.admit(shard, d.envelope.epoch):
        return True
    metrics.STALE_MESSAGES_DROPPED.inc()
    log.warning("message from a stale scheduler epoch dropped", shard=shard,
                epoch=d.envelope.epoch, highest=fence.highest.get(shard),
                run_id=str(d.envelope.stream_id), tenant_id=str(d.envelope.tenant_id))
    return False
