"""GET /v1/audit: the audit trail of control actions, newest first, with filters and cursor
pages. A tenant's key reads its tenant's rows; the admin key reads one tenant's
(X-Ostinato-Tenant) or, naming none, every row, those of no tenant included."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from litestar import Request, get
from litestar.params import FromQuery, QueryParameter

from ostinato.domain import roles
from ostinato.domain.errors import Forbidden, InvalidInput, NotFound
from ostinato.runtime.auth import Caller
from ostinato.stores import audit as audit_store
from ostinato.stores import tenants
from ostinato.wire.api import AuditEntryView, AuditPage
from services.api.routes import app_state, decode_cursor, encode_cursor
from services.api.scope import ACT_FOR_TENANT

Limit = Annotated[int, QueryParameter(ge=1, le=500)]
Text = Annotated[str | None, QueryParameter(max_length=200)]


def entry_view(r: audit_store.AuditRow) -> AuditEntryView:
    return AuditEntryView(
        id=r.id, recorded_at=r.recorded_at, tenant_id=r.tenant_id,
        caller_tenant_id=r.caller_tenant_id, key_id=r.key_id, key_name=r.key_name, role=r.role,
        actor=r.actor, request_id=r.request_id, action=r.action, target_kind=r.target_kind,
        target_id=r.target_id, status=r.status, outcome=r.outcome,  # type: ignore[arg-type]
        detail=r.detail, before=r.before, after=r.after)


async def readable_tenant(request: Request, caller: Caller) -> uuid.UUID | None:
    """Whose rows the caller may read: its tenant's; the admin's named tenant, or all (None)."""
    named = request.headers.get(ACT_FOR_TENANT)
    if caller.tenant_id is not None:
        if named and named != str(caller.tenant_id):
            raise Forbidden(f"a tenant's key acts for its own tenant only ({ACT_FOR_TENANT})")
        return caller.tenant_id
    if not named:
        return None
    try:
        tenant_id = uuid.UUID(named)
    except ValueError:
        raise InvalidInput(f"{ACT_FOR_TENANT} must be a tenant id", errors=[
            {"field": ACT_FOR_TENANT, "message": "not a UUID"}]) from None
    async with app_state(request).pool.acquire() as conn:
        if await tenants.name_of(conn, tenant_id) is None:
            raise NotFound(f"no tenant {tenant_id}")
    return tenant_id


@get("/v1/audit", tags=["audit"], opt={"action": roles.READ_AUDIT})
async def list_audit(
    request: Request,
    caller: Caller,
    action: Text = None,
    key_id: FromQuery[uuid.UUID | None] = None,
    target_kind: Text = None,
    target_id: Text = None,
    request_id: Text = None,
    since: Annotated[datetime | None, QueryParameter(name="from")] = None,
    until: Annotated[datetime | None, QueryParameter(name="to")] = None,
    limit: Limit = 50,
    cursor: FromQuery[str | None] = None,
) -> AuditPage:
    """Control actions, newest first: who (key id and name, role), for which tenant, which
    request, on what, how it ended, and before/after where it applies. `from` is inclusive,
    `to` exclusive; pass `next_cursor` back as `cursor` for more. Operators and the admin
    only."""
    for name, at in (("from", since), ("to", until)):
        if at is not None and at.tzinfo is None:
            raise InvalidInput(f"{name} needs an offset (RFC 3339)",
                               errors=[{"field": name, "message": "no UTC offset"}])
    tenant_id = await readable_tenant(request, caller)
    where = audit_store.Filter(action=action, key_id=key_id, target_kind=target_kind,
                               target_id=target_id, request_id=request_id, since=since,
                               until=until)
    async with app_state(request).pool.acquire() as conn:
        rows = await audit_store.page(conn, tenant_id, where, after=decode_cursor(cursor),
                                      limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return AuditPage(items=[entry_view(r) for r in rows],
                     next_cursor=encode_cursor(rows[-1].recorded_at, rows[-1].id) if more
                     else None)


ROUTES = [list_audit]
