"""Starting a workflow run by the user's own workflow id, and signal-with-start (issue 40 item
3): one transaction finds the id's running run or starts one, then records the signal for it.

Every start by workflow id goes through `start_workflow` (the api's /v1/workflows routes are
its only callers, and nothing else writes a RunScheduled with a workflow id), and each takes a
transaction-scoped advisory lock on (tenant, task, id) before it reads the id's runs. So
"at most one run not final per id" is decided there: under the lock, it reads the id's runs in
`run_workflow_ids` (the projection of RunScheduled.workflow_id, a side table so that `runs`
keeps the shape the previous release reads with `SELECT *`) joined to their state, and the run
it makes is projected there in the same transaction, before the lock is let go. There is no
unique index to hit: an operator reopening an ended run of an id that runs again (a dead
letter's replay, `runs reopen`) is not refused by this module; the id then names two running
runs, and a signal by id goes to the newest (`running_run`).

The run is made here, not by the scheduler's next poll: a one-off job is created and its only
occurrence fired at once (RunScheduled carrying `workflow_id`, and OccurrenceFired moving the
job past it, exactly what the scheduler would append), so the answer names the run.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain import workflow_ids as wids
from ostinato.domain.errors import InvalidState
from ostinato.domain.states import FINAL
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import run_for
from ostinato.jobs.submit import submit_job
from ostinato.runs.signals import send_signal
from ostinato.stores import jobs as job_store
from ostinato.wire.api import JobRequest

_FINAL = [s.value for s in FINAL]


@dataclass(frozen=True, slots=True)
class WorkflowStart:
    """The run a workflow id names now; `started`: made by this call; `signal_id`: the signal
    recorded for it (signal-with-start)."""

    run_id: uuid.UUID
    started: bool
    signal_id: uuid.UUID | None = None
    delivered: bool = False


@dataclass(frozen=True, slots=True)
class Signal:
    name: str
    payload: Any


async def running_run(conn: asyncpg.Connection, tenant_id: uuid.UUID, task: str,
                      workflow_id: str) -> uuid.UUID | None:
    """The id's newest run not final, if any (one, unless an operator reopened an old one)."""
    return await conn.fetchval(
        "SELECT m.run_id FROM run_workflow_ids m JOIN runs r ON r.id = m.run_id "
        "WHERE m.tenant_id = $1 AND m.task = $2 AND m.workflow_id = $3 "
        "AND r.state <> ALL($4::text[]) ORDER BY m.seq DESC LIMIT 1",
        tenant_id, task, workflow_id, _FINAL)


async def _latest(conn: asyncpg.Connection, tenant_id: uuid.UUID, task: str,
                  workflow_id: str) -> str | None:
    """The state of the id's latest run (None: never used): under the lock, in log order."""
    return await conn.fetchval(
        "SELECT r.state FROM run_workflow_ids m JOIN runs r ON r.id = m.run_id "
        "WHERE m.tenant_id = $1 AND m.task = $2 AND m.workflow_id = $3 "
        "ORDER BY m.seq DESC LIMIT 1", tenant_id, task, workflow_id)


async def start_workflow(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    task: str, workflow_id: str, payload: Any, policy: str, idempotency_key: str | None,
    pools: Sequence[str], max_payload_bytes: int, actor: str, signal: Signal | None = None,
    pool: str = "default", traceparent: str | None = None,
) -> WorkflowStart:
    """Start a run of `task` named `workflow_id` (without `signal`: a running one is a 409
    naming it), or with `signal`: signal the running one, starting it first if none runs.
    The same `idempotency_key` again answers the first call's run and records nothing new
    (the start's one-off job is keyed by it, the signal by it too)."""
    wids.check_workflow_id(workflow_id)
    wids.check_policy(policy)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                           f"workflow-id/{tenant_id}/{task}/{workflow_id}")
        run_id: uuid.UUID | None = None
        started = False
        if idempotency_key is not None:
            job = await job_store.by_idempotency_key(conn, tenant_id,
                                                     _job_key(task, workflow_id, idempotency_key))
            if job is not None:
                run_id = await conn.fetchval("SELECT id FROM runs WHERE job_id = $1 LIMIT 1",
                                             job.id)
        if run_id is None:
            run_id = await running_run(conn, tenant_id, task, workflow_id)
            if run_id is not None and signal is None:
                raise InvalidState(f"workflow id {workflow_id!r} of task {task!r} is running "
                                   f"as run {run_id}: a second start is refused")
        if run_id is None:
            why = wids.refusal(policy, await _latest(conn, tenant_id, task, workflow_id))
            if why is not None:
                raise InvalidState(f"workflow id {workflow_id!r} of task {task!r}: {why}")
            run_id = await _start(conn, store, clock, tenant_id=tenant_id, task=task,
                                  workflow_id=workflow_id, payload=payload, pools=pools,
                                  pool=pool, max_payload_bytes=max_payload_bytes, actor=actor,
                                  key=None if idempotency_key is None else
                                  _job_key(task, workflow_id, idempotency_key),
                                  traceparent=traceparent)
            started = True
        if signal is None:
            return WorkflowStart(run_id, started)
        sent = await send_signal(conn, store, tenant_id=tenant_id, run_id=run_id,
                                 name=signal.name, payload=signal.payload, actor=actor,
                                 idempotency_key=idempotency_key,
                                 max_payload_bytes=max_payload_bytes)
    return WorkflowStart(run_id, started, sent.signal_id, sent.delivered)


def _job_key(task: str, workflow_id: str, key: str) -> str:
    """The start's one-off job's idempotency key: the caller's key scoped to the workflow id
    (within the job key's 200 characters)."""
    return "wf:" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"{task}\n{workflow_id}\n{key}"))


async def _start(conn: asyncpg.Connection, store: EventStore, clock: Clock, *,
                 tenant_id: uuid.UUID, task: str, workflow_id: str, payload: Any,
                 pools: Sequence[str], pool: str, max_payload_bytes: int, actor: str,
                 key: str | None, traceparent: str | None) -> uuid.UUID:
    job, _ = await submit_job(conn, store, clock, tenant_id=tenant_id,
                              request=JobRequest(name=task, task=task, payload=payload,
                                                 pool=pool, idempotency_key=key),
                              pools=pools, max_payload_bytes=max_payload_bytes, actor=actor,
                              traceparent=traceparent)
    locked = await job_store.lock_for_repair(conn, job.id)
    assert locked is not None and locked.next_slot is not None  # made above: one slot, now
    slot = locked.next_slot
    run_id, run = run_for(locked, slot, due_at=locked.next_run_at)
    run = msgspec.structs.replace(run, workflow_id=workflow_id)
    await store.append(conn, [
        StreamHead(run_id, tenant_id).next(run, actor, traceparent=traceparent),
        StreamHead(job.id, tenant_id, locked.version).next(ev.OccurrenceFired(
            scheduled_for=slot, run_id=run_id, next_run_at=None, next_slot=None), actor,
            traceparent=traceparent),
    ])
    return run_id
