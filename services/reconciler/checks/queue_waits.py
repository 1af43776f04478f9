"""Queue-wait deadlines: a run not started within its job's `queue_wait_timeout` gets
`QueueWaitExpired` and, per the job, `RunDeadLettered` or `RunCancelled`: it never waits
forever."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import asyncpg

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain.states import RunState, can_transition
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.store import EventStore
from services.reconciler.checks.run_repairs import ACTOR, per_run


async def expire_queue_waits(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                             batch_size: int = 200) -> int:
    now = clock.now()

    def decide(row: Mapping[str, Any]) -> list[ev.Event]:
        state = RunState(row["state"])
        if not can_transition(state, RunState.DEAD_LETTERED):
            return []  # started meanwhile
        due = row["due_at"] or row["scheduled_for"]
        expired = ev.QueueWaitExpired(
            deadline=due + timedelta(seconds=float(row["queue_wait_seconds"] or 0)))
        if row["on_queue_wait"] == "skip":
            return [expired, ev.RunCancelled(by=ACTOR, reason="queue_wait_expired")]
        return [expired, ev.RunDeadLettered(
            reason="queue_wait_expired", error_type="queue_wait_expired",
            message=f"not started within {row['queue_wait_seconds']}s of its due time",
            attempts=row["attempt"], job_id=row["job_id"])]

    return await per_run(pool, store, Q["queue_wait_expired"], (now, batch_size), decide,
                          end_lease=False)
