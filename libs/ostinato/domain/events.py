"""The event catalogue: every fact the log can hold, as versioned msgspec Structs.

Evolution rules (msgspec's): a new field gets a default, a field never changes type, a tag is never
reused. `schemas/events/catalogue.json` is generated from this module (`ostinato schemas`) and a
test keeps it current. Each event names the kind of stream it belongs to.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
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
    next_slot: datetime | None = None  # nominal slot; next_run_at adds the jitter offset


class OccurrenceFired(Event, tag="OccurrenceFired"):
    """The scheduler created the run for one occurrence and moved the job to its next one."""

    stream_type: ClassVar[str] = "job"
    scheduled_for: datetime
    run_id: uuid.UUID
    next_run_at: datetime | None
    next_slot: datetime | None = None


class OccurrencesSkipped(Event, tag="OccurrencesSkipped"):
    """Slots that will not run, with why (misfire policy, calendar, overlap, too late): a skip is
    always recorded, never a silent gap. `slots` is None when the range was too long to count."""

    stream_type: ClassVar[str] = "job"
    first: datetime
    last: datetime
    slots: int | None
    reason: str
    next_run_at: datetime | None
    next_slot: datetime | None


class OccurrenceMissed(Event, tag="OccurrenceMissed"):
    """The reconciler found a due slot with neither a run nor a recorded skip."""

    stream_type: ClassVar[str] = "job"
    scheduled_for: datetime
    detected_by: str
    repair: str  # what follows: "run" | "skip" | "scheduler" (left to the scheduler's policy)


class JobPaused(Event, tag="JobPaused"):
    stream_type: ClassVar[str] = "job"
    reason: str
    auto: bool = False


class JobResumed(Event, tag="JobResumed"):
    """`misfire` decides the slots missed while paused (None: the schedule's own policy)."""

    stream_type: ClassVar[str] = "job"
    misfire: str | None = None


class BackfillRequested(Event, tag="BackfillRequested"):
    stream_type: ClassVar[str] = "job"
    start: datetime
    end: datetime
    runs_created: int
    slots_with_runs: int
    slots_skipped: int


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
    trigger: str = "schedule"  # schedule | manual | backfill | repair
    due_at: datetime | None = None  # scheduled_for + jitter


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


# -- calendar streams --------------------------------------------------------------------------


class CalendarDefined(Event, tag="CalendarDefined"):
    """Creates or replaces a named exclusion calendar: dates a schedule skips (in its zone)."""

    stream_type: ClassVar[str] = "calendar"
    name: str
    dates: list[date]


CATALOGUE: tuple[type[Event], ...] = (
    TenantCreated,
    ApiKeyIssued,
    JobCreated,
    OccurrenceFired,
    OccurrencesSkipped,
    OccurrenceMissed,
    JobPaused,
    JobResumed,
    BackfillRequested,
    JobDeleted,
    CalendarDefined,
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
    | OccurrencesSkipped
    | OccurrenceMissed
    | JobPaused
    | JobResumed
    | BackfillRequested
    | JobDeleted
    | CalendarDefined
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
