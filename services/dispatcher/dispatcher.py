"""The dispatcher: which waiting runs go to their pool's ready topic now (docs/FAIRNESS.md).

Runs wait in the database (`scheduled`, or a retry whose time has come) until a decision admits
them; Kafka messages on `runs.due` and `runs.finished` only wake the dispatcher early. One round
is one transaction under an advisory lock (one decision at a time across instances, so limits
hold globally): read the snapshot, call the pure `decide`, append `RunQueued` for the admitted
runs (the outbox carries them to `runs.ready.<pool>`), record why the others wait, save the
token buckets. A crash anywhere rolls the round back: nothing is lost, nothing is queued twice.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from logging import DEBUG

import asyncpg

from ostinato.clock import Clock
from ostinato.domain.states import RunState, can_transition
from ostinato.eventlog.columns import Queued, append_queued
from ostinato.eventlog.store import EventStore
from ostinato.policy.fairness import ClassConfig, FairState, decide
from ostinato.runtime.duties import Duty
from ostinato.stores import limits, runs
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import get_logger
from ostinato.workers import registry
from ostinato.workers.registry import PoolCapacity, ServedVersion
from services.dispatcher import snapshot
from services.dispatcher.snapshot import DQ, CapacitySource, ServingSource

ACTOR = "dispatcher"
HOLD_REFRESH_SECONDS = 2.0  # a hold whose reason only changed its place in line waits this long
DEPTH_EVERY_SECONDS = 1.0
PRUNE_EVERY_SECONDS = 10.0
log = get_logger("ostinato.dispatcher")
# the states a run is queued from (the lifecycle's table), as the locked rows spell them
QUEUEABLE = frozenset(s.value for s in RunState if can_transition(s, RunState.QUEUED))
RETRY = RunState.RETRY_SCHEDULED.value


def live_workers(ttl: timedelta) -> CapacitySource:
    """Capacity from the worker registry: slots of workers seen within `ttl`."""

    async def source(conn: asyncpg.Connection, db_now: datetime | None) -> list[PoolCapacity]:
        return await registry.live_capacity(conn, db_now, ttl)

    return source


def live_versions(ttl: timedelta) -> ServingSource:
    """What workers seen within `ttl` serve (task versions), from the worker registry."""

    async def source(conn: asyncpg.Connection, db_now: datetime | None) -> list[ServedVersion]:
        return await registry.live_versions(conn, db_now, ttl)

    return source


def fixed_capacity(slots: int, pools: Sequence[str]) -> CapacitySource:
    """Shared capacity of `slots` per pool whatever the workers: for tests and benchmarks of
    the decision alone."""

    async def source(conn: asyncpg.Connection, db_now: datetime | None) -> list[PoolCapacity]:
        return [PoolCapacity(tenant_id=None, pool=p, slots=slots) for p in pools]

    return source


class Dispatcher:
    def __init__(self, pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                 classes: Sequence[ClassConfig], capacity: CapacitySource,
                 candidates: int = 256, key_concurrency: int = 1, prefetch: float = 0.0,
                 on_queued: Callable[[], None] = lambda: None,
                 serving: ServingSource | None = None) -> None:
        self.serving = serving  # None: pinned runs are queued without asking who serves them
        self.pool = pool
        self.store = store
        self.clock = clock
        self.classes = tuple(classes)
        self.capacity = capacity
        self.candidates = candidates
        self.key_concurrency = key_concurrency
        self.prefetch = prefetch
        self.on_queued = on_queued
        self.state = FairState()
        self.instance = uuid.uuid4()  # who wrote the stored fair-queueing memory last
        self._written: dict[uuid.UUID, tuple[str, float]] = {}
        self._depth_at = self._pruned_at = self._explained_at = float("-inf")
        self._left_waiting = False  # the last round saw runs it did not queue

    def duty(self, interval: float) -> Duty:
        """A round (a decision, then housekeeping) on every wake-up (`runs.due`,
        `runs.finished`: its runner's `wake()`) and at least every `interval` seconds."""

        async def round_(now: datetime) -> int:
            queued = await self.run_round()
            await self.housekeeping()
            return queued

        return Duty("dispatch_round", interval, round_)

    async def run_round(self) -> int:
        """One decision; returns how many runs were queued. A round that finds no run waiting
        (asked by one read, before any transaction) decides nothing: half the wake-ups under a
        steady load are a freed slot with no run waiting for one. After a round that left runs
        waiting the question is skipped: its answer is known, and in a burst it cost 1.6 ms a
        round, stepping over the dead entries that queued runs leave at the index's head."""
        started = time.perf_counter()
        now = self.clock.now()
        async with self.pool.acquire() as conn:
            if not self._left_waiting and not await runs.any_dispatchable(conn):
                return 0
            return await self._decide(conn, now, started)

    async def _decide(self, conn: asyncpg.Connection, now: datetime, started: float) -> int:
        async with conn.transaction():
            await conn.execute(DQ["dispatch_lock"])
            self.state, snap = await snapshot.load(conn, now, self.clock.db_now(), self.capacity,
                                                   self.instance, self.state)
            explain = self.clock.monotonic() - self._explained_at >= HOLD_REFRESH_SECONDS
            free = snapshot.free_slots(snap, self.prefetch)
            if free <= 0 and not explain:
                self._left_waiting = True
                return 0  # saturated: nothing to admit, and the reasons are fresh enough
            # A decision admits at most `free` runs per pool; a few more candidates per queue
            # let it skip runs that a limit refuses. Every HOLD_REFRESH_SECONDS, all of them, so
            # every candidate's reason is recorded.
            snap = await snapshot.with_waiting(
                conn, snap, self.candidates if explain else min(self.candidates, free + 16),
                self.serving, self.clock.db_now())
            given = snapshot.inputs(snap, self.key_concurrency, self.prefetch)
            decision = decide(given.waiting, given.pools, self.classes, given.limits,
                              given.buckets, self.state, now, explain=explain)
            queued = await self._queue(conn, decision.admit)
            self._left_waiting = len(given.waiting) + len(given.held) > len(queued)
            admitted = [q.id for q in queued]
            holds = self._changed_holds({**given.held, **decision.held}, given.tenant_of,
                                        admitted)
            buckets = snapshot.bucket_rows(decision.buckets, given.bucket_keys)
            state = decision.state if decision.state != self.state else None
            if holds or admitted or buckets[0] or state is not None:
                await snapshot.save(conn, holds, self.clock.now(), admitted, buckets, state,
                                    self.instance)
        self.state = decision.state
        if explain:
            self._explained_at = self.clock.monotonic()
        metrics.DISPATCH_DECISIONS.inc()
        metrics.DISPATCH_ROUND_SECONDS.observe(time.perf_counter() - started)
        if queued:
            metrics.RUNS_QUEUED.inc(len(queued))
            self.on_queued()
            for q in queued if log.is_enabled_for(DEBUG) else ():
                log.debug("run queued", tenant_id=str(q.tenant_id), run_id=str(q.id))
        return len(queued)

    async def _queue(self, conn: asyncpg.Connection,
                     admitted: Sequence[uuid.UUID]) -> list[Queued]:
        """`RunQueued` for the admitted runs still waiting, in decision order, appended as
        columns (`append_queued`: one statement for the batch's events and read models)."""
        if not admitted:
            return []
        rows = {r.id: r for r in await runs.lock_heads(conn, admitted)}
        queued = []
        for run_id in admitted:  # in decision order
            row = rows.get(run_id)
            if row is None or row.state not in QUEUEABLE:
                continue
            tp = tracing.run_hop("dispatch run", row.traceparent, tenant_id=row.tenant_id,
                                 job_id=row.job_id, run_id=run_id)
            queued.append(Queued(run_id, row.tenant_id, row.version, row.pool,
                                 "retry" if row.state == RETRY else "dispatched", tp))
        await append_queued(self.store, conn, queued, ACTOR)
        return queued

    def _changed_holds(self, held: dict[uuid.UUID, str],
                       tenant_of: dict[uuid.UUID, uuid.UUID],
                       admitted: list[uuid.UUID]) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
        """The (run, tenant, reason) holds to write: those whose reason changed. A reason that
        only moved in line ("behind N runs") is refreshed at most every HOLD_REFRESH_SECONDS, so
        a long backlog is not rewritten on every decision."""
        mono = self.clock.monotonic()
        changed = []
        for run_id, reason in held.items():
            base = reason.split("; behind ", 1)[0]
            last = self._written.get(run_id)
            if last is None or last[0] != base or mono - last[1] >= HOLD_REFRESH_SECONDS:
                changed.append((run_id, tenant_of[run_id], reason))
                self._written[run_id] = (base, mono)
        for run_id in admitted:
            self._written.pop(run_id, None)
        return changed

    async def housekeeping(self) -> None:
        """Queue-depth metrics every second; holds of runs no longer waiting pruned now and
        then."""
        mono = self.clock.monotonic()
        if mono - self._depth_at >= DEPTH_EVERY_SECONDS:
            self._depth_at = mono
            await self.export_depth()
        if mono - self._pruned_at >= PRUNE_EVERY_SECONDS:
            self._pruned_at = mono
            async with self.pool.acquire() as conn:
                await conn.execute(DQ["prune_holds"])
            if len(self._written) > 100_000:
                self._written.clear()

    async def export_depth(self) -> None:
        async with self.pool.acquire() as conn:
            load = await limits.waiting_load(conn)
        now = self.clock.now()
        depth: dict[tuple[str, str, str], int] = {}  # capped tenant label: "other" sums
        oldest: dict[tuple[str, str, str], float] = {}
        for w in load:
            key = (metrics.tenant_label(str(w.tenant_id)), w.priority, w.pool)
            depth[key] = depth.get(key, 0) + w.depth
            oldest[key] = max(oldest.get(key, 0.0), (now - w.oldest).total_seconds())
        metrics.QUEUE_DEPTH.clear()
        metrics.OLDEST_WAITING.clear()
        for (tenant, cls, pool), n in depth.items():
            metrics.QUEUE_DEPTH.labels(tenant=tenant, **{"class": cls}, pool=pool).set(n)
            metrics.OLDEST_WAITING.labels(tenant=tenant, **{"class": cls}, pool=pool).set(
                oldest[tenant, cls, pool])
