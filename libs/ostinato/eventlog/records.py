"""Values that enter and leave the log."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from ostinato.domain.events import Event, decode_event
from ostinato.domain.ids import new_id


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append at `version` (the stream's current version + 1)."""

    stream_id: uuid.UUID
    version: int
    tenant_id: uuid.UUID
    event: Event
    actor: str
    epoch: int | None = None
    traceparent: str | None = None
    event_id: uuid.UUID = field(default_factory=new_id)


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    seq: int
    event_id: uuid.UUID
    stream_id: uuid.UUID
    stream_type: str
    version: int
    tenant_id: uuid.UUID
    type: str
    event: Event
    actor: str
    epoch: int | None
    traceparent: str | None
    occurred_at: datetime
    recorded_at: datetime

    @classmethod
    def from_row(cls, row: object) -> RecordedEvent:
        r = row  # asyncpg.Record
        return cls(
            seq=r["seq"],  # type: ignore[index]
            event_id=r["event_id"],  # type: ignore[index]
            stream_id=r["stream_id"],  # type: ignore[index]
            stream_type=r["stream_type"],  # type: ignore[index]
            version=r["version"],  # type: ignore[index]
            tenant_id=r["tenant_id"],  # type: ignore[index]
            type=r["type"],  # type: ignore[index]
            event=decode_event(r["data"]),  # type: ignore[index]
            actor=r["actor"],  # type: ignore[index]
            epoch=r["epoch"],  # type: ignore[index]
            traceparent=r["traceparent"],  # type: ignore[index]
            occurred_at=r["occurred_at"],  # type: ignore[index]
            recorded_at=r["recorded_at"],  # type: ignore[index]
        )
