"""Recovery of attempts nobody will finish, judged by the database clock:

- **expired leases** (worker killed, partitioned, paused past its lease): `LeaseExpired`, the
  token is revoked (a late write from that worker is refused as stale), and the retry policy
  decides: a new attempt, or the dead-letter queue.
- **timeouts** the worker did not report (a hung handler that still heartbeats):
  `AttemptTimedOut` found by the reconciler, then the same decision.
- **queue-wait deadlines**: a run not started within its job's `queue_wait_timeout` gets
  `QueueWaitExpired` and, per the job, `RunDeadLettered` or `RunCancelled` — never waits forever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import asyncpg

from ostinato import outcomes
from ostinato.clock import Clock
from ostinato.db.queries import load
from ostinato.domain import events as ev
from ostinato.domain.states import RunState, can_transition
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

LQ = load("ostinato.leases", "leases.sql")
ACTOR = "reconciler"
log = get_logger("ostinato.reconciler")


def _append_to(events: list[NewEvent], row: Mapping[str, Any], new: list[ev.Event]) -> None:
    for i, event in enumerate(new, start=1):
        events.append(NewEvent(row["id"], row["version"] + i, row["tenant_id"], event, ACTOR,
                               traceparent=row["traceparent"]))


async def expire_leases(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                        batch_size: int = 200) -> int:
    now = clock.now()
    async with pool.acquire() as conn, conn.transaction():
        leases = await conn.fetch(LQ["expired_leases"], clock.db_now(), batch_size)
        if not leases:
            return 0
        rows = {r["id"]: r for r in
                await conn.fetch(Q["lock_runs"], [lease["run_id"] for lease in leases])}
        events: list[NewEvent] = []
        for lease in leases:
            row = rows.get(lease["run_id"])
            if row is None or row["state"] != "running" \
                    or row["fencing_token"] != lease["lease_token"]:
                continue  # a leftover lease of an attempt that already ended
            _append_to(events, row, outcomes.lease_expired(row, now=now,
                                                           worker_id=lease["worker_id"]))
            metrics.LEASE_EXPIRATIONS.inc()
            log.warning("lease expired", tenant_id=str(row["tenant_id"]),
                        job_id=str(row["job_id"]), run_id=str(row["id"]),
                        attempt=row["attempt"], worker_id=lease["worker_id"])
        await store.append(conn, events)
        await conn.execute(LQ["release_leases"], [lease["run_id"] for lease in leases])
    _observe(events)
    return len({e.stream_id for e in events})


async def _per_run(pool: asyncpg.Pool, store: EventStore, query: str, args: tuple[Any, ...],
                   decide: Callable[[Mapping[str, Any]], list[ev.Event]],
                   end_lease: bool) -> int:
    async with pool.acquire() as conn, conn.transaction():
        ids = [r["id"] for r in await conn.fetch(query, *args)]
        if not ids:
            return 0
        rows = await conn.fetch(Q["lock_runs"], ids)
        events: list[NewEvent] = []
        for row in rows:
            _append_to(events, row, decide(row))
        await store.append(conn, events)
        if end_lease:
            await conn.execute(LQ["release_leases"], ids)
    _observe(events)
    return len({e.stream_id for e in events})


async def expire_timeouts(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                          grace: timedelta = timedelta(seconds=5), batch_size: int = 200) -> int:
    now = clock.now()

    def decide(row: Mapping[str, Any]) -> list[ev.Event]:
        if row["state"] != "running":
            return []
        return outcomes.timed_out(row, now=now, detected_by=ACTOR)

    return await _per_run(pool, store, Q["timed_out_runs"], (now, grace, batch_size), decide,
                          end_lease=True)


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

    return await _per_run(pool, store, Q["queue_wait_expired"], (now, batch_size), decide,
                          end_lease=False)


def _observe(events: list[NewEvent]) -> None:
    for e in events:
        outcomes.observe(e.tenant_id, e.stream_id, e.event)
