"""The event catalogue: every fact the log can hold, as versioned msgspec Structs.

Evolution rules (msgspec's): a new field gets a default, a field never changes type, a tag is never
reused. `schemas/events/catalogue.json` is generated from this module (`ostinato schemas`) and a
test keeps it current. Each event names the kind of stream it belongs to.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar

import msgspec


class Event(msgspec.Struct, tag_field="type", frozen=True, kw_only=True):
    stream_type: ClassVar[str]


# -- tenant streams ----------------------------------------------------------------------------


class TenantCreated(Event, tag="TenantCreated"):
    stream_type: ClassVar[str] = "tenant"
    name: str
    weight: int = 1


class ApiKeyIssued(Event, tag="ApiKeyIssued"):
    stream_type: ClassVar[str] = "tenant"
    key_hash: str  # hex sha256; the key itself is shown once and never stored
    role: str


# -- job streams -------------------------------------------------------------------------------


class JobCreated(Event, tag="JobCreated"):
    stream_type: ClassVar[str] = "job"
    name: str
    task: str
    schedule: dict[str, Any]
    payload_ref: uuid.UUID
    pool: str
    priority: str
    next_run_at: datetime | None
    idempotency_key: str | None = None


class OccurrenceFired(Event, tag="OccurrenceFired"):
    """The scheduler created the run for one occurrence and moved the job to its next one."""

    stream_type: ClassVar[str] = "job"
    scheduled_for: datetime
    run_id: uuid.UUID
    next_run_at: datetime | None


class JobDeleted(Event, tag="JobDeleted"):
    stream_type: ClassVar[str] = "job"
    reason: str = "deleted by user"


# -- run streams -------------------------------------------------------------------------------


class RunScheduled(Event, tag="RunScheduled"):
    stream_type: ClassVar[str] = "run"
    job_id: uuid.UUID
    task: str
    pool: str
    priority: str
    payload_ref: uuid.UUID
    scheduled_for: datetime


class RunQueued(Event, tag="RunQueued"):
    stream_type: ClassVar[str] = "run"
    pool: str
    reason: str = "dispatched"


class RunStarted(Event, tag="RunStarted"):
    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    worker_id: str
    lease_expires_at: datetime


class RunSucceeded(Event, tag="RunSucceeded"):
    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    output_ref: uuid.UUID | None


class RunFailed(Event, tag="RunFailed"):
    stream_type: ClassVar[str] = "run"
    attempt: int
    fencing_token: int
    error_type: str
    message: str
    retryable: bool


class StaleWriteRejected(Event, tag="StaleWriteRejected"):
    """A writer presented a fencing token that is no longer current; nothing else changed."""

    stream_type: ClassVar[str] = "run"
    operation: str
    presented_token: int
    current_token: int
    worker_id: str


CATALOGUE: tuple[type[Event], ...] = (
    TenantCreated,
    ApiKeyIssued,
    JobCreated,
    OccurrenceFired,
    JobDeleted,
    RunScheduled,
    RunQueued,
    RunStarted,
    RunSucceeded,
    RunFailed,
    StaleWriteRejected,
)

AnyEvent = (
    TenantCreated
    | ApiKeyIssued
    | JobCreated
    | OccurrenceFired
    | JobDeleted
    | RunScheduled
    | RunQueued
    | RunStarted
    | RunSucceeded
    | RunFailed
    | StaleWriteRejected
)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)


def encode_event(event: Event) -> bytes:
    return _encoder.encode(event)


def decode_event(data: bytes | str) -> Event:
    return _decoder.decode(data)


def event_type(event: Event) -> str:
    return type(event).__struct_config__.tag  # type: ignore[return-value]


def json_schema() -> dict[str, Any]:
    """The catalogue as one JSON Schema document (committed under schemas/events/)."""
    (schema,), components = msgspec.json.schema_components([AnyEvent])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Ostinato run-event log catalogue",
        **schema,
        "$defs": components,
    }
