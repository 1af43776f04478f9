"""Identities. A run's id is derived from its occurrence, so storage can hold one run per
`(schedule_id, scheduled_for)` whoever creates it (DESIGN invariant 2)."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime

# Fixed namespace: changing it would give existing occurrences new run ids.
RUN_NAMESPACE = uuid.UUID("6f1b7e52-2b0c-4c59-9d7e-0a1e5c3f7a11")


def new_id() -> uuid.UUID:
    """A fresh id for an event, job, tenant or document: UUIDv7 (RFC 9562), 48 bits of Unix
    milliseconds then 74 random bits. Ids made one after another sort side by side, so their
    B-tree inserts land on the index's rightmost page, not on a random page each (fewer pages
    dirtied and logged per append); uniqueness rests on the random bits as with UUIDv4."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = ((millis & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (rand >> 62 & 0xFFF) << 64
             | 0b10 << 62 | rand & (1 << 62) - 1)
    return uuid.UUID(int=value)


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
