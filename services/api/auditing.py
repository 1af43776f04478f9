"""Recording control actions in the audit trail (`ostinato.stores.audit`, docs/SECURITY.md).

A route says it is a control action with `opt=audited("job.pause", "job", "job_id")`: the
action's name, the kind of its target and the path parameter naming it. `recorded` then wraps
the route's work in one transaction on the route's connection (the commands' own transactions
become savepoints) and writes the audit row in it: a done action always has its row, and a row
never describes an action that rolled back. When the action fails, the transaction rolls back and
one row with the answer's status (outcome rejected, or error for a 5xx) is written after it; a
key whose role may not do the action gets a refused row (`refused`, from the auth dependency).
The route fills in what only it knows: the target id once created, before and after.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
from litestar import Request

from ostinato.db.sqlstate import is_unavailable
from ostinato.domain.ids import new_id
from ostinato.domain.roles import Principal
from ostinato.runtime import request_ids
from ostinato.runtime.auth import actor_of
from ostinato.runtime.problems import detail_of, status_of
from ostinato.stores import audit as audit_store
from ostinato.telemetry.logging import RateLimitedLogger, get_logger

log = get_logger("ostinato.api.audit")
_unavailable = RateLimitedLogger("ostinato.api.audit")


def _write_failed(action: str, exc: Exception) -> None:
    """A database away for a moment fails the audit row of every request alike (each also
    answered 503): a warning once per interval with the count; anything else a traceback."""
    if is_unavailable(exc):
        _unavailable.warning("audit_write_failed", exc, action=action)
    else:
        log.exception("audit_write_failed", action=action, exc_info=exc)


@dataclass(frozen=True, slots=True)
class AuditSpec:
    action: str  # e.g. "job.pause"
    target_kind: str  # e.g. "job"
    target_param: str | None  # the path parameter that names the target, if one does


def audited(name: str, target_kind: str, target_param: str | None = None,
            **opt: Any) -> dict[str, Any]:
    """A route's `opt` making it the control action `name` (merged with any other opt, e.g. the
    role `action` it needs)."""
    return {**opt, "audit": AuditSpec(name, target_kind, target_param)}


@dataclass(slots=True)
class Audit:
    """What the route adds to its audit row. `tenant_id` defaults to the tenant acted for."""

    target_id: str = ""
    before: Any = None
    after: Any = None
    status: int | None = None  # when the route answers another status than its default
    detail: str = ""
    tenant_id: uuid.UUID | None = None


def spec_of(request: Request) -> AuditSpec | None:
    return request.route_handler.opt.get("audit")


def _outcome(status: int) -> str:
    if status in (401, 403):
        return "refused"
    return "done" if status < 400 else "rejected" if status < 500 else "error"


def _storable(text: str) -> str:
    """PostgreSQL text holds no NUL: a refusal naming such a value is still recorded."""
    return text.replace("\x00", "\ufffd")


async def _write(conn: asyncpg.Connection, spec: AuditSpec, caller: Principal,
                 tenant_id: uuid.UUID | None, audit: Audit, status: int) -> None:
    await audit_store.record(
        conn, id=new_id(), tenant_id=audit.tenant_id or tenant_id,
        caller_tenant_id=caller.tenant_id, key_id=caller.key_id, key_name=caller.key_name,
        role=caller.role, actor=actor_of(caller), request_id=request_ids.current(),
        action=spec.action, target_kind=spec.target_kind, target_id=_storable(audit.target_id),
        status=status, outcome=_outcome(status), detail=_storable(audit.detail),
        before=msgspec.to_builtins(audit.before), after=msgspec.to_builtins(audit.after))


async def record_keyless(conn: asyncpg.Connection, *, tenant_id: uuid.UUID, actor: str,
                         role: str, action: str, target_kind: str, target_id: str,
                         status: int, after: Any = None) -> None:
    """A done control action that no API key made (a job submitted on Kafka: `ingest.py`): the
    same row with no key and no request id, written in the caller's transaction."""
    await audit_store.record(
        conn, id=new_id(), tenant_id=tenant_id, caller_tenant_id=tenant_id, key_id=None,
        key_name="", role=role, actor=actor, request_id="", action=action,
        target_kind=target_kind, target_id=target_id, status=status, outcome=_outcome(status),
        detail="", before=None, after=msgspec.to_builtins(after))


def _new_audit(request: Request, spec: AuditSpec) -> Audit:
    named = request.path_params.get(spec.target_param) if spec.target_param else None
    return Audit(target_id="" if named is None else str(named))


@asynccontextmanager
async def recorded(conn: asyncpg.Connection, request: Request, caller: Principal,
                   tenant_id: uuid.UUID | None) -> AsyncIterator[Audit]:
    """The route's work as one audited transaction (a plain pass-through for a route that is
    no control action)."""
    spec = spec_of(request)
    audit = Audit() if spec is None else _new_audit(request, spec)
    if spec is None:
        yield audit
        return
    try:
        async with conn.transaction():
            yield audit
            await _write(conn, spec, caller, tenant_id, audit,
                         audit.status or request.route_handler.status_code or 200)
    except Exception as exc:
        failed = Audit(target_id=audit.target_id, before=audit.before,
                       detail=detail_of(exc), tenant_id=audit.tenant_id)
        try:
            await _write(conn, spec, caller, tenant_id, failed, status_of(exc))
        except Exception as audit_exc:  # never hide the action's own error behind the audit's
            _write_failed(spec.action, audit_exc)
        raise


async def refused(request: Request, caller: Principal, exc: Exception) -> None:
    """A key whose role may not do the action (403 at authorization): one refused row."""
    spec = spec_of(request)
    if spec is None:
        return
    audit = _new_audit(request, spec)
    audit.detail = detail_of(exc)
    try:
        async with request.app.state.pool.acquire() as conn:
            await _write(conn, spec, caller, caller.tenant_id, audit, status_of(exc))
    except Exception as exc:
        _write_failed(spec.action, exc)
