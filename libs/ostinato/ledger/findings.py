"""Findings are reported once per (job, slot, kind): the event that records one carries an id
derived from the three, so a second reconciler, or the same one after a restart, that finds the
same slot appends nothing (the log's event ids are unique)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

FINDING_NAMESPACE = uuid.UUID("6b1f0f7e-3c52-4d55-9a0e-0d4c1f6a8e21")
KINDS = ("missing", "resolved", "disagreement", "complete_within", "max_staleness")


def finding_id(job_id: uuid.UUID, slot: datetime, kind: str) -> uuid.UUID:
    """The event id of the finding `kind` about `slot`: the ledger's "missing", its correction
    "resolved" (the slot got its run or skip after all) and "disagreement", the deadline
    check's "complete_within" (slot: the run's occurrence) and "max_staleness" (slot: the last
    success the staleness is counted from)."""
    if kind not in KINDS:
        raise ValueError(f"unknown finding {kind!r}")
    stamp = slot.astimezone(UTC).isoformat()
    return uuid.uuid5(FINDING_NAMESPACE, f"{job_id}/{stamp}/{kind}")


def unreadable_id(job_id: uuid.UUID, document: Mapping[str, Any]) -> uuid.UUID:
    """The event id of "the ledger cannot read this schedule": once per job and document, so a
    changed schedule that is still unreadable is reported again."""
    digest = hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode())
    return uuid.uuid5(FINDING_NAMESPACE, f"{job_id}/{digest.hexdigest()}/unreadable")
