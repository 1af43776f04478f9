"""A job's schedule as the job pages show it: as written, its zone, and its upcoming occurrences
with a note where the zone's clock changes (the new-job form's preview, the edit's before and
after, the job page). The occurrences are `ostinato.schedules.preview`'s, as GET
/v1/jobs/{id}/upcoming and POST /v1/schedules/preview answer them; the notes only read them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ostinato import schedules
from ostinato.schedules.zones import classify
from ostinato.stores.jobs import JobRow

UPCOMING = 10
EPSILON = timedelta(microseconds=1)  # as GET /v1/jobs/{id}/upcoming: the next slot included


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One upcoming occurrence: its local time (ISO 8601 with the offset), UTC slot and due
    instant (the slot plus the schedule's jitter), and what DST does to it ("" if nothing)."""

    local: str
    slot: datetime
    due: datetime
    note: str


def zone_of(job: JobRow) -> str:
    return str(job.schedule.get("timezone") or "UTC")


def schedule_raw(doc: dict[str, Any]) -> str:
    """The schedule as written: the expression and zone, the interval, or the instant."""
    zone = doc.get("timezone") or "UTC"
    if doc.get("cron"):
        return f"cron {doc['cron']} ({zone})"
    if doc.get("every"):
        return f"every {doc['every']}"
    return f"at {doc.get('at')}" if doc.get("at") else str(doc.get("kind") or "once")


def _offset(delta: timedelta | None) -> str:
    minutes = int((delta or timedelta()).total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _notes(s: schedules.Schedule, slots: list[datetime]) -> list[str]:
    """Per slot: the clock change since the previous one (its offset before and after; a cron
    time it skipped is moved or left out by `dst_gap`), or a local time that occurs twice (which
    pass fires is `dst_fold`'s)."""
    notes, before = [], None
    for slot in slots:
        local = slot.astimezone(s.tz)
        said = []
        if before is not None and before.utcoffset() != local.utcoffset():
            said.append(f"the clocks change before this one ({_offset(before.utcoffset())} → "
                        f"{_offset(local.utcoffset())}; a local time skipped: dst_gap "
                        f"{s.dst_gap})")
        if s.cron and classify(s.tz, local.replace(tzinfo=None))[0] == "fold":
            said.append(f"this local time occurs twice: dst_fold {s.dst_fold}")
        notes.append("; ".join(said))
        before = local
    return notes


def occurrences(s: schedules.Schedule, job_id: uuid.UUID, first: datetime | None,
                count: int = UPCOMING) -> list[Occurrence]:
    """The next `count` occurrences from `first` (its next slot; None: none left)."""
    items = [] if first is None else schedules.preview(s, job_id, first - EPSILON, count)
    notes = _notes(s, [slot for slot, _ in items])
    return [Occurrence(slot.astimezone(s.tz).isoformat(), slot, due, note)
            for (slot, due), note in zip(items, notes, strict=True)]


def upcoming(job: JobRow, count: int = UPCOMING) -> list[Occurrence]:
    """A job's next occurrences (none once it is completed or deleted)."""
    if job.status not in ("active", "paused") or job.next_slot is None:
        return []
    return occurrences(schedules.from_document(job.schedule), job.id, job.next_slot, count)
