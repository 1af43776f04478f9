"""Route handlers that steer jobs (pause, resume, trigger now) and define exclusion calendars."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated, Any

from litestar import Request, get, post, put
from litestar.params import FromPath, JSONBody, PathParameter, QueryParameter

from ostinato import calendars, jobs, schedules
from ostinato.domain.errors import NotFound
from ostinato.eventlog.readmodels import Q
from ostinato.runtime.auth import Caller, require_tenant
from ostinato.telemetry import tracing
from services.api.models import (
    BackfillRequest,
    BackfillView,
    CalendarRequest,
    CalendarView,
    PauseRequest,
    PreviewRequest,
    ResumeRequest,
    TriggeredView,
    UpcomingItem,
    UpcomingView,
)
from services.api.routes import app_state

EPSILON = timedelta(microseconds=1)
PREVIEW_JOB_ID = uuid.UUID(int=0)
CalendarName = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9][\w.-]{0,99}$")]


@post("/v1/jobs/{job_id:uuid}/pause", status_code=200, tags=["jobs"])
async def pause(
    request: Request,
    job_id: FromPath[uuid.UUID],
    caller: Caller,
    data: JSONBody[PauseRequest | None] = None,
) -> dict[str, str]:
    """Stop creating runs. Slots that pass while paused are decided when the job resumes."""
    tenant = require_tenant(caller)
    s = app_state(request)
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
    s = app_state(request)
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
    s = app_state(request)
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


def _upcoming(s: schedules.Schedule, job_id: uuid.UUID, first: Any, count: int) -> UpcomingView:
    items = [] if first is None else schedules.preview(s, job_id, first - EPSILON, count)
    return UpcomingView(
        timezone=s.tz_name,
        items=[
            UpcomingItem(slot=slot, due_at=due, local=slot.astimezone(s.tz).isoformat())
            for slot, due in items
        ],
    )


@get("/v1/jobs/{job_id:uuid}/upcoming", tags=["jobs"])
async def upcoming(
    request: Request,
    job_id: FromPath[uuid.UUID],
    caller: Caller,
    count: Annotated[int, QueryParameter(ge=1, le=100)] = 10,
) -> UpcomingView:
    """The job's next `count` occurrences in UTC, with their due instants (jitter) and local
    times, so DST behaviour can be checked before it happens."""
    tenant = require_tenant(caller)
    async with app_state(request).pool.acquire() as conn:
        row = await conn.fetchrow(Q["job_by_id"], job_id, tenant.tenant_id)
    if row is None:
        raise NotFound(f"no job {job_id}")
    first = row["next_slot"] if row["status"] in ("active", "paused") else None
    return _upcoming(schedules.from_document(row["schedule"]), job_id, first, count)


@post("/v1/schedules/preview", status_code=200, tags=["jobs"])
async def preview(request: Request, data: JSONBody[PreviewRequest], caller: Caller) -> UpcomingView:
    """The occurrences a schedule not yet created would have (jitter shown for a sample id)."""
    require_tenant(caller)
    s = schedules.parse_schedule(data.schedule, now=app_state(request).clock.now())
    return _upcoming(s, PREVIEW_JOB_ID, schedules.next_occurrence(s, None), data.count)


@post("/v1/jobs/{job_id:uuid}/backfill", status_code=200, tags=["jobs"])
async def backfill(
    request: Request, job_id: FromPath[uuid.UUID], caller: Caller, data: JSONBody[BackfillRequest]
) -> BackfillView:
    """Create runs for the slots in [start, end) that have none (idempotent when repeated)."""
    tenant = require_tenant(caller)
    st = app_state(request)
    async with st.pool.acquire() as conn:
        done = await jobs.backfill(
            conn,
            st.store,
            tenant_id=tenant.tenant_id,
            job_id=job_id,
            start=data.start,
            end=data.end,
            actor=f"tenant:{tenant.name}",
        )
    return BackfillView(
        start=done.start,
        end=done.end,
        runs_created=done.runs_created,
        slots_with_runs=done.slots_with_runs,
        slots_skipped=done.slots_skipped,
    )


def _calendar_view(row: Any) -> CalendarView:
    return CalendarView(name=row["name"], dates=list(row["dates"]), updated_at=row["updated_at"])


@put("/v1/calendars/{name:str}", status_code=200, tags=["calendars"])
async def put_calendar(
    request: Request, name: CalendarName, data: JSONBody[CalendarRequest], caller: Caller
) -> CalendarView:
    """Create or replace an exclusion calendar; schedules naming it skip its dates."""
    tenant = require_tenant(caller)
    s = app_state(request)
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
    async with app_state(request).pool.acquire() as conn:
        row = await conn.fetchrow(Q["calendar_by_name"], tenant.tenant_id, name)
    if row is None:
        raise NotFound(f"no calendar {name!r}")
    return _calendar_view(row)


@get("/v1/calendars", tags=["calendars"])
async def list_calendars(request: Request, caller: Caller) -> dict[str, list[CalendarView]]:
    tenant = require_tenant(caller)
    async with app_state(request).pool.acquire() as conn:
        rows = await conn.fetch(Q["list_calendars"], tenant.tenant_id)
    return {"items": [_calendar_view(r) for r in rows]}


ROUTES = [
    pause,
    resume,
    trigger,
    upcoming,
    preview,
    backfill,
    put_calendar,
    get_calendar,
    list_calendars,
]
