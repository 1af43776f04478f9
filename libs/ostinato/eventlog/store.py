"""Append to and read from the log. `append` must run inside the caller's transaction: it writes
the events, updates the read models and fills the outbox, so all commit or none do."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.bus.topics import Topics
from ostinato.clock import Clock
from ostinato.db.queries import load
from ostinato.domain.errors import VersionConflict
from ostinato.domain.events import encode_event, event_type
from ostinato.eventlog import ended, outbox, readmodels
from ostinato.eventlog.records import NewEvent, RecordedEvent
from ostinato.telemetry import metrics

Q = load("ostinato.eventlog", "eventlog.sql")
_json = msgspec.json.Encoder()


class EventStore:
    def __init__(self, clock: Clock, topics: Topics) -> None:
        self.clock = clock
        self.topics = topics

    async def append(
        self, conn: asyncpg.Connection, events: Sequence[NewEvent]
    ) -> list[RecordedEvent]:
        """Append `events` (each at its expected version) or raise VersionConflict."""
        if not events:
            return []
        if not conn.is_in_transaction():
            raise RuntimeError("EventStore.append must run inside a transaction")
        occurred_at = self.clock.now()
        data = [encode_event(e.event).decode() for e in events]
        try:
            # No savepoint (two round trips per append): a conflict aborts the caller's
            # transaction, which every caller rolls back anyway.
            rows = await conn.fetch(
                Q["append_events"],
                [e.stream_id for e in events],
                [e.version for e in events],
                [e.event.stream_type for e in events],
                [e.tenant_id for e in events],
                [e.event_id for e in events],
                [event_type(e.event) for e in events],
                data,
                [e.actor for e in events],
                [e.epoch for e in events],
                [e.traceparent for e in events],
                occurred_at,
                *outbox.messages(self.topics, events, occurred_at),
                ended.notices(events),
            )
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name == "events_pkey":
                raise VersionConflict(
                    "the stream was changed concurrently; re-read it and try again"
                ) from exc
            raise
        by_id = {row["event_id"]: row for row in rows}  # RETURNING order is not promised
        recorded = [
            RecordedEvent(
                seq=by_id[e.event_id]["seq"], event_id=e.event_id, stream_id=e.stream_id,
                stream_type=e.event.stream_type, version=e.version,
                tenant_id=e.tenant_id, type=event_type(e.event), event=e.event, actor=e.actor,
                epoch=e.epoch, traceparent=e.traceparent, occurred_at=occurred_at,
                recorded_at=by_id[e.event_id]["recorded_at"],
            )
            for e in events
        ]
        await readmodels.apply(conn, recorded)
        metrics.EVENTS_APPENDED.inc(len(recorded))
        return recorded


async def read_stream(
    conn: asyncpg.Connection, stream_id: uuid.UUID, tenant_id: uuid.UUID
) -> list[RecordedEvent]:
    return [RecordedEvent.from_row(r) for r in await conn.fetch(Q["read_stream"], stream_id,
                                                                 tenant_id)]


async def read_stream_page(conn: asyncpg.Connection, stream_id: uuid.UUID,
                           tenant_id: uuid.UUID, after: int, limit: int) -> list[RecordedEvent]:
    """Up to `limit` of the stream's events after version `after`, in order."""
    return [RecordedEvent.from_row(r) for r in await conn.fetch(
        Q["read_stream_page"], stream_id, tenant_id, after, limit)]


async def read_all_after(conn: asyncpg.Connection, after: int, limit: int) -> list[RecordedEvent]:
    return [RecordedEvent.from_row(r) for r in await conn.fetch(Q["read_all_after"], after, limit)]


async def put_blobs(
    conn: asyncpg.Connection, items: Sequence[tuple[uuid.UUID, uuid.UUID, bytes]],
    kind: str | Sequence[str] = "payload",
) -> None:
    """Store many (blob_id, tenant_id, json bytes) documents at once; `kind` is one of
    payload, output, logs, step (one for all, or one per item): outputs and logs expire."""
    if items:
        kinds = [kind] * len(items) if isinstance(kind, str) else list(kind)
        await conn.execute(
            Q["insert_blobs"], [i[0] for i in items], [i[1] for i in items],
            [i[2].decode() for i in items], [len(i[2]) for i in items], kinds,
        )


async def expire_blobs(conn: asyncpg.Connection, older_than: datetime, limit: int = 5000) -> int:
    """Delete outputs and logs created before `older_than`; returns how many went."""
    status = await conn.execute(Q["expire_blobs"], older_than, limit)
    return int(status.split()[-1])


async def get_blobs(
    conn: asyncpg.Connection, ids: Sequence[uuid.UUID], tenant_id: uuid.UUID | None
) -> dict[uuid.UUID, Any]:
    """Documents by id; `tenant_id=None` only for callers that already checked the tenant."""
    if tenant_id is None:
        rows = await conn.fetch(Q["get_blobs_any_tenant"], list(ids))
    else:
        rows = await conn.fetch(Q["get_blobs"], list(ids), tenant_id)
    return {r["id"]: msgspec.json.decode(r["data"]) for r in rows}

