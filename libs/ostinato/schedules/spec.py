"""The public JSON shape of a schedule, accepted under "schedule" at POST /v1/jobs.

Decoding only checks types; `parse_schedule` checks meaning (cron syntax, zone, durations, bounds)
and names the offending field. The semantics of every option are in docs/SCHEDULES.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

import msgspec

AwareDatetime = Annotated[datetime, msgspec.Meta(tz=True)]

DstGap = Literal["shift_forward", "skip"]
DstFold = Literal["auto", "first", "second", "both"]
Misfire = Literal["run_once", "catch_up", "skip"]
Overlap = Literal["allow", "skip", "queue"]


def _doc(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


class ScheduleSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """When a job runs: exactly one of `at`, `cron` or `every`, plus policies."""

    # The rule across fields that `parse_schedule` enforces (else a 422 naming `schedule`), in
    # JSON Schema: `runtime/contract.py` puts it into the OpenAPI document.
    SCHEMA_RULES: ClassVar[dict[str, Any]] = {"oneOf": [
        {"required": [k], "properties": {k: {"type": "string"}}} for k in ("at", "cron", "every")]}

    at: Annotated[AwareDatetime | None, _doc(
        "One-off instant, RFC 3339 with an offset.")] = None
    cron: Annotated[str | None, _doc(
        "Cron expression evaluated in `timezone`: 5 fields (minute hour day-of-month month "
        "day-of-week) or 6 with SECONDS FIRST (second minute hour day-of-month month "
        "day-of-week).")] = None
    every: Annotated[str | None, _doc(
        "Fixed interval from `start_at` in UTC, unaffected by DST: \"90s\", \"15m\", "
        "\"1h30m\", \"2d\" or ISO 8601 \"PT15M\"; at least 1s.")] = None
    timezone: Annotated[str, _doc("IANA time zone the cron expression is read in.")] = "UTC"
    start_at: Annotated[AwareDatetime | None, _doc(
        "First possible occurrence and anchor of `every` (default: creation time).")] = None
    end_at: Annotated[AwareDatetime | None, _doc("No occurrence after this instant.")] = None
    dst_gap: Annotated[DstGap, _doc(
        "Local time skipped by a DST change: run at the first instant after the gap, or skip."
    )] = "shift_forward"
    dst_fold: Annotated[DstFold, _doc(
        "Local time that occurs twice: first pass, second pass, both; auto = both when the "
        "cron fires in several hours of the day, else first.")] = "auto"
    misfire: Annotated[Misfire, _doc(
        "What to do with missed occurrences: run the latest once, catch up, or skip.")] = "run_once"
    misfire_grace: Annotated[str, _doc("Lateness still counted as on time.")] = "60s"
    max_lateness: Annotated[str | None, _doc(
        "A missed occurrence older than this is skipped (reason too_late).")] = None
    catch_up_max: Annotated[int, _doc(
        "At most this many missed runs with catch_up (1..1000)."), msgspec.Meta(ge=1, le=1000)] = 10
    jitter: Annotated[str | None, _doc(
        "Deterministic start delay in [0, jitter) per occurrence, to spread load.")] = None
    calendar: Annotated[str | None, _doc(
        "Name of an exclusion calendar: occurrences on its dates (local) are skipped.")] = None
    overlap: Annotated[Overlap, _doc(
        "Previous run still going: allow, skip the new occurrence, or queue it.")] = "allow"
    auto_pause_after: Annotated[Annotated[int, msgspec.Meta(ge=1, le=1000)] | None, _doc(
        "Pause the job (with an alert) after this many consecutive failed runs (1..1000).")] = None


SPEC_FIELDS = ("at", "cron", "every", "timezone", "end_at", "dst_gap", "dst_fold", "misfire",
               "misfire_grace", "max_lateness", "catch_up_max", "jitter", "calendar", "overlap",
               "auto_pause_after")


def edited_spec(document: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The schedule an edit sends when only some of it changes (the CLI's flags, the UI's
    form): a job's stored schedule document as a request (`ScheduleSpec` fields), `changes`
    on top (None: unchanged). A new `cron`/`every`/`at` replaces the other two (and resets
    `dst_fold` to its default unless given); an unchanged `every` keeps its phase (its anchor
    is sent as `start_at`). Pure."""
    spec = {k: document[k] for k in SPEC_FIELDS if document.get(k) is not None}
    if any(changes.get(k) is not None for k in ("at", "cron", "every")):
        for k in ("at", "cron", "every", "dst_fold"):
            spec.pop(k, None)
    spec.update({k: v for k, v in changes.items() if v is not None})
    if ("start_at" not in spec and spec.get("every") is not None
            and spec.get("every") == document.get("every") and document.get("anchor")):
        spec["start_at"] = document["anchor"]
    return spec
