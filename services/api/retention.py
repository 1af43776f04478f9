"""Route handlers of retention (docs/RETENTION.md): a tenant's policy (`PUT` by the admin key,
`GET` by the admin or the tenant's own keys) and holds on runs (operators), each a control
action audited in the transaction of its event, over `ostinato.runs.retention`."""

from __future__ import annotations

import uuid

import asyncpg
from litestar import Request, get, post, put
from litestar.params import FromPath, JSONBody

from ostinato.domain import roles
from ostinato.domain.errors import NotFound
from ostinato.domain.retention import format_keep
from ostinato.runs import retention
from ostinato.runs.retention import PolicyShown
from ostinato.runtime.auth import Caller, require_admin
from ostinato.stores import retention as retention_store
from ostinato.stores.retention import HoldRow
from ostinato.wire.api import (
    HoldRequest,
    HoldView,
    RetentionRequest,
    RetentionView,
    RunHoldResult,
)
from services.api import auditing
from services.api.archived import refuses_archived
from services.api.auditing import audited
from services.api.scope import Tenant


def retention_view(tenant_id: uuid.UUID, shown: PolicyShown) -> RetentionView:
    p, row = shown.policy, shown.row
    return RetentionView(tenant_id=tenant_id, keep_seconds=p.keep_seconds,
                         keep=format_keep(p.keep_seconds), archive=p.archive,
                         default=row is None, updated_at=row.updated_at if row else None,
                         updated_by=row.updated_by if row else None)


def hold_view(hold: HoldRow | None) -> HoldView | None:
    """A hold as GET /v1/runs/{id} and the hold routes show it."""
    if hold is None:
        return None
    return HoldView(reason=hold.reason, by=hold.held_by, at=hold.held_at)


async def held_of(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                  run_id: uuid.UUID) -> HoldView | None:
    """GET /v1/runs/{id}'s `held` (an archived run has none: a held run is never archived)."""
    return hold_view((await retention_store.holds_of(conn, tenant_id, [run_id])).get(run_id))


@get("/v1/tenants/{tenant_id:uuid}/retention", tags=["retention"])
async def get_retention(request: Request, tenant_id: FromPath[uuid.UUID],
                        caller: Caller) -> RetentionView:
    """The tenant's retention (`default: true` when never set: 30 days, archive). The admin
    key reads any tenant's; a tenant's key only its own (another's: 404, as an unknown one)."""
    if caller.tenant_id is not None and caller.tenant_id != tenant_id:
        raise NotFound(f"no tenant {tenant_id}")
    async with request.app.state.pool.acquire() as conn:
        return retention_view(tenant_id, await retention.policy_of(conn, tenant_id))


@put("/v1/tenants/{tenant_id:uuid}/retention", status_code=200, tags=["retention"],
     opt=audited("retention.set", "tenant", "tenant_id", action=roles.ADMINISTER))
async def put_retention(request: Request, tenant_id: FromPath[uuid.UUID],
                        data: JSONBody[RetentionRequest], caller: Caller) -> RetentionView:
    """Set how long the tenant's finished runs stay in the hot database after they ended
    (`keep`: seconds or "30d"; 1 hour to 10 years) and whether they are archived first
    (admin key). Setting the policy the tenant has records nothing."""
    require_admin(caller)
    s = request.app.state
    async with s.pool.acquire() as conn, \
            auditing.recorded(conn, request, caller, tenant_id) as audit:
        audit.before = (await retention.policy_of(conn, tenant_id)).doc()
        shown, _ = await retention.set_retention(
            conn, s.store, tenant_id=tenant_id, keep=data.keep, archive=data.archive,
            actor="admin", reason=data.reason, floor=s.settings.retention_floor_seconds)
        audit.after = shown.doc()
    return retention_view(tenant_id, shown)


@post("/v1/runs/{run_id:uuid}/hold", status_code=200, tags=["retention"],
      opt=audited("run.hold", "run", "run_id"))
@refuses_archived
async def hold(run_id: FromPath[uuid.UUID], tenant: Tenant,
               data: JSONBody[HoldRequest | None] = None) -> RunHoldResult:
    """Hold the run (any state; `reason` required): it is never archived or removed until
    released. Holding a held run answers 200 with its existing hold and records nothing; an
    archived run is a 409 run-archived (it can be read, not changed)."""
    row, changed = await retention.hold_run(tenant.conn, tenant.store,
                                            tenant_id=tenant.tenant_id, run_id=run_id,
                                            actor=tenant.actor,
                                            reason=(data or HoldRequest()).reason)
    tenant.audit.before = None if changed else {"reason": row.reason, "by": row.held_by}
    tenant.audit.after = {"reason": row.reason, "by": row.held_by}
    return RunHoldResult(run_id=run_id, held=hold_view(row), changed=changed)


@post("/v1/runs/{run_id:uuid}/release", status_code=200, tags=["retention"],
      opt=audited("run.release", "run", "run_id"))
@refuses_archived
async def release(run_id: FromPath[uuid.UUID], tenant: Tenant,
                  data: JSONBody[HoldRequest | None] = None) -> RunHoldResult:
    """Release the run's hold: its tenant's retention applies again. Releasing a run not held
    answers 200 with `held: null` and records nothing."""
    row, changed = await retention.release_run(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id,
        actor=tenant.actor, reason=(data or HoldRequest()).reason)
    tenant.audit.before = {"reason": row.reason, "by": row.held_by} if row else None
    tenant.audit.after = None
    return RunHoldResult(run_id=run_id, held=None, changed=changed)


ROUTES = [get_retention, put_retention, hold, release]
