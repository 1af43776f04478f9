"""Alerts in PostgreSQL: the signals the rules read (every tenant at once), the state per alert
key, the tenants' sinks and the delivery outbox (migration 0031, docs/ALERTS.md)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "alerts.sql")


class DeadLetterSignal(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job: str
    owner: str | None
    n: int
    since: datetime


class FindingSignal(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job: str
    owner: str | None
    last_missing_slot: datetime | None
    last_overdue_slot: datetime | None
    succeeded_slot: datetime | None


class StaleSignal(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job: str
    owner: str | None
    last_success_at: datetime | None


class StuckSignal(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job: str | None
    owner: str | None
    n: int


class PausedSignal(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job: str
    owner: str | None


class LagSignal(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    tenant: str
    pool: str
    n: int
    p99_seconds: float | None


class DisagreementSignal(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job: str
    owner: str | None
    n: int
    last_at: datetime


class FiringAlert(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    alert_key: str
    rule: str


class Resolved(msgspec.Struct, frozen=True):
    group_key: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime


class AlertRow(msgspec.Struct, frozen=True):
    alert_key: str
    rule: str
    status: str
    owner: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None


class SinkRow(msgspec.Struct, frozen=True):
    name: str
    url: str
    secret_header: str | None
    owners: list[str]
    is_default: bool
    created_at: datetime
    updated_at: datetime


class RoutingSink(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    name: str
    owners: list[str]
    is_default: bool


class DueDelivery(msgspec.Struct, frozen=True):
    id: int
    tenant_id: uuid.UUID
    sink_name: str
    group_key: str
    alert: dict[str, Any]  # the Alertmanager alert object
    attempts: int
    url: str
    secret_header: str | None
    secret_value: str | None


# -- signals -----------------------------------------------------------------------------------

async def dead_letters(conn: asyncpg.Connection, limit: int) -> list[DeadLetterSignal]:
    return many(DeadLetterSignal, await conn.fetch(Q["alert_dead_letters"], limit))


async def job_findings(conn: asyncpg.Connection, limit: int) -> list[FindingSignal]:
    return many(FindingSignal, await conn.fetch(Q["alert_job_findings"], limit))


async def stale_jobs(conn: asyncpg.Connection, now: datetime, limit: int) -> list[StaleSignal]:
    return many(StaleSignal, await conn.fetch(Q["alert_stale_jobs"], now, limit))


async def stuck_runs(conn: asyncpg.Connection, limit: int) -> list[StuckSignal]:
    return many(StuckSignal, await conn.fetch(Q["alert_stuck_runs"], limit))


async def auto_paused(conn: asyncpg.Connection, limit: int) -> list[PausedSignal]:
    return many(PausedSignal, await conn.fetch(Q["alert_auto_paused"], limit))


async def lag_by_pool(conn: asyncpg.Connection, since: datetime, until: datetime,
                      limit: int) -> list[LagSignal]:
    """Per tenant and pool, the first starts of the whole minutes from `since`'s to `until` and
    their schedule lag p99, from the start-lag histogram (never the log: a constant cost)."""
    return many(LagSignal, await conn.fetch(Q["alert_lag_by_pool"], since, until, limit))


async def ledger_disagreements(conn: asyncpg.Connection, since: datetime,
                               limit: int) -> list[DisagreementSignal]:
    return many(DisagreementSignal, await conn.fetch(Q["alert_ledger_disagreements"], since,
                                                     limit))


# -- state -------------------------------------------------------------------------------------

async def firing(conn: asyncpg.Connection) -> list[FiringAlert]:
    return many(FiringAlert, await conn.fetch(Q["alerts_firing"]))


async def fire(conn: asyncpg.Connection, tenant_id: uuid.UUID, key: str, rule: str,
               group_key: str, owner: str | None, labels: dict[str, str],
               annotations: dict[str, str], now: datetime) -> datetime | None:
    """The new episode's start, or None when the key fires already."""
    return await conn.fetchval(Q["alert_fire"], tenant_id, key, rule, group_key, owner, labels,
                               annotations, now)


async def resolve(conn: asyncpg.Connection, tenant_id: uuid.UUID, key: str,
                  now: datetime) -> Resolved | None:
    return one(Resolved, await conn.fetchrow(Q["alert_resolve"], tenant_id, key, now))


async def alerts_of(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    limit: int) -> list[AlertRow]:
    return many(AlertRow, await conn.fetch(Q["alert_states_of_tenant"], tenant_id, limit))


# -- sinks -------------------------------------------------------------------------------------

async def put_sink(conn: asyncpg.Connection, tenant_id: uuid.UUID, name: str, *, url: str,
                   secret_header: str | None, secret_value: str | None, owners: Sequence[str],
                   is_default: bool, now: datetime) -> SinkRow:
    row = one(SinkRow, await conn.fetchrow(Q["sink_put"], tenant_id, name, url, secret_header,
                                           secret_value, list(owners), is_default, now))
    assert row is not None
    return row


async def sinks_of(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> list[SinkRow]:
    return many(SinkRow, await conn.fetch(Q["sinks_of_tenant"], tenant_id))


async def delete_sink(conn: asyncpg.Connection, tenant_id: uuid.UUID, name: str) -> bool:
    return await conn.fetchval(Q["sink_delete"], tenant_id, name) is not None


async def sinks_for_routing(conn: asyncpg.Connection,
                            tenant_ids: Sequence[uuid.UUID]) -> list[RoutingSink]:
    return many(RoutingSink, await conn.fetch(Q["sinks_for_routing"], list(tenant_ids)))


# -- deliveries --------------------------------------------------------------------------------

async def enqueue(conn: asyncpg.Connection, tenant_id: uuid.UUID, key: str, group_key: str,
                  status: str, starts_at: datetime, alert: dict[str, Any], now: datetime,
                  sinks: Sequence[str]) -> None:
    if sinks:
        await conn.execute(Q["delivery_enqueue"], tenant_id, key, group_key, status, starts_at,
                           alert, now, list(sinks))


async def sinks_of_firing(conn: asyncpg.Connection, tenant_id: uuid.UUID, key: str,
                          starts_at: datetime) -> list[str]:
    return [r["sink_name"] for r in await conn.fetch(Q["delivery_sinks_of_firing"], tenant_id,
                                                     key, starts_at)]


async def due(conn: asyncpg.Connection, now: datetime, limit: int) -> list[DueDelivery]:
    return many(DueDelivery, await conn.fetch(Q["deliveries_due"], now, limit))


async def delivered(conn: asyncpg.Connection, ids: Sequence[int], now: datetime) -> None:
    await conn.execute(Q["deliveries_done"], list(ids), now)


async def failed(conn: asyncpg.Connection, ids: Sequence[int], error: str,
                 next_at: datetime) -> None:
    await conn.execute(Q["deliveries_failed"], list(ids), error, next_at)


async def pending(conn: asyncpg.Connection) -> int:
    return await conn.fetchval(Q["deliveries_pending"])
