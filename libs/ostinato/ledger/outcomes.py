"""What happened to each expected slot: the ledger's classification, shared by the reconciler's
check and `GET /v1/jobs/{id}/ledger`. Pure.

Outcomes, first match wins:

| outcome | when |
|---|---|
| `completed` | its run succeeded |
| `failed` | its run was dead-lettered |
| `cancelled` | its run was cancelled |
| `in_progress` | its run is not final (scheduled, queued, running, retrying, suspended) |
| `skipped` | a recorded skip covers it (`skip_reason` says why) |
| `paused` | the job was paused at that slot: nothing is expected |
| `upcoming` | the slot is in the future |
| `pending` | due, but within its jitter and the grace, or not passed by the scheduler yet |
| `waiting` | `overlap: queue` holds it behind a run still going |
| `missing` | none of the above: nothing happened to it |

"Not passed yet": no pass of the scheduler over the job's shard has completed since the slot's
latest due instant (`decided`), so it has not had its chance to decide the slot.

A DAG job's occurrence is its DAG run (not any of its node runs, which share the job and slot):
`completed` when the DAG run succeeded, `failed` when it failed (one node's success is not the
job's), `cancelled`, else `in_progress` (pending, running).

`expected_by` says which cron implementation has the slot: `both`, `ledger` (only the
independent one) or `scheduler` (only the scheduler's) — either of the last two is a
disagreement.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ostinato.ledger.slots import ExpectedSlot

OUTCOMES = ("completed", "failed", "cancelled", "in_progress", "skipped", "paused", "upcoming",
            "pending", "waiting", "missing")
_BY_STATE = {"succeeded": "completed", "dead_lettered": "failed", "cancelled": "cancelled"}
_BY_DAG_STATE = {"succeeded": "completed", "failed": "failed", "cancelled": "cancelled"}


@dataclass(frozen=True)
class RunFact:
    run_id: uuid.UUID | None  # None: a run retention removed (its id is in the archive)
    state: str
    dag: bool = False  # a DAG run (a DAG job's occurrence), `state` a DAG run's state


@dataclass(frozen=True)
class CarriedRange:
    """Slots of a recurring job whose runs retention removed (migration 0046, `ledger_carried`):
    every run of the job with a slot in [first, last] ended in `state`, and no run of the job
    stayed hot between them."""

    first: datetime
    last: datetime
    state: str


@dataclass(frozen=True)
class SkipFact:
    first: datetime
    last: datetime
    reason: str


@dataclass(frozen=True)
class Entry:
    slot: datetime
    outcome: str
    expected_by: str = "both"  # both | ledger | scheduler
    run_id: uuid.UUID | None = None
    state: str | None = None  # the run's state, or the DAG run's for a DAG job
    skip_reason: str | None = None
    paused: bool = False
    excluded: bool = False
    dag_run_id: uuid.UUID | None = None  # a DAG job's occurrence (then run_id is None)


@dataclass(frozen=True)
class Context:
    """What the classification needs besides the slot's own facts."""

    now: datetime
    due_within: timedelta  # the schedule's jitter plus the grace: a run is expected by then
    waiting_from: datetime | None = None  # overlap=queue with a run going: slots from here wait
    # the instant up to which the scheduler has completed a pass over the job's shard (None:
    # not known, the clock alone judges); a slot due after it has not been decided yet
    decided_through: datetime | None = None
    jitter: timedelta = timedelta(0)  # the latest a slot is due: slot + jitter


def decided(slot: datetime, context: Context) -> bool:
    """Whether the scheduler has had its chance to decide `slot`: a pass over the job's shard
    completed through the slot's latest due instant. Until then a slot with nothing is not
    missing, however late by the clock: after an outage the scheduler catches up, and a check
    judging before it would cry wolf. Pure."""
    return context.decided_through is None or slot + context.jitter <= context.decided_through


def _skip_of(skips: Sequence[SkipFact], starts: list[datetime], slot: datetime) -> SkipFact | None:
    """The recorded skip covering `slot` (ranges are sorted by first slot and barely overlap:
    the last few starting at or before it are enough)."""
    i = bisect.bisect_right(starts, slot)
    for j in range(i - 1, max(-1, i - 65), -1):
        if skips[j].first <= slot <= skips[j].last:
            return skips[j]
    return None


def classify(expected: Sequence[ExpectedSlot], runs: Mapping[datetime, RunFact],
             skips: Sequence[SkipFact], context: Context, *,
             scheduler_slots: set[datetime] | None = None) -> list[Entry]:
    """One entry per slot that either implementation expects, ascending. `scheduler_slots`: the
    scheduler's own slots over the same window (None: not compared)."""
    ordered = sorted(skips, key=lambda k: k.first)
    starts = [k.first for k in ordered]
    marks = {e.slot: e for e in expected}
    mine = set(marks)
    theirs = mine if scheduler_slots is None else scheduler_slots
    entries = []
    for slot in sorted(mine | theirs):
        by = "both" if slot in mine and slot in theirs else ("ledger" if slot in mine
                                                             else "scheduler")
        mark = marks.get(slot, ExpectedSlot(slot))
        run = runs.get(slot)
        skip = None if run is not None else _skip_of(ordered, starts, slot)
        entries.append(Entry(
            slot=slot, outcome=_outcome(mark, run, skip, context), expected_by=by,
            run_id=run.run_id if run and not run.dag else None,
            state=run.state if run else None, skip_reason=skip.reason if skip else None,
            paused=mark.paused, excluded=mark.excluded,
            dag_run_id=run.run_id if run and run.dag else None))
    return entries


def carried_runs(expected: Sequence[ExpectedSlot], carried: Sequence[CarriedRange],
                 runs: Mapping[datetime, RunFact], skips: Sequence[SkipFact],
                 recorded_missing: set[datetime]) -> dict[datetime, RunFact]:
    """The runs retention removed, back in the ledger's view: an expected slot inside a carried
    range that has no run, no skip covering it, was not paused or excluded and was not
    recorded missing had a run, in the range's state (its id unknown here: None). Between two
    runs of a range the job's other slots were skipped, paused or missing, and each of those
    left its own record, so the history reads as it did while the runs were hot."""
    ordered = sorted(skips, key=lambda k: k.first)
    starts = [k.first for k in ordered]
    ranges = sorted(carried, key=lambda c: c.first)
    firsts = [c.first for c in ranges]
    out: dict[datetime, RunFact] = {}
    for mark in expected:
        slot = mark.slot
        if slot in runs or mark.paused or mark.excluded or slot in recorded_missing:
            continue
        i = bisect.bisect_right(firsts, slot) - 1
        if i < 0 or slot > ranges[i].last or _skip_of(ordered, starts, slot) is not None:
            continue
        out[slot] = RunFact(None, ranges[i].state)
    return out


def _outcome(mark: ExpectedSlot, run: RunFact | None, skip: SkipFact | None,
             c: Context) -> str:
    if run is not None:
        return (_BY_DAG_STATE if run.dag else _BY_STATE).get(run.state, "in_progress")
    if skip is not None:
        return "skipped"
    if mark.paused:
        return "paused"
    if mark.slot > c.now:
        return "upcoming"
    if c.now - mark.slot <= c.due_within or not decided(mark.slot, c):
        return "pending"
    if c.waiting_from is not None and mark.slot >= c.waiting_from:
        return "waiting"
    return "missing"
