"""Bulk actions by query as tracked operations: `POST /v1/operations` (kind and filter; a dry
run only counts), `GET /v1/operations[/{id}]` (progress), `POST /v1/operations/{id}/cancel`.
The work itself is the api's `operations` duty (`ostinato.operations.work`, docs/OPERATIONS.md).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from ostinato.domain import roles
from ostinato.domain.errors import NotFound
from ostinato.operations import filters, work
from ostinato.stores import operations as op_store
from ostinato.stores.operations import OperationRow
from ostinato.wire.api import (
    OperationCountView,
    OperationFailureView,
    OperationRequest,
    OperationView,
    Page,
)
from services.api.auditing import audited
from services.api.routes import app_state, decode_cursor, encode_cursor
from services.api.scope import Tenant

Limit = Annotated[int, QueryParameter(ge=1, le=500)]
FAILURES_SHOWN = 100


def operation_view(row: OperationRow,
                   failures: list[OperationFailureView] | None = None) -> OperationView:
    return OperationView(
        id=row.id, kind=row.kind, filter=row.filter, state=row.state, total=row.total,
        processed=row.position, done=row.done, skipped=row.skipped, failed=row.failed,
        actor=row.actor, created_at=row.created_at, finished_at=row.finished_at,
        cancelled_by=row.cancelled_by, failures=failures)


def wake(request: Request) -> None:
    """Start the duty's next tick now (it also polls every second)."""
    wake_operations = getattr(app_state(request), "wake_operations", None)
    if wake_operations is not None:
        wake_operations()


@post("/v1/operations", status_code=202, tags=["operations"],
      opt=audited("operation.start", "operation", action=roles.OPERATE))
async def create_operation(request: Request, data: JSONBody[OperationRequest],
                           tenant: Tenant) -> Response[OperationView | OperationCountView]:
    """Act on every item the filter selects, with no page cap: cancel or retry runs, replay
    dead letters, pause jobs. The selection is frozen now (`total`); the api works through it
    in batches (`GET /v1/operations/{id}` shows progress), each item with its single-item
    command, so an item that no longer qualifies (a run that finished meanwhile) is skipped.
    `dry_run` returns the count and writes nothing."""
    if data.dry_run:
        n = await work.count(tenant.conn, tenant_id=tenant.tenant_id, kind=data.kind,
                             f=data.filter)
        tenant.audit.status, tenant.audit.detail = 200, f"dry run: {n} would be acted on"
        return Response(OperationCountView(kind=data.kind, filter=filters.given(data.filter),
                                           count=n), status_code=200)
    row = await work.start(tenant.conn, tenant_id=tenant.tenant_id, kind=data.kind,
                           f=data.filter, actor=tenant.actor, now=tenant.clock.now())
    tenant.audit.target_id = str(row.id)
    tenant.audit.after = {"kind": row.kind, "filter": row.filter, "total": row.total}
    wake(request)
    return Response(operation_view(row), status_code=202,
                    headers={"Location": f"/v1/operations/{row.id}"})


@get("/v1/operations", tags=["operations"])
async def list_operations(
    tenant: Tenant,
    op_state: Annotated[Literal["running", "completed", "cancelled"] | None,
                        QueryParameter(name="state")] = None,
    cursor: FromQuery[str | None] = None, limit: Limit = 50,
) -> Page:
    """This tenant's operations, newest first."""
    rows = await op_store.page(tenant.conn, tenant.tenant_id, state=op_state,
                               after=decode_cursor(cursor), limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(items=[operation_view(r) for r in rows],
                next_cursor=encode_cursor(rows[-1].created_at, rows[-1].id) if more else None)


@get("/v1/operations/{op_id:uuid}", tags=["operations"])
async def get_operation(op_id: FromPath[uuid.UUID], tenant: Tenant) -> OperationView:
    """One operation's progress, with the first items it skipped or could not act on."""
    row = await op_store.by_id(tenant.conn, tenant.tenant_id, op_id)
    if row is None:
        raise NotFound(f"no operation {op_id}")
    failures = await op_store.failures_of(tenant.conn, row.id, FAILURES_SHOWN)
    return operation_view(row, [OperationFailureView(item_id=f.item_id, outcome=f.outcome,
                                                     detail=f.detail) for f in failures])


@post("/v1/operations/{op_id:uuid}/cancel", status_code=200, tags=["operations"],
      opt=audited("operation.cancel", "operation", "op_id", action=roles.OPERATE))
async def cancel_operation(op_id: FromPath[uuid.UUID], tenant: Tenant) -> OperationView:
    """Stop a running operation after the batch in hand; what it did stays done."""
    row = await work.cancel(tenant.conn, tenant_id=tenant.tenant_id, op_id=op_id,
                            actor=tenant.actor, now=tenant.clock.now())
    return operation_view(row)


ROUTES = [create_operation, list_operations, get_operation, cancel_operation]
