"""The reconciler's checks as duties (`ostinato.runtime.duties`). Fast checks (expired leases,
timeouts, queue-wait deadlines, overdue jobs: cheap indexed queries whose latency decides
recovery time) run every `fast_interval`; slow ones (pipeline health, the gap enumeration over
every recurring schedule, the expected-occurrence ledger, completion deadlines, the retention of
outputs, of the start-lag histogram and of the web UI's sessions, the database's storage)
every `interval`. Each is its own duty, so a failing check is retried and reported on its own
while the others still run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg
import httpx

from ostinato.alerts import Thresholds
from ostinato.alerts.conditions import DEFAULT as DEFAULT_THRESHOLDS
from ostinato.clock import Clock
from ostinato.eventlog import start_lags
from ostinato.eventlog.store import EventStore
from ostinato.objects import ObjectStore
from ostinato.runtime.duties import Duty
from ostinato.stores.runs import StuckThresholds
from services.reconciler.checks.alerts import deliver_alerts, evaluate_alerts
from services.reconciler.checks.archive import DEFAULT_ARCHIVE, ArchiveConfig, archive_duty
from services.reconciler.checks.deadlines import check_deadlines
from services.reconciler.checks.gaps import check_gaps
from services.reconciler.checks.leases import DEAD_AFTER, LeaseWatch
from services.reconciler.checks.ledger import LedgerSweep
from services.reconciler.checks.overdue import check_overdue
from services.reconciler.checks.pipeline import check_once
from services.reconciler.checks.queue_waits import expire_queue_waits
from services.reconciler.checks.retention import (
    START_LAG_BATCH,
    expire_retained,
    expire_start_lags,
)
from services.reconciler.checks.storage import NO_STORAGE_MEASURE, StorageConfig, check_storage
from services.reconciler.checks.stuck import mark_stuck
from services.reconciler.checks.timeouts import expire_timeouts

Check = Callable[[], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class ReconcileConfig:
    interval: timedelta = timedelta(seconds=10)
    fast_interval: timedelta = timedelta(seconds=1)
    stuck_after: timedelta = timedelta(minutes=5)
    suspended_alert_after: timedelta = timedelta(days=1)  # a signal, child or paused wait
    unserved_alert_after: timedelta = timedelta(minutes=5)  # a pinned version nobody serves
    worker_ttl: timedelta = timedelta(seconds=35)  # a worker seen within this is live
    worker_dead_after: timedelta = DEAD_AFTER  # a pinging worker silent this long is dead
    missed_grace: timedelta = timedelta(seconds=30)  # due this long without a decision: overdue
    gap_window: timedelta = timedelta(hours=24)  # how far back gaps (and the ledger) look
    ledger_max_slots: int = 5_000  # per job and pass: the newest, when the window holds more
    ledger_interval: timedelta = timedelta(minutes=1)  # (or `interval`, if longer)
    output_retention: timedelta = timedelta(days=30)  # outputs and logs kept this long
    alert_delivery_timeout: timedelta = timedelta(seconds=5)  # one webhook POST at most
    alert_thresholds: Thresholds = DEFAULT_THRESHOLDS  # the fleet-state rules' (docs/ALERTS.md)
    # archive, then remove: the runs past their tenant's retention (docs/RETENTION.md)
    archive: ArchiveConfig = DEFAULT_ARCHIVE
    # the database's storage: how it is measured, the watermarks (docs/RETENTION.md "The disk")
    storage: StorageConfig = NO_STORAGE_MEASURE


def fast_checks(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                config: ReconcileConfig) -> dict[str, Check]:
    return {
        "leases": LeaseWatch(pool, store, clock, dead_after=config.worker_dead_after),
        "timeouts": lambda: expire_timeouts(pool, store, clock),
        "queue_waits": lambda: expire_queue_waits(pool, store, clock),
        "overdue": lambda: check_overdue(pool, store, clock, grace=config.missed_grace),
    }


def slow_checks(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                config: ReconcileConfig) -> dict[str, Check]:
    return {
        "health": lambda: check_once(pool, clock, stuck_after=config.stuck_after,
                                     suspended_alert_after=config.suspended_alert_after,
                                     worker_ttl=config.worker_ttl),
        "stuck": lambda: mark_stuck(pool, store, clock, limits=StuckThresholds(
            suspended=config.suspended_alert_after, child_dead_lettered=config.stuck_after,
            unserved=config.unserved_alert_after, worker_ttl=config.worker_ttl)),
        "gaps": lambda: check_gaps(pool, store, clock, window=config.gap_window,
                                   grace=config.missed_grace),
        "deadlines": lambda: check_deadlines(pool, store, clock, window=config.gap_window),
        "alerts": lambda: evaluate_alerts(pool, clock, thresholds=config.alert_thresholds,
                                          worker_ttl=config.worker_ttl),
        "retention": lambda: expire_retained(pool, clock, retention=config.output_retention),
        "storage": lambda: check_storage(pool, config.storage),
    }


def found(result: object) -> int:
    """How many items a check found: its count, or the stuck runs of the health check."""
    return result if isinstance(result, int) else sum(result.stuck.values())  # type: ignore[attr-defined]


def duties(pool: asyncpg.Pool, store: EventStore, clock: Clock, config: ReconcileConfig, *,
           on_repaired: Callable[[], None] = lambda: None,
           objects: ObjectStore | None = None) -> list[Duty]:
    """One duty per check, taking turns (one check at a time, each failing on its own): the
    fast ones every `fast_interval`, the slow ones every `interval`. A check that repaired
    something (any but health and retention) calls `on_repaired`, the relay's wake-up. With
    an object store (and `archive.enabled`), the archiver too, outside the turns."""
    turn = asyncio.Lock()
    archiver = ([archive_duty(pool, objects, clock, config.archive)]
                if objects is not None and config.archive.enabled else [])

    def duty(name: str, check: Check, interval: timedelta) -> Duty:
        async def run_once(now: datetime) -> int:
            count = found(await check())
            if count and name not in ("health", "retention", "alerts", "alert_delivery"):
                on_repaired()
            return count

        return Duty(f"reconcile_{name}", interval.total_seconds(), run_once, turn=turn)

    return [*(duty(name, check, config.fast_interval)
              for name, check in fast_checks(pool, store, clock, config).items()),
            *(duty(name, check, config.interval)
              for name, check in slow_checks(pool, store, clock, config).items()),
            ledger_duty(pool, store, clock, config, turn),
            start_lag_retention_duty(pool, clock, config, turn),
            delivery_duty(pool, clock, config), *archiver]


def delivery_duty(pool: asyncpg.Pool, clock: Clock, config: ReconcileConfig) -> Duty:
    """The alert delivery outbox's relay, every `fast_interval`, outside the checks' turns (a
    sink answering slowly delays no repair)."""
    client = httpx.AsyncClient(timeout=config.alert_delivery_timeout.total_seconds())

    async def run_once(now: datetime) -> int:
        return await deliver_alerts(pool, clock, client)

    return Duty("reconcile_alert_delivery", config.fast_interval.total_seconds(), run_once,
                batch=500, on_stop=client.aclose)


def start_lag_retention_duty(pool: asyncpg.Pool, clock: Clock, config: ReconcileConfig,
                             turn: asyncio.Lock) -> Duty:
    """The start-lag histogram's retention: minutes older than twice the lag rule's window (an
    hour at least) deleted, `START_LAG_BATCH` rows a tick, again at once while ticks are full
    (a rebuild brings every minute of the log back), else every `interval`."""
    keep = start_lags.retention(config.alert_thresholds.lag_window)

    async def run_once(now: datetime) -> int:
        return await expire_start_lags(pool, clock, keep=keep)

    return Duty("reconcile_start_lag_retention", config.interval.total_seconds(), run_once,
                batch=START_LAG_BATCH, turn=turn)


def ledger_duty(pool: asyncpg.Pool, store: EventStore, clock: Clock, config: ReconcileConfig,
                turn: asyncio.Lock) -> Duty:
    """The ledger check, a sweep of `jobs_per_tick` jobs a tick (again at once while ticks are
    full, so the fast checks take turns in between), a new sweep every `ledger_interval` (or
    `interval`, if longer)."""
    sweep = LedgerSweep(pool, store, clock, window=config.gap_window, grace=config.missed_grace,
                        max_slots=config.ledger_max_slots)

    async def run_once(now: datetime) -> int:
        return await sweep.tick()

    interval = max(config.interval, config.ledger_interval)
    return Duty("reconcile_ledger", interval.total_seconds(), run_once,
                batch=sweep.jobs_per_tick, turn=turn)
