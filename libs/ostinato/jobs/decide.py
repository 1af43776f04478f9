"""What the scheduler does with one due job: a pure decision over values.

Order of concerns: auto-pause (too many consecutive failed runs) first, then the schedule's plan
(misfire policy, calendar, lateness bounds: `ostinato.schedules.plan_due`), then the overlap
policy against the runs of the job that are not final yet:

- `allow`: fire whatever the plan fires.
- `skip`: fire at most one slot, and none while a run is active; the others are recorded as
  skipped with reason `overlap`.
- `queue`: while a run is active, do nothing (the slot waits); otherwise fire the first slot and
  leave the next one due, so queued slots run one after another. Skips the plan decided beyond
  the waiting slot are left for the later plans, which see them again.

A stored schedule this version can no longer evaluate (a cron form refused since it was
stored) pauses its job, with the reason and the auto-pause alert, rather than failing every
scheduler tick for every job beside it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import date, datetime

from ostinato.schedules import Schedule, SkipRange, jitter_offset, plan_due
from ostinato.schedules.cronexpr import CronSyntaxError


@dataclass(frozen=True, slots=True)
class Decision:
    fire: tuple[tuple[datetime, datetime], ...] = ()  # (slot, due instant with jitter)
    skipped: tuple[SkipRange, ...] = ()
    next_slot: datetime | None = None
    next_run_at: datetime | None = None
    pause_reason: str | None = None
    wait: bool = False  # overlap=queue with a run still active: change nothing yet
    notes: dict[str, str] = field(default_factory=dict)


def decide(
    s: Schedule, *, job_id: uuid.UUID, next_slot: datetime, now: datetime,
    excluded_dates: frozenset[date] = frozenset(), policy: str | None = None,
    active_runs: int = 0, consecutive_failures: int = 0,
) -> Decision:
    if s.auto_pause_after is not None and consecutive_failures >= s.auto_pause_after:
        return Decision(
            pause_reason=f"auto-paused after {consecutive_failures} consecutive failed runs",
            next_slot=next_slot)
    try:
        plan = plan_due(s, next_slot, now, excluded_dates=excluded_dates, policy=policy)
    except CronSyntaxError as exc:
        return Decision(pause_reason=f"the schedule cannot be evaluated: {exc}; change it and "
                                     "resume the job", next_slot=next_slot)
    fire = list(plan.fire)
    skipped = list(plan.skipped)
    following = plan.next_slot
    if fire and s.overlap == "skip":
        keep = 0 if active_runs else 1
        skipped += [SkipRange(first=x, last=x, count=1, reason="overlap") for x in fire[keep:]]
        fire = fire[:keep]
    elif fire and s.overlap == "queue":
        if active_runs:
            return Decision(wait=True, next_slot=next_slot)
        if len(fire) > 1:
            following = fire[1]
            fire = fire[:1]
            skipped = [r for r in skipped if r.last < following]
    skipped.sort(key=lambda r: r.first)
    return Decision(
        fire=tuple((slot, slot + jitter_offset(s, job_id, slot)) for slot in fire),
        skipped=tuple(skipped),
        next_slot=following,
        next_run_at=None if following is None else following + jitter_offset(s, job_id,
                                                                                following),
    )
