"""Health of the pipeline: outbox rows not published (lag and age), runs waiting in
`scheduled` or `queued` longer than a threshold, and suspended workflow runs due longer ago
than it (the scheduler's wake poll is behind or down; state "suspended" of the stuck gauge).
Each check sets a gauge and logs an error line an operator can alert on; the suspended runs
are also counted by what they wait for, and those waiting for a signal, a child or their
resume longer than `suspended_alert_after` are counted per tenant and reason
(`ostinato_workflows_suspended_too_long`), with an alert line. It also sets the scaling signal
`ostinato_upcoming_due{pool,window}`, and worker capacity per pool from the worker registry and
the attempt leases: `ostinato_pool_slots{pool,scope}`, `ostinato_pool_busy_slots{pool}` and
`ostinato_pool_utilisation{pool}` (the reconciler exports them, not the gateway: every gateway
instance would report the same fleet-wide figures). (The reconciler's own outbox relay
publishes what is waiting.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from ostinato import workers
from ostinato.clock import Clock
from ostinato.eventlog import outbox
from ostinato.leases import attempts as attempt_leases
from ostinato.stores import runs
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.reconciler")
WATCHED_STATES = ("scheduled", "queued", "suspended")
SUSPENSION_REASONS = ("timer", "signal", "child", "fan_out", "paused")  # RunSuspended.reason
UPCOMING_WINDOWS = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=15))
_WINDOW_LABELS = ("1m", "5m", "15m")


@dataclass(frozen=True, slots=True)
class PoolUsage:
    """One pool's live slots (shared workers', tenants' own) and leased attempts."""

    shared: int = 0
    own: int = 0
    busy: int = 0

    @property
    def utilisation(self) -> float:
        total = self.shared + self.own
        return self.busy / total if total else 0.0


def pool_usage(capacity: list[workers.PoolCapacity],
               busy: list[attempt_leases.BusySlots]) -> dict[str, PoolUsage]:
    """Per pool: live slots by scope and busy slots (a pool with only one of them counts)."""
    out: dict[str, PoolUsage] = {}
    for c in capacity:
        u = out.get(c.pool, PoolUsage())
        out[c.pool] = (PoolUsage(u.shared + c.slots, u.own, u.busy) if c.tenant_id is None
                       else PoolUsage(u.shared, u.own + c.slots, u.busy))
    for b in busy:
        u = out.get(b.pool, PoolUsage())
        out[b.pool] = PoolUsage(u.shared, u.own, u.busy + b.busy)
    return out


@dataclass(frozen=True, slots=True)
class Findings:
    outbox_unpublished: int
    outbox_oldest: timedelta
    stuck: dict[str, int]
    suspended_too_long: dict[tuple[str, str], int]  # (tenant id, reason) -> runs


async def check_once(pool: asyncpg.Pool, clock: Clock, *, stuck_after: timedelta,
                     outbox_alert_after: timedelta = timedelta(seconds=60),
                     suspended_alert_after: timedelta = timedelta(days=1),
                     worker_ttl: timedelta = timedelta(seconds=35)) -> Findings:
    async with pool.acquire() as conn:
        unpublished, oldest = await outbox.lag(conn, clock)
        counts = await runs.stuck(conn, clock.db_now(), stuck_after)
        overdue = await runs.overdue_wakeups(conn, clock.db_now(), stuck_after)
        suspended = await runs.suspended_counts(conn)
        too_long = await runs.suspended_too_long(conn, clock.db_now(), suspended_alert_after)
        upcoming = await runs.upcoming_due(conn, clock.db_now(), UPCOMING_WINDOWS)
        usage = pool_usage(await workers.live_capacity(conn, clock.db_now(), worker_ttl),
                           await attempt_leases.busy_slots(conn))
    _report_upcoming(upcoming)
    _report_pools(usage)
    long_waits = {(str(w.tenant_id), w.reason): w.n for w in too_long}
    _report_long_waits(long_waits, suspended_alert_after)
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
    return Findings(unpublished, oldest, stuck, long_waits)


_reported: set[tuple[str, str]] = set()  # labels set last time: zeroed when they clear
_upcoming_pools: set[str] = set()
_usage_pools: set[str] = set()


def _report_pools(usage: dict[str, PoolUsage]) -> None:
    for pool in _usage_pools - set(usage):
        usage = usage | {pool: PoolUsage()}  # gone: its series drop to 0
    _usage_pools.clear()
    for pool, u in usage.items():
        if u.shared or u.own or u.busy:
            _usage_pools.add(pool)
        metrics.POOL_SLOTS.labels(pool=pool, scope="shared").set(u.shared)
        metrics.POOL_SLOTS.labels(pool=pool, scope="own").set(u.own)
        metrics.POOL_BUSY_SLOTS.labels(pool=pool).set(u.busy)
        metrics.POOL_UTILISATION.labels(pool=pool).set(u.utilisation)


def _report_upcoming(found: list[runs.UpcomingDue]) -> None:
    now = {u.pool: u for u in found}
    for pool in _upcoming_pools - set(now):
        for label in _WINDOW_LABELS:
            metrics.UPCOMING_DUE.labels(pool=pool, window=label).set(0)
    _upcoming_pools.clear()
    for pool, u in now.items():
        _upcoming_pools.add(pool)
        for label, n in zip(_WINDOW_LABELS, (u.soon, u.later, u.latest), strict=True):
            metrics.UPCOMING_DUE.labels(pool=pool, window=label).set(n)


def _report_long_waits(found: dict[tuple[str, str], int], after: timedelta) -> None:
    series: dict[tuple[str, str], int] = {}  # capped tenant label: "other" sums its tenants
    for (tenant, reason), n in found.items():
        label = (metrics.tenant_label(tenant), reason)
        series[label] = series.get(label, 0) + n
    for tenant, reason in _reported - set(series):
        metrics.WORKFLOWS_SUSPENDED_TOO_LONG.labels(tenant=tenant, reason=reason).set(0)
    _reported.clear()
    for (tenant, reason), n in series.items():
        _reported.add((tenant, reason))
        metrics.WORKFLOWS_SUSPENDED_TOO_LONG.labels(tenant=tenant, reason=reason).set(n)
    for (tenant, reason), n in found.items():
        log.error("workflows suspended too long", tenant_id=tenant, reason=reason, count=n,
                  threshold_seconds=after.total_seconds(), alert="ostinato_workflow_stuck")
