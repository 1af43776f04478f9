"""A hop's batch appended as columns: one statement writes a batch's events with their read
models and outbox row, where `EventStore.append` builds an event, a record and a projection's
row per run (issue 44: handle runs as columns on the hot path).

`append_queued` is the dispatcher's hop: `RunQueued` for runs it locked. It writes what
`append` and the projector write for the same events (the events as `append_events` does,
the runs as `project_run_queued` leaves them, their slots as `sync_run_slots`, the outbox row as
`outbox.messages` builds it); `tests/integration/test_columnar_append.py` holds the two paths to
the same rows and a rebuild from the log to the live ones. The documents are the catalogue's
encoder's (one per pool and reason, not per run), so the log has one encoder.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import NamedTuple

import asyncpg

from ostinato.domain import events as ev
from ostinato.domain.errors import VersionConflict
from ostinato.domain.ids import new_id
from ostinato.eventlog.outbox import wake_ups
from ostinato.eventlog.records import NewEvent
from ostinato.eventlog.store import EventStore, Q
from ostinato.telemetry import metrics


class Queued(NamedTuple):
    """A run to queue, as its writer read it under a lock: `version` is its stream's version
    before the event; `traceparent` the one to store on the event (the hop's span's, or the
    run's own)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    version: int
    pool: str
    reason: str
    traceparent: str | None


async def append_queued(store: EventStore, conn: asyncpg.Connection, runs: Sequence[Queued],
                        actor: str) -> None:
    """Append `RunQueued` for each of `runs` (locked by the caller, each able to move to
    queued) in one statement, in the caller's transaction; VersionConflict as `append`."""
    if not runs:
        return
    if not conn.is_in_transaction():
        raise RuntimeError("append_queued must run inside a transaction")
    occurred_at = store.clock.now()
    documents: dict[tuple[str, str], str] = {}
    data, event_ids = [], []
    last: dict[tuple[str, uuid.UUID], tuple[Queued, uuid.UUID, int]] = {}
    for run in runs:
        key = (run.pool, run.reason)
        doc = documents.get(key)
        if doc is None:
            doc = documents[key] = ev.encode_event(ev.RunQueued(*key)).decode()
        data.append(doc)
        event_id = new_id()
        event_ids.append(event_id)
        seen = last.get((run.pool, run.tenant_id))
        last[(run.pool, run.tenant_id)] = (run, event_id, 1 if seen is None else seen[2] + 1)
    # the wake-ups: one per (topic, tenant), the envelope of its last event (outbox.messages)
    told = {(store.topics.ready(pool), tenant_id): (
        NewEvent(r.id, r.version + 1, tenant_id, ev.RunQueued(r.pool, r.reason), actor,
                 traceparent=r.traceparent, event_id=event_id), n)
        for (pool, tenant_id), (r, event_id, n) in last.items()}
    try:
        await conn.execute(
            Q["append_run_queued"], [r.id for r in runs], [r.version + 1 for r in runs],
            [r.tenant_id for r in runs], event_ids, [r.pool for r in runs], data,
            [r.traceparent for r in runs], actor, occurred_at,
            *wake_ups(told, occurred_at))
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "events_pkey":
            raise VersionConflict(
                "the stream was changed concurrently; re-read it and try again") from exc
        raise
    metrics.EVENTS_APPENDED.inc(len(runs))
