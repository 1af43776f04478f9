"""Answers the API serves as plain JSON objects (no Struct of their own in the OpenAPI
document), typed here so the client can decode them like the rest. Field names are the API's.

These live beside `models` rather than in it because the API does not use them: it builds the
same objects as dicts. A test (tests/integration/test_client.py) decodes real answers into
them, so a drift shows up there.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import msgspec

from ostinato.wire.api import (
    AlertSinkView,
    AlertView,
    CalendarView,
    DeadLetterView,
    JobBatchItem,
    KeyView,
    LimitView,
    PoolView,
)


class JobStatus(msgspec.Struct, kw_only=True):
    """POST /v1/jobs/{id}/pause and /resume: the job's status after the call."""

    status: str


class JobBatch(msgspec.Struct, kw_only=True):
    items: list[JobBatchItem]


class Calendars(msgspec.Struct, kw_only=True):
    items: list[CalendarView]


class AlertSinks(msgspec.Struct, kw_only=True):
    items: list[AlertSinkView]


class Alerts(msgspec.Struct, kw_only=True):
    items: list[AlertView]


class Cancelled(msgspec.Struct, kw_only=True):
    """POST /v1/runs/{id}/cancel: `cancel` is `done` (it was waiting) or `requested` (a running
    run stops at its next safe point)."""

    state: str
    cancel: str


class RunPaused(msgspec.Struct, kw_only=True):
    paused: bool
    changed: bool  # False: it was already so


class LogLine(msgspec.Struct, kw_only=True):
    t: float  # seconds since the attempt started, on the worker's monotonic clock
    level: str
    message: str
    fields: dict[str, Any] = {}


class RunLogs(msgspec.Struct, kw_only=True):
    """The log lines of the run's latest reported attempt."""

    run_id: uuid.UUID
    attempt: int
    items: list[LogLine]


class DeadLetterCounts(msgspec.Struct, kw_only=True):
    total: int
    by_error_type: dict[str, int]
    by_triage_state: dict[str, int]


class DeadLetterPage(msgspec.Struct, kw_only=True):
    items: list[DeadLetterView]
    counts: DeadLetterCounts  # of every dead letter matching the filter, not just this page
    next_cursor: str | None = None


class Triaged(msgspec.Struct, kw_only=True):
    triage_state: str


class BulkReplayed(msgspec.Struct, kw_only=True):
    matched: int
    replayed: int
    already_replayed: int


class Pools(msgspec.Struct, kw_only=True):
    items: list[PoolView]


class PoolPaused(msgspec.Struct, kw_only=True):
    pool: str
    scope: str  # "every tenant" (admin key) or "this tenant's queue"
    status: str  # paused | active
    changed: bool


class WorkerView(msgspec.Struct, kw_only=True):
    worker_id: str
    shared: bool  # started with the admin key: serves every tenant
    pools: list[str]
    slots: int
    seen_at: datetime
    versions: dict[str, str] = {}  # task -> the handler version this worker serves


class Workers(msgspec.Struct, kw_only=True):
    items: list[WorkerView]


class Limits(msgspec.Struct, kw_only=True):
    items: list[LimitView]


class Keys(msgspec.Struct, kw_only=True):
    """GET /v1/keys."""

    keys: list[KeyView]


class LimitSet(msgspec.Struct, kw_only=True):
    scope: str
    name: str
    status: str
