"""Route handlers that steer jobs (pause, resume, trigger now, backfill, previews) and define
exclusion calendars."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any

import asyncpg
from litestar import Response, get, patch, post, put
from litestar.params import (
    FromPath,
    HeaderParameter,
    JSONBody,
    PathParameter,
    QueryParameter,
)

from ostinato import calendars, jobs, schedules
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.jobs import edit
from ostinato.jobs.submit import calendar_errors
from ostinato.schedules.zones import load_zone
from ostinato.stores import calendars as calendar_store
from ostinato.stores import jobs as job_store
from ostinato.telemetry import tracing
from ostinato.wire.api import (
    BackfillRequest,
    BackfillSlotView,
    BackfillView,
    CalendarRequest,
    Calendars,
    CalendarView,
    JobStatus,
    JobUpdateRequest,
    JobUpdateView,
    PauseRequest,
    PreviewRequest,
    ResumeRequest,
    TriggeredView,
    TriggerRequest,
    UpcomingItem,
    UpcomingView,
)
from services.api.auditing import audited
from services.api.routes import definition, job_view
from services.api.scope import Tenant, TenantScope

EPSILON = timedelta(microseconds=1)
PREVIEW_JOB_ID = uuid.UUID(int=0)
CalendarName = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9][\w.-]{0,99}$")]


async def _status(tenant: TenantScope, job_id: uuid.UUID) -> dict[str, str] | None:
    job = await job_store.by_id(tenant.conn, tenant.tenant_id, job_id)
    return None if job is None else {"status": job.status}


@post("/v1/jobs/{job_id:uuid}/pause", status_code=200, tags=["jobs"],
      opt=audited("job.pause", "job", "job_id"))
async def pause(
    job_id: FromPath[uuid.UUID], tenant: Tenant, data: JSONBody[PauseRequest | None] = None,
) -> JobStatus:
    """Stop creating runs. Slots that pass while paused are decided when the job resumes."""
    tenant.audit.before = await _status(tenant, job_id)
    await jobs.pause_job(tenant.conn, tenant.store, tenant_id=tenant.tenant_id, job_id=job_id,
                         actor=tenant.actor, reason=(data or PauseRequest()).reason)
    tenant.audit.after = await _status(tenant, job_id)
    return JobStatus(status="paused")


@post("/v1/jobs/{job_id:uuid}/resume", status_code=200, tags=["jobs"],
      opt=audited("job.resume", "job", "job_id"))
async def resume(
    job_id: FromPath[uuid.UUID], tenant: Tenant, data: JSONBody[ResumeRequest | None] = None,
) -> JobStatus:
    """Resume; `misfire` (run_once, catch_up, skip) decides the slots missed while paused."""
    tenant.audit.before = await _status(tenant, job_id)
    await jobs.resume_job(tenant.conn, tenant.store, tenant_id=tenant.tenant_id, job_id=job_id,
                          actor=tenant.actor, misfire=(data or ResumeRequest()).misfire)
    tenant.audit.after = await _status(tenant, job_id)
    return JobStatus(status="active")


@post("/v1/jobs/{job_id:uuid}/trigger", status_code=201, tags=["jobs"],
      opt=audited("job.trigger", "job", "job_id"))
async def trigger(job_id: FromPath[uuid.UUID], tenant: Tenant,
                  data: JSONBody[TriggerRequest | None] = None) -> Response[TriggeredView]:
    """Run the job once now, outside its schedule; the run is marked `manual`. A DAG job
    (task `dag:<id>`) starts a DAG run instead, answered as `dag_run_id`. The same
    `request_key` again starts nothing and answers the first (200, `created` false)."""
    done = await jobs.trigger_now(tenant.conn, tenant.store, tenant.clock,
                                  tenant_id=tenant.tenant_id, job_id=job_id, actor=tenant.actor,
                                  traceparent=tracing.current_traceparent(),
                                  request_key=(data or TriggerRequest()).request_key)
    status = 201 if done.created else 200
    tenant.audit.after = ({"dag_run_id": str(done.dag_run_id)} if done.dag_run_id
                          else {"run_id": str(done.run_id)})
    tenant.audit.status = status
    return Response(TriggeredView(run_id=done.run_id, job_id=job_id, trigger="manual",
                                  dag_run_id=done.dag_run_id, created=done.created),
                    status_code=status)


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
    job_id: FromPath[uuid.UUID], tenant: Tenant,
    count: Annotated[int, QueryParameter(ge=1, le=100)] = 10,
) -> UpcomingView:
    """The job's next `count` occurrences in UTC, with their due instants (jitter) and local
    times, so DST behaviour can be checked before it happens."""
    job = await job_store.by_id(tenant.conn, tenant.tenant_id, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    first = job.next_slot if job.status in ("active", "paused") else None
    return _upcoming(schedules.from_document(job.schedule), job_id, first, count)


@post("/v1/schedules/preview", status_code=200, tags=["jobs"],
      opt={"action": roles.READ})  # changes nothing
async def preview(data: JSONBody[PreviewRequest], tenant: Tenant) -> UpcomingView:
    """The next `count` (at most 100; no paging: preview from a later `start_at` for more)
    occurrences a schedule not yet created would have, jitter shown for a sample id. The same
    checks as creating the job: an unknown `calendar` is a 422."""
    s = await checked_schedule(tenant.conn, tenant.tenant_id, data.schedule, tenant.clock.now())
    return _upcoming(s, PREVIEW_JOB_ID, schedules.next_occurrence(s, None), data.count)


async def checked_schedule(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                           spec: schedules.ScheduleSpec, now: datetime) -> schedules.Schedule:
    """A schedule not yet created, checked as creating its job checks it (the preview's and
    the web UI's new-job form's): InvalidInput naming each bad field or unknown calendar."""
    s = schedules.parse_schedule(spec, now=now)
    if s.calendar:
        known = await calendar_store.existing_names(conn, tenant_id, [s.calendar])
        if errors := calendar_errors(s, known):
            raise InvalidInput("the schedule names an unknown calendar", errors=errors)
    return s


IfMatch = Annotated[str | None, HeaderParameter(
    name="If-Match", required=False,
    description="The job's version as its ETag gives it (GET /v1/jobs/{id}), e.g. \"3\": the "
                "edit applies only to that version (else 412). Without it the edit applies to "
                "whatever version is current.")]
DryRun = Annotated[bool, QueryParameter(
    description="Answer the change and the upcoming occurrences before and after it; change "
                "nothing (as `dry_run: true` in the body).")]


def _job_upcoming(job: job_store.JobRow, count: int) -> UpcomingView:
    first = job.next_slot if job.status in ("active", "paused") else None
    return _upcoming(schedules.from_document(job.schedule), job.id, first, count)


@patch("/v1/jobs/{job_id:uuid}", status_code=200, tags=["jobs"],
       opt=audited("job.update", "job", "job_id"))
async def update(
    job_id: FromPath[uuid.UUID], tenant: Tenant, data: JSONBody[JobUpdateRequest],
    if_match: IfMatch = None, dry_run: DryRun = False,
) -> Response[JobUpdateView]:
    """Edit the job in place: same id and history, one JobUpdated event (with `reason`), the
    definition `version` one more (the answer's ETag). A new schedule owns the occurrences from
    `switch_at` on; runs already created keep their settings unless `apply_to_scheduled`
    (docs/SCHEDULES.md, "Editing a job"). `dry_run` answers the same and changes nothing."""
    settings = tenant.settings
    done = await edit.update_job(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, job_id=job_id,
        patch=data, actor=tenant.actor, pools=settings.pool_names,
        classes=[c.name for c in settings.classes], max_payload_bytes=settings.max_payload_bytes,
        if_match=edit.parse_if_match(if_match), dry_run=dry_run, pool_retry=settings.pool_retry)
    if done.dry_run:
        tenant.audit.detail = f"dry run: would change {', '.join(done.changed) or 'nothing'}"
    elif done.changed:
        tenant.audit.before = {**definition(done.before), "version": done.version_before}
        tenant.audit.after = {**definition(done.after), "version": done.version,
                              "changed": done.changed, "reason": data.reason,
                              "runs_amended": done.runs_amended}
    else:
        tenant.audit.detail = "nothing changed: the settings sent are the job's"
    view = JobUpdateView(
        job=job_view(done.after, done.payload, done.version if not done.dry_run
                     else done.version_before),
        version=done.version_before if done.dry_run else done.version, changed=done.changed,
        dry_run=done.dry_run, upcoming_before=_job_upcoming(done.before, data.preview_count),
        upcoming_after=_job_upcoming(done.after, data.preview_count), switch_at=done.switch_at,
        runs_amended=done.runs_amended)
    return Response(view, headers={"ETag": edit.etag(view.version)})


def backfill_view(done: jobs.Backfill) -> BackfillView:
    """The answer of a backfill or its dry run: counts and every slot in UTC and local time."""
    tz = load_zone(done.timezone)
    return BackfillView(
        start=done.start,
        end=done.end,
        runs_created=done.runs_created,
        slots_with_runs=done.slots_with_runs,
        slots_skipped=done.slots_skipped,
        dry_run=done.dry_run,
        timezone=done.timezone,
        slots=[BackfillSlotView(slot=s.slot, local=s.slot.astimezone(tz).isoformat(),
                                action=s.action, recorded_skip=s.recorded_skip)
               for s in done.slots],
    )


@post("/v1/jobs/{job_id:uuid}/backfill", status_code=200, tags=["jobs"],
      opt=audited("job.backfill", "job", "job_id"))
async def backfill(
    job_id: FromPath[uuid.UUID], tenant: Tenant, data: JSONBody[BackfillRequest]
) -> BackfillView:
    """Create runs for the slots in [start, end) that have none (idempotent when repeated),
    answering every slot and what was done with it. `dry_run` answers the same list and
    changes nothing, so the slots can be checked first (in local time across DST changes)."""
    done = await jobs.backfill(tenant.conn, tenant.store, tenant_id=tenant.tenant_id, job_id=job_id,
                               start=data.start, end=data.end, actor=tenant.actor,
                               dry_run=data.dry_run)
    if done.dry_run:
        tenant.audit.detail = f"dry run: {done.runs_created} runs would be created"
    else:
        tenant.audit.after = {"start": done.start, "end": done.end,
                              "runs_created": done.runs_created}
    return backfill_view(done)


def _calendar_view(row: calendar_store.CalendarRow) -> CalendarView:
    return CalendarView(name=row.name, dates=list(row.dates), updated_at=row.updated_at)


@put("/v1/calendars/{name:str}", status_code=200, tags=["calendars"],
     opt=audited("calendar.put", "calendar", "name"))
async def put_calendar(
    name: CalendarName, data: JSONBody[CalendarRequest], tenant: Tenant
) -> CalendarView:
    """Create or replace an exclusion calendar; schedules naming it skip its dates."""
    old = await calendar_store.by_name(tenant.conn, tenant.tenant_id, name)
    row = await calendars.define_calendar(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, name=name, dates=data.dates,
        actor=tenant.actor)
    tenant.audit.before = None if old is None else {"dates": list(old.dates)}
    tenant.audit.after = {"dates": list(row.dates)}
    return _calendar_view(row)


@get("/v1/calendars/{name:str}", tags=["calendars"])
async def get_calendar(name: CalendarName, tenant: Tenant) -> CalendarView:
    row = await calendar_store.by_name(tenant.conn, tenant.tenant_id, name)
    if row is None:
        raise NotFound(f"no calendar {name!r}")
    return _calendar_view(row)


@get("/v1/calendars", tags=["calendars"])
async def list_calendars(tenant: Tenant) -> Calendars:
    return Calendars(items=[_calendar_view(r)
                            for r in await calendar_store.all_of(tenant.conn, tenant.tenant_id)])


ROUTES = [
    update,
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
