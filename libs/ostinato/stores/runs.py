"""The `runs` read model: one run of a tenant, a page of them, and why a waiting run waits (the
API); the locked rows every writer of a run stream appends from; the workers' claims; the
scheduler's retry poll; the dispatcher's waiting candidates; the reconciler's sweeps."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from ostinato.db.queries import load
from ostinato.domain.attributes import AttributeFilter
from ostinato.domain.states import RunState
from ostinato.stores import attributes
from ostinato.stores.rows import many, one

Q = load("ostinato.stores", "runs.sql")


class RunRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    job_id: uuid.UUID
    task: str
    pool: str
    priority: str
    payload_ref: uuid.UUID
    scheduled_for: datetime
    state: str
    attempt: int
    fencing_token: int
    worker_id: str | None
    output_ref: uuid.UUID | None
    last_error: Any
    scheduled_at: datetime | None
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    version: int
    trigger: str
    due_at: datetime | None
    traceparent: str | None
    failures: int
    retry_at: datetime | None
    retry_policy: Any
    timeout_seconds: float | None
    queue_wait_seconds: float | None
    on_queue_wait: str | None
    cancel_requested: bool
    replay_of: uuid.UUID | None
    logs_ref: uuid.UUID | None
    concurrency_key: str | None
    resource: str | None
    steps_done: int  # workflow steps recorded (run_steps)
    wait_reason: str | None  # a suspended run's: timer | signal
    wait_seq: int | None  # the workflow position that waits
    wait_name: str | None
    wait_signal: str | None
    wake_at: datetime | None  # the timer's due time or the signal wait's timeout
    deadline_at: datetime | None  # a suspended workflow's overall deadline
    parent_run_id: uuid.UUID | None  # a workflow's child: its parent run
    parent_notified: bool  # a final child whose parent has been told
    wait_child: uuid.UUID | None  # the child run a suspended workflow waits for
    compensable: bool  # a completed step registered a compensation
    paused: bool  # an operator paused the workflow
    paused_at: datetime | None
    frozen_wake_at: datetime | None  # a paused run's timer, out of the wake poll
    frozen_deadline_at: datetime | None  # a paused run's deadline, likewise
    task_version: str | None  # the handler version of the latest attempt's worker
    pinned: bool  # a started workflow: only workers serving `task_version` may claim it
    payload_version: int | None  # the task's payload schema version at submission
    stuck_version: int | None  # the run's version at its last RunStuck
    completion_overdue: bool  # its completion deadline passed unmet (CompletionOverdue)

    @property
    def waits_for_dispatch(self) -> bool:
        """Scheduled, or a retry whose time has come: the dispatcher decides when it runs."""
        return self.state == RunState.SCHEDULED or (
            self.state == RunState.RETRY_SCHEDULED and self.retry_at is None)


async def by_id(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                run_id: uuid.UUID) -> RunRow | None:
    return one(RunRow, await conn.fetchrow(Q["run_by_id"], run_id, tenant_id))


async def hot_ids(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                  run_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Those of `run_ids` the tenant's hot tables still hold."""
    if not run_ids:
        return set()
    return {r["id"] for r in await conn.fetch(Q["hot_run_ids"], list(run_ids), tenant_id)}


async def page(conn: asyncpg.Connection, tenant_id: uuid.UUID, *, job_id: uuid.UUID | None,
               state: str | None, after: tuple[datetime | None, uuid.UUID | None],
               limit: int, task: str | None = None, pool: str | None = None,
               since: datetime | None = None, until: datetime | None = None,
               priority: str | None = None, error_type: str | None = None,
               where: AttributeFilter | None = None, oldest_first: bool = False) -> list[RunRow]:
    """Latest occurrence first, strictly after the (scheduled_for, id) cursor `after`; `task`,
    `pool`, the priority class, the last attempt's error type (`last_error.type`), a
    scheduled-for range [since, until) and searchable attributes (`where`, not with an error
    type) narrow it further. `oldest_first` (not with `where`): the other way, strictly after
    the cursor in that order."""
    if oldest_first and where:
        raise ValueError("oldest first is not offered with a where filter")
    args = (tenant_id, job_id, state, after, limit, task, pool, since, until, priority,
            error_type, where, oldest_first)
    if where is None and state is None:
        return await _page(conn, *args)
    # planned for these values: an index that suits one value ruins another. A failed,
    # retrying, dead-lettered or cancelled state is read through runs_tenant_state (partial,
    # migration 0053) in the list's order, which only a plan made for the state can use; a
    # plan made for any state (a prepared statement's generic plan, its other filters' `$n IS
    # NULL OR` unresolved) guesses a row or two and sorts every run in it (50,000: 190 ms).
    async with conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        return await _page(conn, *args)


async def _page(conn: asyncpg.Connection, tenant_id: uuid.UUID, job_id: uuid.UUID | None,
                state: str | None, after: tuple[datetime | None, uuid.UUID | None], limit: int,
                task: str | None, pool: str | None, since: datetime | None,
                until: datetime | None, priority: str | None, error_type: str | None,
                where: AttributeFilter | None, oldest_first: bool) -> list[RunRow]:
    """page's statement for its filters."""
    if oldest_first:
        return many(RunRow, await conn.fetch(Q["list_runs_oldest"], tenant_id, job_id, state,
                                             task, pool, priority, since, until, *after, limit,
                                             error_type))
    if where:
        query, args = attributes.list_query(where)
        return many(RunRow, await conn.fetch(query, tenant_id, job_id, state, task, pool,
                                             priority, since, until, *after, limit, *args))
    if (task is None and pool is None and since is None and until is None and priority is None
            and error_type is None):
        return many(RunRow, await conn.fetch(Q["list_runs"], tenant_id, job_id, state, *after,
                                             limit))
    filtered = [tenant_id, job_id, state, task, pool, priority, since, until, *after, limit]
    if error_type is not None:
        return many(RunRow, await conn.fetch(Q["list_runs_by_error_type"], *filtered,
                                             error_type))
    return many(RunRow, await conn.fetch(Q["list_runs_filtered"], *filtered))


class StartLag(msgspec.Struct, frozen=True):
    """One minute of one pool and class: how long its runs waited from due to started."""

    pool: str
    priority: str
    minute: datetime  # the runs' slot, truncated to the minute
    runs: int
    p50: float  # seconds
    p99: float


async def start_lag(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    since: datetime) -> list[StartLag]:
    """The tenant's start lag per pool, class and minute of the runs' slots since `since`."""
    return many(StartLag, await conn.fetch(Q["start_lag_by_minute"], tenant_id, since))


async def waiting_reason(conn: asyncpg.Connection, run: RunRow) -> str | None:
    """Why a run waits: a suspended workflow's timer or signal; for the dispatcher, the reason
    of the last decision that looked at it, or (not looked at yet: deep in a backlog) its place
    in its tenant's queue."""
    if run.state == RunState.SUSPENDED and run.paused:
        left = ""
        if run.frozen_wake_at is not None and run.paused_at is not None:
            left = f", {(run.frozen_wake_at - run.paused_at).total_seconds():g} s of its wait left"
        return f"paused (waiting for {run.wait_reason}{left})"
    if run.state == RunState.SUSPENDED:
        until = f" until {run.wake_at.isoformat()}" if run.wake_at else ""
        if run.wait_reason == "timer":
            return f"timer{until}"
        if run.wait_reason == "child":
            return f"child run {run.wait_child}"
        if run.wait_reason == "fan_out":
            return f"fan-out {run.wait_name!r}: its chunk runs"
        return f"signal {run.wait_signal!r}{until}"
    if not run.waits_for_dispatch:
        return None
    reason = await conn.fetchval(Q["hold_of_run"], run.id, run.tenant_id)
    if reason is not None:
        return reason
    ahead = await conn.fetchval(Q["waiting_position"], run.tenant_id, run.pool, run.priority,
                                run.updated_at, run.id)
    return (f"waiting for the dispatcher; behind {ahead} earlier runs of this tenant in class "
            f"{run.priority} of pool {run.pool}")


class LockedRun(msgspec.Struct, frozen=True):
    """A run as a writer locked it: its head (state, version) and what deciding its next event
    needs."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    job_id: uuid.UUID
    task: str
    pool: str
    priority: str
    state: str
    attempt: int
    fencing_token: int
    payload_ref: uuid.UUID
    scheduled_for: datetime
    due_at: datetime | None
    traceparent: str | None
    version: int
    failures: int
    retry_policy: Any
    cancel_requested: bool
    timeout_seconds: float | None
    queue_wait_seconds: float | None
    on_queue_wait: str | None
    worker_id: str | None
    started_at: datetime | None
    last_error: Any
    steps_done: int
    wait_reason: str | None  # a suspended run's: timer | signal | child
    wait_seq: int | None
    wait_name: str | None
    wait_signal: str | None
    wake_at: datetime | None
    deadline_at: datetime | None
    parent_run_id: uuid.UUID | None
    wait_child: uuid.UUID | None
    compensable: bool
    paused: bool
    paused_at: datetime | None
    frozen_wake_at: datetime | None  # a paused run's timer, out of the wake poll


class ClaimedRun(msgspec.Struct, frozen=True):
    """A queued run a worker's claim locked: what starting its attempt needs."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    job_id: uuid.UUID
    task: str
    pool: str
    state: str
    attempt: int
    fencing_token: int
    payload_ref: uuid.UUID
    scheduled_for: datetime
    due_at: datetime | None
    traceparent: str | None
    timeout_seconds: float | None
    version: int
    steps_done: int
    cancel_requested: bool  # a workflow woken to run its compensations
    retry_policy: Any
    failures: int
    payload_version: int | None  # the task's payload schema version at submission
    awaited: bool  # a parent is told of its end: a fan-out chunk, a workflow's child


class RunHead(msgspec.Struct, frozen=True):
    """A run as the dispatcher locks it to queue it: its head, pool and trace."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    job_id: uuid.UUID
    pool: str
    state: str
    version: int
    traceparent: str | None


class ReportedRun(RunHead, frozen=True):
    """A run as the gateway locks it to record a worker's outcome (`lock_reported`): its head
    and what an outcome reads."""

    attempt: int
    fencing_token: int
    cancel_requested: bool
    failures: int
    timeout_seconds: float | None
    started_at: datetime | None
    parent_run_id: uuid.UUID | None
    retry_policy: Any  # None unless asked for (a failure's retry decision reads it)
    task: str
    trigger: str  # fan_out: a fan-out's chunk, whose end its report may tell the parent


class RunToken(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    state: str
    fencing_token: int


class SuspendedCount(msgspec.Struct, frozen=True):
    wait_reason: str
    n: int


class WakingRun(msgspec.Struct, frozen=True):
    """A suspended run whose timer (or signal-wait timeout), or workflow deadline, is due."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    state: str
    version: int
    traceparent: str | None
    wait_reason: str
    wait_seq: int
    wait_name: str
    wait_signal: str | None
    wake_at: datetime | None
    deadline_at: datetime | None

    def wait_is_due(self, now: datetime) -> bool:
        """The wait's own time came (else only the workflow's deadline did)."""
        return self.wake_at is not None and self.wake_at <= now


class DueRetry(msgspec.Struct, frozen=True):
    id: uuid.UUID
    tenant_id: uuid.UUID
    pool: str
    traceparent: str | None
    version: int
    state: str


class StuckCount(msgspec.Struct, frozen=True):
    state: str
    n: int
    oldest: datetime


class WaitingRun(msgspec.Struct, frozen=True):
    """A run waiting for the dispatcher, as its snapshot sees it."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    pool: str
    priority: str
    task: str
    concurrency_key: str | None
    resource: str | None
    updated_at: datetime
    pinned: bool  # a started workflow: only a worker serving `task_version` may run it
    task_version: str | None


async def lock(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID]) -> list[LockedRun]:
    """Lock the runs (in id order, so concurrent writers cannot deadlock) of any tenant: the
    caller checks the tenant."""
    return many(LockedRun, await conn.fetch(Q["lock_runs"], list(run_ids)))


async def lock_heads(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID]) -> list[RunHead]:
    """`lock`, for a writer that needs only the runs' heads, pools and traces (few columns on
    the dispatcher's hot path)."""
    return many(RunHead, await conn.fetch(Q["lock_run_heads"], list(run_ids)))


async def lock_reported(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID], *,
                        with_policy: bool) -> list[ReportedRun]:
    """`lock`, for recording outcomes: the columns they read; the retry policy only
    `with_policy` (a batch holding a failure)."""
    return many(ReportedRun, await conn.fetch(Q["lock_reported_runs"], list(run_ids),
                                              with_policy))


async def token_of(conn: asyncpg.Connection, run_id: uuid.UUID) -> RunToken | None:
    """A run of any tenant with its current fencing token, unlocked: the caller checks the
    tenant."""
    return one(RunToken, await conn.fetchrow(Q["run_token"], run_id))


async def claim_ready(conn: asyncpg.Connection, tenant_id: uuid.UUID | None,
                      pools: Sequence[str], tasks: Sequence[str] | None, limit: int, *,
                      versions: Mapping[str, str] | None = None,
                      payload_versions: Mapping[str, Sequence[int]] | None = None,
                      ) -> list[ClaimedRun]:
    """Lock up to `limit` queued runs of the pools, oldest first (SKIP LOCKED), of one tenant or
    (None: a shared worker) of any. Pinned runs only of the (task, version) pairs `versions`
    serves; runs with a payload version only if `payload_versions` accepts it (tasks absent
    from it: any)."""
    tasks = None if tasks is None else list(tasks)
    served = dict(versions or {})
    accepts = [(t, v) for t, vs in (payload_versions or {}).items() for v in vs]
    serving = (list(served), list(served.values()), list(payload_versions or {}),
               [t for t, _ in accepts], [v for _, v in accepts])
    if tenant_id is None:
        records = await conn.fetch(Q["claim_ready_runs_any_tenant"], list(pools), tasks, limit,
                                   *serving)
    else:
        records = await conn.fetch(Q["claim_ready_runs"], tenant_id, list(pools), tasks, limit,
                                   *serving)
    return many(ClaimedRun, records)


async def cancel_requested(conn: asyncpg.Connection,
                           run_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of the runs have a cancel requested."""
    return {r["id"] for r in await conn.fetch(Q["cancel_flags"], list(run_ids))}


async def claim_due_retries(conn: asyncpg.Connection, now: datetime | None,
                            limit: int) -> list[DueRetry]:
    return many(DueRetry, await conn.fetch(Q["claim_due_retries"], now, limit))


async def any_retry_due(conn: asyncpg.Connection, now: datetime | None) -> bool:
    """Whether a run's retry is due at `now` (None: the database's now)."""
    return bool(await conn.fetchval(Q["any_retry_due"], now))


async def stuck(conn: asyncpg.Connection, now: datetime | None,
                older_than: timedelta) -> list[StuckCount]:
    """Per waiting state, the runs whose last change is older than `older_than`."""
    return many(StuckCount, await conn.fetch(Q["stuck_runs"], now, older_than))


async def active_counts(conn: asyncpg.Connection,
                        job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Runs not yet final, per job (jobs with none are absent)."""
    return {r["job_id"]: r["active"]
            for r in await conn.fetch(Q["active_runs_of_jobs"], list(job_ids))}


async def slots_taken(conn: asyncpg.Connection, job_id: uuid.UUID, start: datetime,
                      end: datetime) -> set[datetime]:
    """The slots in [start, end) of a job that already have a (non-manual) run."""
    return {r["scheduled_for"]
            for r in await conn.fetch(Q["runs_of_job_between"], job_id, start, end)}


async def timed_out(conn: asyncpg.Connection, now: datetime | None, grace: timedelta,
                    limit: int) -> list[uuid.UUID]:
    """Running attempts past their timeout plus `grace`."""
    return [r["id"] for r in await conn.fetch(Q["timed_out_runs"], now, grace, limit)]


async def queue_wait_expired(conn: asyncpg.Connection, now: datetime | None,
                             limit: int) -> list[uuid.UUID]:
    """Runs not started within their queue-wait deadline."""
    return [r["id"] for r in await conn.fetch(Q["queue_wait_expired"], now, limit)]


async def any_dispatchable(conn: asyncpg.Connection) -> bool:
    """Whether any run waits for a dispatcher decision (scheduled, or a retry whose time came)."""
    return bool(await conn.fetchval(Q["any_dispatchable"]))


async def waiting_candidates(conn: asyncpg.Connection, per_group: int) -> list[WaitingRun]:
    """The oldest `per_group` waiting runs of every (tenant, pool, class)."""
    return many(WaitingRun, await conn.fetch(Q["waiting_candidates"], per_group))


async def claim_wakeups(conn: asyncpg.Connection, now: datetime | None,
                        limit: int) -> list[WakingRun]:
    return many(WakingRun, await conn.fetch(Q["claim_wakeups"], now, limit))


async def any_wakeup_due(conn: asyncpg.Connection, now: datetime | None) -> bool:
    """Whether a suspended run is due to wake at `now` (None: the database's now)."""
    return bool(await conn.fetchval(Q["any_wakeup_due"], now))


async def suspended_counts(conn: asyncpg.Connection) -> dict[str, int]:
    """Suspended workflow runs by what they wait for (timer, signal, child)."""
    return {c.wait_reason: c.n
            for c in many(SuspendedCount, await conn.fetch(Q["suspended_by_reason"]))}


async def overdue_wakeups(conn: asyncpg.Connection, now: datetime | None,
                          older_than: timedelta) -> int:
    """Suspended runs due longer ago than `older_than`: the wake poll is behind."""
    return await conn.fetchval(Q["overdue_wakeups"], now, older_than)


class ChildRun(msgspec.Struct, frozen=True):
    """A workflow's child run, as its parent and the notification of its end see it."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    parent_run_id: uuid.UUID
    task: str
    state: str
    version: int
    traceparent: str | None
    output_ref: uuid.UUID | None
    last_error: Any
    parent_notified: bool
    trigger: str = "child"  # child | fan_out (a chunk) | fan_out_complete (its completion)


async def children(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ChildRun]:
    """The child runs among `ids` that exist (not locked: a parent's lock orders them)."""
    return {c.id: c for c in many(ChildRun, await conn.fetch(Q["children_by_id"], list(ids)))}


async def finished_children(conn: asyncpg.Connection, limit: int) -> list[ChildRun]:
    """Final children whose parent has not been told yet, oldest first (index
    runs_children_done); not locked: the parent is locked first, then the child again."""
    return many(ChildRun, await conn.fetch(Q["finished_children"], limit))


async def any_finished_child(conn: asyncpg.Connection) -> bool:
    """Whether a final child's parent has not been told yet."""
    return bool(await conn.fetchval(Q["any_finished_child"]))


async def lock_children(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> list[ChildRun]:
    """Lock these children, skipping any another scheduler holds."""
    return many(ChildRun, await conn.fetch(Q["lock_children"], list(ids)))


async def lock_free(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID]) -> list[LockedRun]:
    """`lock`, skipping the runs another transaction holds (for a caller whose own locks could
    make waiting a deadlock): the caller checks the tenant and leaves the skipped ones."""
    return many(LockedRun, await conn.fetch(Q["lock_runs_free"], list(run_ids)))


async def lock_ended_chunks(conn: asyncpg.Connection,
                            run_ids: Sequence[uuid.UUID]) -> list[ChildRun]:
    """The fan-out chunk runs among `run_ids` that are final and not told to their parents,
    with their parents' other such chunks (a few of the oldest), locked if free."""
    return many(ChildRun, await conn.fetch(Q["lock_ended_chunks"], list(run_ids)))


async def active_children(conn: asyncpg.Connection,
                          parent_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """The not yet final children of these parents (index runs_children)."""
    return [r["id"] for r in await conn.fetch(Q["active_children"], list(parent_ids))]


async def children_of(conn: asyncpg.Connection, tenant_id: uuid.UUID, parent_id: uuid.UUID,
                      after: uuid.UUID | None, limit: int) -> list[ChildRun]:
    """A parent's children in id order, after the id `after` (GET /v1/runs/{id}/children)."""
    return many(ChildRun, await conn.fetch(Q["children_of"], parent_id, tenant_id, after,
                                           limit))


async def pausable(conn: asyncpg.Connection, tenant_id: uuid.UUID, *, task: str | None,
                   job_id: uuid.UUID | None, paused: bool, limit: int) -> list[uuid.UUID]:
    """A tenant's running and suspended runs of a task or a job, paused or not (a filtered
    pause or resume: an operator's rare call, reading the tenant's in-flight runs)."""
    return [r["id"] for r in await conn.fetch(Q["pausable_runs"], tenant_id, task, job_id,
                                              paused, limit)]


class LongWait(msgspec.Struct, frozen=True):
    tenant_id: uuid.UUID
    reason: str
    n: int


async def suspended_too_long(conn: asyncpg.Connection, now: datetime | None,
                             older_than: timedelta) -> list[LongWait]:
    """Suspended runs waiting for a signal, a child or the resume of a pause that suspended
    them, since longer ago than `older_than` (their last change), by tenant and reason."""
    return many(LongWait, await conn.fetch(Q["suspended_too_long"], now, older_than))


class StuckRuns(msgspec.Struct, frozen=True):
    """One tenant's runs stuck for one reason: how many, and the oldest not yet marked stuck
    in this episode (ids, their versions, details and since when, in parallel lists)."""

    tenant_id: uuid.UUID
    reason: str  # suspended_too_long | child_dead_lettered | no_worker | compensation_failed
    n: int
    new_ids: list[uuid.UUID]
    versions: list[int]
    details: list[str]
    sinces: list[datetime]


@dataclass(frozen=True, slots=True)
class StuckThresholds:
    """How long each kind of wait lasts before it counts as stuck."""

    suspended: timedelta  # a signal, child or paused wait
    child_dead_lettered: timedelta
    unserved: timedelta  # a pinned run whose version no live worker serves
    worker_ttl: timedelta  # a worker seen within this is live


async def stuck_by_reason(conn: asyncpg.Connection, now: datetime | None,
                          limits: StuckThresholds, batch: int) -> list[StuckRuns]:
    """Runs stuck per tenant and reason, with up to `batch` per group to mark."""
    return many(StuckRuns, await conn.fetch(
        Q["stuck_runs_by_reason"], now, limits.suspended, limits.child_dead_lettered,
        limits.unserved, limits.worker_ttl, batch))


class TaskVersionCount(msgspec.Struct, frozen=True):
    task: str
    version: str | None  # None: waiting runs that any version may start
    waiting: int
    running: int
    suspended: int


async def task_version_counts(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                              task: str | None) -> list[TaskVersionCount]:
    """A tenant's runs not final per task and handler version: what draining a version waits
    for."""
    return many(TaskVersionCount, await conn.fetch(Q["task_version_counts"], tenant_id, task))


class UpcomingDue(msgspec.Struct, frozen=True):
    """What falls due in one pool within each of three windows (shortest first)."""

    pool: str
    soon: int
    later: int
    latest: int


async def upcoming_due(conn: asyncpg.Connection, now: datetime | None,
                       windows: tuple[timedelta, timedelta, timedelta]) -> list[UpcomingDue]:
    """Per pool, the job occurrences, retries and workflow timers due within each window."""
    return many(UpcomingDue, await conn.fetch(Q["upcoming_due"], now, *windows))

