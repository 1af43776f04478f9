"""Retention commands (docs/RETENTION.md): a tenant's policy (`RetentionSet` on the tenant's
stream, by the admin) and holds on runs (`RunHeld` / `RunReleased` on the run's stream, by an
operator). Each validates its input first (`ostinato.domain.retention`: a 422 naming the
field, nothing recorded) and appends under the stream's lock, so two callers never both
record a hold. The rules that use them are `ostinato.domain.retention.removable`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from ostinato.domain import events as ev
from ostinato.domain.errors import NotFound
from ostinato.domain.retention import (
    DEFAULT_POLICY,
    MIN_KEEP_SECONDS,
    RetentionPolicy,
    check_reason,
    parse_keep,
)
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.runs.commands import lock_run
from ostinato.stores import retention as retention_store
from ostinato.stores import tenants
from ostinato.stores.retention import HoldRow, RetentionRow
from ostinato.telemetry.logging import get_logger


@dataclass(frozen=True, slots=True)
class PolicyShown:
    """A tenant's policy as shown: the row as set, or the default (`row` None)."""

    policy: RetentionPolicy
    row: RetentionRow | None

    def doc(self) -> dict[str, object]:
        """As the audit trail records it before and after a change."""
        return {"keep_seconds": self.policy.keep_seconds, "archive": self.policy.archive,
                "default": self.row is None}


async def policy_of(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> PolicyShown:
    """The tenant's policy, the default when it never set one; NotFound for no such tenant."""
    if await tenants.name_of(conn, tenant_id) is None:
        raise NotFound(f"no tenant {tenant_id}")
    row = await retention_store.policy_of(conn, tenant_id)
    if row is None:
        return PolicyShown(DEFAULT_POLICY, None)
    return PolicyShown(RetentionPolicy(keep_seconds=row.keep_seconds, archive=row.archive), row)


async def set_retention(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                        keep: str | int, archive: bool, actor: str,
                        reason: str | None = None,
                        floor: int = MIN_KEEP_SECONDS) -> tuple[PolicyShown, bool]:
    """Record the tenant's policy; (the policy now, whether anything was recorded: setting the
    policy it has already records nothing). `floor`: the least keep (the operator's
    OSTINATO_RETENTION_FLOOR_SECONDS; below it a 422 naming it)."""
    keep_seconds = parse_keep(keep, floor=floor)
    why = check_reason(reason, required=False)
    async with conn.transaction():
        tenant = await tenants.lock(conn, tenant_id)
        if tenant is None:
            raise NotFound(f"no tenant {tenant_id}")
        current = await retention_store.policy_of(conn, tenant_id)
        if current is not None and (current.keep_seconds, current.archive) == (keep_seconds,
                                                                                archive):
            return await policy_of(conn, tenant_id), False
        head = StreamHead(tenant_id, tenant_id, tenant.version)
        await store.append(conn, [head.next(ev.RetentionSet(
            keep_seconds=keep_seconds, archive=archive, by=actor, reason=why), actor)])
        shown = await policy_of(conn, tenant_id)
    get_logger("ostinato.retention").info(
        "retention set", tenant_id=str(tenant_id), keep_seconds=keep_seconds, archive=archive,
        actor=actor)
    return shown, True


async def hold_run(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                   run_id: uuid.UUID, actor: str, reason: str | None) -> tuple[HoldRow, bool]:
    """Hold the run (any state); (its hold, whether it is new). A run held already keeps its
    first hold and nothing is recorded. NotFound for another tenant's run."""
    why = check_reason(reason, required=True)
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        existing = (await retention_store.holds_of(conn, tenant_id, [run_id])).get(run_id)
        if existing is not None:
            return existing, False
        head = StreamHead.of(run)
        await store.append(conn, [head.next(ev.RunHeld(reason=why or "", by=actor), actor,
                                            traceparent=run.traceparent)])
        hold = (await retention_store.holds_of(conn, tenant_id, [run_id]))[run_id]
    get_logger("ostinato.retention").info("run held", tenant_id=str(tenant_id),
                                          run_id=str(run_id), actor=actor)
    return hold, True


async def release_run(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                      run_id: uuid.UUID, actor: str,
                      reason: str | None = None) -> tuple[HoldRow | None, bool]:
    """Release the run's hold; (the hold it had, whether one was released). A run not held
    records nothing. NotFound for another tenant's run."""
    why = check_reason(reason, required=False)
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        existing = (await retention_store.holds_of(conn, tenant_id, [run_id])).get(run_id)
        if existing is None:
            return None, False
        head = StreamHead.of(run)
        await store.append(conn, [head.next(ev.RunReleased(by=actor, reason=why), actor,
                                            traceparent=run.traceparent)])
    get_logger("ostinato.retention").info("run released", tenant_id=str(tenant_id),
                                          run_id=str(run_id), actor=actor)
    return existing, True
