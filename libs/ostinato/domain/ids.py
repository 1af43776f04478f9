"""Identities. A run's id is derived from its occurrence, so storage can hold one run per
`(schedule_id, scheduled_for)` whoever creates it (DESIGN invariant 2)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

# Fixed namespace: changing it would give existing occurrences new run ids.
RUN_NAMESPACE = uuid.UUID("6f1b7e52-2b0c-4c59-9d7e-0a1e5c3f7a11")


def new_id() -> uuid.UUID:
    return uuid.uuid4()


def occurrence_key(job_id: uuid.UUID, scheduled_for: datetime) -> str:
    if scheduled_for.tzinfo is None:
        raise ValueError("scheduled_for must be timezone-aware")
    instant = scheduled_for.astimezone(UTC).isoformat(timespec="microseconds")
    return f"{job_id}/{instant}"


def run_id_for(job_id: uuid.UUID, scheduled_for: datetime) -> uuid.UUID:
    """The one run id an occurrence can have."""
    return uuid.uuid5(RUN_NAMESPACE, occurrence_key(job_id, scheduled_for))


def idempotency_key(run_id: uuid.UUID) -> str:
    """Stable across attempts of a run: what handlers pass to external APIs."""
    return f"run:{run_id}"
