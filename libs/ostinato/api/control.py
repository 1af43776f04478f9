"""Route handlers that steer jobs (pause, resume, trigger now) and define exclusion calendars."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Request, get, post, put
from litestar.params import FromPath, JSONBody, PathParameter

from ostinato import calendars, jobs
from ostinato.api.auth import Caller, require_tenant
from ostinato.api.models import (
    CalendarRequest,
    CalendarView,
    PauseRequest,
    ResumeRequest,
    TriggeredView,
)
from ostinato.domain.errors import NotFound
from ostinato.eventlog.readmodels import Q
from ostinato.telemetry import tracing

CalendarName = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9][\w.-]{0,99}$")]


def _state(request: Request) -> Any:
    return request.app.state


@post("/v1/jobs/{job_id:uuid}/pause", status_code=200, tags=["jobs"])
async def pause(
    request: Request,
    job_id: FromPath[uuid.UUID],
    caller: Caller,
    data: JSONBody[PauseRequest | None] = None,
) -> dict[str, str]:
    """Stop creating runs. Slots that pass while paused are decided when the job resumes."""
    tenant = require_tenant(caller)
    s = _state(request)
    async with s.pool.acquire() as conn:
        await jobs.pause_job(
            conn,
            s.store,
            tenant_id=tenant.tenant_id,
            job_id=job_id,
            actor=f"tenant:{tenant.name}",
            reason=(data or PauseRequest()).reason,
        )
    return {"status": "paused"}


@post("/v1/jobs/{job_id:uuid}/resume", status_code=200, tags=["jobs"])
async def resume(
    request: Request,
    job_id: FromPath[uuid.UUID],
    caller: Caller,
    data: JSONBody[ResumeRequest | None] = None,
) -> dict[str, str]:
    """Resume; `misfire` (run_once, catch_up, skip) decides the slots missed while paused."""
    tenant = require_tenant(caller)
    s = _state(request)
    async with s.pool.acquire() as conn:
        await jobs.resume_job(
            conn,
            s.store,
            tenant_id=tenant.tenant_id,
            job_id=job_id,
            actor=f"tenant:{tenant.name}",
            misfire=(data or ResumeRequest()).misfire,
        )
    return {"status": "active"}


@post("/v1/jobs/{job_id:uuid}/trigger", status_code=201, tags=["jobs"])
async def trigger(request: Request, job_id: FromPath[uuid.UUID], caller: Caller) -> TriggeredView:
    """Run the job once now, outside its schedule; the run is marked `manual`."""
    tenant = require_tenant(caller)
    s = _state(request)
    async with s.pool.acquire() as conn:
        run_id = await jobs.trigger_now(
            conn,
            s.store,
            s.clock,
            tenant_id=tenant.tenant_id,
            job_id=job_id,
            actor=f"tenant:{tenant.name}",
            traceparent=tracing.current_traceparent(),
        )
    return TriggeredView(run_id=run_id, job_id=job_id, trigger="manual")


def _calendar_view(row: Any) -> CalendarView:
    return CalendarView(name=row["name"], dates=list(row["dates"]), updated_at=row["updated_at"])


@put("/v1/calendars/{name:str}", status_code=200, tags=["calendars"])
async def put_calendar(
    request: Request, name: CalendarName, data: JSONBody[CalendarRequest], caller: Caller
) -> CalendarView:
    """Create or replace an exclusion calendar; schedules naming it skip its dates."""
    tenant = require_tenant(caller)
    s = _state(request)
    async with s.pool.acquire() as conn:
        row = await calendars.define_calendar(
            conn,
            s.store,
            tenant_id=tenant.tenant_id,
            name=name,
            dates=data.dates,
            actor=f"tenant:{tenant.name}",
        )
    return _calendar_view(row)


@get("/v1/calendars/{name:str}", tags=["calendars"])
async def get_calendar(request: Request, name: CalendarName, caller: Caller) -> CalendarView:
    tenant = require_tenant(caller)
    async with _state(request).pool.acquire() as conn:
        row = await conn.fetchrow(Q["calendar_by_name"], tenant.tenant_id, name)
    if row is None:
        raise NotFound(f"no calendar {name!r}")
    return _calendar_view(row)


@get("/v1/calendars", tags=["calendars"])
async def list_calendars(request: Request, caller: Caller) -> dict[str, list[CalendarView]]:
    tenant = require_tenant(caller)
    async with _state(request).pool.acquire() as conn:
        rows = await conn.fetch(Q["list_calendars"], tenant.tenant_id)
    return {"items": [_calendar_view(r) for r in rows]}


ROUTES = [pause, resume, trigger, put_calendar, get_calendar, list_calendars]
