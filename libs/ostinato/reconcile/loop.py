"""The reconciler's pass: every check in turn, every `interval`; a failing check is logged and
the others still run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.eventlog.store import EventStore
from ostinato.reconcile.health import check_once
from ostinato.reconcile.occurrences import check_gaps, check_overdue
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.reconciler")


@dataclass(frozen=True, slots=True)
class ReconcileConfig:
    interval: timedelta = timedelta(seconds=10)
    stuck_after: timedelta = timedelta(minutes=5)
    missed_grace: timedelta = timedelta(seconds=30)  # due this long without a decision: overdue
    gap_window: timedelta = timedelta(hours=24)  # how far back gaps are looked for


async def reconcile_once(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                         config: ReconcileConfig) -> dict[str, int]:
    found: dict[str, int] = {}
    checks = {
        "health": lambda: check_once(pool, clock, stuck_after=config.stuck_after),
        "overdue": lambda: check_overdue(pool, store, clock, grace=config.missed_grace),
        "gaps": lambda: check_gaps(pool, store, clock, window=config.gap_window,
                                   grace=config.missed_grace),
    }
    for name, check in checks.items():
        try:
            result = await check()
            found[name] = result if isinstance(result, int) else sum(result.stuck.values())
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("reconcile check failed; next pass retries", check=name, error=repr(exc))
    return found


async def run_reconciler(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                         config: ReconcileConfig, *, stopping: asyncio.Event,
                         on_repaired: Callable[[], None] = lambda: None) -> None:
    while not stopping.is_set():
        found = await reconcile_once(pool, store, clock, config)
        if found.get("overdue") or found.get("gaps"):
            on_repaired()
        try:
            await asyncio.wait_for(stopping.wait(), config.interval.total_seconds())
        except TimeoutError:
            pass
