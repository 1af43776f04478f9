"""Schedule semantics: when a job's occurrences fall, and what happens to missed ones.

Pure functions (no I/O, no clock: `now` is always an argument). The user-facing rules are
documented in docs/SCHEDULES.md:

- `spec`: the public JSON shape (`ScheduleSpec`);
- `model`: the normalised `Schedule` and its stored document;
- `parse`: validation of user input into a `Schedule`;
- `occurrences`: the instants (cron in the schedule's IANA zone with an explicit DST policy,
  fixed intervals in UTC, one-off instants), jitter and the preview;
- `misfire`: which due slots fire and which are skipped, and why.
"""

from ostinato.domain.durations import format_duration, parse_duration
from ostinato.schedules.misfire import Plan, SkipRange, plan_due
from ostinato.schedules.model import Schedule, from_document, to_document
from ostinato.schedules.occurrences import (
    expected_slots,
    jitter_offset,
    next_occurrence,
    occurrences,
    preview,
)
from ostinato.schedules.parse import parse_schedule
from ostinato.schedules.spec import AwareDatetime, ScheduleSpec

__all__ = [
    "AwareDatetime",
    "Plan",
    "Schedule",
    "ScheduleSpec",
    "SkipRange",
    "expected_slots",
    "format_duration",
    "from_document",
    "jitter_offset",
    "next_occurrence",
    "occurrences",
    "parse_duration",
    "parse_schedule",
    "plan_due",
    "preview",
    "to_document",
]
