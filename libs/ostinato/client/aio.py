"""`AsyncClient`: the public API over httpx.AsyncClient, for services and async scripts.

The twin of `ostinato.client.sync.Client`, method for method (both execute the calls of
`ostinato.client.calls`): `await client.jobs.get(id)`, `async for run in client.runs.list()`.
Docstrings are on the sync methods.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import date, datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from ostinato.client import calls as c
from ostinato.client import config, updates
from ostinato.client import transport as t
from ostinato.client.calls import Id
from ostinato.client.handles import AsyncRunHandle
from ostinato.wire import api as m

T = TypeVar("T")
PAGE = 100
UNSET: Any = c._UNSET


class AsyncClient:
    """A connection to the public API. `base_url` and `api_key` default to OSTINATO_API_URL
    and OSTINATO_API_KEY (`from_profile` reads the CLI's profile file too); `tenant` (else
    OSTINATO_TENANT), a tenant's id, makes the admin key act for that tenant. `retries` (3;
    0: none): how often a call safe to repeat is sent again after a 503 or a lost connection
    (`ostinato.client.transport`). Use as `async with`."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *,
                 timeout: float = t.DEFAULT_TIMEOUT,
                 transport: httpx.AsyncBaseTransport | None = None,
                 headers: dict[str, str] | None = None,
                 tenant: Id | None = None,
                 retries: int = t.DEFAULT_RETRIES) -> None:
        self.base_url = t.base_url(base_url)
        self.retries = t.check_retries(retries)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, transport=transport,
            headers=t.headers(t.api_key(api_key), headers, t.tenant(tenant)))
        self.jobs = Jobs(self)
        self.schedules = Schedules(self)
        self.calendars = Calendars(self)
        self.alert_sinks = AlertSinks(self)
        self.alerts = Alerts(self)
        self.usage = Usage(self)
        self.runs = Runs(self)
        self.dead_letters = DeadLetters(self)
        self.pools = Pools(self)
        self.workers = Workers(self)
        self.tasks = Tasks(self)
        self.limits = Limits(self)
        self.tenants = Tenants(self)
        self.keys = Keys(self)
        self.audit = Audit(self)
        self.operations = Operations(self)
        self.search_attributes = SearchAttributes(self)
        self.dags = Dags(self)
        self.dag_runs = DagRuns(self)

    @classmethod
    def from_profile(cls, profile: str | None = None, **kwargs: Any) -> AsyncClient:
        """Connect as the CLI would: flag-free, so environment > profile file."""
        conn = config.resolve(profile=profile)
        return cls(conn.api_url, conn.api_key, **{"tenant": conn.tenant, **kwargs})

    async def send(self, call: c.Call[T]) -> T:
        """One call; sent again after a 503 or a lost connection while that is safe
        (`transport.next_delay`: reads and keyed creates, up to `retries` times)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(call.method, call.path,
                                                  **t.request_args(call))
            except httpx.HTTPError as exc:
                delay = t.next_delay(call, attempt, self.retries, exc)
                if delay is None:
                    raise t.unreachable(self.base_url, exc) from exc
            else:
                delay = t.next_delay(call, attempt, self.retries, response)
                if delay is None:
                    return t.decode(call, response)
            await asyncio.sleep(delay)

    async def iterate(self, paged: c.Paged[T, Any]) -> AsyncIterator[T]:
        call: c.Call[Any] | None = paged.first
        while call is not None:
            page = await self.send(call)
            for item in paged.items(page):
                yield item
            call = paged.next_call(page)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


class _Resource:
    def __init__(self, client: AsyncClient) -> None:
        self._c = client


class Jobs(_Resource):
    async def create(self, job: m.JobRequest | Mapping[str, Any] | None = None, /,
               **fields: Any) -> m.JobView:
        """Register a job: a `JobRequest`, a mapping of its fields, or keyword fields
        (`name=`, `schedule={"cron": ..., "timezone": ...}`, `payload=`...). The same
        `idempotency_key` again returns the first job."""
        return await self._c.send(c.create_job(job, fields))

    async def create_many(self, jobs: Sequence[m.JobRequest | Mapping[str, Any]]) -> m.JobBatch:
        """Up to 1,000 jobs in one transaction: all or none."""
        return await self._c.send(c.create_jobs(jobs))

    def list(self, *, status: str | None = None, page_size: int = PAGE) -> AsyncIterator[m.JobView]:
        """Newest first, every page (lazily)."""
        return self._c.iterate(c.list_jobs(status, page_size))

    async def get(self, job_id: Id) -> m.JobView:
        return await self._c.send(c.get_job(job_id))

    async def update(self, job_id: Id,
                     changes: m.JobUpdateRequest | Mapping[str, Any] | None = None, /, *,
                     if_match: int | str | None = None, dry_run: bool = False,
                     **fields: Any) -> m.JobUpdateView:
        """Edit the job in place (`schedule=`, `payload=`, `pool=`, `priority=`, `retry=`,
        `timeout=`, `owner=`, ... and `reason=`, `apply_to_scheduled=`): same id and
        history, its `version` one more. `if_match`: the version you read (`get(id).version`);
        a stale one raises the 412 problem. `dry_run`: the upcoming occurrences before and
        after, nothing changed."""
        return await self._c.send(c.update_job(job_id, changes, fields, if_match, dry_run))

    async def delete(self, job_id: Id) -> None:
        """Stop the job creating runs; runs already created go on."""
        await self._c.send(c.delete_job(job_id))

    async def pause(self, job_id: Id, *, reason: str | None = None) -> m.JobStatus:
        return await self._c.send(c.pause_job(job_id, reason))

    async def resume(self, job_id: Id, *, misfire: str | None = None) -> m.JobStatus:
        """`misfire` (run_once, catch_up, skip) decides the slots missed while paused."""
        return await self._c.send(c.resume_job(job_id, misfire))

    async def trigger(self, job_id: Id, *, request_key: str | None = None) -> m.TriggeredView:
        """One run now, outside the schedule (trigger `manual`); a DAG job's is a DAG run
        (`dag_run_id`). The same `request_key` again starts nothing (`created` false)."""
        return await self._c.send(c.trigger_job(job_id, request_key))

    async def backfill(self, job_id: Id, start: datetime, end: datetime, *,
                       dry_run: bool = False) -> m.BackfillView:
        """Runs for the slots in [start, end) that have none; repeating it creates none. Every
        slot is answered with what was done; `dry_run` answers the same and changes nothing."""
        return await self._c.send(c.backfill_job(job_id, start, end, dry_run))

    async def upcoming(self, job_id: Id, count: int = 10) -> m.UpcomingView:
        return await self._c.send(c.upcoming(job_id, count))

    def events(self, job_id: Id, *, page_size: int = PAGE) -> AsyncIterator[m.EventView]:
        return self._c.iterate(c.job_events(job_id, page_size))

    def skips(self, job_id: Id, *, page_size: int = PAGE) -> AsyncIterator[m.SkipView]:
        return self._c.iterate(c.job_skips(job_id, page_size))

    async def health(self, job_id: Id, window: str = "24h") -> m.JobHealthView:
        """The job's runs, schedule lag p50/p99, last success, missed and overdue counts over
        the last `window`."""
        return await self._c.send(c.job_health(job_id, window))


class Schedules(_Resource):
    async def preview(self, schedule: Any, count: int = 10) -> m.UpcomingView:
        """The next `count` occurrences of a schedule not yet created (a `ScheduleSpec` or its
        fields), with local times, so DST behaviour can be checked first."""
        return await self._c.send(c.preview(schedule, count))


class Calendars(_Resource):
    async def put(self, name: str, dates: Sequence[date]) -> m.CalendarView:
        return await self._c.send(c.put_calendar(name, dates))

    async def get(self, name: str) -> m.CalendarView:
        return await self._c.send(c.get_calendar(name))

    async def list(self) -> list[m.CalendarView]:
        return (await self._c.send(c.list_calendars())).items


class AlertSinks(_Resource):
    async def put(self, name: str, url: str, *, owners: Sequence[str] = (), default: bool = False,
            secret_header: str | None = None, secret: str | None = None) -> m.AlertSinkView:
        """Create or replace a webhook sink for the alerts of `owners` (teams), and of
        everything no owner's sink takes when `default`."""
        return await self._c.send(c.put_alert_sink(name, m.AlertSinkRequest(
            url=url, owners=list(owners), default=default, secret_header=secret_header,
            secret=secret)))

    async def list(self) -> list[m.AlertSinkView]:
        return (await self._c.send(c.list_alert_sinks())).items

    async def delete(self, name: str) -> None:
        await self._c.send(c.delete_alert_sink(name))


class Alerts(_Resource):
    async def list(self, limit: int = 200) -> list[m.AlertView]:
        """The tenant's alerts: firing first, then resolved, newest first."""
        return (await self._c.send(c.list_alerts(limit))).items


class Usage(_Resource):
    async def get(self, start: datetime | None = None, end: datetime | None = None,
            granularity: str = "hour") -> m.UsageView:
        """Runs, attempts, worker-seconds, bytes and steps per hour or day in [start, end)."""
        return await self._c.send(c.usage(start, end, granularity))


class Runs(_Resource):
    async def start(self, task: str, payload: Any = None, /, **fields: Any) -> AsyncRunHandle:
        """A run of `task` now (a one-off job: `fields` as `jobs.create`'s, e.g. `pool=`,
        `priority=`, `retry=`, `idempotency_key=`); `await handle.result(timeout=)`."""
        job = await self._c.send(c.start_run(task, payload, fields))
        return AsyncRunHandle(self._c.send, job.next_run_id or job.id, job.id)

    async def start_workflow(self, task: str, workflow_id: str, payload: Any = None, *,
                             id_reuse_policy: str = "allow_duplicate",
                             idempotency_key: str | None = None) -> m.WorkflowStarted:
        """A run of `task` under your own `workflow_id` (409 while one with it runs; an ended
        one's id is reused per `id_reuse_policy`: docs/WORKFLOWS.md)."""
        return await self._c.send(c.start_workflow(task, workflow_id, {
            "payload": payload, "id_reuse_policy": id_reuse_policy,
            "idempotency_key": idempotency_key}))

    async def signal_with_start(self, task: str, workflow_id: str, signal: str,
                                signal_payload: Any = None, *, payload: Any = None,
                                id_reuse_policy: str = "allow_duplicate",
                                idempotency_key: str | None = None) -> m.WorkflowStarted:
        """Signal the running run of `workflow_id`, starting it with `payload` first if none
        runs (`started` says which); two concurrent calls start one run."""
        return await self._c.send(c.start_workflow(task, workflow_id, {
            "signal": signal, "signal_payload": signal_payload, "payload": payload,
            "id_reuse_policy": id_reuse_policy, "idempotency_key": idempotency_key}))

    def get_handle(self, run_id: Id) -> AsyncRunHandle:
        """A handle on any run (task, workflow or DAG run) by id."""
        return AsyncRunHandle(self._c.send, run_id)

    def list(self, *, job_id: Id | None = None, state: str | None = None,
             priority: str | None = None, error_type: str | None = None,
             where: Sequence[str] | None = None, page_size: int = PAGE,
             task: str | None = None, include_archived: bool = False,
             ended_after: datetime | None = None,
             ended_before: datetime | None = None) -> AsyncIterator[m.RunView]:
        """Latest occurrence first, every page (lazily); `priority`: a class, `error_type`:
        the last attempt's error type; `where`: searchable attributes, e.g.
        `["customer=acme", "amount>100"]` (docs/SEARCH_ATTRIBUTES.md). `include_archived`:
        then the archived runs (`archived` true) that ended in [`ended_after`,
        `ended_before`), at most 31 days (docs/RETENTION.md)."""
        span = (ended_after, ended_before) if include_archived else None
        return self._c.iterate(c.list_runs(job_id, state, page_size, priority, error_type,
                                           where, span, task))

    async def get(self, run_id: Id) -> m.RunView:
        return await self._c.send(c.get_run(run_id))

    def events(self, run_id: Id, *, page_size: int = PAGE) -> AsyncIterator[m.EventView]:
        """The run's timeline, straight from the log, in version order; pages are fetched as
        the iteration reaches them (a long workflow has thousands of events)."""
        return self._c.iterate(c.run_events(run_id, page_size))

    async def logs(self, run_id: Id) -> m.RunLogs:
        return await self._c.send(c.run_logs(run_id))

    def steps(self, run_id: Id, *, inline_outputs: bool = False,
              page_size: int = PAGE) -> AsyncIterator[m.StepView]:
        return self._c.iterate(c.run_steps(run_id, inline_outputs, page_size))

    async def steps_page(self, run_id: Id, *, after: int = -1, limit: int = PAGE,
                         inline_outputs: bool = False) -> m.StepsPage:
        return await self._c.send(c.run_steps_page(run_id, after, limit, inline_outputs))

    def children(self, run_id: Id, *, page_size: int = PAGE) -> AsyncIterator[m.ChildView]:
        return self._c.iterate(c.run_children(run_id, page_size))

    def set_aside_steps(self, run_id: Id, *,
                        page_size: int = PAGE) -> AsyncIterator[m.SetAsideStepView]:
        return self._c.iterate(c.set_aside_steps(run_id, page_size))

    async def cancel(self, run_id: Id) -> m.Cancelled:
        """At once if it waits; a running run is asked to stop at its next safe point."""
        return await self._c.send(c.cancel_run(run_id))

    async def retry(self, run_id: Id, *, request_key: str | None = None) -> m.Rerun:
        """Re-run a failed, cancelled or dead-lettered run as a new linked run."""
        return await self._c.send(c.retry_run(run_id, request_key))

    async def signal(self, run_id: Id, name: str, payload: Any = None, *,
               idempotency_key: str | None = None, reason: str | None = None
               ) -> m.SignalAccepted:
        return await self._c.send(c.signal_run(run_id, name, payload, idempotency_key, reason))

    async def state(self, run_id: Id, name: str | None = None, *,
              wait: float = 0.0) -> m.RunStateView:
        """The latest value of each name the workflow published (`ctx.set`), while it runs
        and after; `name` alone with `wait` (seconds, at most 60): once it is published or
        the run ended, else after `wait` without it (`view.values.get(name)` is None)."""
        return await self._c.send(c.run_state(run_id, name, wait))

    async def update(self, run_id: Id, name: str, payload: Any = None, *,
               timeout: float | None = 30.0,  # noqa: ASYNC109
               idempotency_key: str | None = None) -> Any:
        """Send update `name` to a running workflow and return its answer (the workflow's
        `ctx.handle_update` / `ctx.reply`): UpdateRejectedError (`error_type`, e.g.
        `unknown_update`; or the run ended unanswered), UpdateTimeoutError after `timeout`
        seconds (None: as long as it takes), ApiError 409 for a final run. The same
        `idempotency_key` names the same update, and returns the same answer."""
        return await updates.update_async(self._c.send, run_id, name, payload, timeout,
                                          idempotency_key)

    async def update_outcome(self, run_id: Id, update_id: Id, *,
                       wait: float = 0.0) -> m.UpdateView:
        """Where an update stands (`state`: pending, completed, rejected, abandoned)."""
        return await self._c.send(c.update_outcome(run_id, update_id, wait))

    async def hold(self, run_id: Id, *, reason: str) -> m.RunHoldResult:
        """Hold the run: never archived or removed until released (docs/RETENTION.md). A
        held run keeps its first hold (`changed` False)."""
        return await self._c.send(c.hold_run(run_id, reason))

    async def release(self, run_id: Id, *, reason: str | None = None) -> m.RunHoldResult:
        """Release the run's hold (`changed` False when it was not held)."""
        return await self._c.send(c.release_run(run_id, reason))

    async def pause(self, run_id: Id, *, reason: str | None = None) -> m.RunPaused:
        return await self._c.send(c.pause_run(run_id, reason, resume=False))

    async def resume(self, run_id: Id, *, reason: str | None = None) -> m.RunPaused:
        return await self._c.send(c.pause_run(run_id, reason, resume=True))

    async def pause_matching(self, *, task: str | None = None, job_id: Id | None = None,
                       reason: str | None = None) -> m.PauseChanged:
        return await self._c.send(c.pause_matching(task, job_id, reason, resume=False))

    async def resume_matching(self, *, task: str | None = None, job_id: Id | None = None,
                        reason: str | None = None) -> m.PauseChanged:
        return await self._c.send(c.pause_matching(task, job_id, reason, resume=True))

    async def retry_step(self, run_id: Id, seq: int, *, reason: str) -> m.InterventionDone:
        return await self._c.send(c.retry_step(run_id, seq, reason))

    async def skip_step(self, run_id: Id, seq: int, output: Any, *, reason: str,
                  name: str | None = None) -> m.InterventionDone:
        return await self._c.send(c.skip_step(run_id, seq, output, reason, name))

    async def restart(self, run_id: Id, from_seq: int, *, reason: str) -> m.InterventionDone:
        return await self._c.send(c.restart_run(run_id, from_seq, reason))

    async def succeed(self, run_id: Id, *, reason: str, output: Any = None) -> m.InterventionDone:
        return await self._c.send(c.succeed_run(run_id, reason, output))

    async def fail(self, run_id: Id, *, reason: str, error_type: str | None = None,
             message: str | None = None) -> m.InterventionDone:
        return await self._c.send(c.fail_run(run_id, reason, error_type, message))


class DeadLetters(_Resource):
    def list(self, *, page_size: int = PAGE, **filters: Any) -> AsyncIterator[m.DeadLetterView]:
        """Newest first; filters: job_id, error_type, triage_state, older_than ("1h")."""
        return self._c.iterate(c.list_dead_letters(filters, page_size))

    async def counts(self, **filters: Any) -> m.DeadLetterCounts:
        """How many match the filters, by error type and triage state (one small request)."""
        return (await self._c.send(c.list_dead_letters(filters, 1).first)).counts

    async def get(self, run_id: Id) -> m.DeadLetterView:
        """With its payload and full attempt history."""
        return await self._c.send(c.get_dead_letter(run_id))

    async def triage(self, run_id: Id, state: str, *, comment: str | None = None) -> m.Triaged:
        return await self._c.send(c.triage(run_id, state, comment))

    async def replay(self, run_id: Id, *, payload: Any = UNSET,
               request_key: str | None = None) -> m.Rerun:
        """A new linked run, with `payload` instead of the original when given; the same
        `request_key` replays once."""
        return await self._c.send(c.replay(run_id, payload, request_key))

    async def replay_matching(self, request_key: str, *, limit: int = 100,
                        **filters: Any) -> m.BulkReplayed:
        return await self._c.send(c.replay_matching(request_key, filters, limit))


class Pools(_Resource):
    async def list(self) -> list[m.PoolView]:
        return (await self._c.send(c.list_pools())).items

    async def pause(self, pool: str, *, reason: str | None = None) -> m.PoolPaused:
        """With the admin key: for every tenant; with a tenant's key: its own queue."""
        return await self._c.send(c.pause_pool(pool, reason, resume=False))

    async def resume(self, pool: str) -> m.PoolPaused:
        return await self._c.send(c.pause_pool(pool, None, resume=True))


class Workers(_Resource):
    async def list(self) -> list[m.WorkerView]:
        return (await self._c.send(c.list_workers())).items


class Tasks(_Resource):
    async def list(self, *, task: str | None = None) -> list[m.TaskVersionView]:
        """Per task and handler version: runs waiting, running, suspended, live workers."""
        return (await self._c.send(c.list_tasks(task))).items


class Limits(_Resource):
    async def list(self) -> list[m.LimitView]:
        return (await self._c.send(c.list_limits())).items

    async def set(self, scope: str, name: str, limit: m.LimitRequest) -> m.LimitSet:
        """`scope`: task, resource, or tenant (admin key; `name` is the tenant id)."""
        return await self._c.send(c.set_limit(scope, name, limit))


class Tenants(_Resource):
    def list(self, *, page_size: int = PAGE) -> AsyncIterator[m.TenantView]:
        """Admin key only: every tenant, newest first, every page (lazily)."""
        return self._c.iterate(c.list_tenants(page_size))

    async def create(self, name: str, *, weight: int = 1) -> m.TenantCreatedView:
        """Admin key only; the answer holds the tenant's API key, shown this once."""
        return await self._c.send(c.create_tenant(name, weight))

    async def get_retention(self, tenant_id: Id) -> m.RetentionView:
        """The tenant's retention (`default` True when never set); the admin key, or the
        tenant's own key for its own."""
        return await self._c.send(c.get_retention(tenant_id))

    async def set_retention(self, tenant_id: Id, *, keep: str | int, archive: bool = True,
                      reason: str | None = None) -> m.RetentionView:
        """Admin key only: keep finished runs `keep` ("30d" or seconds; 1 hour to 10 years)
        in the hot database after they ended, archived first when `archive`."""
        return await self._c.send(c.set_retention(tenant_id, keep, archive, reason))


class Keys(_Resource):
    """The tenant's API keys (an operator's key): a key's secret is in the answer that issues
    it and nowhere else."""

    async def list(self) -> list[m.KeyView]:
        return (await self._c.send(c.list_keys())).keys

    async def create(self, name: str, role: str, *,
               pools: Sequence[str] = ()) -> m.IssuedKeyView:
        return await self._c.send(c.issue_key(name, role, pools))

    async def revoke(self, key_id: Id) -> None:
        await self._c.send(c.revoke_key(key_id))

    async def rotate(self, key_id: Id, *, grace_seconds: int = 0) -> m.RotatedKeyView:
        """A new key in the old one's place; the old one works for `grace_seconds` more."""
        return await self._c.send(c.rotate_key(key_id, grace_seconds))


class Audit(_Resource):
    def list(self, *, since: datetime | None = None, until: datetime | None = None,
             page_size: int = PAGE, **filters: Any) -> AsyncIterator[m.AuditEntryView]:
        """Control actions, newest first (operator or admin key). Filters: action, key_id,
        target_kind, target_id, request_id; `since` inclusive, `until` exclusive."""
        return self._c.iterate(c.list_audit(filters, since, until, page_size))


class SearchAttributes(_Resource):
    """The tenant's declared searchable attributes (docs/SEARCH_ATTRIBUTES.md): jobs
    (`attributes=` at creation) and workflows (`ctx.upsert_attributes`) set values of declared
    names only; `runs.list(where=...)` and operations filter by them."""

    async def declare(self, name: str, type: str) -> m.SearchAttributeView:
        """`type`: keyword, text, int, float, bool or datetime; a repeat changes nothing."""
        return await self._c.send(c.declare_attribute(name, type))

    async def list(self) -> m.SearchAttributeList:
        return await self._c.send(c.list_attributes())

    async def remove(self, name: str) -> None:
        await self._c.send(c.remove_attribute(name))


class Operations(_Resource):
    """Bulk actions by query with no page cap (docs/OPERATIONS.md): `kind` cancel or retry
    (runs: states, job_id, task, pool, since, until), replay (dead letters: job_id, error_type,
    triage_state) or pause (jobs: task, pool)."""

    async def count(self, kind: str, **filters: Any) -> int:
        """How many items the operation would act on now (a dry run: nothing is written)."""
        return (await self._c.send(c.count_operation(kind, filters))).count

    async def start(self, kind: str, **filters: Any) -> m.OperationView:
        """Freeze the selection and start working through it (the api does, in batches)."""
        return await self._c.send(c.start_operation(kind, filters))

    async def get(self, op_id: Id) -> m.OperationView:
        return await self._c.send(c.get_operation(op_id))

    def list(self, *, state: str | None = None,
             page_size: int = PAGE) -> AsyncIterator[m.OperationView]:
        """Newest first, every page (lazily)."""
        return self._c.iterate(c.list_operations(state, page_size))

    async def cancel(self, op_id: Id) -> m.OperationView:
        """Stop after the batch in hand; what was done stays done."""
        return await self._c.send(c.cancel_operation(op_id))


class Dags(_Resource):
    async def define(self, dag: m.DagRequest | Mapping[str, Any] | None = None, /,
                     **fields: Any) -> m.DagView:
        """Define a DAG, or its next version (a changed definition; the same one: unchanged,
        `created` False). A cycle is an ApiError 422 whose problem names it."""
        return await self._c.send(c.define_dag(dag, fields))

    def list(self, *, page_size: int = PAGE) -> AsyncIterator[m.DagView]:
        return self._c.iterate(c.list_dags(page_size))

    async def get(self, dag_id: Id) -> m.DagView:
        return await self._c.send(c.get_dag(dag_id))

    async def run(self, dag_id: Id, *, at: datetime | None = None) -> m.DagRunCreated:
        """A DAG run of the current version, now or at `at`."""
        return await self._c.send(c.run_dag(dag_id, at))

    async def runs(self, dag_id: Id, *, limit: int = 20) -> list[m.DagRunView]:
        return (await self._c.send(c.list_dag_runs(dag_id, limit))).items


class DagRuns(_Resource):
    async def get(self, dag_run_id: Id) -> m.DagRunView:
        return await self._c.send(c.get_dag_run(dag_run_id))

    def events(self, dag_run_id: Id, *, page_size: int = PAGE) -> AsyncIterator[m.EventView]:
        return self._c.iterate(c.dag_run_events(dag_run_id, page_size))

    async def cancel(self, dag_run_id: Id, *, reason: str | None = None) -> m.DagRunChanged:
        return await self._c.send(c.cancel_dag_run(dag_run_id, reason))

    async def retry(self, dag_run_id: Id, key: str, *,
                    reason: str | None = None) -> m.DagRunChanged:
        """Re-run node `key` and everything downstream of it in the same DAG run."""
        return await self._c.send(c.retry_dag_node(dag_run_id, key, reason))
