"""The expected-occurrence ledger: over a sliding window, every slot a recurring job should have
had, enumerated by the independent implementation (`ostinato.ledger`: cronsim and its own DST
mapping), is reconciled with what happened to it — a run (completed, in progress, failed), a
recorded skip with its reason, or nothing — and the scheduler's own slots over the same window
(`ostinato.schedules`, croniter) are compared with it.

Three findings, each once per (job, slot) — the event id is derived from both, so restarts and
a second reconciler add nothing (`ostinato.ledger.finding_id`):

- a slot past its due instant (jitter included) and the grace, that the scheduler has passed
  (a completed pass over the job's shard since: `decided_through`), with neither a run nor a
  skip: `LedgerSlotMissing` on the job's stream, `ostinato_ledger_slots_missing_total{tenant}`,
  and an error line with `alert=ostinato_ledger_slot_missing`. A slot the scheduler has not
  passed yet is never judged, however late by the clock: after an outage the check would
  otherwise race the scheduler's catch-up. If its shard has had no pass within the grace, the
  sweep says so once per shard: a warning with `alert=ostinato_scheduler_frozen` (the
  scheduler is not deciding; OstinatoSchedulerFrozen), not an omission;
- a slot recorded missing that later got its run or recorded skip: `LedgerSlotResolved`, the
  correction (the job's latest missing slot, the input of OstinatoOccurrenceOmitted, becomes
  its latest one not resolved), `ostinato_ledger_slots_resolved_total{tenant}` and an info line;
- a slot only one implementation has: `LedgerDisagreement` (`expected_by` names which),
  `ostinato_ledger_disagreements_total{tenant}`, `alert=ostinato_ledger_disagreement`.

A stored schedule the ledger cannot read (its slots would go unaudited) is one
`LedgerScheduleUnreadable` per (job, document), `ostinato_ledger_schedules_unreadable_total
{tenant}` and `alert=ostinato_ledger_schedule_unreadable`.

The check repairs nothing: the gaps and overdue checks do (their `OccurrenceMissed`); this one
is the audit that does not share the scheduler's code. docs/SCHEDULES.md, "The
expected-occurrence ledger".
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta

import asyncpg

from ostinato import ledger
from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs import ledger as job_ledger
from ostinato.leases.shard import ShardPass, shard_passes, taken_over
from ostinato.ledger import Entry
from ostinato.stores import jobs as job_store
from ostinato.stores import ledger as ledger_store
from ostinato.stores.ledger import LedgerJob
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

ACTOR = "reconciler"
# outcomes that contradict an earlier "missing": the slot got its run or its recorded skip
RESOLVING = frozenset({"completed", "failed", "cancelled", "in_progress", "skipped"})


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str  # missing | disagreement | resolved
    entry: Entry

    def event(self) -> ev.Event:
        e = self.entry
        if self.kind == "missing":
            return ev.LedgerSlotMissing(scheduled_for=e.slot)
        if self.kind == "resolved":
            return ev.LedgerSlotResolved(scheduled_for=e.slot, outcome=e.outcome,
                                         run_id=e.run_id or e.dag_run_id)
        return ev.LedgerDisagreement(scheduled_for=e.slot, expected_by=e.expected_by)


def findings(entries: list[Entry], unresolved: Collection[datetime] = ()) -> list[Finding]:
    """What the entries of one job's window report; `unresolved`: its slots recorded missing
    and not corrected yet, each of which now with a run or skip is resolved. Pure."""
    found = []
    for e in entries:
        if e.expected_by != "both":
            found.append(Finding("disagreement", e))
        if e.outcome == "missing":
            found.append(Finding("missing", e))
        elif e.slot in unresolved and e.outcome in RESOLVING:
            found.append(Finding("resolved", e))
    return found


def undecided_overdue(entries: list[Entry], now: datetime, due_within: timedelta) -> int:
    """Slots late by the clock (past their jitter and the grace) that the scheduler has not
    passed yet: what the check would have called missing without waiting for its pass. Pure."""
    return sum(1 for e in entries if e.outcome == "pending" and now - e.slot > due_within)


def not_deciding(undecided: Mapping[int, int], passes: Mapping[int, ShardPass],
                 now: datetime, grace: timedelta) -> list[int]:
    """Shards with slots late by the clock that no scheduler holds nor passed within the
    grace: the scheduler is not deciding (stopped, frozen past its lease, cut off), which is
    said as such, not as omissions. A shard held or passed within the grace is its scheduler's,
    catching up: nothing to say (if it never does, OstinatoSchedulerFrozen). Pure."""
    return sorted(s for s, n in undecided.items()
                  if n and (s not in passes or taken_over(passes[s], now, grace)))


def window_start(s: ledger.LedgerSchedule, start: datetime, end: datetime,
                 max_slots: int) -> datetime:
    """`start`, or later when [start, end) holds more than `max_slots` slots: then about the
    newest `max_slots` (a job firing every second is checked over its last hour or so, not over
    a day of 86,400 slots). The density of the first slots places the start; a few rounds
    settle a schedule denser at some hours than at others."""
    for _ in range(4):
        first = ledger.expected_slots(s, start, end, limit=max_slots + 1)
        if len(first) <= max_slots:
            return start
        span = first[-1].slot - first[0].slot  # what max_slots slots cover at this density
        start = max(start + (first[1].slot - first[0].slot), end - span)
    return start


class LedgerSweep:
    """The check as a resumable sweep: each `tick` reconciles the next `jobs_per_tick` jobs
    (by id) and returns how many it looked at, so a full tick means "again at once" and the
    reconciler's other checks take their turns in between; a short tick ends a sweep."""

    def __init__(self, pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                 window: timedelta, grace: timedelta, max_slots: int = 5_000,
                 jobs_per_tick: int = 50) -> None:
        self.pool, self.store, self.clock = pool, store, clock
        self.window, self.grace, self.max_slots = window, grace, max_slots
        self.jobs_per_tick = jobs_per_tick
        self.after: uuid.UUID | None = None  # the last job id of the current sweep
        self.recorded = 0  # findings recorded by the last tick
        self.not_deciding: list[int] = []  # shards the last tick found not decided in time

    async def tick(self) -> int:
        now = self.clock.now()
        async with self.pool.acquire() as conn:
            jobs = await ledger_store.jobs_after(conn, self.after, self.jobs_per_tick)
        self.recorded = 0
        undecided: dict[int, int] = {}
        for job in jobs:
            try:
                checked = await check_job(self.pool, self.store, job, now, window=self.window,
                                          grace=self.grace, max_slots=self.max_slots)
            except (ValueError, KeyError) as exc:  # a document the ledger cannot read
                self.recorded += await record_unreadable(self.pool, self.store, job, str(exc))
                continue
            self.recorded += checked.recorded
            undecided[job.shard] = undecided.get(job.shard, 0) + checked.undecided
        self.not_deciding = []
        if any(undecided.values()):
            async with self.pool.acquire() as conn:
                passes = await shard_passes(conn, self.clock.db_now())
            self.not_deciding = not_deciding(undecided, passes, now, self.grace)
            for shard in self.not_deciding:
                p = passes.get(shard)
                get_logger("ostinato.reconciler").warning(
                    "scheduler not deciding: late slots wait for a pass, none judged missing",
                    shard=shard, slots=undecided[shard], live=bool(p and p.live),
                    decided_through=p.decided_through.isoformat()
                    if p and p.decided_through else None,
                    alert="ostinato_scheduler_frozen")
        self.after = jobs[-1].id if len(jobs) == self.jobs_per_tick else None
        return len(jobs)


async def check_ledger(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                       window: timedelta, grace: timedelta, max_slots: int = 5_000,
                       page: int = 200) -> int:
    """One whole sweep at once; returns how many new findings were recorded."""
    sweep = LedgerSweep(pool, store, clock, window=window, grace=grace, max_slots=max_slots,
                        jobs_per_tick=page)
    total = 0
    while True:
        looked = await sweep.tick()
        total += sweep.recorded
        if looked < page:
            return total


@dataclasses.dataclass(frozen=True)
class JobCheck:
    recorded: int  # findings recorded now
    undecided: int  # slots late by the clock the scheduler has not passed yet


async def check_job(pool: asyncpg.Pool, store: EventStore, job: LedgerJob, now: datetime, *,
                    window: timedelta, grace: timedelta, max_slots: int = 5_000) -> JobCheck:
    """One job's window: classify, then record the findings not recorded yet."""
    schedule = ledger.read_document(job.schedule)
    start = window_start(schedule, now - window, now, max_slots)
    async with pool.acquire() as conn:
        entries = await job_ledger.job_entries(
            conn, job.tenant_id, job.id, job.schedule, overlap=job.overlap,
            calendar=job.calendar, next_slot=job.next_slot, start=start, end=now, now=now,
            grace=grace, limit=max_slots)
        undecided = undecided_overdue(entries, now, (schedule.jitter or timedelta(0)) + grace)
        unresolved: set[datetime] = set()
        if job.last_missing_slot is not None and job.last_missing_slot >= start:
            unresolved = set(await ledger_store.unresolved_missing(
                conn, job.tenant_id, job.id, start, now))
        found = {ledger.finding_id(job.id, f.entry.slot, f.kind): f
                 for f in findings(entries, unresolved)}
        if not found:
            return JobCheck(0, undecided)
        fresh = set(found) - await ledger_store.findings_recorded(conn, list(found))
        if not fresh:
            return JobCheck(0, undecided)
    return JobCheck(await _record(pool, store, job, {k: found[k] for k in fresh}), undecided)


async def _record(pool: asyncpg.Pool, store: EventStore, job: LedgerJob,
                  found: dict[uuid.UUID, Finding]) -> int:
    async with pool.acquire() as conn, conn.transaction():
        locked = await job_store.lock_for_repair(conn, job.id)
        if locked is None:
            return 0
        # Under the job's lock: another reconciler may have recorded some meanwhile.
        fresh = set(found) - await ledger_store.findings_recorded(conn, list(found))
        ordered = sorted(fresh, key=lambda k: (found[k].entry.slot, found[k].kind))
        head = StreamHead(job.id, job.tenant_id, locked.version)
        events: list[NewEvent] = [
            head.next(found[k].event(), ACTOR, event_id=k) for k in ordered]
        await store.append(conn, events)
    for k in ordered:
        alert(job.tenant_id, job.id, found[k])
    return len(ordered)


async def record_unreadable(pool: asyncpg.Pool, store: EventStore, job: LedgerJob,
                            error: str) -> int:
    """A schedule the ledger cannot read leaves its slots unaudited: one
    `LedgerScheduleUnreadable` per (job, document), a metric and an alert line; 1 if new."""
    key = ledger.unreadable_id(job.id, job.schedule)
    async with pool.acquire() as conn:
        if await ledger_store.findings_recorded(conn, [key]):
            return 0  # reported already: no lock at every sweep
    async with pool.acquire() as conn, conn.transaction():
        locked = await job_store.lock_for_repair(conn, job.id)
        # Under the job's lock: another reconciler may have recorded it meanwhile.
        if locked is None or await ledger_store.findings_recorded(conn, [key]):
            return 0
        head = StreamHead(job.id, job.tenant_id, locked.version)
        await store.append(conn, [
            head.next(ev.LedgerScheduleUnreadable(error=error), ACTOR, event_id=key)])
    metrics.LEDGER_SCHEDULES_UNREADABLE.labels(
        tenant=metrics.tenant_label(str(job.tenant_id))).inc()
    get_logger("ostinato.reconciler").error(
        "ledger cannot read schedule", tenant_id=str(job.tenant_id), job_id=str(job.id),
        error=error, alert="ostinato_ledger_schedule_unreadable")
    return 1


def alert(tenant_id: uuid.UUID, job_id: uuid.UUID, finding: Finding) -> None:
    e, tenant = finding.entry, str(tenant_id)
    # A fresh logger per finding (they are rare): it follows the logging configuration of now,
    # where the module's keeps the processors of its first use (a test capturing lines after
    # another configured logging would see none).
    log = get_logger("ostinato.reconciler")
    if finding.kind == "missing":
        metrics.LEDGER_SLOTS_MISSING.labels(tenant=tenant).inc()
        log.error("ledger slot missing", tenant_id=tenant, job_id=str(job_id),
                  scheduled_for=e.slot.isoformat(), expected_by=e.expected_by,
                  alert="ostinato_ledger_slot_missing")
    elif finding.kind == "resolved":
        metrics.LEDGER_SLOTS_RESOLVED.labels(tenant=tenant).inc()
        log.info("ledger slot resolved: recorded missing, it got its run or skip after all",
                 tenant_id=tenant, job_id=str(job_id), scheduled_for=e.slot.isoformat(),
                 outcome=e.outcome, resolves="ostinato_ledger_slot_missing")
    else:
        metrics.LEDGER_DISAGREEMENTS.labels(tenant=tenant).inc()
        log.error("cron implementations disagree", tenant_id=tenant, job_id=str(job_id),
                  scheduled_for=e.slot.isoformat(), expected_by=e.expected_by,
                  outcome=e.outcome, alert="ostinato_ledger_disagreement")
