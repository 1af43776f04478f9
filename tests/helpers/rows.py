"""Typed read-model rows with plain defaults, for tests of the pure decisions that take them
(pause and resume, children, outcomes): name only the columns a test is about."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.domain.lifecycle import Run
from ostinato.domain.states import RunState
from ostinato.stores.runs import LockedRun

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def locked_run(**columns: Any) -> LockedRun:
    """A running run's locked row (attempt 1, token 1, version 3, two steps recorded) with
    `columns` instead; every column not named and not listed here is None."""
    row: dict[str, Any] = {f.name: None for f in msgspec.structs.fields(LockedRun)}
    row |= {"id": uuid.uuid4(), "tenant_id": uuid.uuid4(), "job_id": uuid.uuid4(),
            "task": "t", "pool": "default", "priority": "default", "state": "running",
            "attempt": 1, "fencing_token": 1, "payload_ref": uuid.uuid4(), "scheduled_for": T0,
            "version": 3, "failures": 0, "cancel_requested": False, "steps_done": 2,
            "compensable": False, "paused": False}
    return LockedRun(**(row | columns))


ROW = """
SELECT state, version, attempt, fencing_token, worker_id, pool, cancel_requested, failures,
       retry_at IS NOT NULL AS retry_pending, output_ref, logs_ref,
       last_error->>'type' AS last_error_type, steps_done, wait_reason AS waiting_for,
       parent_notified, compensable, paused, task_version, pinned, stuck_version
FROM runs WHERE id = $1"""


def _as_run(row: asyncpg.Record) -> Run:
    return Run(**{**dict(row), "state": RunState(row["state"])})
