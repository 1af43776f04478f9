"""Child workflows and jobs (`ctx.child`, `ctx.start_child` in `ostinato.sdk.workflow`).

A child is a run of its parent's job and occurrence, created by the worker-gateway in the
transaction that records the parent's step at position `seq` (`child_started`); its id derives
from the parent's id and that position, so a resent report creates nothing new.

- `ctx.child`: `ChildStarted` (awaited) and `RunSuspended` (reason child): the parent holds no
  worker until the child is final. The scheduler's duty (`notify_parents`) finds final children
  whose parent was not told yet (partial index `runs_children_done`) and appends, to a parent
  that waits for that child, `ChildFinished` (the child's outcome becomes the step's: its
  output, or its error when it was dead-lettered or cancelled) and `RunWoken`; and to the child
  `ParentNotified`, which takes it out of the poll. A paused parent gets `ChildFinished`
  only: its resume wakes it.
- `ctx.start_child`: `ChildStarted` is the position's record and the workflow goes on; the
  child's end wakes no one.
- Cancelling a parent cancels its children that are not final, and theirs
  (`ostinato.runs.commands.cancel_run`); a parent whose cancel was requested starts no child.

Lock order, everywhere: a parent before its children.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.domain import events as ev
from ostinato.domain import workflow as wf
from ostinato.domain.errors import InvalidInput
from ostinato.domain.ids import new_id
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore, get_blobs, put_blobs
from ostinato.jobs import materialise
from ostinato.policy import retry
from ostinato.runs import fanout
from ostinato.runs.rules import ChildRules, settings
from ostinato.stores import fan_outs as fan_store
from ostinato.stores import runs as run_store
from ostinato.stores import signals as signal_store
from ostinato.stores.runs import ChildRun, LockedRun

CHILD_NAMESPACE = uuid.UUID("5b0e7c52-0f3e-4d7a-9a39-64d1c8f2a7e1")
_json = msgspec.json.Encoder()


def child_run_id(parent_run_id: uuid.UUID, seq: int) -> uuid.UUID:
    """The one run id the child started at workflow position `seq` can have."""
    return uuid.uuid5(CHILD_NAMESPACE, f"{parent_run_id}/child/{seq}")


@dataclass(frozen=True, slots=True)
class ChildRequest:
    """A parent's step asking for a child (the SDK's ChildSpec, validated by the gateway)."""

    task: str
    payload: Any = None
    pool: str | None = None
    priority: str | None = None
    retry: Any = None  # a RetrySpec document, as a job's `retry`
    timeout_seconds: float | None = None
    awaited: bool = True


@dataclass
class ChildStart:
    """The events and payload blob that start a child; `payloads` go to the blob store."""

    child_id: uuid.UUID
    events: list[NewEvent]
    payloads: list[tuple[uuid.UUID, uuid.UUID, bytes]]


def child_started(parent: LockedRun, head: StreamHead, seq: int, name: str,
                  request: ChildRequest, rules: ChildRules, now: datetime, actor: str,
                  epoch: int) -> ChildStart:
    """Pure: the child's `RunScheduled` (its own stream) and the parent's `ChildStarted` (on
    `head`); raises InvalidInput naming the field a child may not have."""
    pool, priority, policy, errors = settings(parent, request.pool, request.priority,
                                              request.retry, request.timeout_seconds, rules,
                                              "child")
    body = _json.encode(request.payload)
    if len(body) > rules.max_payload_bytes:
        errors.append({"field": "child.payload",
                       "message": f"larger than {rules.max_payload_bytes} bytes"})
    if errors:
        raise InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors)
    child_id = child_run_id(parent.id, seq)
    payload_ref = new_id()
    scheduled = materialise.scheduled(
        job_id=parent.job_id, task=request.task, pool=pool, priority=priority,
        payload_ref=payload_ref, scheduled_for=parent.scheduled_for, trigger="child",
        due_at=now, retry=retry.to_document(policy), timeout_seconds=request.timeout_seconds,
        parent_run_id=parent.id)
    events = [
        StreamHead(child_id, parent.tenant_id).next(scheduled, actor,
                                                    traceparent=parent.traceparent),
        head.next(ev.ChildStarted(seq=seq, name=name, child_run_id=child_id, task=request.task,
                                  awaited=request.awaited, attempt=parent.attempt),
                  actor, epoch=epoch, traceparent=parent.traceparent),
    ]
    return ChildStart(child_id, events, [(payload_ref, parent.tenant_id, body)])


def finished(child: ChildRun, seq: int, name: str, output: Any,
             blobs: list[tuple[uuid.UUID, uuid.UUID, bytes]]) -> ev.ChildFinished:
    """Pure: the child's outcome as the parent's step record at `seq`; a large output (`output`:
    the child's decoded output document) is copied into a step blob appended to `blobs`, so the
    parent's history outlives the child's output retention."""
    if child.state == "succeeded":
        encoded = _json.encode(output)
        ref = None
        if len(encoded) > wf.INLINE_OUTPUT_BYTES:
            ref, output = new_id(), None
            blobs.append((ref, child.tenant_id, encoded))
        return ev.ChildFinished(seq=seq, name=name, child_run_id=child.id, state=child.state,
                                output=output, output_ref=ref)
    kind, message = wf.child_error(child.state, child.last_error, child.id)
    return ev.ChildFinished(seq=seq, name=name, child_run_id=child.id, state=child.state,
                            error_type=kind, message=message)


async def outputs_of(conn: asyncpg.Connection,
                     children: Sequence[ChildRun]) -> dict[uuid.UUID, Any]:
    """The decoded outputs of the succeeded children among `children`, by child id."""
    refs = {c.output_ref: c for c in children if c.state == "succeeded" and c.output_ref}
    if not refs:
        return {}
    docs: dict[uuid.UUID, Any] = {}
    for tenant in {c.tenant_id for c in refs.values()}:
        docs |= await get_blobs(conn, [r for r, c in refs.items() if c.tenant_id == tenant],
                                tenant)
    return {c.id: docs.get(ref) for ref, c in refs.items()}


def waits_for(parent: LockedRun | None, child: ChildRun) -> bool:
    return parent is not None and wf.waits_on(state=parent.state, wait_reason=parent.wait_reason,
                                              waited=parent.wait_child, reason="child",
                                              what=child.id)


async def notify_parents(conn: asyncpg.Connection, store: EventStore, *, batch_size: int,
                         actor: str, checked: bool = False) -> int:
    """In one transaction: tell the parents of up to `batch_size` final children; returns how
    many children were handled. A fan-out's chunk runs move their parent's fan-out on
    (`ostinato.runs.fanout`: counted, the next chunks admitted) in the same transaction. With
    no parent to tell, one read and no transaction (none at all when `checked`: the caller's
    read found one).

    A chunk's end is mostly told by the worker-gateway in the transaction that records it
    (`tell`, from `services.worker_gateway.reports.tell_chunk_parents`); this poll tells the
    ends the gateway left (a parent it could not lock without waiting) and every other end (a
    chunk dead-lettered or cancelled by an operator, a child's)."""
    if not checked and not await run_store.any_finished_child(conn):
        return 0
    async with conn.transaction():
        found = await run_store.finished_children(conn, batch_size)
        if not found:
            return 0
        parents = {p.id: p for p in await run_store.lock(
            conn, sorted({c.parent_run_id for c in found}))}
        # locked after their parents, still final and not told (a gateway may have told them
        # since the read above): each end is told once
        children = await run_store.lock_children(conn, [c.id for c in found])
        await tell(conn, store, parents, children, actor=actor)
    return len(children)


async def tell(conn: asyncpg.Connection, store: EventStore, parents: dict[uuid.UUID, LockedRun],
               children: Sequence[ChildRun], *, actor: str,
               now: datetime | None = None,
               notified: frozenset[uuid.UUID] = frozenset()) -> None:
    """In the caller's transaction, `children` (final, not told yet) and the `parents` found
    locked: append what their ends tell (`ChildFinished` and `RunWoken` to a parent waiting for
    that child, a fan-out's progress for chunk runs) and each child's `ParentNotified`, which
    takes it out of the scheduler's poll. `now` (the database clock; read when needed and not
    given) dates the chunks admitted. `notified`: the children whose `ParentNotified` the
    caller wrote already, with their ends (the gateway's report of fan-out chunks)."""
    waited = [c for c in children if c.trigger != "fan_out"
              and waits_for(parents.get(c.parent_run_id), c)]  # a chunk's output: not read
    outputs = await outputs_of(conn, waited) if waited else {}
    heads = {pid: StreamHead.of(p) for pid, p in parents.items()}
    events: list[NewEvent] = []
    blobs: list[tuple[uuid.UUID, uuid.UUID, bytes]] = []
    chunks: dict[uuid.UUID, list[ChildRun]] = {}
    for child in children:
        parent = parents.get(child.parent_run_id)
        woke = waits_for(parent, child)
        if child.trigger == "fan_out":
            chunks.setdefault(child.parent_run_id, []).append(child)
        elif woke:
            assert parent is not None and parent.wait_seq is not None
            head = heads[parent.id]
            # a paused parent gets the record; its resume wakes it (ostinato.runs.pausing)
            _, woke = wf.ended_wait(True, parent.paused)
            outcome = finished(child, parent.wait_seq, parent.wait_name or "child",
                               outputs.get(child.id), blobs)
            events.append(head.next(outcome, actor, traceparent=parent.traceparent))
            if woke:
                events.append(head.next(ev.RunWoken(cause="child"), actor,
                                        traceparent=parent.traceparent))
        if child.id not in notified:
            events.append(StreamHead.of(child).next(
                ev.ParentNotified(parent_run_id=child.parent_run_id, woke=woke), actor,
                traceparent=child.traceparent))
    payloads: list[tuple[uuid.UUID, uuid.UUID, bytes]] = []
    if chunks:
        fans = await fan_store.of_parents(conn, sorted(chunks))
        if now is None:
            now = await signal_store.database_now(conn)
        for pid, ended in chunks.items():
            running = [f for (p, _), f in fans.items() if p == pid and f.state == "running"]
            if pid in parents and running:
                moves = fanout.progressed(parents[pid], heads[pid], running[0], ended, now,
                                          actor)
                events += moves.events
                payloads += moves.payloads
    await put_blobs(conn, blobs, "step")
    await put_blobs(conn, payloads)
    await store.append(conn, events)
