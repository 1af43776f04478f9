"""Health of the pipeline: outbox rows not published (lag and age), runs waiting in
`scheduled` or `queued` longer than a threshold, and suspended workflow runs due longer ago
than it (the scheduler's wake poll is behind or down; state "suspended" of the stuck gauge).
Each check sets a gauge and logs an error line an operator can alert on; the suspended runs
are also counted by what they wait for. (The reconciler's own outbox relay publishes what is
waiting.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.eventlog import outbox
from ostinato.stores import runs
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.reconciler")
WATCHED_STATES = ("scheduled", "queued", "suspended")
SUSPENSION_REASONS = ("timer", "signal", "child", "paused")  # RunSuspended.reason


@dataclass(frozen=True, slots=True)
class Findings:
    outbox_unpublished: int
    outbox_oldest: timedelta
    stuck: dict[str, int]


async def check_once(pool: asyncpg.Pool, clock: Clock, *, stuck_after: timedelta,
                     outbox_alert_after: timedelta = timedelta(seconds=60)) -> Findings:
    async with pool.acquire() as conn:
        unpublished, oldest = await outbox.lag(conn, clock)
        counts = await runs.stuck(conn, clock.db_now(), stuck_after)
        overdue = await runs.overdue_wakeups(conn, clock.db_now(), stuck_after)
        suspended = await runs.suspended_counts(conn)
    stuck = {state: 0 for state in WATCHED_STATES} | {c.state: c.n for c in counts}
    stuck["suspended"] = overdue
    for reason in SUSPENSION_REASONS:
        metrics.WORKFLOWS_SUSPENDED.labels(reason=reason).set(suspended.get(reason, 0))
    metrics.OUTBOX_UNPUBLISHED.set(unpublished)
    metrics.OUTBOX_OLDEST_UNPUBLISHED_AGE.set(oldest.total_seconds())
    for state, n in stuck.items():
        metrics.STUCK_RUNS.labels(state=state).set(n)
        if n:
            log.error("runs stuck", state=state, count=n,
                      threshold_seconds=stuck_after.total_seconds(), alert="ostinato_stuck_runs")
    if unpublished and oldest > outbox_alert_after:
        log.error("outbox not draining", unpublished=unpublished,
                  oldest_seconds=oldest.total_seconds(), alert="ostinato_outbox_lag")
    return Findings(unpublished, oldest, stuck)
