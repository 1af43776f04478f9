"""Route handlers of the public API: thin, tenant-scoped (`scope.TenantScope`), over commands and
stores."""

from __future__ import annotations

import base64
import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import asyncpg
from litestar import Request, Response, delete, get, post
from litestar.di import Provide
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from ostinato import jobs, tenancy
from ostinato.archive import ArchivedRun
from ostinato.domain import attributes, roles
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.domain.events import event_data
from ostinato.domain.states import RunState
from ostinato.eventlog.records import RecordedEvent
from ostinato.eventlog.store import get_blobs, read_stream_page
from ostinato.policy import retry
from ostinato.runtime.auth import Caller, require_admin
from ostinato.stores import attributes as attribute_store
from ostinato.stores import fan_outs as fan_store
from ostinato.stores import job_edits
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from ostinato.stores import tenants as tenant_store
from ostinato.stores.fan_outs import FanOutRow
from ostinato.stores.jobs import JobRow
from ostinato.stores.runs import RunRow
from ostinato.telemetry import tracing
from ostinato.wire.api import (
    EventsPage,
    EventView,
    FanOutView,
    JobBatch,
    JobBatchItem,
    JobBatchRequest,
    JobRequest,
    JobView,
    Page,
    RunView,
    StateTimes,
    TenantCreatedView,
    TenantRequest,
    TenantView,
)
from ostinato.workers import registry
from services.api import archived, auditing, kafka_access, results
from services.api.auditing import audited
from services.api.ratelimit import limited_principal
from services.api.retention import held_of
from services.api.running import running_step
from services.api.scope import Tenant, TenantScope, tenant_scope

Limit = Annotated[int, QueryParameter(ge=1, le=500)]
EventsLimit = Annotated[int, QueryParameter(ge=1, le=1000)]  # a page of a timeline
AfterVersion = Annotated[int, QueryParameter(ge=0, le=2**31 - 1)]  # a stream version
Priority = Annotated[str | None, QueryParameter(
    pattern=r"^[a-z0-9][a-z0-9_.-]{0,62}$",
    description="A configured priority class (OSTINATO_PRIORITY_CLASSES; by default one of "
                "critical, default, bulk): only runs of that class.")]
Include = Annotated[Literal["archived"] | None, QueryParameter(
    description="`archived`: archived runs too (docs/RETENTION.md, \"Reading an archived "
                "run\"), those that ended in [`ended_after`, `ended_before`) (required, at most "
                "31 days), after the hot ones.")]
EndedAt = Annotated[datetime | None, QueryParameter(
    description="With include=archived: the archived runs that ended in [ended_after, "
                "ended_before) (RFC 3339).")]
READS_ARCHIVE = {"reads_archive": True}  # answers archived runs too: 424 archive-unreadable
ErrorType = Annotated[str | None, QueryParameter(
    min_length=1, max_length=200,
    description="Only runs whose last attempt failed with this error type (`last_error.type`, "
                "as a dead letter's `error_type`), e.g. `bad_input` or `timeout`.")]


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


def job_view(job: JobRow, payload: Any = None, version: int | None = None,
             attrs: dict[str, Any] | None = None) -> JobView:
    """`version`: the job's definition version (`stores.job_edits`), its ETag; `attrs`: its
    searchable attributes."""
    return JobView(attributes=attrs,
        id=job.id, name=job.name, task=job.task, status=job.status, schedule=job.schedule,
        pool=job.pool, priority=job.priority, next_run_at=job.next_run_at,
        next_slot=job.next_slot, last_run_at=job.last_run_at, runs_created=job.runs_created,
        consecutive_failures=job.consecutive_failures, idempotency_key=job.idempotency_key,
        created_at=job.created_at, updated_at=job.updated_at, payload=payload,
        payload_version=job.payload_version,
        complete_within_seconds=job.complete_within_seconds,
        max_staleness_seconds=job.max_staleness_seconds, owner=job.owner, version=version,
        retry=job.retry_policy, timeout_seconds=job.timeout_seconds,
        queue_wait_seconds=job.queue_wait_seconds, on_queue_wait=job.on_queue_wait,
        concurrency_key=job.concurrency_key, resource=job.resource,
        next_run_id=results.next_run_id(job.id, job.task, job.next_slot),
    )


def run_view(run: RunRow, output: Any = None, waiting_reason: str | None = None,
             payload: Any = None, attrs: dict[str, Any] | None = None) -> RunView:
    return RunView(attributes=attrs,
        id=run.id, job_id=run.job_id, task=run.task, pool=run.pool, priority=run.priority,
        state=run.state, scheduled_for=run.scheduled_for, due_at=run.due_at,
        trigger=run.trigger, attempt=run.attempt, fencing_token=run.fencing_token,
        worker_id=run.worker_id,
        timestamps=StateTimes(scheduled_at=run.scheduled_at, queued_at=run.queued_at,
                              started_at=run.started_at, finished_at=run.finished_at),
        last_error=run.last_error, updated_at=run.updated_at, output=output,
        failures=run.failures, retry_at=run.retry_at, cancel_requested=run.cancel_requested,
        replay_of=run.replay_of, executions=run.attempt,
        retry_attempt=retry.attempt_of(run.state, run.failures),
        max_attempts=retry.max_attempts_of(run.retry_policy),
        links={"events": f"/v1/runs/{run.id}/events", "logs": f"/v1/runs/{run.id}/logs"},
        concurrency_key=run.concurrency_key, resource=run.resource,
        waiting_reason=waiting_reason, steps_done=run.steps_done,
        current_step=run.wait_name if run.state == RunState.SUSPENDED else None,
        parent_run_id=run.parent_run_id,
        waiting_for_child=run.wait_child if run.state == RunState.SUSPENDED else None,
        paused=run.paused, task_version=run.task_version, pinned=run.pinned,
        wait_reason=run.wait_reason if run.state == RunState.SUSPENDED else None,
        payload=payload, payload_version=run.payload_version,
    )


def archived_run_view(found: ArchivedRun, *, listed: bool = False) -> RunView:
    """An archived run's view, from its `runs` row and documents as archived, by `run_view`
    (`listed`: as a listing shows it, without its payload)."""
    row, docs = archived.run_row(found), archived.blobs(found)
    view = run_view(row, docs.get(row.output_ref) if row.output_ref is not None else None,
                    payload=None if listed else docs.get(row.payload_ref),
                    attrs=dict(found.attributes) or None)
    view.archived, view.archived_at = True, found.archived_at
    return view if listed else with_dag_node(view)


def with_dag_node(view: RunView) -> RunView:
    """A DAG node's run (trigger dag): its DAG run and node, which its payload names
    (ostinato.runs.dags)."""
    if view.trigger == "dag":
        dag = view.payload.get("dag") if isinstance(view.payload, dict) else None
        if isinstance(dag, dict) and isinstance(dag.get("dag_run_id"), str):
            view.dag_run_id, view.dag_node = uuid.UUID(dag["dag_run_id"]), dag.get("node")
    return view


@post("/v1/tenants", status_code=201, tags=["tenants"],
      opt=audited("tenant.create", "tenant", action=roles.ADMINISTER))
async def create_tenant(
    request: Request, data: JSONBody[TenantRequest], caller: Caller
) -> TenantCreatedView:
    """Create a tenant (admin key only). The tenant's API key is shown once, in this answer."""
    require_admin(caller)
    s = app_state(request)
    async with s.pool.acquire() as conn, auditing.recorded(conn, request, caller, None) as audit:
        tenant_id, key = await tenancy.create_tenant(
            conn, s.store, data.name, actor="admin", weight=data.weight
        )
        audit.tenant_id, audit.target_id = tenant_id, str(tenant_id)
        audit.after = {"name": data.name, "weight": data.weight}
    return TenantCreatedView(id=tenant_id, name=data.name, api_key=key,
                             kafka=await kafka_access.grant_at_creation(s.settings, tenant_id))


@get("/v1/tenants", tags=["tenants"], opt={"action": roles.ADMINISTER})
async def list_tenants(request: Request, caller: Caller, limit: Limit = 50,
                       cursor: FromQuery[str | None] = None) -> Page:
    """Every tenant, newest first (admin key only: a tenant's key sees no other tenant); pass
    `next_cursor` back as `cursor` for more. Act for one with X-Ostinato-Tenant: its id."""
    require_admin(caller)
    async with app_state(request).pool.acquire() as conn:
        rows = await tenant_store.page(conn, decode_cursor(cursor), limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(
        items=[TenantView(id=r.id, name=r.name, weight=r.weight, created_at=r.created_at)
               for r in rows],
        next_cursor=encode_cursor(rows[-1].created_at, rows[-1].id) if more else None,
    )


def definition(job: JobRow) -> dict[str, Any]:
    """A job's definition as the audit trail shows it before and after a change."""
    return {"name": job.name, "task": job.task, "status": job.status, "schedule": job.schedule,
            "pool": job.pool, "priority": job.priority}


@post("/v1/jobs", status_code=201, tags=["jobs"],
      opt=audited("job.create", "job", action=roles.SUBMIT))
async def create_job(data: JSONBody[JobRequest], tenant: Tenant) -> Response[JobView]:
    """Register a job. A repeated `idempotency_key` returns the first job with status 200."""
    settings = tenant.settings
    job, created = await jobs.submit_job(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, request=data,
        pools=settings.pool_names, pool_retry=settings.pool_retry,
        classes=[c.name for c in settings.classes], max_payload_bytes=settings.max_payload_bytes,
        actor=tenant.actor, traceparent=tracing.current_traceparent(),
    )
    tenant.audit.target_id, tenant.audit.status = str(job.id), 201 if created else 200
    tenant.audit.after = definition(job) if created else None
    version = 1 if created else await job_edits.definition_version(tenant.conn, job.id)
    attrs = (await attribute_store.of_jobs(tenant.conn, tenant.tenant_id, [job.id])).get(job.id) \
        if data.attributes or not created else None  # as stored, like GET /v1/jobs/{id}
    return Response(job_view(job, data.payload, version, attrs),
                    status_code=201 if created else 200)


@post("/v1/jobs/batch", status_code=200, tags=["jobs"],
      opt=audited("job.create_batch", "job", action=roles.SUBMIT))
async def create_jobs(
    data: JSONBody[JobBatchRequest], tenant: Tenant
) -> JobBatch:
    """Register up to 1,000 jobs in one transaction: all or none. Items whose
    `idempotency_key` names an existing job return it with `created: false`."""
    settings = tenant.settings
    done = await jobs.submit_jobs(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, requests=data.jobs,
        pools=settings.pool_names, pool_retry=settings.pool_retry,
        classes=[c.name for c in settings.classes], max_payload_bytes=settings.max_payload_bytes,
        actor=tenant.actor, traceparent=tracing.current_traceparent(),
    )
    tenant.audit.after = {"created": [str(d.id) for d in done if d.created],
                          "existing": [str(d.id) for d in done if not d.created]}
    return JobBatch(
        items=[JobBatchItem(id=d.id, created=d.created, next_run_at=d.next_run_at) for d in done]
    )


@get("/v1/jobs", tags=["jobs"])
async def list_jobs(
    tenant: Tenant,
    status: FromQuery[str | None] = None,
    limit: Limit = 50,
    cursor: FromQuery[str | None] = None,
) -> Page:
    """This tenant's jobs, newest first; pass `next_cursor` back as `cursor` for more."""
    rows = await job_store.page(tenant.conn, tenant.tenant_id, status=status,
                                after=decode_cursor(cursor), limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    versions = await job_edits.definition_versions(tenant.conn, [r.id for r in rows])
    attrs = await attribute_store.of_jobs(tenant.conn, tenant.tenant_id, [r.id for r in rows])
    return Page(
        items=[job_view(r, version=versions[r.id], attrs=attrs.get(r.id)) for r in rows],
        next_cursor=encode_cursor(rows[-1].created_at, rows[-1].id) if more else None,
    )


@get("/v1/jobs/{job_id:uuid}", tags=["jobs"])
async def get_job(job_id: FromPath[uuid.UUID], tenant: Tenant) -> Response[JobView]:
    """The job, with its definition `version` also as the ETag: send it back as If-Match to
    PATCH only the version you read."""
    job = await job_store.by_id(tenant.conn, tenant.tenant_id, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    payloads = await get_blobs(tenant.conn, [job.payload_ref], tenant.tenant_id)
    version = await job_edits.definition_version(tenant.conn, job_id)
    attrs = await attribute_store.of_jobs(tenant.conn, tenant.tenant_id, [job_id])
    return Response(job_view(job, payloads.get(job.payload_ref), version, attrs.get(job_id)),
                    headers={"ETag": f'"{version}"'})


@delete("/v1/jobs/{job_id:uuid}", status_code=204, tags=["jobs"],
        opt=audited("job.delete", "job", "job_id"))
async def delete_job(job_id: FromPath[uuid.UUID], tenant: Tenant) -> None:
    """Stop the job from creating runs; runs already created keep going."""
    before = await job_store.by_id(tenant.conn, tenant.tenant_id, job_id)
    tenant.audit.before = definition(before) if before else None
    await jobs.delete_job(tenant.conn, tenant.store, tenant_id=tenant.tenant_id, job_id=job_id,
                          actor=tenant.actor)


@get("/v1/runs", tags=["runs"], opt=READS_ARCHIVE)
async def list_runs(
    tenant: Tenant,
    job_id: FromQuery[uuid.UUID | None] = None,
    run_state: Annotated[str | None, QueryParameter(name="state")] = None,
    priority: Priority = None,
    error_type: ErrorType = None,
    task: Annotated[str | None, QueryParameter(
        min_length=1, max_length=200, description="Only runs of this task.")] = None,
    pool: Annotated[str | None, QueryParameter(
        min_length=1, max_length=200, description="Only runs of this pool.")] = None,
    since: Annotated[datetime | None, QueryParameter(
        description="Only runs scheduled for this instant or later (RFC 3339).")] = None,
    until: Annotated[datetime | None, QueryParameter(
        description="Only runs scheduled for before this instant (RFC 3339).")] = None,
    where: Annotated[list[str] | None, QueryParameter(
        max_items=10, description="Searchable attributes, ANDed (docs/SEARCH_ATTRIBUTES.md): "
        "`name=value`, `name!=value`, `name>value` (>=, <, <=), `name~part`; each name "
        "declared with PUT /v1/search-attributes/{name}, e.g. `where=customer=acme`.")] = None,
    include: Include = None,
    ended_after: EndedAt = None,
    ended_before: EndedAt = None,
    limit: Limit = 50,
    cursor: FromQuery[str | None] = None,
) -> Page:
    """This tenant's runs, latest occurrence first, optionally of one job, in one state, of one
    priority class, task or pool, scheduled for within [`since`, `until`), or whose last
    attempt failed with one error type. A parameter this route does not take is a 422.
    `include=archived`: then the archived runs that ended in [`ended_after`, `ended_before`)
    (at most 31 days), latest day first, filtered by job, state, task, `since`/`until` and
    `where` (not by pool, priority class or error type: a 422), each `archived` true; a page
    may be short and still name a next cursor (docs/RETENTION.md)."""
    if run_state is not None and run_state not in RunState.__members__.values():
        raise InvalidInput(
            f"unknown state {run_state!r}",
            errors=[
                {"field": "state", "message": f"one of {', '.join(s.value for s in RunState)}"}
            ],
        )
    classes = [c.name for c in tenant.settings.classes]
    if priority is not None and priority not in classes:
        raise InvalidInput(f"unknown priority class {priority!r}", errors=[
            {"field": "priority", "message": f"one of {', '.join(classes)}"}])
    attrs_filter = None
    if where:
        if error_type is not None:
            raise InvalidInput("where and error_type cannot be combined", errors=[
                {"field": "where", "message": "not with error_type"}])
        attrs_filter = attributes.parse_where(
            where, await attribute_store.types_of(tenant.conn, tenant.tenant_id))
    gone = None
    if include == "archived":
        unfit = [n for n, v in (("priority", priority), ("pool", pool),
                                ("error_type", error_type)) if v is not None]
        if unfit:
            raise InvalidInput(f"{', '.join(unfit)} cannot filter archived runs (their index "
                               "rows do not carry it)", errors=[
                {"field": n, "message": "not with include=archived"} for n in unfit])
        gone = archived.summary_filter(ended_after, ended_before, job_id=job_id,
                                       state=run_state, task=task, since=since, until=until,
                                       where=attrs_filter or attributes.AttributeFilter())
    elif ended_after is not None or ended_before is not None:
        raise InvalidInput("ended_after and ended_before select archived runs: send "
                           "include=archived", errors=[
            {"field": "ended_after" if ended_after is not None else "ended_before",
             "message": "only with include=archived"}])
    if archived.is_archive_cursor(cursor):
        if gone is None:
            raise InvalidInput("this cursor continues an archived listing: send "
                               "include=archived", errors=[
                {"field": "cursor", "message": "only with include=archived"}])
        return await archived_runs_page(tenant, gone, archived.decode_cursor(cursor or ""),
                                        limit, [])
    rows = await run_store.page(tenant.conn, tenant.tenant_id, job_id=job_id, state=run_state,
                                after=decode_cursor(cursor), limit=limit + 1,
                                priority=priority, error_type=error_type, task=task,
                                pool=pool, since=since, until=until, where=attrs_filter)
    more = len(rows) > limit
    rows = rows[:limit]
    outputs = await get_blobs(tenant.conn, [r.output_ref for r in rows if r.output_ref],
                              tenant.tenant_id)  # one read for the page, as GET /v1/runs/{id}
    attrs = await attribute_store.of_runs(tenant.conn, tenant.tenant_id, [r.id for r in rows])
    items = [run_view(r, outputs.get(r.output_ref) if r.output_ref else None,
                      attrs=attrs.get(r.id)) for r in rows]
    if gone is None or more:
        return Page(items=items, next_cursor=encode_cursor(rows[-1].scheduled_for, rows[-1].id)
                    if more else None)
    return await archived_runs_page(tenant, gone, None, limit, items)  # the hot ones are done


async def archived_runs_page(tenant: TenantScope, gone: archived.SummaryFilter,
                             after: archived.ArchiveCursor | None, limit: int,
                             hot: list[RunView]) -> Page:
    """The rest of a listing's page (after its `hot` items) from the archive's index objects;
    each run's view from its own object, as GET /v1/runs/{id} builds it (no payload, as a
    listing's). A run still hot is the hot part's."""
    archive = tenant.archive
    if archive is None or len(hot) == limit:
        start = archived.ArchiveCursor(gone.days()[0], "", 0)  # from the range's latest day
        return Page(items=list(hot), next_cursor=archived.encode_cursor(start)
                    if archive is not None else None)
    page = await archived.summaries(archive, tenant.tenant_id, gone, after, limit - len(hot))
    ids = [r.id for r in page.rows]
    found = await archived.runs_of(archive, tenant.tenant_id, ids,
                                   skip=await run_store.hot_ids(tenant.conn, tenant.tenant_id,
                                                                ids))
    return Page(items=[*hot, *(archived_run_view(r, listed=True) for r in found)],
                next_cursor=page.next_cursor)


@get("/v1/runs/{run_id:uuid}", tags=["runs"], opt=READS_ARCHIVE)
async def get_run(run_id: FromPath[uuid.UUID], tenant: Tenant) -> RunView:
    """The run; one that has left the hot database is read from its archive (`archived`
    true, `archived_at`; docs/RETENTION.md)."""
    run = await run_store.by_id(tenant.conn, tenant.tenant_id, run_id)
    if run is None:
        return archived_run_view(await archived.read(tenant.archive, tenant.tenant_id, run_id))
    refs = [run.payload_ref] if run.output_ref is None else [run.payload_ref, run.output_ref]
    blobs = await get_blobs(tenant.conn, refs, tenant.tenant_id)
    output = blobs.get(run.output_ref) if run.output_ref is not None else None
    reason = await run_store.waiting_reason(tenant.conn, run)
    if reason is None and run.state == "queued" and run.pinned and run.task_version:
        ttl = timedelta(seconds=tenant.settings.worker_ttl_seconds)
        if not await registry.serves(tenant.conn, run.tenant_id, run.pool, run.task,
                                     run.task_version, tenant.clock.db_now(), ttl):
            reason = registry.unserved_reason(run.task, run.task_version, run.pool)
    view = run_view(run, output, reason, blobs.get(run.payload_ref),
                    (await attribute_store.of_runs(tenant.conn, tenant.tenant_id,
                                                   [run.id])).get(run.id))
    view.running_step = await running_step(tenant.conn, tenant.tenant_id, run)
    if view.running_step is not None:
        view.current_step = view.running_step.name
    view.held = await held_of(tenant.conn, tenant.tenant_id, run_id)
    fan = await fan_store.latest(tenant.conn, tenant.tenant_id, run_id)
    if fan is not None:
        view.fan_out = fan_out_view(fan)
    return with_dag_node(view)


def fan_out_view(fan: FanOutRow) -> FanOutView:
    w = fan.window
    return FanOutView(seq=fan.seq, name=fan.name, task=fan.task, state=fan.state,
                      total=w.total, succeeded=w.succeeded, failed=w.failed, running=w.running,
                      pending=w.total - w.admitted, max_concurrency=w.max_concurrency,
                      on_failure=fan.on_failure, on_complete=fan.on_complete,
                      completion_run_id=fan.completion_run_id, failures=fan.listed_failures,
                      started_at=fan.started_at, finished_at=fan.finished_at)


def event_view(r: RecordedEvent) -> EventView:
    return EventView(seq=r.seq, version=r.version, event_id=r.event_id, type=r.type,
                     occurred_at=r.occurred_at, recorded_at=r.recorded_at, actor=r.actor,
                     epoch=r.epoch, data=event_data(r.event))


async def timeline_page(conn: asyncpg.Connection, stream_id: uuid.UUID, tenant_id: uuid.UUID,
                        after: int, limit: int) -> tuple[list[EventView], int | None] | None:
    """Up to `limit` of a stream's events after version `after`, in version order, and the
    version to pass as `after` for the next page (None: this is the last); None when the
    tenant has no such stream. A timeline can be long (20,000 steps are 20,000 events): it is
    read a page at a time, never whole."""
    page = await read_stream_page(conn, stream_id, tenant_id, after, limit + 1)
    if not page and (after == 0 or not await read_stream_page(conn, stream_id, tenant_id, 0, 1)):
        return None
    return events_page(page, limit)


def events_page(page: list[RecordedEvent], limit: int) -> tuple[list[EventView], int | None]:
    """Up to `limit + 1` events read after a version: the page's views and its `next_after`."""
    more = len(page) > limit
    page = page[:limit]
    return [event_view(r) for r in page], page[-1].version if more else None


@get("/v1/runs/{run_id:uuid}/events", tags=["runs"], opt=READS_ARCHIVE)
async def run_events(run_id: FromPath[uuid.UUID], tenant: Tenant,
                     after: FromQuery[AfterVersion] = 0,
                     limit: FromQuery[EventsLimit] = 100) -> EventsPage:
    """The run's timeline, read straight from the append-only log, in version order: the
    events after version `after`; pass `next_after` back as `after` for the next page. An
    archived run's comes from its archive, paged alike (`archived` true)."""
    found = await timeline_page(tenant.conn, run_id, tenant.tenant_id, after, limit)
    if found is not None:
        items, next_after = found
        return EventsPage(run_id=run_id, items=items, next_after=next_after)
    gone = await archived.read(tenant.archive, tenant.tenant_id, run_id)
    stream = [r for r in archived.recorded_events(gone) if r.version > after]
    items, next_after = events_page(stream[:limit + 1], limit)
    return EventsPage(run_id=run_id, items=items, next_after=next_after, archived=True,
                      archived_at=gone.archived_at)


ROUTES = [
    create_tenant,
    list_tenants,
    create_job,
    create_jobs,
    list_jobs,
    get_job,
    delete_job,
    list_runs,
    get_run,
    run_events,
]
DEPENDENCIES = {"caller": Provide(limited_principal), "tenant": Provide(tenant_scope)}
