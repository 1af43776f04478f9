"""Expired leases (worker killed, partitioned, paused past its lease), judged by the database
clock: `LeaseExpired` revokes the token (a late write from that worker is refused as stale), and
the retry policy decides: a new attempt, or the dead-letter queue."""

from __future__ import annotations

import asyncpg

from ostinato import outcomes
from ostinato.clock import Clock
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore
from ostinato.leases import attempts as attempt_leases
from ostinato.stores import runs
from ostinato.telemetry import metrics
from services.reconciler.checks.run_repairs import append_to, log, observe


async def expire_leases(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                        batch_size: int = 200) -> int:
    now = clock.now()
    async with pool.acquire() as conn, conn.transaction():
        leases = await attempt_leases.expired_leases(conn, clock.db_now(), batch_size)
        if not leases:
            return 0
        rows = {r.id: r for r in await runs.lock(conn, [lease.run_id for lease in leases])}
        events: list[NewEvent] = []
        for lease in leases:
            row = rows.get(lease.run_id)
            if row is None or row.state != "running" \
                    or row.fencing_token != lease.lease_token:
                continue  # a leftover lease of an attempt that already ended
            append_to(events, row, outcomes.lease_expired(row, now=now,
                                                           worker_id=lease.worker_id))
            metrics.LEASE_EXPIRATIONS.inc()
            log.warning("lease expired", tenant_id=str(row.tenant_id),
                        job_id=str(row.job_id), run_id=str(row.id),
                        attempt=row.attempt, worker_id=lease.worker_id)
        await store.append(conn, events)
        await attempt_leases.release_leases(conn, [lease.run_id for lease in leases])
    observe(events)
    return len({e.stream_id for e in events})
