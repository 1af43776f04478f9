"""The scheduler's duties (`duties`, run by `ostinato.runtime.duties`): turn due occurrences
into runs (or recorded skips), hand runs whose retry is due back to the dispatcher, wake
suspended workflow runs whose timer (or signal-wait timeout) is due, tell parents that their
child runs ended (`ostinato.runs.children`), advance DAG runs whose nodes ended or whose start
time came (`ostinato.runs.dags`), and keep the shard leases.

One `fire_due` tick holds the shard leases still current in its transaction, locks a small
batch of due jobs of those shards (`FOR UPDATE SKIP LOCKED` over the partial index on
`next_run_at`) and hands them to `ostinato.jobs.materialise.decide_and_append`, which decides
and appends in the same transaction, each write under the shard's epoch. A poll that leaves
nothing due of its shards (fewer due jobs than a batch, or none at all) has completed a pass
through its instant: remembered in `ShardOwnership.passed` and written by the next lease
renewal (`decided_through`), so the reconciler judges only slots the scheduler has passed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TypeVar

import asyncpg

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain import workflow as wf
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore
from ostinato.jobs.materialise import Waiting, decide_and_append
from ostinato.leases.shard import SHARDS, ShardLeases, ShardOwnership, hold, passed_every_shard
from ostinato.runs import dags as dag_runs
from ostinato.runs.children import notify_parents
from ostinato.runtime.duties import Duty
from ostinato.stores import jobs, runs
from ostinato.telemetry import metrics
from services.scheduler.work import WorkGate

ACTOR = "scheduler"
RETRY_BATCH = 500  # runs whose retry is due, per transaction
WAKE_BATCH = 500  # suspended runs woken, per transaction
CHILD_BATCH = 500  # final children told to their parents, per transaction
DAG_BATCH = 100  # DAG runs advanced (nodes ended, or start time come), per transaction
R = TypeVar("R")


async def fire_due(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, batch_size: int = 100,
    actor: str = ACTOR, waiting: Waiting | None = None,
    ownership: ShardOwnership | None = None, checked: bool = False,
) -> list[ev.RunScheduled]:
    """Decide one batch of due jobs (of the leased shards, when `ownership` is given: writes
    happen only under leases still current in this transaction); returns the runs created.
    `checked`: the caller's read (`WorkGate`) already found a job due."""
    waiting = waiting or Waiting()
    # no ownership (tests, one scheduler): every shard
    shards = list(range(SHARDS)) if ownership is None else ownership.shards()
    if not shards:
        return []
    now = clock.now()
    async with pool.acquire() as conn:
        if not checked and not await jobs.any_due(conn, now):
            # idle: one read, no transaction, no plan of the per-shard poll (and without
            # leases no pass recorded either: that would be a write)
            if ownership is not None:
                ownership.passed_through(now, shards)
            return []
        async with conn.transaction():
            created, passed = await _fire_locked(
                conn, store, clock, now, batch_size=batch_size, actor=actor, waiting=waiting,
                ownership=ownership, shards=shards)
    if passed and ownership is not None:  # committed: the next renewal records the pass
        ownership.passed_through(now, shards)
    return created


async def _fire_locked(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, now: datetime, *,
    batch_size: int, actor: str, waiting: Waiting, ownership: ShardOwnership | None,
    shards: list[int],
) -> tuple[list[ev.RunScheduled], bool]:
    """The runs created, and whether the poll left nothing of `shards` due at `now` (a pass
    completed: fewer due jobs than a batch; those SKIP LOCKED are another transaction's, those
    left out `waiting` are held behind a run on purpose)."""
    due = await jobs.claim_due(conn, now, batch_size, waiting.ids(clock.monotonic()), shards)
    passed = len(due) < batch_size
    if due and ownership is not None:
        # The leases are checked (and held FOR SHARE) only when there is something to write:
        # a poll that found nothing stays a read-only transaction (no lock written, no WAL
        # flush at commit), and jobs of a shard lost meanwhile are left to its new owner.
        held = set((await hold(conn, ownership, clock)).shards())
        due = [j for j in due if j.shard in held]
    created = await decide_and_append(conn, store, clock, due, actor=actor, waiting=waiting,
                                      epochs=None if ownership is None else ownership.epochs)
    metrics.RUNS_CREATED.inc(len(created))
    if passed and ownership is None:  # no lease to carry it: recorded with the decisions
        await passed_every_shard(conn, now)
    return created, passed


async def release_retries(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                          batch_size: int = 500, actor: str = ACTOR,
                          checked: bool = False) -> int:
    """Hand runs whose retry is due to the dispatcher (`RetryDue` on `runs.due`). `checked`:
    the caller's read (`WorkGate`) already found one due."""
    return await _claim_and_append(
        pool, store, clock.now(), None if checked else runs.any_retry_due,
        lambda conn, now: runs.claim_due_retries(conn, now, batch_size),
        lambda rows, now: [StreamHead.of(r).next(ev.RetryDue(pool=r.pool), actor,
                                                 traceparent=r.traceparent) for r in rows])


async def wake_suspended(pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                         batch_size: int = WAKE_BATCH, actor: str = ACTOR,
                         checked: bool = False) -> int:
    """Wake suspended runs whose due time has come: the timer fired (`TimerFired`) or the signal
    wait timed out (`SignalTimedOut`), then `RunWoken` hands the run to the dispatcher; a run
    whose workflow deadline came first is only woken (`RunWoken`, cause deadline): its next
    execution meets the deadline and fails. `checked`: as for `release_retries`."""
    return await _claim_and_append(
        pool, store, clock.now(), None if checked else runs.any_wakeup_due,
        lambda conn, now: runs.claim_wakeups(conn, now, batch_size),
        lambda rows, now: _wake_events(rows, now, actor))


async def _claim_and_append(
    pool: asyncpg.Pool, store: EventStore, now: datetime,
    any_due: Callable[[asyncpg.Connection, datetime], Awaitable[bool]] | None,
    claim: Callable[[asyncpg.Connection, datetime], Awaitable[Sequence[R]]],
    events_of: Callable[[Sequence[R], datetime], list[NewEvent]],
) -> int:
    """One poll that moves due runs: `any_due` first (None: the caller asked), one read without
    a transaction (an idle poll is that alone); then, in one transaction, `claim` locks a batch
    and the events of `events_of` are appended. Returns how many runs were claimed."""
    async with pool.acquire() as conn:
        if any_due is not None and not await any_due(conn, now):
            return 0
        async with conn.transaction():
            rows = await claim(conn, now)
            await store.append(conn, events_of(rows, now))
    return len(rows)


def _wake_events(rows: Sequence[runs.WakingRun], now: datetime, actor: str) -> list[NewEvent]:
    events = []
    for r in rows:
        head = StreamHead.of(r)
        due = r.wake_at if r.wait_is_due(now) else r.deadline_at
        assert due is not None  # the query found one of them due
        record, cause = wf.wake(r.wait_reason, r.wait_is_due(now))  # the step model decides
        if record == "TimerFired":
            events.append(head.next(ev.TimerFired(seq=r.wait_seq, name=r.wait_name, due_at=due),
                                    actor, traceparent=r.traceparent))
        elif record == "SignalTimedOut":
            events.append(head.next(ev.SignalTimedOut(seq=r.wait_seq, name=r.wait_name,
                                                      deadline=due),
                                    actor, traceparent=r.traceparent))
        events.append(head.next(ev.RunWoken(cause=cause), actor, traceparent=r.traceparent))
        metrics.TIMER_LATENESS.observe(max(0.0, (now - due).total_seconds()))
    return events


def duties(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, batch_size: int,
    poll_seconds: float, on_created: Callable[[], None], leases: ShardLeases | None = None,
    dag_rules: dag_runs.Rules | None = None, gate: WorkGate | None = None,
) -> list[Duty]:
    """The scheduler's duties, taking turns (one scheduler transaction at a time): with
    `leases`, their renewal every third of their time to live (handed back on stop; retried at
    least that often after an error); `fire_due` every `poll_seconds`, back to back while
    batches are full, only on the shards leased; the retry release, wake-ups, parents and DAG
    runs at the same pace. Every `fire_due` tick reads `gate` (`services.scheduler.work`:
    whether each of the five has work, in one statement), and the others act on its answer
    (wire `gate.wake_with` to their runners so that they start as soon as it finds their
    work). `on_created` (the relay's wake-up) follows every tick that appended."""
    turn = asyncio.Lock()
    waiting = Waiting()
    gate = gate or WorkGate(clock, max_age=poll_seconds)

    async def fire(now: datetime) -> int:
        with metrics.SCHEDULER_TICK_SECONDS.time():
            through = clock.now()  # the read asks at this instant or later
            if not (await gate.read(pool))["jobs"]:
                if leases is not None:  # nothing due anywhere: a pass over the shards held
                    leases.ownership.passed_through(through, leases.ownership.shards())
                return 0  # idle: that one read, no transaction
            created = await fire_due(pool, store, clock, batch_size=batch_size, waiting=waiting,
                                     ownership=leases.ownership if leases else None,
                                     checked=True)
        if created:
            on_created()
        return len(created)

    def gated(kind: str, batch: int,
              work: Callable[[], Awaitable[int]]) -> Callable[[datetime], Awaitable[int]]:
        async def run_once(now: datetime) -> int:
            if not await gate.has(pool, kind):
                return 0  # by the last read: no statement at all
            handled = await work()
            if handled < batch:
                gate.done(kind)
            if handled:
                on_created()
            return handled
        return run_once

    async def retries() -> int:
        return await release_retries(pool, store, clock, batch_size=RETRY_BATCH, checked=True)

    async def wake() -> int:
        return await wake_suspended(pool, store, clock, batch_size=WAKE_BATCH, checked=True)

    async def tell_parents() -> int:
        async with pool.acquire() as conn:
            return await notify_parents(conn, store, batch_size=CHILD_BATCH, actor=ACTOR,
                                        checked=True)

    async def advance_dags() -> int:
        async with pool.acquire() as conn:
            return await dag_runs.advance_due(conn, store, now=clock.now(),
                                              batch_size=DAG_BATCH, actor=ACTOR,
                                              rules=dag_rules or dag_runs.Rules(),
                                              checked=True)

    found = [Duty("fire_due", poll_seconds, fire, batch=batch_size, turn=turn, paced=True),
             Duty("release_retries", poll_seconds, gated("retries", RETRY_BATCH, retries),
                  batch=RETRY_BATCH, turn=turn),
             Duty("wake_suspended", poll_seconds, gated("wakeups", WAKE_BATCH, wake),
                  batch=WAKE_BATCH, turn=turn),
             Duty("notify_parents", poll_seconds, gated("children", CHILD_BATCH, tell_parents),
                  batch=CHILD_BATCH, turn=turn),
             Duty("advance_dags", poll_seconds, gated("dags", DAG_BATCH, advance_dags),
                  batch=DAG_BATCH, turn=turn)]
    if leases is None:
        return found
    renew_every = leases.ttl.total_seconds() / 3

    async def renew(now: datetime) -> int:
        return len((await leases.refresh()).shards())

    return [Duty("shard_leases", renew_every, renew, max_backoff=renew_every, turn=turn,
                 on_stop=leases.release_all), *found]
