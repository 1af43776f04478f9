"""Stuck runs made visible: a workflow suspended too long on a signal, a child or a pause;
waiting on a dead-lettered child; pinned to a handler version no live worker serves; or
dead-lettered by a failed compensation. Each stuck run gets one `RunStuck` event per stuck
episode (nothing else happened to it since: `runs.stuck_version` is its version), the gauge
`ostinato_runs_stuck{tenant,reason}` counts them, and an error line carries the alert
`ostinato_run_stuck` an operator can page on."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.eventlog.store import EventStore
from ostinato.stores import runs
from ostinato.stores.runs import LockedRun, StuckRuns, StuckThresholds
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger
from services.reconciler.checks.run_repairs import per_run

log = get_logger("ostinato.reconciler")
_reported: set[tuple[str, str]] = set()  # gauge labels set last time: zeroed when they clear


async def mark_stuck(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                     limits: StuckThresholds, batch_size: int = 200) -> int:
    """Count the stuck runs and record `RunStuck` on those not marked yet; how many were."""
    async with pool.acquire() as conn:
        groups = await runs.stuck_by_reason(conn, clock.db_now(), limits, batch_size)
    report(groups)
    found: dict[uuid.UUID, ev.RunStuck] = {}
    expected: dict[uuid.UUID, int] = {}
    for g in groups:
        for run_id, version, detail, since in zip(g.new_ids, g.versions, g.details, g.sinces,
                                                  strict=True):
            if run_id not in found:  # one reason per episode: the first found
                found[run_id] = ev.RunStuck(reason=g.reason, detail=detail, since=since)
                expected[run_id] = version
    if not found:
        return 0

    async def find(conn: asyncpg.Connection) -> list[uuid.UUID]:
        return list(found)

    def decide(row: LockedRun) -> list[ev.Event]:
        return [found[row.id]] if row.version == expected[row.id] else []  # moved on meanwhile

    return await per_run(pool, store, find, decide, end_lease=False)


def report(groups: list[StuckRuns]) -> None:
    """Set the gauge per (tenant, reason), zero the groups that cleared, log an alert line."""
    now = {(str(g.tenant_id), g.reason): g for g in groups}
    series: dict[tuple[str, str], int] = {}  # capped tenant label: "other" sums its tenants
    for (tenant, reason), g in now.items():
        label = (metrics.tenant_label(tenant), reason)
        series[label] = series.get(label, 0) + g.n
    for tenant, reason in _reported - set(series):
        metrics.RUNS_STUCK.labels(tenant=tenant, reason=reason).set(0)
    _reported.clear()
    for (tenant, reason), n in series.items():
        _reported.add((tenant, reason))
        metrics.RUNS_STUCK.labels(tenant=tenant, reason=reason).set(n)
    for (tenant, reason), g in now.items():
        log.error("runs stuck", tenant_id=tenant, reason=reason, count=g.n,
                  oldest_since=_oldest(g), example=g.details[0] if g.details else None,
                  alert="ostinato_run_stuck")


def _oldest(g: StuckRuns) -> str | None:
    first: datetime | None = g.sinces[0] if g.sinces else None
    return first.isoformat() if first else None
