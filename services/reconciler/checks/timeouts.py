"""Timeouts the worker did not report (a hung handler that still heartbeats): `AttemptTimedOut`
found by the reconciler, then the retry policy's decision, as for an expired lease."""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from ostinato import outcomes
from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.eventlog.store import EventStore
from ostinato.stores import runs
from ostinato.stores.runs import LockedRun
from services.reconciler.checks.run_repairs import ACTOR, per_run


async def expire_timeouts(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                          grace: timedelta = timedelta(seconds=5), batch_size: int = 200) -> int:
    now = clock.now()

    def decide(row: LockedRun) -> list[ev.Event]:
        if row.state != "running":
            return []
        return outcomes.timed_out(row, now=now, detected_by=ACTOR)

    return await per_run(pool, store, lambda conn: runs.timed_out(conn, now, grace, batch_size),
                         decide, end_lease=True)
