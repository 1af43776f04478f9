"""Route handlers for workflow runs (docs/WORKFLOWS.md): the steps a run recorded, and signals
sent to it. Tenant-scoped through `scope.TenantScope`, over `ostinato.runs` and the stores."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import asyncpg
import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from ostinato import runs
from ostinato.archive import ArchivedRun
from ostinato.domain import roles
from ostinato.domain import workflow as wf
from ostinato.domain.errors import InvalidInput, NotFound, PayloadTooLarge
from ostinato.domain.roles import Principal
from ostinato.domain.states import FINAL
from ostinato.eventlog.store import get_blobs
from ostinato.runs import updates as run_updates
from ostinato.runtime.auth import Caller
from ostinato.stores import runs as run_store
from ostinato.stores import steps as step_store
from ostinato.stores.runs import RunRow
from ostinato.stores.steps import StateRow, StepRow
from ostinato.wire.api import (
    ChildrenPage,
    ChildView,
    PauseChanged,
    PauseMatchingRequest,
    RunPaused,
    RunPauseRequest,
    RunStateView,
    SignalAccepted,
    StateValue,
    StepsPage,
    StepView,
    UpdateError,
    UpdateRequest,
    UpdateView,
)
from services.api import archived, scope
from services.api.archived import refuses_archived
from services.api.auditing import audited
from services.api.news import news_of
from services.api.results import parse_wait
from services.api.running import running_item, running_step
from services.api.scope import Tenant

Limit = Annotated[int, QueryParameter(ge=1, le=1000)]
After = Annotated[int, QueryParameter(ge=-1, le=2**31 - 1)]
T = TypeVar("T")
_FINAL = frozenset(s.value for s in FINAL)
StateName = Annotated[str, QueryParameter(min_length=1, max_length=200)]
MAX_IDEMPOTENCY_KEY_CHARS = 256


@get("/v1/runs/{run_id:uuid}/steps", tags=["runs"], opt={"reads_archive": True})
async def run_steps(run_id: FromPath[uuid.UUID], tenant: Tenant,
                    after: FromQuery[After] = -1, limit: FromQuery[Limit] = 100,
                    inline_outputs: FromQuery[bool] = False) -> StepsPage:
    """A workflow run's recorded steps (steps, timers, signal waits) in order, from position
    `after + 1`, with the run attempt that recorded each, its tries, duration, error and output
    (large outputs by reference; `inline_outputs=true`: put back in `output` as well, as a
    resuming workflow reads them, e.g. for `ostinato workflows check`). The last page of a
    running workflow ends with the step it is executing, `state` running. An archived run's
    come from its archive (`archived` true)."""
    run = await run_store.by_id(tenant.conn, tenant.tenant_id, run_id)
    if run is None:
        return _archived_steps(await archived.read(tenant.archive, tenant.tenant_id, run_id),
                               after, limit, inline_outputs)
    page = await step_store.page(tenant.conn, tenant.tenant_id, run_id, after=after,
                                 limit=limit)
    refs = [s.output_ref for s in page if s.output_ref is not None] if inline_outputs else []
    blobs = await get_blobs(tenant.conn, refs, tenant.tenant_id) if refs else {}
    return StepsPage(
        run_id=run_id, steps_done=run.steps_done,
        items=[_step_view(s, blobs) for s in page]
              + await _running(tenant, run, after, last=len(page) < limit),
        next_after=page[-1].seq if len(page) == limit else None)


def _step_view(s: StepRow, blobs: dict[uuid.UUID, Any]) -> StepView:
    """A recorded step; its large output put back from `blobs` when they hold it."""
    return StepView(seq=s.seq, name=s.name, succeeded=s.succeeded, attempt=s.attempt,
                    tries=s.tries, duration_ms=s.duration_ms, recorded_at=s.recorded_at,
                    output=blobs.get(s.output_ref, s.output) if s.output_ref else s.output,
                    output_ref=s.output_ref, error_type=s.error_type, message=s.message,
                    state="succeeded" if s.succeeded else "failed")


def _archived_steps(gone: ArchivedRun, after: int, limit: int,
                    inline_outputs: bool) -> StepsPage:
    """A page of an archived run's steps, as the hot run's was paged (nothing runs)."""
    page = [s for s in archived.step_rows(gone) if s.seq > after][:limit]
    blobs = archived.blobs(gone) if inline_outputs else {}
    return StepsPage(run_id=gone.run_id, steps_done=archived.run_row(gone).steps_done,
                     items=[_step_view(s, blobs) for s in page],
                     next_after=page[-1].seq if len(page) == limit else None,
                     archived=True, archived_at=gone.archived_at)


async def _running(tenant: Tenant, run: RunRow, after: int, *, last: bool) -> list[StepView]:
    """The executing step, on the last page after `after` (none: an empty list)."""
    step = await running_step(tenant.conn, tenant.tenant_id, run) if last else None
    return [running_item(step, run.attempt)] if step is not None and step.seq > after else []


@get("/v1/runs/{run_id:uuid}/children", tags=["runs"], opt={"reads_archive": True})
async def run_children(run_id: FromPath[uuid.UUID], tenant: Tenant,
                       after: FromQuery[uuid.UUID | None] = None,
                       limit: FromQuery[Limit] = 100) -> ChildrenPage:
    """A workflow run's child runs (`ctx.child`, `ctx.start_child`, fan-out chunks) in id
    order, after the id `after`. An archived run's are named by its archived stream and read
    from their own archive objects (`archived` true; a child with no object is left out)."""
    if await run_store.by_id(tenant.conn, tenant.tenant_id, run_id) is None:
        return await _archived_children(
            tenant, await archived.read(tenant.archive, tenant.tenant_id, run_id), after, limit)
    page = await run_store.children_of(tenant.conn, tenant.tenant_id, run_id, after, limit)
    return ChildrenPage(run_id=run_id, items=[
        ChildView(id=c.id, task=c.task, state=c.state, parent_notified=c.parent_notified)
        for c in page], next_after=page[-1].id if len(page) == limit else None)


async def _archived_children(tenant: Tenant, gone: ArchivedRun, after: uuid.UUID | None,
                             limit: int) -> ChildrenPage:
    """A page of an archived parent's children: ids from its stream, each child's state from
    its own object (a parent leaves the hot tables with or after its children)."""
    ids = [c for c in archived.child_ids(gone) if after is None or c > after][:limit]
    assert tenant.archive is not None  # the parent was read from it
    found = {c.run_id: c for c in await archived.runs_of(tenant.archive, tenant.tenant_id, ids)}
    items = []
    for child in (found[c] for c in ids if c in found):
        row = archived.run_row(child)
        items.append(ChildView(id=row.id, task=row.task, state=row.state,
                               parent_notified=row.parent_notified))
    return ChildrenPage(run_id=gone.run_id, items=items,
                        next_after=ids[-1] if len(ids) == limit else None,
                        archived=True, archived_at=gone.archived_at)


@post("/v1/runs/{run_id:uuid}/pause", status_code=200, tags=["runs"],
      opt=audited("run.pause", "run", "run_id"))
@refuses_archived
async def pause(run_id: FromPath[uuid.UUID], tenant: Tenant,
                data: JSONBody[RunPauseRequest | None] = None) -> RunPaused:
    """Pause a running or suspended workflow run: it starts no next step, its timer is frozen
    (the time left is kept), and a signal or a child's end that comes meanwhile is recorded but
    wakes nothing until the run is resumed. Recorded with the caller and the `reason`."""
    changed = await runs.pause_run(tenant.conn, tenant.store, tenant.clock,
                                   tenant_id=tenant.tenant_id, run_id=run_id,
                                   actor=tenant.actor, reason=(data or RunPauseRequest()).reason)
    tenant.audit.before, tenant.audit.after = {"paused": not changed}, {"paused": True}
    return RunPaused(paused=True, changed=changed)


@post("/v1/runs/{run_id:uuid}/resume", status_code=200, tags=["runs"],
      opt=audited("run.resume", "run", "run_id"))
@refuses_archived
async def resume(run_id: FromPath[uuid.UUID], tenant: Tenant,
                 data: JSONBody[RunPauseRequest | None] = None) -> RunPaused:
    """Resume a paused run where it stopped: a frozen timer gets the time it had left, and a
    run whose wait completed meanwhile (or that the pause suspended) is woken."""
    changed = await runs.resume_run(tenant.conn, tenant.store, tenant.clock,
                                    tenant_id=tenant.tenant_id, run_id=run_id,
                                    actor=tenant.actor, reason=(data or RunPauseRequest()).reason)
    tenant.audit.before, tenant.audit.after = {"paused": changed}, {"paused": False}
    return RunPaused(paused=False, changed=changed)


@post("/v1/runs/pause", status_code=200, tags=["runs"],
      opt=audited("runs.pause", "runs"))
async def pause_matching(data: JSONBody[PauseMatchingRequest], tenant: Tenant) -> PauseChanged:
    """Pause the running and suspended runs of a `task` or a `job_id` (up to 1,000 a call;
    call again for more)."""
    changed = await runs.pause_matching(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, task=data.task,
        job_id=data.job_id, actor=tenant.actor, reason=data.reason)
    tenant.audit.target_id = data.task or str(data.job_id or "")
    tenant.audit.after = {"paused": True, "changed": changed}
    return PauseChanged(changed=changed)


@post("/v1/runs/resume", status_code=200, tags=["runs"],
      opt=audited("runs.resume", "runs"))
async def resume_matching(data: JSONBody[PauseMatchingRequest],
                          tenant: Tenant) -> PauseChanged:
    """Resume the paused runs of a `task` or a `job_id` (up to 1,000 a call)."""
    changed = await runs.pause_matching(
        tenant.conn, tenant.store, tenant.clock, tenant_id=tenant.tenant_id, task=data.task,
        job_id=data.job_id, actor=tenant.actor, reason=data.reason, resume=True)
    tenant.audit.target_id = data.task or str(data.job_id or "")
    tenant.audit.after = {"paused": False, "changed": changed}
    return PauseChanged(changed=changed)


@post("/v1/runs/{run_id:uuid}/signals/{name:str}", status_code=202, tags=["runs"],
      opt=audited("run.signal", "run", "run_id", action=roles.SUBMIT))
@refuses_archived
async def send_signal(request: Request, run_id: FromPath[uuid.UUID], name: FromPath[str],
                      tenant: Tenant,
                      reason: FromQuery[str | None] = None) -> Response[SignalAccepted]:
    """Send signal `name` with a JSON body as its payload (empty: null) to a run: a workflow
    waiting for it is woken at once; otherwise its next wait of that name takes it. A finished
    run answers 409. `Idempotency-Key`: the same key again with the same body returns the
    first answer (200); with another body it is a 409 `idempotency-conflict`.
    `reason` (an operator delivering it on the run's behalf): recorded with the caller."""
    key = request.headers.get("idempotency-key")
    if key is not None and not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidInput("Idempotency-Key has 1 to 256 characters",
                           errors=[{"field": "Idempotency-Key", "message": "invalid"}])
    sent = await runs.send_signal(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id, name=name,
        payload=await _payload(request, tenant.settings.max_payload_bytes), actor=tenant.actor,
        idempotency_key=key, max_payload_bytes=tenant.settings.max_payload_bytes,
        reason=reason)
    tenant.audit.status, tenant.audit.detail = (202 if sent.created else 200), f"signal {name}"
    tenant.audit.after = {"signal": name, "signal_id": str(sent.signal_id),
                          "delivered": sent.delivered}
    return Response(SignalAccepted(signal_id=sent.signal_id, delivered=sent.delivered,
                                   created=sent.created),
                    status_code=202 if sent.created else 200)


@get("/v1/runs/{run_id:uuid}/state", tags=["runs"], opt={"reads_archive": True})
async def run_state(request: Request, run_id: FromPath[uuid.UUID], caller: Caller,
                    name: FromQuery[StateName | None] = None,
                    wait: FromQuery[str | None] = None) -> RunStateView:
    """The latest value of each name the workflow published (`ctx.set`), while it runs and
    after; `name`: that one only. With `name` and `wait` (a duration, "30s", at most "60s"):
    answers once `name` is published or the run is final, else after `wait` without it. The
    wait holds no connection: it is woken by the run's news (`services.api.news`). An
    archived run's values come from its archive (`archived` true), at once."""
    seconds = parse_wait(wait) if wait is not None else 0.0  # checked even without a name
    archive = archived.archive_of(request.app.state)

    async def read(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> RunStateView:
        try:
            state, rows = await run_updates.state(conn, tenant_id, run_id, name=name)
        except NotFound:
            gone = await archived.read(archive, tenant_id, run_id)
            return RunStateView(run_id=run_id, run_state=archived.run_row(gone).state,
                                values=_values(archived.state_values(gone, name)),
                                archived=True, archived_at=gone.archived_at)
        return RunStateView(run_id=run_id, run_state=state, values=_values(rows))

    return await _awaited(request, caller, run_id, seconds if name is not None else 0.0, read,
                          lambda v: bool(v.values) or v.run_state in _FINAL)


@post("/v1/runs/{run_id:uuid}/updates", status_code=202, tags=["runs"],
      opt=audited("run.update", "run", "run_id", action=roles.SUBMIT))
@refuses_archived
async def send_update(run_id: FromPath[uuid.UUID], data: JSONBody[UpdateRequest],
                      tenant: Tenant) -> Response[UpdateView]:
    """Send an update to a running workflow: its `ctx.next_update` / `ctx.handle_update` wait
    takes it (at once if it waits, and the run is woken) and answers it. Durable like a signal;
    the same `idempotency_key` again returns the same update (200, `created` false). A final
    run answers 409. The answer is awaited with `GET .../updates/{update_id}?wait=` (this
    route's audited transaction must end for the workflow to see the update)."""
    sent = await run_updates.send_update(
        tenant.conn, tenant.store, tenant_id=tenant.tenant_id, run_id=run_id, name=data.name,
        payload=data.payload, actor=tenant.actor, idempotency_key=data.idempotency_key)
    tenant.audit.status, tenant.audit.detail = (202 if sent.created else 200), \
        f"update {data.name}"
    tenant.audit.after = {"update": data.name, "update_id": str(sent.update_id)}
    found = await run_updates.outcome(tenant.conn, tenant.tenant_id, run_id, sent.update_id)
    return Response(_update_view(run_id, found, sent.created),
                    status_code=202 if sent.created else 200)


def _values(rows: list[StateRow]) -> dict[str, StateValue]:
    return {r.name: StateValue(value=r.value, seq=r.seq, set_at=r.set_at) for r in rows}


@get("/v1/runs/{run_id:uuid}/updates/{update_id:uuid}", tags=["runs"],
     opt={"reads_archive": True})
async def get_update(request: Request, run_id: FromPath[uuid.UUID],
                     update_id: FromPath[uuid.UUID], caller: Caller,
                     wait: FromQuery[str | None] = None) -> UpdateView:
    """Where an update stands; `wait` (a duration, "30s", at most "60s"; none: at once):
    answers once it is answered or its run ended, else as it stands after `wait`. The wait
    holds no connection: it is woken by the run's news (`services.api.news`). An archived
    run's update is read from its archive (`archived` true), at once."""
    seconds = parse_wait(wait) if wait is not None else 0.0
    archive = archived.archive_of(request.app.state)

    async def read(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> UpdateView:
        try:
            return _update_view(run_id, await run_updates.outcome(conn, tenant_id, run_id,
                                                                  update_id), True)
        except NotFound:
            if await run_store.by_id(conn, tenant_id, run_id) is not None:
                raise  # a hot run without that update
        gone = await archived.read(archive, tenant_id, run_id)
        view = _update_view(run_id, archived.update_outcome(gone, update_id), True)
        view.archived, view.archived_at = True, gone.archived_at
        return view

    return await _awaited(request, caller, run_id, seconds, read,
                          lambda v: v.state != wf.UpdateState.PENDING)


async def _awaited(request: Request, caller: Principal, run_id: uuid.UUID, seconds: float,
                   read: Callable[[asyncpg.Connection, uuid.UUID], Awaitable[T]],
                   done: Callable[[T], bool]) -> T:
    """`read()` once `done`, else as it stands after `seconds`: watched on the api's news
    listener (`services.api.news`) before each read, so news after a read wakes the wait; a
    pooled connection is held only while reading. A draining api (SIGTERM: `stopping`) answers
    at once as things stand, so its clients ask again elsewhere instead of being cut."""
    state = request.app.state
    pool: asyncpg.Pool = state.pool
    tenant_id = await scope.tenant_of(request, caller)
    news = news_of(state, state.settings.database_url)
    stopping: asyncio.Event = getattr(state, "stopping", None) or asyncio.Event()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    fut = news.watch(run_id) if seconds > 0 else None
    try:
        while True:
            async with pool.acquire() as conn:
                answer = await read(conn, tenant_id)
            left = deadline - loop.time()
            if fut is None or done(answer) or left <= 0 or stopping.is_set():
                return answer
            stop = loop.create_task(stopping.wait())
            try:
                await asyncio.wait((fut, stop), timeout=left,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
            if not fut.done():
                return answer
            fut = news.watch(run_id)  # woken: watch again before reading
    finally:
        if fut is not None:
            news.forget(run_id, fut)


def _update_view(run_id: uuid.UUID, found: run_updates.UpdateOutcome,
                 created: bool) -> UpdateView:
    answer = found.answer or {}
    error = answer.get("error") if isinstance(answer.get("error"), dict) else None
    return UpdateView(update_id=found.update_id, run_id=run_id, name=found.name,
                      state=str(found.state), taken=found.taken, created=created,
                      output=answer.get("output"),
                      error=None if error is None else UpdateError(
                          type=str(error.get("type", "")), message=str(error.get("message", ""))))


async def _payload(request: Request, max_bytes: int) -> Any:
    body = await request.body()
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"signal payload is {len(body)} bytes; the limit is {max_bytes}")
    if not body.strip():
        return None
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"the body is not JSON: {exc}",
                           errors=[{"field": "body", "message": "invalid JSON"}]) from exc


ROUTES = [run_steps, run_children, pause, resume, pause_matching, resume_matching, send_signal,
          run_state, send_update, get_update]
