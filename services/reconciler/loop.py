"""The reconciler's passes. Fast checks (expired leases, timeouts, queue-wait deadlines,
overdue jobs: cheap indexed queries whose latency decides recovery time) run every
`fast_interval`; slow ones (pipeline health, the gap enumeration over every recurring schedule)
every `interval`. A failing check is logged and the others still run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.db.sqlstate import TRANSIENT_ERRORS
from ostinato.eventlog.store import EventStore
from ostinato.telemetry.logging import get_logger
from services.reconciler.checks.attempts import (
    expire_leases,
    expire_queue_waits,
    expire_timeouts,
)
from services.reconciler.checks.health import check_once, expire_outputs
from services.reconciler.checks.occurrences import check_gaps, check_overdue

log = get_logger("ostinato.reconciler")
Check = Callable[[], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class ReconcileConfig:
    interval: timedelta = timedelta(seconds=10)
    fast_interval: timedelta = timedelta(seconds=1)
    stuck_after: timedelta = timedelta(minutes=5)
    missed_grace: timedelta = timedelta(seconds=30)  # due this long without a decision: overdue
    gap_window: timedelta = timedelta(hours=24)  # how far back gaps are looked for
    output_retention: timedelta = timedelta(days=30)  # outputs and logs kept this long


def fast_checks(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                config: ReconcileConfig) -> dict[str, Check]:
    return {
        "leases": lambda: expire_leases(pool, store, clock),
        "timeouts": lambda: expire_timeouts(pool, store, clock),
        "queue_waits": lambda: expire_queue_waits(pool, store, clock),
        "overdue": lambda: check_overdue(pool, store, clock, grace=config.missed_grace),
    }


def slow_checks(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                config: ReconcileConfig) -> dict[str, Check]:
    return {
        "health": lambda: check_once(pool, clock, stuck_after=config.stuck_after),
        "gaps": lambda: check_gaps(pool, store, clock, window=config.gap_window,
                                   grace=config.missed_grace),
        "retention": lambda: expire_outputs(pool, clock, retention=config.output_retention),
    }


async def run_checks(checks: dict[str, Check]) -> dict[str, int]:
    """Run each check; returns how many items each found (repairs made, for most)."""
    found: dict[str, int] = {}
    for name, check in checks.items():
        try:
            result = await check()
        except TRANSIENT_ERRORS as exc:
            log.warning("reconcile check failed; next pass retries", check=name, error=repr(exc))
            continue
        found[name] = result if isinstance(result, int) else sum(result.stuck.values())  # type: ignore[attr-defined]
    return found


async def reconcile_once(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                         config: ReconcileConfig) -> dict[str, int]:
    return await run_checks({**fast_checks(pool, store, clock, config),
                             **slow_checks(pool, store, clock, config)})


async def run_reconciler(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                         config: ReconcileConfig, *, stopping: asyncio.Event,
                         on_repaired: Callable[[], None] = lambda: None) -> None:
    fast = fast_checks(pool, store, clock, config)
    slow = slow_checks(pool, store, clock, config)
    next_slow = 0.0
    while not stopping.is_set():
        checks = dict(fast)
        if clock.monotonic() >= next_slow:
            checks |= slow
            next_slow = clock.monotonic() + config.interval.total_seconds()
        found = await run_checks(checks)
        if any(n for name, n in found.items() if name not in ("health", "retention")):
            on_repaired()
        try:
            await asyncio.wait_for(stopping.wait(), config.fast_interval.total_seconds())
        except TimeoutError:
            pass
