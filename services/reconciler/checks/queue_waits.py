"""Queue-wait deadlines: a run not started within its job's `queue_wait_timeout` gets
`QueueWaitExpired` and, per the job, `RunDeadLettered` or `RunCancelled`: it never waits
forever."""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain.states import RunState, can_transition
from ostinato.eventlog.store import EventStore
from ostinato.stores import runs
from ostinato.stores.runs import LockedRun
from services.reconciler.checks.run_repairs import ACTOR, per_run


async def expire_queue_waits(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                             batch_size: int = 200) -> int:
    now = clock.now()

    def decide(row: LockedRun) -> list[ev.Event]:
        state = RunState(row.state)
        if not can_transition(state, RunState.DEAD_LETTERED):
            return []  # started meanwhile
        due = row.due_at or row.scheduled_for
        expired = ev.QueueWaitExpired(
            deadline=due + timedelta(seconds=float(row.queue_wait_seconds or 0)))
        if row.on_queue_wait == "skip":
            return [expired, ev.RunCancelled(by=ACTOR, reason="queue_wait_expired")]
        return [expired, ev.RunDeadLettered(
            reason="queue_wait_expired", error_type="queue_wait_expired",
            message=f"not started within {row.queue_wait_seconds}s of its due time",
            attempts=row.failures + 1, job_id=row.job_id)]  # the attempt it waited for

    return await per_run(pool, store, lambda conn: runs.queue_wait_expired(conn, now, batch_size),
                         decide, end_lease=False)
