"""Completion deadlines: a job's `complete_within` (a run must have *succeeded* that long after
its slot) and a recurring job's `max_staleness` (how old its last success may get). The ledger
and the gap check see whether a run was created; this check sees whether the work got done, so
a run still retrying, waiting for a worker, stuck on a child or dead-lettered past its deadline
is a breach too (a cancelled run is not: an operator decided it). A DAG job's occurrence is its
DAG run: one node's success is not the job's, a failed DAG run past its deadline is a breach.

Each breach is one `CompletionOverdue` event on the job's stream, whose id is derived from the
job, the occurrence (or the last success a staleness is counted from) and the kind
(`ostinato.ledger.finding_id`), so restarts and a second reconciler add nothing; a breached
run is marked (`runs.completion_overdue`) so it is looked at once. Each also counts
`ostinato_completion_overdue_total{tenant,kind}` and logs `alert=ostinato_completion_overdue`;
the alert rules (`ostinato.alerts`) turn the events into an alert for the job's owner.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import timedelta

import asyncpg

from ostinato import ledger
from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.stores import deadlines as deadline_store
from ostinato.stores import jobs as job_store
from ostinato.stores import ledger as ledger_store
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

ACTOR = "reconciler"
Found = dict[uuid.UUID, ev.CompletionOverdue]  # by derived event id


async def check_deadlines(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                          window: timedelta, batch_size: int = 200) -> int:
    """Record the breaches not recorded yet; how many were. An occurrence is looked at for
    `window` after its deadline passed (by deadline, not by slot: a `complete_within` longer
    than the window is checked like a short one)."""
    now = clock.now()
    async with pool.acquire() as conn:
        late = await deadline_store.overdue_runs(conn, now, now - window, batch_size)
        stale = await deadline_store.stale_jobs(conn, now, batch_size)
    by_job: dict[tuple[uuid.UUID, uuid.UUID], Found] = defaultdict(dict)
    for r in late:
        by_job[r.tenant_id, r.job_id][ledger.finding_id(r.job_id, r.scheduled_for,
                                                        "complete_within")] = \
            ev.CompletionOverdue(kind="complete_within", deadline=r.deadline,
                                 run_id=None if r.dag else r.run_id,
                                 dag_run_id=r.run_id if r.dag else None,
                                 scheduled_for=r.scheduled_for, state=r.state)
    if stale:
        async with pool.acquire() as conn:
            keys = {ledger.finding_id(s.job_id, s.last_success_at or s.deadline, "max_staleness"):
                    s for s in stale}
            done = await ledger_store.findings_recorded(conn, list(keys))
        for key, s in keys.items():
            if key not in done:
                by_job[s.tenant_id, s.job_id][key] = ev.CompletionOverdue(
                    kind="max_staleness", deadline=s.deadline, last_success_at=s.last_success_at)
    total = 0
    for (tenant_id, job_id), found in by_job.items():
        total += await _record(pool, store, tenant_id, job_id, found)
    return total


async def _record(pool: asyncpg.Pool, store: EventStore, tenant_id: uuid.UUID,
                  job_id: uuid.UUID, found: Found) -> int:
    async with pool.acquire() as conn, conn.transaction():
        locked = await job_store.lock_for_repair(conn, job_id)
        if locked is None:
            return 0
        # Under the job's lock: another reconciler may have recorded some meanwhile.
        fresh = sorted(set(found) - await ledger_store.findings_recorded(conn, list(found)),
                       key=lambda k: (found[k].deadline, k))
        head = StreamHead(job_id, tenant_id, locked.version)
        events: list[NewEvent] = [
            head.next(found[k], ACTOR, event_id=k) for k in fresh]
        if events:
            await store.append(conn, events)
    for k in fresh:
        alert(tenant_id, job_id, found[k])
    return len(fresh)


def alert(tenant_id: uuid.UUID, job_id: uuid.UUID, e: ev.CompletionOverdue) -> None:
    metrics.COMPLETION_OVERDUE.labels(tenant=metrics.tenant_label(str(tenant_id)),
                                      kind=e.kind).inc()
    # A fresh logger per breach (they are rare): it follows the logging configuration of now,
    # where a module-level one keeps the processors of its first use.
    get_logger("ostinato.reconciler").error(
        "completion deadline passed", tenant_id=str(tenant_id), job_id=str(job_id),
        kind=e.kind, deadline=e.deadline.isoformat(),
        scheduled_for=e.scheduled_for.isoformat() if e.scheduled_for else None,
        run_id=str(e.run_id) if e.run_id else None,
        dag_run_id=str(e.dag_run_id) if e.dag_run_id else None, state=e.state,
        alert="ostinato_completion_overdue")
