"""What to do with the slots that are due now: fire them or record why they are skipped.

The scheduler calls `plan_due` with the stored next slot and the clock's now. Every due slot ends
up either in `fire` or in exactly one `SkipRange` (which becomes an `OccurrenceSkipped` event):
nothing is dropped silently, and nothing floods after a long outage (age and count bounds, and
enumeration itself is bounded).

Reasons, in order of precedence: "calendar" (the slot's local date is excluded), "too_late"
(older than max_lateness, or beyond the enumeration bound), then the policy's own:
"misfire_run_once", "catch_up_limit", "misfire_skip".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from itertools import islice

from ostinato.domain.errors import InvalidInput
from ostinato.schedules.model import Schedule
from ostinato.schedules.occurrences import iter_backward, iter_forward
from ostinato.schedules.zones import to_utc

POLICIES = ("run_once", "catch_up", "skip")


@dataclass(frozen=True)
class SkipRange:
    """Consecutive due slots skipped for the same reason; count None = not enumerated (too many)."""

    first: datetime
    last: datetime
    count: int | None
    reason: str


@dataclass(frozen=True)
class Plan:
    """Slots to create runs for (oldest first), skipped ranges, and the slot to wait for next."""

    fire: list[datetime]
    skipped: list[SkipRange]
    next_slot: datetime | None


def _merge(ranges: list[SkipRange], slot: datetime, reason: str, *, join: bool) -> None:
    if join and ranges and ranges[-1].reason == reason:
        prev = ranges[-1]
        total = None if prev.count is None else prev.count + 1
        ranges[-1] = SkipRange(prev.first, slot, total, reason)
    else:
        ranges.append(SkipRange(slot, slot, 1, reason))


def _decide(s: Schedule, due: Sequence[datetime], now: datetime, policy: str,
            excluded: frozenset[date], bounded: bool) -> tuple[list[datetime], dict[datetime, str]]:
    # no calendar (most jobs): no zone looked up, no local date computed
    reasons = {u: "calendar" for u in due if u.astimezone(s.tz).date() in excluded} \
        if excluded else {}
    eligible = [u for u in due if u not in reasons]

    def on_time(u: datetime) -> bool:
        return now - u <= s.misfire_grace

    if not bounded and len(eligible) == 1 and on_time(eligible[0]):
        return eligible, reasons  # the normal case: one slot, on time
    cutoff = None if s.max_lateness is None else now - s.max_lateness
    candidates = []
    for u in eligible:
        if cutoff is not None and u < cutoff:
            reasons[u] = "too_late"
        else:
            candidates.append(u)
    if policy == "catch_up":
        fire, rest, why = candidates[:s.catch_up_max], candidates[s.catch_up_max:], "catch_up_limit"
    elif policy == "run_once":
        fire, rest, why = candidates[-1:], candidates[:-1], "misfire_run_once"
    else:
        keep = bool(candidates) and on_time(candidates[-1])
        fire = candidates[-1:] if keep else []
        rest, why = (candidates[:-1] if keep else candidates), "misfire_skip"
    for u in rest:
        reasons[u] = why
    return fire, reasons


def plan_due(s: Schedule, next_slot: datetime, now: datetime, *,
             excluded_dates: frozenset[date] = frozenset(), policy: str | None = None,
             max_enumerated: int = 10_000) -> Plan:
    """Decide the slots in [next_slot, now]; `policy` overrides s.misfire (e.g. on resume)."""
    chosen = s.misfire if policy is None else policy
    if chosen not in POLICIES:
        raise InvalidInput(f"unknown misfire policy {chosen!r}",
                           errors=[{"field": "misfire",
                                    "message": f"must be one of {', '.join(POLICIES)}"}])
    if max_enumerated < 1:
        raise ValueError("max_enumerated must be at least 1")
    now, next_slot = to_utc(now, "now"), to_utc(next_slot, "next_slot")
    if next_slot > now:
        return Plan([], [], next(iter_forward(s, next_slot, inclusive=True), None))
    if s.kind == "at":
        return plan_one_off(s, next_slot, now, excluded_dates, chosen)
    return plan_enumerated(s, next_slot, now, excluded_dates, chosen, max_enumerated)


def plan_one_off(s: Schedule, next_slot: datetime, now: datetime, excluded: frozenset[date],
                 policy: str) -> Plan:
    """`plan_enumerated`'s plan for a one-off schedule (UTC instants, `next_slot` ≤ `now`),
    without its generators: its one slot when it falls in [next_slot, now] (and before
    end_at). Most due jobs are one-off, and the scheduler plans each once."""
    upper = now if s.end_at is None or s.end_at >= now else s.end_at
    at = s.at
    due = [at] if at is not None and max(s.start_at, next_slot) <= at <= upper else []
    fire, reasons = _decide(s, due, now, policy, excluded, False)
    skipped = [SkipRange(u, u, 1, reasons[u]) for u in due if u in reasons]
    # a slot at or before `now` has nothing after it
    following = next(iter_forward(s, now), None) if at is not None and at > now else None
    return Plan(fire, skipped, following)


def plan_enumerated(s: Schedule, next_slot: datetime, now: datetime, excluded_dates:
                    frozenset[date], chosen: str, max_enumerated: int) -> Plan:
    """The slots in [next_slot, now] enumerated newest first (at most `max_enumerated`, the
    rest one skipped range), each decided by the policy `chosen`."""
    # Newest first, so that a bounded enumeration keeps the slots that still matter.
    newest = list(islice(iter_backward(s, now, inclusive=True, floor=next_slot),
                         max_enumerated + 1))
    skipped: list[SkipRange] = []
    bounded = len(newest) > max_enumerated
    if bounded:
        boundary = newest[max_enumerated]
        oldest = next(iter_forward(s, next_slot, inclusive=True), boundary)
        count = None
        if s.kind == "every" and s.every is not None:
            count = (boundary - oldest) // s.every + 1
        skipped.append(SkipRange(oldest, boundary, count, "too_late"))
        newest = newest[:max_enumerated]
    due = newest[::-1]
    fire, reasons = _decide(s, due, now, chosen, excluded_dates, bounded)
    joinable = True
    for u in due:
        if u in reasons:
            _merge(skipped, u, reasons[u], join=joinable)
            joinable = True
        else:
            joinable = False  # a fired slot separates ranges: each range is contiguous
    return Plan(fire, skipped, next(iter_forward(s, now), None))
