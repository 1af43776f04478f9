"""Expired leases (worker killed, partitioned, paused past its lease), judged by the database
clock: `LeaseExpired` revokes the token (a late write from that worker is refused as stale), and
the retry policy decides: a new attempt, or the dead-letter queue."""

from __future__ import annotations

import asyncpg

from ostinato import outcomes
from ostinato.clock import Clock
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore
from ostinato.telemetry import metrics
from services.reconciler.checks.run_repairs import LQ, append_to, log, observe


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
            append_to(events, row, outcomes.lease_expired(row, now=now,
                                                           worker_id=lease["worker_id"]))
            metrics.LEASE_EXPIRATIONS.inc()
            log.warning("lease expired", tenant_id=str(row["tenant_id"]),
                        job_id=str(row["job_id"]), run_id=str(row["id"]),
                        attempt=row["attempt"], worker_id=lease["worker_id"])
        await store.append(conn, events)
        await conn.execute(LQ["release_leases"], [lease["run_id"] for lease in leases])
    observe(events)
    return len({e.stream_id for e in events})
