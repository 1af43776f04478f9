"""Typed read-model rows with plain defaults, for tests of the pure decisions that take them
(pause and resume, children, outcomes): name only the columns a test is about."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec

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
