"""Abandoned leases (worker killed, partitioned, paused), judged by the database clock: an
expired lease, or the lease of a worker that pings and has been silent for seconds
(`policy.liveness.abandoned`). Either way `LeaseExpired` (with its `cause`) revokes the token (a
late write from that worker is refused as stale), and the retry policy decides: a new attempt,
or the dead-letter queue."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from ostinato import outcomes
from ostinato.clock import Clock
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore
from ostinato.leases import attempts as attempt_leases
from ostinato.policy import liveness
from ostinato.stores import runs
from ostinato.telemetry import metrics
from services.reconciler.checks.run_repairs import append_to, log, observe

DEAD_AFTER = timedelta(seconds=3)  # OSTINATO_WORKER_DEAD_AFTER_SECONDS' default


class LeaseWatch:
    """The lease check of one reconciler process, with the start of its continuous watch
    (`liveness.watch_start`): silence is only counted while this process kept looking."""

    def __init__(self, pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                 dead_after: timedelta = DEAD_AFTER, batch_size: int = 200) -> None:
        self.pool, self.store, self.clock = pool, store, clock
        self.dead_after = dead_after
        self.batch_size = batch_size
        self.since: datetime | None = None
        self.last_pass: datetime | None = None

    async def __call__(self) -> int:
        return await self.expire()

    async def expire(self) -> int:
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            db_now = self.clock.db_now() or await conn.fetchval("SELECT now()")
            since = liveness.watch_start(self.since, self.last_pass, db_now, self.dead_after)
            self.since, self.last_pass = since, db_now
            leases = await attempt_leases.abandoned_leases(
                conn, self.clock.db_now(), since, self.dead_after, self.batch_size)
            causes = {lease.run_id: cause for lease in leases if (cause := liveness.abandoned(
                now=lease.now, expires_at=lease.expires_at, seen_at=lease.seen_at,
                liveness_seconds=lease.liveness_seconds, dead_after=self.dead_after,
                watching_since=since, gateways_since=lease.gateways_since)) is not None}
            if not causes:
                return 0
            rows = {r.id: r for r in await runs.lock(conn, list(causes))}
            events: list[NewEvent] = []
            for lease in leases:
                row, cause = rows.get(lease.run_id), causes.get(lease.run_id)
                if cause is None or row is None or row.state != "running" \
                        or row.fencing_token != lease.lease_token:
                    continue  # a leftover lease of an attempt that already ended
                append_to(events, row, outcomes.lease_expired(row, now=now,
                                                               worker_id=lease.worker_id,
                                                               cause=cause))
                metrics.LEASE_EXPIRATIONS.inc()
                log.warning("lease expired" if cause == "lease_expired"
                            else "worker silent: its lease taken back",
                            tenant_id=str(row.tenant_id), job_id=str(row.job_id),
                            run_id=str(row.id), attempt=row.attempt, worker_id=lease.worker_id,
                            cause=cause, lease_expires_at=lease.expires_at.isoformat())
            await self.store.append(conn, events)
            await attempt_leases.release_leases(conn, list(causes))
        observe(events)
        return len({e.stream_id for e in events})


async def expire_leases(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                        batch_size: int = 200) -> int:
    """One pass judging expiry alone (no watch yet: no worker can be judged silent)."""
    return await LeaseWatch(pool, store, clock, batch_size=batch_size).expire()
