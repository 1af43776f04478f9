"""Pausing and resuming an in-flight workflow run (`POST /v1/runs/{id}/pause`, `.../resume`, and
the filter form over a task's or a job's runs), each recorded with its actor and reason.

    running   ──pause──> RunPaused; its next step report is recorded, then the gateway suspends
                         it (RunSuspended, reason paused): no next step starts
    suspended ──pause──> RunPaused; its timer and deadline are frozen (out of the wake poll); a
                         signal or a child's end that comes meanwhile is recorded, wakes nothing
    paused    ─resume──> RunResumed{wake_at: now + the time its timer had left}; a run suspended
                         by the pause, or whose wait completed meanwhile, is woken (RunWoken)

Only running and suspended runs can be paused (a run waiting for dispatch is about to run or
already finished its attempt; cancel it instead); pausing a paused run or resuming a running
one changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import asyncpg

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput, InvalidState
from ostinato.domain.states import RunState
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.runs.commands import lock_run
from ostinato.stores import runs as run_store
from ostinato.stores.runs import LockedRun

PAUSABLE = (RunState.RUNNING, RunState.SUSPENDED)
MAX_REASON_CHARS = 1000
MAX_MATCHING = 1000  # runs one filtered pause or resume acts on


def _check_reason(reason: str | None) -> None:
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"a reason has at most {MAX_REASON_CHARS} characters",
                           errors=[{"field": "reason", "message": "too long"}])


def pause_events(run: LockedRun, now: datetime, actor: str,
                 reason: str | None) -> list[ev.Event]:
    """Pure: what pausing `run` appends (nothing when it is paused already)."""
    state = RunState(run.state)
    if run.paused:
        return []
    if state not in PAUSABLE:
        raise InvalidState(f"run {run.id} is {state}: only a running or suspended workflow "
                           "run can be paused")
    left = None
    if state is RunState.SUSPENDED and run.wake_at is not None:
        left = max(0.0, (run.wake_at - now).total_seconds())
    return [ev.RunPaused(by=actor, reason=reason, frozen_wake_in=left)]


def resume_events(run: LockedRun, now: datetime, actor: str,
                  reason: str | None) -> list[ev.Event]:
    """Pure: what resuming `run` appends (nothing when it is not paused)."""
    if not run.paused:
        return []
    wake_at = None
    if run.frozen_wake_at is not None and run.paused_at is not None:
        wake_at = now + max(run.frozen_wake_at - run.paused_at, timedelta(0))
    events: list[ev.Event] = [ev.RunResumed(by=actor, reason=reason, wake_at=wake_at)]
    waited = run.wait_seq if run.wait_seq is not None else run.steps_done
    if run.state == RunState.SUSPENDED and (run.wait_reason == "paused"
                                            or run.steps_done > waited):
        events.append(ev.RunWoken(cause="resumed"))  # nothing left to wait for
    return events


async def pause_run(conn: asyncpg.Connection, store: EventStore, clock: Clock, *,
                    tenant_id: uuid.UUID, run_id: uuid.UUID, actor: str,
                    reason: str | None) -> bool:
    """Pause one run; False when it was paused already."""
    return await _change(conn, store, clock, tenant_id, run_id, actor, reason, pause_events)


async def resume_run(conn: asyncpg.Connection, store: EventStore, clock: Clock, *,
                     tenant_id: uuid.UUID, run_id: uuid.UUID, actor: str,
                     reason: str | None) -> bool:
    """Resume one run; False when it was not paused."""
    return await _change(conn, store, clock, tenant_id, run_id, actor, reason, resume_events)


Decide = Callable[[LockedRun, datetime, str, "str | None"], list[ev.Event]]


async def _change(conn: asyncpg.Connection, store: EventStore, clock: Clock,
                  tenant_id: uuid.UUID, run_id: uuid.UUID, actor: str, reason: str | None,
                  decide: Decide) -> bool:
    _check_reason(reason)
    async with conn.transaction():
        run = await lock_run(conn, tenant_id, run_id)
        return await _append(conn, store, run, decide(run, clock.now(), actor, reason), actor)


async def _append(conn: asyncpg.Connection, store: EventStore, run: LockedRun,
                  events: Sequence[ev.Event], actor: str) -> bool:
    if not events:
        return False
    head = StreamHead.of(run)
    await store.append(conn, [head.next(e, actor, traceparent=run.traceparent)
                              for e in events])
    return True


async def pause_matching(conn: asyncpg.Connection, store: EventStore, clock: Clock, *,
                         tenant_id: uuid.UUID, task: str | None, job_id: uuid.UUID | None,
                         actor: str, reason: str | None, resume: bool = False) -> int:
    """Pause (or resume) the running and suspended runs of a task or a job, at most
    `MAX_MATCHING` at a time; returns how many changed."""
    if task is None and job_id is None:
        raise InvalidInput("name a task or a job_id", errors=[
            {"field": "task", "message": "a task or a job_id is required"}])
    _check_reason(reason)
    changed = 0
    async with conn.transaction():
        ids = await run_store.pausable(conn, tenant_id, task=task, job_id=job_id,
                                       paused=resume, limit=MAX_MATCHING)
        now = clock.now()
        decide: Decide = resume_events if resume else pause_events
        for run in await run_store.lock(conn, ids):
            changed += await _append(conn, store, run, decide(run, now, actor, reason), actor)
    return changed
