"""A job's expected-occurrence ledger read from the database: the slots the independent
enumeration (`ostinato.ledger`) expects over a window, the scheduler's own slots over the same
window (`ostinato.schedules`), and what happened to each (runs, recorded skips, pauses, calendar
dates), classified. Shared by the reconciler's ledger check and `GET /v1/jobs/{id}/ledger`."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from ostinato import calendars, ledger
from ostinato import schedules as scheduler
from ostinato.leases import shard as shard_leases
from ostinato.ledger import CarriedRange, Context, Entry, RunFact, SkipFact
from ostinato.stores import jobs as job_store
from ostinato.stores import ledger as ledger_store
from ostinato.stores import runs as run_store

_TICK = timedelta(microseconds=1)


async def job_entries(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID,
                      document: Mapping[str, Any], *, overlap: str, calendar: str | None,
                      next_slot: datetime | None, start: datetime, end: datetime,
                      now: datetime, grace: timedelta, limit: int) -> list[Entry]:
    """The classified slots of one job in [start, end), at most about `limit` (when the ledger
    enumerates `limit` slots, the window ends after its last, for both implementations). Slots
    the scheduler has not passed yet (its shard's `decided_through`) are `pending`."""
    doc = dict(document)
    mine = ledger.read_document(doc)
    theirs = scheduler.from_document(doc)
    pauses = [(p.paused_at, p.resumed_at) for p in await job_store.pauses(conn, job_id)]
    excluded: frozenset[date] = frozenset()
    if calendar:
        excluded = (await calendars.excluded_dates(conn, [(tenant_id, calendar)])).get(
            (tenant_id, calendar), frozenset())
    expected = ledger.expected_slots(mine, start, end, paused=pauses, excluded_dates=excluded,
                                     limit=limit)
    if len(expected) >= limit:
        end = expected[-1].slot + _TICK
    scheduler_slots = set(scheduler.expected_slots(theirs, start, end, limit=2 * limit + 10))
    runs = {r.scheduled_for: RunFact(r.id, r.state, dag=r.dag)
            for r in await ledger_store.runs_between(conn, tenant_id, job_id, start, end)}
    skips = [SkipFact(k.first_slot, k.last_slot, k.reason)
             for k in await ledger_store.skips_between(conn, tenant_id, job_id, start, end)]
    carried = [CarriedRange(c.first_slot, c.last_slot, c.state)
               for c in await ledger_store.carried_between(conn, tenant_id, job_id, start, end)]
    if carried:  # runs retention removed: their slots read as they did while hot
        missing = set(await ledger_store.unresolved_missing(conn, tenant_id, job_id, start, end))
        runs |= ledger.carried_runs(expected, carried, runs, skips, missing)
    waiting_from = None
    if overlap == "queue" and (await run_store.active_counts(conn, [job_id])).get(job_id):
        waiting_from = next_slot  # the scheduler holds its next slot until the run is final
    jitter = mine.jitter or timedelta(0)
    # a slot the scheduler has not passed yet is pending, however late by the clock
    decided_through = await shard_leases.decided_through_of_job(conn, job_id)
    context = Context(now=now, due_within=jitter + grace, waiting_from=waiting_from,
                      decided_through=decided_through or datetime.min.replace(tzinfo=UTC),
                      jitter=jitter)
    return ledger.classify(expected, runs, skips, context, scheduler_slots=scheduler_slots)
