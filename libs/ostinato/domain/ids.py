"""Identities. A run's id is derived from its occurrence, so storage can hold one run per
`(schedule_id, scheduled_for)` whoever creates it (DESIGN invariant 2)."""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from datetime import UTC, datetime

# Fixed namespace: changing it would give existing occurrences new run ids.
RUN_NAMESPACE = uuid.UUID("6f1b7e52-2b0c-4c59-9d7e-0a1e5c3f7a11")
_NAMESPACE_BYTES = RUN_NAMESPACE.bytes


# Random 80-bit values made from one getrandom() call per 400 ids rather than one per id;
# list.pop is atomic, so threads never share one. A forked child drops its copy of the parent's
# (`os.register_at_fork`), never reusing them.
_randoms: list[int] = []


def _refill() -> None:
    block = os.urandom(4000)
    _randoms.extend(int.from_bytes(block[i:i + 10], "big") for i in range(0, 4000, 10))


os.register_at_fork(after_in_child=_randoms.clear)
_uuid_new, _set = object.__new__, object.__setattr__
_UUID, _UNKNOWN = uuid.UUID, uuid.SafeUUID.unknown
_sha1 = hashlib.sha1


def new_id() -> uuid.UUID:
    """A fresh id for an event, job, tenant or document: UUIDv7 (RFC 9562), 48 bits of Unix
    milliseconds then 74 random bits. Ids made one after another sort side by side, so their
    B-tree inserts land on the index's rightmost page, not on a random page each (fewer pages
    dirtied and logged per append); uniqueness rests on the random bits as with UUIDv4. Made
    as UUID.__init__ makes one from an int, without re-checking the bits set here, from the
    random values read in blocks: 0.9 µs an id rather than 1.8."""
    while True:
        try:
            rand = _randoms.pop()
            break
        except IndexError:
            _refill()
    millis = time.time_ns() // 1_000_000
    value = ((millis & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (rand >> 62 & 0xFFF) << 64
             | 0b10 << 62 | rand & (1 << 62) - 1)
    made = _uuid_new(_UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN)
    return made  # type: ignore[no-any-return]


def occurrence_key(job_id: uuid.UUID, scheduled_for: datetime) -> str:
    if scheduled_for.tzinfo is None:
        raise ValueError("scheduled_for must be timezone-aware")
    instant = scheduled_for.astimezone(UTC).isoformat(timespec="microseconds")
    return f"{job_id}/{instant}"


def run_id_for(job_id: uuid.UUID, scheduled_for: datetime) -> uuid.UUID:
    """The one run id an occurrence can have: `uuid.uuid5(RUN_NAMESPACE, occurrence_key)`,
    made as `new_id` makes one (the SHA-1 digest's bits set here, not checked again by
    UUID.__init__): a run's id is derived once a run by the scheduler and again by every
    reader of an occurrence."""
    digest = _sha1(_NAMESPACE_BYTES + occurrence_key(job_id, scheduled_for).encode()).digest()
    value = (int.from_bytes(digest[:16], "big") & ~(0xF000 << 64 | 0xC000 << 48)
             | 5 << 76 | 0x8000 << 48)
    made = _uuid_new(_UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN)
    return made  # type: ignore[no-any-return]


def idempotency_key(run_id: uuid.UUID) -> str:
    """Stable across attempts of a run: what handlers pass to external APIs."""
    return f"run:{run_id}"
