"""Operator interventions on a run (docs/WORKFLOWS.md, "Operator interventions"): retry a
failed step in place, skip a step with a supplied output, restart from a position, mark a run
succeeded or failed. Each locks the run, reads what the decision needs, lets the pure
`ostinato.domain.interventions` decide the events (or refuse), and appends them in one
transaction; never a new run.

Marking a run succeeded or failed cancels its children that are not final, as a cancel does
(`commands.cancel_run`); retrying, skipping and restarting leave them (a re-executed child
step finds the same child: its id derives from the position).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec

from ostinato.domain import events as ev
from ostinato.domain import interventions as rules
from ostinato.domain.errors import InvalidState, PayloadTooLarge
from ostinato.domain.ids import new_id
from ostinato.domain.states import RunState
from ostinato.domain.workflow import INLINE_OUTPUT_BYTES
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore, put_blobs, stage_blobs
from ostinato.runs.commands import cancel_run, lock_run
from ostinato.stores import runs as run_store
from ostinato.stores import steps
from ostinato.stores.runs import LockedRun
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.interventions")
_json = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Intervened:
    """What an intervention did: the run's state and version afterwards, and the types of the
    events it appended, in order."""

    state: str
    version: int
    events: list[str]
    children_cancelled: int = 0


async def retry_step(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                     run_id: uuid.UUID, seq: int, actor: str, reason: str) -> Intervened:
    """Set the failed record at `seq` (and later ones) aside; the run's next attempt runs the
    step again."""
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        record, undone = await _at(conn, run, seq)
        events = rules.retry_step(_target(run), seq, record, undone, by=actor, reason=reason)
        return await _append(conn, store, run, events, actor)


async def skip_step(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                    run_id: uuid.UUID, seq: int, name: str | None, output: Any, actor: str,
                    reason: str, max_output_bytes: int) -> Intervened:
    """Record the step at `seq` as succeeded with `output` (over 16 KiB: in the blob store)."""
    body = _encoded(output, max_output_bytes)
    big = len(body) > INLINE_OUTPUT_BYTES
    staged = await stage_blobs(conn, [(tenant_id, body)] if big else [])  # before the lock
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        record, undone = await _at(conn, run, seq)
        ref = new_id() if big else None
        events = rules.skip_step(_target(run), seq, record, name, output, ref, undone,
                                  by=actor, reason=reason)
        if ref is not None:
            await put_blobs(conn, [(ref, tenant_id, body)], "step", staged=staged)
        return await _append(conn, store, run, events, actor)


async def restart(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                  run_id: uuid.UUID, from_seq: int, actor: str, reason: str) -> Intervened:
    """Set the records from `from_seq` on aside; the run's next attempt runs them again."""
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        _, undone = await _at(conn, run, from_seq)
        events = rules.restart(_target(run), from_seq, undone, by=actor, reason=reason)
        return await _append(conn, store, run, events, actor)


async def mark_succeeded(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                         run_id: uuid.UUID, output: Any, actor: str, reason: str,
                         max_output_bytes: int) -> Intervened:
    """End the run succeeded with `output` (None: none), without running anything."""
    body = None if output is None else _encoded(output, max_output_bytes)
    staged = await stage_blobs(conn, [] if body is None else [(tenant_id, body)])
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        ref = None if body is None else new_id()
        events = rules.mark_succeeded(_target(run), ref, by=actor, reason=reason,
                                      output_bytes=None if body is None else len(body))
        if ref is not None and body is not None:
            await put_blobs(conn, [(ref, tenant_id, body)], "output", staged=staged)
        done = await _append(conn, store, run, events, actor)
        return await _cancel_children(conn, store, tenant_id, run_id, actor, done)


async def mark_failed(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                      run_id: uuid.UUID, error_type: str | None, message: str | None,
                      actor: str, reason: str) -> Intervened:
    """End the run failed for good (dead-lettered, reason operator); no compensation runs."""
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        events = rules.mark_failed(_target(run), error_type, message, by=actor,
                                    reason=reason)
        done = await _append(conn, store, run, events, actor)
        return await _cancel_children(conn, store, tenant_id, run_id, actor, done)


def _target(run: LockedRun) -> rules.Target:
    return rules.Target(run_id=run.id, state=RunState(run.state), steps_done=run.steps_done,
                         paused=run.paused, wait_reason=run.wait_reason, wait_seq=run.wait_seq,
                         wait_name=run.wait_name, failures=run.failures, job_id=run.job_id)


async def _at(conn: asyncpg.Connection, run: LockedRun,
              seq: int) -> tuple[rules.Record | None, list[str]]:
    """The record at `seq` and the kept steps a set-aside from `seq` would have undone."""
    if not 0 <= seq < run.steps_done:
        return None, []
    row = await steps.at(conn, run.tenant_id, run.id, seq)
    record = None if row is None else rules.Record(row.seq, row.name, row.succeeded)
    return record, await steps.undone_by_set_aside(conn, run.id, seq)


def _encoded(output: Any, limit: int) -> bytes:
    body = _json.encode(output)
    if len(body) > limit:
        raise PayloadTooLarge(f"output is {len(body)} bytes; the limit is {limit}",
                              errors=[{"field": "output", "message": "too large"}])
    return body


async def _append(conn: asyncpg.Connection, store: EventStore, run: LockedRun,
                  events: Sequence[ev.Event], actor: str) -> Intervened:
    head = StreamHead.of(run)
    await store.append(conn, [head.next(e, actor, traceparent=run.traceparent)
                              for e in events])
    kinds = [ev.event_type(e) for e in events]
    log.info("operator intervention", tenant_id=str(run.tenant_id), run_id=str(run.id),
             actor=actor, events=kinds, reason=getattr(events[0], "reason", None))
    state = head.state.value if head.state is not None else run.state
    return Intervened(state=state, version=head.version, events=kinds)


async def _cancel_children(conn: asyncpg.Connection, store: EventStore, tenant_id: uuid.UUID,
                           run_id: uuid.UUID, actor: str, done: Intervened) -> Intervened:
    """A run decided by an operator leaves no child running (as a cancel does)."""
    cancelled = 0
    for child_id in await run_store.active_children(conn, [run_id]):
        try:
            await cancel_run(conn, store, tenant_id=tenant_id, run_id=child_id, actor=actor)
            cancelled += 1
        except InvalidState:
            pass  # it ended meanwhile
    return Intervened(done.state, done.version, done.events, children_cancelled=cancelled)
