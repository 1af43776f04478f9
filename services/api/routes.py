"""Route handlers of the public API: thin, tenant-scoped, over commands and read models."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime
from typing import Annotated, Any

import asyncpg
import msgspec
from litestar import Request, Response, delete, get, post
from litestar.di import Provide
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from ostinato import jobs, tenancy
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.domain.states import RunState
from ostinato.eventlog.readmodels import Q
from ostinato.eventlog.store import get_blobs, read_stream
from ostinato.runtime.auth import Caller, principal, require_admin, require_tenant
from ostinato.telemetry import tracing
from services.api.models import (
    EventsPage,
    EventView,
    JobBatchItem,
    JobBatchRequest,
    JobRequest,
    JobView,
    Page,
    RunView,
    StateTimes,
    TenantCreatedView,
    TenantRequest,
)

Limit = Annotated[int, QueryParameter(ge=1, le=500)]


def app_state(request: Request) -> Any:
    """The running app's pool, store, clock and settings."""
    return request.app.state


def encode_cursor(at: datetime, row_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(f"{at.isoformat()}|{row_id}".encode()).decode()


def decode_cursor(cursor: str | None) -> tuple[datetime | None, uuid.UUID | None]:
    if not cursor:
        return None, None
    try:
        at, _, row_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(at), uuid.UUID(row_id)
    except ValueError as exc:
        raise InvalidInput(
            "cursor is not one this API returned",
            errors=[{"field": "cursor", "message": "invalid cursor"}],
        ) from exc


def job_view(row: asyncpg.Record, payload: Any = None) -> JobView:
    return JobView(
        id=row["id"],
        name=row["name"],
        task=row["task"],
        status=row["status"],
        schedule=row["schedule"],
        pool=row["pool"],
        priority=row["priority"],
        next_run_at=row["next_run_at"],
        next_slot=row["next_slot"],
        last_run_at=row["last_run_at"],
        runs_created=row["runs_created"],
        consecutive_failures=row["consecutive_failures"],
        idempotency_key=row["idempotency_key"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        payload=payload,
    )


def run_view(row: asyncpg.Record, output: Any = None,
             waiting_reason: str | None = None) -> RunView:
    return RunView(
        id=row["id"],
        job_id=row["job_id"],
        task=row["task"],
        pool=row["pool"],
        priority=row["priority"],
        state=row["state"],
        scheduled_for=row["scheduled_for"],
        due_at=row["due_at"],
        trigger=row["trigger"],
        attempt=row["attempt"],
        fencing_token=row["fencing_token"],
        worker_id=row["worker_id"],
        timestamps=StateTimes(
            scheduled_at=row["scheduled_at"],
            queued_at=row["queued_at"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
        ),
        last_error=row["last_error"],
        updated_at=row["updated_at"],
        output=output,
        failures=row["failures"],
        retry_at=row["retry_at"],
        cancel_requested=row["cancel_requested"],
        replay_of=row["replay_of"],
        links={"events": f"/v1/runs/{row['id']}/events", "logs": f"/v1/runs/{row['id']}/logs"},
        concurrency_key=row["concurrency_key"],
        resource=row["resource"],
        waiting_reason=waiting_reason,
    )


@post("/v1/tenants", status_code=201, tags=["tenants"])
async def create_tenant(
    request: Request, data: JSONBody[TenantRequest], caller: Caller
) -> TenantCreatedView:
    """Create a tenant (admin key only). The tenant's API key is shown once, in this answer."""
    require_admin(caller)
    s = app_state(request)
    async with s.pool.acquire() as conn:
        tenant_id, key = await tenancy.create_tenant(
            conn, s.store, data.name, actor="admin", weight=data.weight
        )
    return TenantCreatedView(id=tenant_id, name=data.name, api_key=key)


@post("/v1/jobs", status_code=201, tags=["jobs"])
async def create_job(
    request: Request, data: JSONBody[JobRequest], caller: Caller
) -> Response[JobView]:
    """Register a job. A repeated `idempotency_key` returns the first job with status 200."""
    tenant = require_tenant(caller)
    s = app_state(request)
    async with s.pool.acquire() as conn:
        row, created = await jobs.submit_job(
            conn,
            s.store,
            s.clock,
            tenant_id=tenant.tenant_id,
            request=data,
            pools=s.settings.pool_names,
            pool_retry=s.settings.pool_retry,
            classes=[c.name for c in s.settings.classes],
            max_payload_bytes=s.settings.max_payload_bytes,
            actor=f"tenant:{tenant.name}",
            traceparent=tracing.current_traceparent(),
        )
    return Response(job_view(row, data.payload), status_code=201 if created else 200)


@post("/v1/jobs/batch", status_code=200, tags=["jobs"])
async def create_jobs(
    request: Request, data: JSONBody[JobBatchRequest], caller: Caller
) -> dict[str, list[JobBatchItem]]:
    """Register up to 1,000 jobs in one transaction: all or none. Items whose
    `idempotency_key` names an existing job return it with `created: false`."""
    tenant = require_tenant(caller)
    s = app_state(request)
    async with s.pool.acquire() as conn:
        done = await jobs.submit_jobs(
            conn,
            s.store,
            s.clock,
            tenant_id=tenant.tenant_id,
            requests=data.jobs,
            pools=s.settings.pool_names,
            pool_retry=s.settings.pool_retry,
            classes=[c.name for c in s.settings.classes],
            max_payload_bytes=s.settings.max_payload_bytes,
            actor=f"tenant:{tenant.name}",
            traceparent=tracing.current_traceparent(),
        )
    return {
        "items": [JobBatchItem(id=d.id, created=d.created, next_run_at=d.next_run_at) for d in done]
    }


@get("/v1/jobs", tags=["jobs"])
async def list_jobs(
    request: Request,
    caller: Caller,
    status: FromQuery[str | None] = None,
    limit: Limit = 50,
    cursor: FromQuery[str | None] = None,
) -> Page:
    """This tenant's jobs, newest first; pass `next_cursor` back as `cursor` for more."""
    tenant = require_tenant(caller)
    at, after = decode_cursor(cursor)
    async with app_state(request).pool.acquire() as conn:
        rows = await conn.fetch(Q["list_jobs"], tenant.tenant_id, status, at, after, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(
        items=[job_view(r) for r in rows],
        next_cursor=encode_cursor(rows[-1]["created_at"], rows[-1]["id"]) if more else None,
    )


@get("/v1/jobs/{job_id:uuid}", tags=["jobs"])
async def get_job(request: Request, job_id: FromPath[uuid.UUID], caller: Caller) -> JobView:
    tenant = require_tenant(caller)
    async with app_state(request).pool.acquire() as conn:
        row = await conn.fetchrow(Q["job_by_id"], job_id, tenant.tenant_id)
        if row is None:
            raise NotFound(f"no job {job_id}")
        payload = (await get_blobs(conn, [row["payload_ref"]], tenant.tenant_id)).get(
            row["payload_ref"]
        )
    return job_view(row, payload)


@delete("/v1/jobs/{job_id:uuid}", status_code=204, tags=["jobs"])
async def delete_job(request: Request, job_id: FromPath[uuid.UUID], caller: Caller) -> None:
    """Stop the job from creating runs; runs already created keep going."""
    tenant = require_tenant(caller)
    s = app_state(request)
    async with s.pool.acquire() as conn:
        await jobs.delete_job(
            conn, s.store, tenant_id=tenant.tenant_id, job_id=job_id, actor=f"tenant:{tenant.name}"
        )


@get("/v1/runs", tags=["runs"])
async def list_runs(
    request: Request,
    caller: Caller,
    job_id: FromQuery[uuid.UUID | None] = None,
    run_state: Annotated[str | None, QueryParameter(name="state")] = None,
    limit: Limit = 50,
    cursor: FromQuery[str | None] = None,
) -> Page:
    """This tenant's runs, latest occurrence first, optionally of one job or in one state."""
    tenant = require_tenant(caller)
    if run_state is not None and run_state not in RunState.__members__.values():
        raise InvalidInput(
            f"unknown state {run_state!r}",
            errors=[
                {"field": "state", "message": f"one of {', '.join(s.value for s in RunState)}"}
            ],
        )
    at, after = decode_cursor(cursor)
    async with app_state(request).pool.acquire() as conn:
        rows = await conn.fetch(
            Q["list_runs"], tenant.tenant_id, job_id, run_state, at, after, limit + 1
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(
        items=[run_view(r) for r in rows],
        next_cursor=encode_cursor(rows[-1]["scheduled_for"], rows[-1]["id"]) if more else None,
    )


async def waiting_reason(conn: asyncpg.Connection, row: asyncpg.Record) -> str | None:
    """Why a run waiting for the dispatcher waits: the reason of the last decision that looked
    at it, or (not looked at yet: deep in a backlog) its place in its tenant's queue."""
    waiting = row["state"] == "scheduled" or (row["state"] == "retry_scheduled"
                                              and row["retry_at"] is None)
    if not waiting:
        return None
    hold = await conn.fetchrow(Q["hold_of_run"], row["id"], row["tenant_id"])
    if hold is not None:
        return hold["reason"]
    ahead = await conn.fetchval(Q["waiting_position"], row["tenant_id"], row["pool"],
                                row["priority"], row["updated_at"], row["id"])
    return (f"waiting for the dispatcher; behind {ahead} earlier runs of this tenant in class "
            f"{row['priority']} of pool {row['pool']}")


@get("/v1/runs/{run_id:uuid}", tags=["runs"])
async def get_run(request: Request, run_id: FromPath[uuid.UUID], caller: Caller) -> RunView:
    tenant = require_tenant(caller)
    async with app_state(request).pool.acquire() as conn:
        row = await conn.fetchrow(Q["run_by_id"], run_id, tenant.tenant_id)
        if row is None:
            raise NotFound(f"no run {run_id}")
        output = None
        if row["output_ref"] is not None:
            output = (await get_blobs(conn, [row["output_ref"]], tenant.tenant_id)).get(
                row["output_ref"]
            )
        reason = await waiting_reason(conn, row)
    return run_view(row, output, reason)


@get("/v1/runs/{run_id:uuid}/events", tags=["runs"])
async def run_events(request: Request, run_id: FromPath[uuid.UUID], caller: Caller) -> EventsPage:
    """The run's timeline, read straight from the append-only log, in version order."""
    tenant = require_tenant(caller)
    async with app_state(request).pool.acquire() as conn:
        recorded = await read_stream(conn, run_id, tenant.tenant_id)
    if not recorded:
        raise NotFound(f"no run {run_id}")
    return EventsPage(
        run_id=run_id,
        items=[
            EventView(
                seq=r.seq,
                version=r.version,
                event_id=r.event_id,
                type=r.type,
                occurred_at=r.occurred_at,
                recorded_at=r.recorded_at,
                actor=r.actor,
                epoch=r.epoch,
                data=msgspec.to_builtins(r.event),
            )
            for r in recorded
        ],
    )


ROUTES = [
    create_tenant,
    create_job,
    create_jobs,
    list_jobs,
    get_job,
    delete_job,
    list_runs,
    get_run,
    run_events,
]
DEPENDENCIES = {"caller": Provide(principal)}
