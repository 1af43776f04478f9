"""Run commands: cancel, re-run (a failed, cancelled or dead-lettered run as a new linked run),
dead-letter triage and replay. Each appends to run streams in the caller's transaction."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec

from ostinato import outcomes
from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain import ids
from ostinato.domain.errors import (
    InvalidInput,
    InvalidState,
    NotFound,
    OstinatoError,
    PayloadTooLarge,
)
from ostinato.domain.states import FINAL, RunState
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore, put_blobs, stage_blobs
from ostinato.jobs import payloads
from ostinato.jobs.materialise import run_for
from ostinato.stores import attributes as attribute_store
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store

_json = msgspec.json.Encoder()
TRIAGE_STATES = ("new", "acknowledged", "fixed", "wont_fix")


async def lock_run(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                   run_id: uuid.UUID) -> run_store.LockedRun:
    """The run locked for a command, or NotFound when it is not this tenant's."""
    rows = await run_store.lock(conn, [run_id])
    if not rows or rows[0].tenant_id != tenant_id:
        raise NotFound(f"no run {run_id}")
    return rows[0]


async def cancel_run(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                     run_id: uuid.UUID, actor: str) -> str:
    """A waiting run is cancelled at once; a running one is asked to stop (its worker learns
    it on the next heartbeat). A waiting workflow with compensations to run is asked to stop
    too, and a suspended one is woken for it: its next attempt compensates, then ends
    cancelled. A workflow's children that are not final are cancelled with it, and theirs
    (`ostinato.runs.children`). Returns the state the run is in afterwards."""
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        state = RunState(run.state)
        events = _cancel_events(run, actor)
        if not events:
            return state.value
        head = StreamHead.of(run)
        await store.append(conn, [head.next(e, actor, traceparent=run.traceparent)
                                  for e in events])
        for child_id in await run_store.active_children(conn, [run_id]):
            try:
                await cancel_run(conn, store, tenant_id=tenant_id, run_id=child_id,
                                 actor=actor)
            except InvalidState:
                pass  # it ended meanwhile
    for event in events:
        outcomes.observe(tenant_id, run_id, event)
    return head.state.value if head.state is not None else state.value


def _cancel_events(run: run_store.LockedRun, actor: str) -> list[ev.Event]:
    """What cancels `run` (cancel_run's rule); none when a cancel is already requested."""
    state = RunState(run.state)
    if state in FINAL:
        raise InvalidState(f"run {run.id} is already {state}")
    if state is RunState.RUNNING or run.compensable:
        if run.cancel_requested:
            return []
        if state is RunState.SUSPENDED:
            return [ev.CancelRequested(by=actor), ev.RunWoken(cause="cancel")]
        return [ev.CancelRequested(by=actor)]
    return [ev.RunCancelled(by=actor, reason="requested")]


async def cancel_runs(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                      run_ids: Sequence[uuid.UUID],
                      actor: str) -> dict[uuid.UUID, str | OstinatoError]:
    """`cancel_run` for many runs at once (a bulk operation's batch): one lock, one multi-row
    append. Per run: its state afterwards, or why it was not cancelled (NotFound, or
    InvalidState for a run already final). Their children that are not final go with them."""
    out: dict[uuid.UUID, str | OstinatoError] = {}
    observed: list[tuple[uuid.UUID, list[ev.Event]]] = []
    async with conn.transaction():
        rows = {r.id: r for r in await run_store.lock(conn, run_ids)}
        appended = []
        for run_id in run_ids:
            run = rows.get(run_id)
            if run is None or run.tenant_id != tenant_id:
                out[run_id] = NotFound(f"no run {run_id}")
                continue
            try:
                events = _cancel_events(run, actor)
            except InvalidState as exc:
                out[run_id] = exc
                continue
            head = StreamHead.of(run)
            appended.extend(head.next(e, actor, traceparent=run.traceparent) for e in events)
            out[run_id] = head.state.value if head.state is not None else run.state
            if events:
                observed.append((run_id, events))
        if appended:
            await store.append(conn, appended)
        for child_id in await run_store.active_children(conn, [r for r, _ in observed]):
            try:
                await cancel_run(conn, store, tenant_id=tenant_id, run_id=child_id, actor=actor)
            except InvalidState:
                pass  # it ended meanwhile
    for run_id, events in observed:
        for event in events:
            outcomes.observe(tenant_id, run_id, event)
    return out


async def rerun(conn: asyncpg.Connection, store: EventStore, clock: Clock, *,
                tenant_id: uuid.UUID, run_id: uuid.UUID, actor: str, request_key: str | None,
                payload: Any = msgspec.UNSET, max_payload_bytes: int = 1 << 20,
                trigger: str = "retry") -> tuple[uuid.UUID, bool]:
    """A new run linked to `run_id` (which must be failed, cancelled or dead-lettered), due now,
    optionally with a corrected payload. The same `request_key` on the same run always gives
    the same new run: (new run id, created now)."""
    key = request_key or uuid.uuid4().hex
    new_id = outcomes.new_run_id(run_id, key)
    body = None if payload is msgspec.UNSET else _json.encode(payload)
    # a large corrected payload is put before the run's row is locked
    staged = await stage_blobs(conn, [(tenant_id, body)] if body is not None
                               and len(body) <= max_payload_bytes else [])
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        if run.state not in ("failed", "cancelled", "dead_lettered"):
            raise InvalidState(f"run {run_id} is {run.state}; only a failed, cancelled or "
                               "dead-lettered run can be re-run")
        if await run_store.by_id(conn, tenant_id, new_id) is not None:
            return new_id, False  # the same request again
        row = await run_store.by_id(conn, tenant_id, run_id)
        if row is not None and row.trigger == "dag":
            raise InvalidState(f"run {run_id} is a DAG node's: re-run it in its DAG run with "
                               "POST /v1/dag-runs/{id}/nodes/{key}/retry")
        job = await job_store.by_id(conn, tenant_id, run.job_id)
        if job is None:  # job rows are never removed (a deleted job keeps its row)
            raise NotFound(f"no job {run.job_id} for run {run_id}")
        payload_ref = None
        # the run's own payload version (a child's is not its parent job's); a corrected
        # payload is checked against the task's newest schema and takes its version
        payload_version = row.payload_version if row is not None else None
        if body is not None:
            if len(body) > max_payload_bytes:
                raise PayloadTooLarge(f"payload is {len(body)} bytes; the limit is "
                                      f"{max_payload_bytes}", errors=[
                                          {"field": "payload", "message": "too large"}])
            [verdict] = await payloads.schemas.check(conn, tenant_id, [(run.task, payload)],
                                                     path="rerun")
            if verdict.errors:
                raise InvalidInput("; ".join(f"{e['field']}: {e['message']}"
                                             for e in verdict.errors[:10]), verdict.errors)
            payload_version = verdict.payload_version
            payload_ref = ids.new_id()
            await put_blobs(conn, [(payload_ref, tenant_id, body)], staged=staged)
        # The run's own task, pool, class and payload; the job's current limits.
        source = msgspec.structs.replace(job, payload_ref=run.payload_ref, task=run.task,
                                         pool=run.pool, priority=run.priority,
                                         payload_version=payload_version)
        _, event = run_for(source, clock.now(), trigger=trigger, run_id=new_id,
                           replay_of=run_id, payload_ref=payload_ref,  # and its attributes
                           attributes=(await attribute_store.of_runs(
                               conn, tenant_id, [run_id])).get(run_id))
        events = [StreamHead(new_id, tenant_id).next(event, actor,
                                                      traceparent=run.traceparent)]
        if run.state == "dead_lettered":
            events.append(StreamHead.of(run).next(ev.DeadLetterReplayed(
                new_run_id=new_id, request_key=key, payload_changed=payload_ref is not None,
                by=actor), actor))
        await store.append(conn, events)
    return new_id, True


async def triage(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                 run_id: uuid.UUID, state: str, comment: str | None, actor: str) -> None:
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        if run.state != "dead_lettered":
            raise NotFound(f"run {run_id} is not in the dead-letter queue")
        await store.append(conn, [StreamHead.of(run).next(
            ev.DeadLetterTriaged(state=state, comment=comment, by=actor), actor)])


async def replay_many(conn: asyncpg.Connection, store: EventStore, clock: Clock, *,
                      tenant_id: uuid.UUID, run_ids: Sequence[uuid.UUID], actor: str,
                      request_key: str) -> tuple[int, int]:
    """Replay each dead letter (same request key for all: repeating the bulk replay creates
    nothing new). Returns (created, already replayed with this key)."""
    created = existing = 0
    for run_id in run_ids:
        _, new = await rerun(conn, store, clock, tenant_id=tenant_id, run_id=run_id,
                             actor=actor, request_key=request_key, trigger="replay")
        created += new
        existing += not new
    return created, existing
