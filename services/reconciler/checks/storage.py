"""Never let the disk decide (docs/RETENTION.md, "The disk"): the reconciler's
`reconcile_storage` duty measures the database's size (`pg_database_size`) and the free space
of its storage — statvfs of `OSTINATO_DB_VOLUME_PATH` (a path on the database's volume, where
the reconciler shares its host) and/or `OSTINATO_DB_CAPACITY_BYTES` (a quota for a managed
database) — and the room inside the database's files that removed rows left and VACUUM freed
(estimated from the statistics, `policy.storage.reusable_bytes`), decides the level against
the watermarks (`ostinato.policy.storage`), records it in the one row of `storage_state`
(migration 0047) that every api instance reads through a short cache, sets the metrics and logs
each change of level once.

PostgreSQL cannot report its volume's free space itself (no built-in function does; reading
the disk from SQL needs a superuser's COPY ... PROGRAM), so the measure is taken where the
volume can be seen, and a capacity stands in where it cannot.

`storage_signals` turns a recorded level at or over the alert watermark into the alert rules'
signals (`OstinatoDatabaseFilling`; over the refuse watermark also `OstinatoNewWorkRefused`),
one per tenant: every tenant's new work is refused, so every tenant is told, through its
default sinks, like the outbox backlog."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg

from ostinato.alerts import Signal
from ostinato.policy import storage as policy
from ostinato.policy.storage import Level, Volume, Watermarks
from ostinato.stores import storage as storage_store
from ostinato.stores.storage import StorageRow
from ostinato.stores.tenants import TenantWeight
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.reconciler")
MEASURED_BY = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class StorageConfig:
    volume_path: str = ""  # a path on the database's volume ("": none)
    capacity_bytes: int = 0  # the database's quota (0: none)
    watermarks: Watermarks = field(default_factory=Watermarks)


NO_STORAGE_MEASURE = StorageConfig()  # the size only: the level is unmeasured


def read_volume(path: str) -> Volume:
    st = os.statvfs(path)
    return Volume.of_statvfs(st.f_blocks, st.f_bfree, st.f_bavail, st.f_frsize)


async def check_storage(pool: asyncpg.Pool, config: StorageConfig) -> int:
    """One measure, decision and record; returns 0 (it repairs nothing). A volume path that
    cannot be read fails the tick (the duty's error on /readyz) and records nothing: the last
    level stands."""
    volume = (await asyncio.to_thread(read_volume, config.volume_path)
              if config.volume_path else None)
    async with pool.acquire() as conn:
        size = await storage_store.database_size(conn)
        room = policy.reusable_bytes(r.space() for r in await storage_store.relations(conn))
        use = policy.usage(size, volume, config.capacity_bytes or None, room)
        level = policy.level(use.used_ratio, config.watermarks)
        previous = await storage_store.record(conn, level, use, config.watermarks, MEASURED_BY)
    metrics.DATABASE_BYTES.set(size)
    metrics.DATABASE_REUSABLE_BYTES.set(room)
    if use.total_bytes is not None and use.free_bytes is not None:
        metrics.DATABASE_VOLUME_BYTES.labels(kind="total").set(use.total_bytes)
        metrics.DATABASE_VOLUME_BYTES.labels(kind="free").set(use.free_bytes)
    metrics.DATABASE_VOLUME_USED_RATIO.set(use.used_ratio or 0.0)
    metrics.STORAGE_REFUSING.set(1 if policy.refuses_new_work(level) else 0)
    if previous != level:
        _log_change(previous, level, use, config)
    return 0


def _log_change(previous: str | None, level: Level, use: policy.Usage,
                config: StorageConfig) -> None:
    marks = config.watermarks
    fields = {"level": level.value, "previous": previous, "source": use.source,
              "used_percent": None if use.used_ratio is None else round(100 * use.used_ratio, 2),
              "database_bytes": use.database_bytes, "free_bytes": use.free_bytes,
              "reusable_bytes": use.reusable_bytes,
              "alert_percent": 100 * marks.alert, "refuse_percent": 100 * marks.refuse}
    if level is Level.FULL:
        log.error("database storage full: the api refuses new work until it falls back under "
                  "the refuse watermark", alert="ostinato_new_work_refused", **fields)
    elif level is Level.FILLING:
        log.warning("database storage filling", alert="ostinato_database_filling", **fields)
    elif level is Level.UNMEASURED:
        log.warning("database storage unmeasured: set OSTINATO_DB_VOLUME_PATH (a path on the "
                    "database's volume) or OSTINATO_DB_CAPACITY_BYTES; nothing is refused",
                    **fields)
    elif previous is None:
        log.info("database storage measured", **fields)
    else:
        log.info("database storage back under the alert watermark", **fields)


def _percent(ratio: float | None) -> str:
    return "unknown" if ratio is None else f"{100 * ratio:.1f} %"


def storage_signals(row: StorageRow | None,
                    tenants: Sequence[TenantWeight]) -> list[Signal]:
    """The storage rules' signals for every tenant, from the recorded level (none below the
    alert watermark, unmeasured, or never recorded)."""
    if row is None or not policy.alerting(row.level):
        return []
    rules = ["OstinatoDatabaseFilling"]
    if policy.refuses_new_work(row.level):
        rules.append("OstinatoNewWorkRefused")
    notes = {"used": _percent(row.used_ratio), "alert_at": _percent(row.alert_ratio),
             "refuse_at": _percent(row.refuse_ratio), "source": row.source,
             "database_bytes": str(row.database_bytes),
             "free_bytes": "unknown" if row.free_bytes is None else str(row.free_bytes),
             "measured_at": row.measured_at.isoformat(),
             "runbook": "docs/RETENTION.md#the-disk: shorten retention "
                        "(PUT /v1/tenants/{id}/retention) or grow the volume"}
    return [Signal(rule, str(t.id), {"tenant": t.name, "tenant_id": str(t.id)}, None, notes)
            for t in tenants for rule in rules]
