"""Schedule semantics: when a job's occurrences fall.

Only one-off schedules (`at`, or no schedule: due now) exist yet. Cron and interval schedules with
IANA time zones, DST and misfire policies arrive with the recurring-schedules issue; until then
they are refused with a clear error, never accepted and ignored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

from ostinato.domain.errors import NotImplementedYet

AwareDatetime = Annotated[datetime, msgspec.Meta(tz=True)]


class ScheduleSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    at: AwareDatetime | None = None
    cron: str | None = None
    timezone: str | None = None
    every: str | None = None


def check_supported(spec: ScheduleSpec) -> None:
    for field in ("cron", "every", "timezone"):
        if getattr(spec, field) is not None:
            raise NotImplementedYet(
                f"schedule.{field}: recurring schedules are not available yet; "
                "use a one-off schedule {\"at\": \"<RFC 3339 instant>\"}",
                errors=[{"field": f"schedule.{field}",
                         "message": "recurring schedules are not available yet"}],
            )


def first_occurrence(spec: ScheduleSpec | None, now: datetime) -> datetime:
    """The first instant a new job is due: its `at`, or now when none is given."""
    if spec is None or spec.at is None:
        return now
    return spec.at


def next_after(schedule: dict[str, Any], scheduled_for: datetime) -> datetime | None:
    """The occurrence after `scheduled_for`; a one-off schedule has none."""
    return None


def as_document(spec: ScheduleSpec | None, first: datetime) -> dict[str, Any]:
    """The schedule as stored in JobCreated: explicit, so the log says exactly when it was due."""
    return {"at": first.isoformat()}
