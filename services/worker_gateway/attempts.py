"""Claim, heartbeat, complete and fail attempts, all batched: one transaction per request.

Every write about an attempt presents its fencing token; the token is checked against the
locked run row (state `running`, same token) inside the transaction. A stale token changes
nothing but appends `StaleWriteRejected` (who tried what) and answers 409 for that item.

`tenant_id` is the worker's scope: a tenant's key sees only that tenant's runs (any other run is
answered 404, as if it did not exist); `None` is a shared worker (admin key) serving every
tenant. Events, blobs, logs and metrics always carry the run's own tenant, from its row.

A lone workflow step (one plain step in the batch: no wait, child, fan-out or deadline, its
output inline) of a run whose last steps this process recorded takes one statement instead of
a transaction of four (issue 44): the process remembers where the run stands after its step
records (`_heads`: the locked row moved by them), decides over that row with the same pure
`record_steps`, and appends with `append_step_if`, which writes only if the run is still at
that version, running, under the step's token (fencing in the same statement). Any other
writer moves the run's version, so a run moved meanwhile (paused, claimed again, another
gateway's step) writes nothing there and is decided again on the locked row, as every other
report is.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from logging import DEBUG
from typing import TypeVar

import asyncpg
import msgspec

from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain.ids import idempotency_key
from ostinato.domain.workflow import StepKind
from ostinato.eventlog.columns import append_started, append_succeeded
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import (
    NOTHING_STAGED,
    EventStore,
    StagedBlobs,
    append_step_if,
    blob_objects,
    get_blobs,
    kept_in_objects,
    put_blobs,
    stage_blobs,
)
from ostinato.leases import attempts as attempt_leases
from ostinato.outcomes import observe
from ostinato.policy import retry
from ostinato.runs import children
from ostinato.stores import attributes as attribute_store
from ostinato.stores import fan_outs, runs, signals, steps
from ostinato.stores.runs import LockedRun, ReportedRun
from ostinato.telemetry import metrics, tracing
from ostinato.telemetry.logging import get_logger
from ostinato.wire import worker as p
from services.worker_gateway.reports import (
    Outcome,
    outcome_blob_values,
    parse_run_id,
    record_outcomes,
    tell_chunk_parents,
    tell_with_ends,
)
from services.worker_gateway.steps import (
    Children,
    kind_of,
    record_steps,
    step_blob_values,
    step_records,
)

_json = msgspec.json.Encoder()
log = get_logger("ostinato.gateway")
R = TypeVar("R", LockedRun, ReportedRun)  # a locked run, whole or as an outcome reads it


async def append_outcomes(store: EventStore, conn: asyncpg.Connection,
                          events: Sequence[NewEvent], finished: Sequence[uuid.UUID],
                          told: Sequence[NewEvent] = ()) -> None:
    """In a report's transaction: the events (and `told`, the `ParentNotified` of fan-out
    chunks they end, `tell_with_ends`), and the end of the leases of the runs that left
    `running`. A batch of completions only (most batches) goes as columns (`append_succeeded`:
    one statement for the events and their read models, a told chunk's row written once)."""
    if events and all(type(e.event) is ev.RunSucceeded for e in events):
        await append_succeeded(store, conn, events, told)
    else:
        await store.append(conn, [*events, *told])
    if finished:
        await attempt_leases.release_leases(conn, list(finished))


class Attempts:
    def __init__(self, pool: asyncpg.Pool, store: EventStore, clock: Clock, *,
                 lease_ttl_seconds: float, on_finished: Callable[[], None] = lambda: None,
                 child_rules: children.ChildRules | None = None) -> None:
        self.on_finished = on_finished
        self.child_rules = child_rules or children.ChildRules()
        self.pool = pool
        self.store = store
        self.clock = clock
        self.ttl = timedelta(seconds=lease_ttl_seconds)
        self._heads: dict[uuid.UUID, LockedRun] = {}  # runs' predicted heads (`_lone_step`)

    async def claim(self, tenant_id: uuid.UUID | None,
                    req: p.ClaimRequest) -> list[p.ClaimedRun]:
        """Lease up to `max_runs` queued runs of this tenant (None: of any tenant, oldest
        first); each gets a higher token."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await runs.claim_ready(conn, tenant_id, req.pools, req.tasks, req.max_runs,
                                          versions=req.versions,
                                          payload_versions=req.payload_versions)
            if not rows:
                return []
            # None (shared worker): the refs come from the claimed rows, so each is its run's.
            # A payload in the object store that cannot be read now (gone, corrupt: counted and
            # alerted; the store away) leaves its run queued; the others are handed out.
            unreadable: set[uuid.UUID] = set()
            payloads = await get_blobs(conn, [r.payload_ref for r in rows], tenant_id,
                                       unreadable=unreadable)
            if unreadable:
                for r in rows:
                    if r.payload_ref in unreadable:
                        log.warning("run left queued: its payload cannot be read",
                                    tenant_id=str(r.tenant_id), run_id=str(r.id),
                                    payload_ref=str(r.payload_ref))
                rows = [r for r in rows if r.payload_ref not in unreadable]
                if not rows:
                    return []
            tokens = [r.fencing_token + 1 for r in rows]
            leases = await attempt_leases.grant_leases(
                conn, [r.id for r in rows], [r.tenant_id for r in rows],
                tokens, req.worker_id, self.clock.db_now(), self.ttl,
            )
            expires = {lease.run_id: lease.expires_at for lease in leases}
            owner = {r.id: r.tenant_id for r in rows}
            for lease in leases:
                if lease.was_live:
                    metrics.DUPLICATE_CLAIMS.inc()
                    log.error("duplicate claim: the run still had a live lease",
                              tenant_id=str(owner[lease.run_id]), run_id=str(lease.run_id),
                              alert="ostinato_duplicate_claims")
            versions, pinning = req.versions or {}, set(req.workflows or ())
            traces = {r.id: tracing.run_hop("claim run", r.traceparent, tenant_id=r.tenant_id,
                                            job_id=r.job_id, run_id=r.id,
                                            attempt=r.attempt + 1)
                      for r in rows}
            await append_started(self.store, conn, [  # as columns: one statement
                StreamHead.of(r).next(
                    ev.RunStarted(attempt=r.attempt + 1, fencing_token=token,
                                  worker_id=req.worker_id, lease_expires_at=expires[r.id],
                                  task_version=versions.get(r.task),
                                  pinned=r.task in pinning),
                    f"worker:{req.worker_id}", epoch=token, traceparent=traces[r.id])
                for r, token in zip(rows, tokens, strict=True)
            ])
        metrics.RUNS_CLAIMED.inc(len(rows))
        started = self.clock.now()
        lags: dict[tuple[uuid.UUID, str], list[float]] = defaultdict(list)
        for r in rows:
            if r.attempt == 0 and r.due_at is not None:
                lags[r.tenant_id, r.pool].append(max(0.0, (started - r.due_at).total_seconds()))
        for (tenant_id, pool), values in lags.items():  # one labelled child per batch and pool
            observe = metrics.SCHEDULE_LAG.labels(tenant=str(tenant_id), pool=pool).observe
            for value in values:
                observe(value)
        for r, token in zip(rows, tokens, strict=True) if log.is_enabled_for(DEBUG) else ():
            log.debug("run claimed", tenant_id=str(r.tenant_id), job_id=str(r.job_id),
                      run_id=str(r.id), attempt=r.attempt + 1, fencing_token=token,
                      worker_id=req.worker_id)
        return [
            p.ClaimedRun(
                run_id=str(r.id), job_id=str(r.job_id), tenant_id=str(r.tenant_id),
                task=r.task, attempt=r.attempt + 1, fencing_token=token,
                lease_expires_at=expires[r.id], lease_ttl_seconds=self.ttl.total_seconds(),
                scheduled_for=r.scheduled_for, idempotency_key=idempotency_key(r.id),
                payload=payloads.get(r.payload_ref), traceparent=traces[r.id],
                timeout_seconds=r.timeout_seconds, steps_done=r.steps_done,
                cancel_requested=r.cancel_requested,
                final_attempt=retry.retries_exhausted(r.retry_policy, r.failures),
                payload_version=r.payload_version, step_starts=True, awaited=r.awaited,
            )
            for r, token in zip(rows, tokens, strict=True)
        ]

    async def heartbeat(self, tenant_id: uuid.UUID | None, worker_id: str,
                        items: Sequence[p.HeartbeatItem]) -> list[p.BatchItemResult]:
        if not items:
            return []
        ids = [parse_run_id(i.run_id) for i in items]
        async with self.pool.acquire() as conn, conn.transaction():
            extended = {
                lease.run_id: lease.expires_at
                for lease in await attempt_leases.extend_leases_if_token(
                    conn, [i or uuid.UUID(int=0) for i in ids],
                    [i.fencing_token for i in items], tenant_id, self.clock.db_now(), self.ttl)
            }
            cancel = await runs.cancel_requested(conn, list(extended)) if extended else set()
            missing = [(i, rid) for i, rid in zip(items, ids, strict=True)
                       if rid is not None and rid not in extended]
            stale = await self._reject_stale(conn, tenant_id, worker_id, "heartbeat", missing)
        results = []
        for item, rid in zip(items, ids, strict=True):
            if rid in extended:
                results.append(p.BatchItemResult(run_id=item.run_id, kind="heartbeat", status=200,
                                                 lease_expires_at=extended[rid],
                                                 cancel_requested=rid in cancel))
            else:
                results.append(_failed_item(item.run_id, "heartbeat", stale.get(rid)))
        return results

    async def steps_started(self, tenant_id: uuid.UUID | None,
                            items: Sequence[p.StepStartedItem]) -> None:
        """Workflow steps that began executing: kept on their leases (fenced by token) as the
        runs' running steps; one statement for the batch, none without items. No result: an
        item about an unknown run or an older attempt writes nothing."""
        known = [(i, rid) for i in items if (rid := parse_run_id(i.run_id)) is not None]
        if not known:
            return
        async with self.pool.acquire() as conn:
            await attempt_leases.step_started(
                conn, [rid for _, rid in known], [i.fencing_token for i, _ in known],
                [i.seq for i, _ in known], [i.name for i, _ in known],
                [i.age_ms for i, _ in known], self.clock.db_now(), tenant_id)

    async def record(self, tenant_id: uuid.UUID | None, worker_id: str,
                     items: Sequence[Outcome]) -> list[p.BatchItemResult]:
        """Record completions, failures and releases; one result per item, in order."""
        if not items:
            return []
        async with self.pool.acquire() as conn:
            staged = await _stage(conn, tenant_id, outcome_blob_values(items)
                                  if blob_objects() is not None else [])
            async with conn.transaction():
                ids = [o.run_id for o in items if o.run_id is not None]
                rows = _visible(await runs.lock_reported(
                    conn, ids, with_policy=any(o.kind == "fail" for o in items)), tenant_id)
                done = record_outcomes(rows, worker_id, items, self.clock.now())
                await put_blobs(conn, [b[:3] for b in done.blobs], [b[3] for b in done.blobs],
                                staged=staged)
                with_ends = await tell_with_ends(conn, rows, done.events)
                await append_outcomes(self.store, conn, done.events, done.finished,
                                      with_ends.events)
                await tell_chunk_parents(conn, self.store, rows, done.finished,
                                         self.clock.now(), with_ends)
        self._after(done.events, done.finished, rows)
        return done.results

    async def release_held(self, tenant_id: uuid.UUID | None, worker_id: str) -> int:
        """A worker's goodbye (its last request, once it finished or released every run it
        knew of): the leases still in its name are runs whose claim answer it never read, a
        claim its stop cut short after the gateway had granted it. They go back to the queue
        now (`LeaseReleased`, each fenced by its token), not at their leases' expiry. Returns
        how many were released."""
        async with self.pool.acquire() as conn:
            held = await attempt_leases.leases_of_worker(conn, worker_id, tenant_id)
        if not held:
            return 0
        results = await self.record(tenant_id, worker_id, [
            Outcome(lease.run_id, str(lease.run_id), lease.fencing_token, "release")
            for lease in held])
        released = sum(r.status == 200 for r in results)
        log.warning("runs released at the worker's goodbye: claimed for it, never read by it",
                    worker_id=worker_id, released=released)
        return released

    async def steps(self, tenant_id: uuid.UUID | None, worker_id: str,
                    items: Sequence[p.StepItem]) -> list[p.BatchItemResult]:
        """Record workflow steps (`steps.py`); one result per item, in order."""
        if not items:
            return []
        if len(items) == 1 and (fast := await self._lone_step(tenant_id, worker_id,
                                                               items[0])) is not None:
            return fast
        return await self._steps(tenant_id, worker_id, items)

    async def _lone_step(self, tenant_id: uuid.UUID | None, worker_id: str,
                         item: p.StepItem) -> list[p.BatchItemResult] | None:
        """A plain step of a run whose head this process predicts (its last step recorded
        here): decided over the predicted row, appended in one statement that holds only if
        the run is still there (`append_step_if`). None: take the locked path."""
        rid = parse_run_id(item.run_id)
        row = self._heads.get(rid) if rid is not None else None
        if (row is None or row.fencing_token != item.fencing_token or item.wait is not None
                or item.child is not None or item.fan_out is not None
                or item.deadline is not None or kind_of(item) is not StepKind.STEP
                or (tenant_id is not None and row.tenant_id != tenant_id)):
            return None
        done = record_steps({row.id: row}, worker_id, [item])
        if len(done.events) != 1 or done.blobs or done.finished \
                or not isinstance(done.events[0].event, ev.StepCompleted | ev.StepFailed):
            return None
        async with self.pool.acquire() as conn:
            if not await append_step_if(self.store, conn, done.events[0], item.fencing_token):
                self._heads.pop(row.id, None)
                return None
        self._predict(row, done.events)
        self._after(done.events, done.finished)
        return done.results

    def _predict(self, row: LockedRun, events: Sequence[NewEvent]) -> None:
        """Remember where the run stands after `events` (all step records) were committed."""
        last = events[-1].event
        assert isinstance(last, ev.StepCompleted | ev.StepFailed)
        self._heads.pop(row.id, None)
        while len(self._heads) >= 10_000:
            del self._heads[next(iter(self._heads))]
        self._heads[row.id] = msgspec.structs.replace(
            row, version=events[-1].version, steps_done=max(row.steps_done, last.seq + 1),
            compensable=row.compensable or (isinstance(last, ev.StepCompleted)
                                            and last.compensable))

    async def _steps(self, tenant_id: uuid.UUID | None, worker_id: str,
                     items: Sequence[p.StepItem]) -> list[p.BatchItemResult]:
        ids = [i for i in (parse_run_id(item.run_id) for item in items) if i is not None]
        waits = [i.wait for i in items if i.wait is not None]
        timed = waits or any(i.deadline is not None or i.child is not None
                             or i.fan_out is not None for i in items)
        async with self.pool.acquire() as conn:
            staged = await _stage(conn, tenant_id, step_blob_values(items)
                                  if blob_objects() is not None else [])
            async with conn.transaction():
                rows = _visible(await runs.lock(conn, ids), tenant_id)
                now = pending = None
                if timed:
                    now = self.clock.db_now() or await signals.database_now(conn)
                    names = [w.signal for w in waits if w.signal]
                    pending = await signals.pending(conn, list(rows), names) if names else {}
                    pending = await _with_payloads(conn, pending)
                upserting = {rows[rid].tenant_id for item in items
                             if kind_of(item) is StepKind.ATTRIBUTES
                             and (rid := parse_run_id(item.run_id)) in rows}
                declared = (await attribute_store.types_of_tenants(conn, list(upserting))
                            if upserting else None)
                done = record_steps(rows, worker_id, items, now, pending,
                                    await self._children(conn, rows, items), declared)
                await put_blobs(conn, done.payloads, staged=staged)
                await put_blobs(conn, done.blobs, "step", staged=staged)
                await append_outcomes(self.store, conn, done.events, done.finished)
                await tell_chunk_parents(conn, self.store, rows, done.finished,
                                         self.clock.now())
        for rid, row in rows.items():
            mine = [e for e in done.events if e.stream_id == rid]
            if mine and not done.finished and all(
                    isinstance(e.event, ev.StepCompleted | ev.StepFailed) for e in mine):
                self._predict(row, mine)
            else:
                self._heads.pop(rid, None)
        self._after(done.events, done.finished)
        return done.results

    async def _children(self, conn: asyncpg.Connection, rows: Mapping[uuid.UUID, LockedRun],
                        items: Sequence[p.StepItem]) -> Children | None:
        """For the child and fan-out steps among `items`: the children and fan-outs that exist
        already (a resent report, a re-execution), and the outputs of the final children."""
        ids = [children.child_run_id(rid, i.seq) for i in items if i.child is not None
               and (rid := parse_run_id(i.run_id)) is not None and rid in rows]
        fanning = [rid for i in items if i.fan_out is not None
                   and (rid := parse_run_id(i.run_id)) is not None and rid in rows]
        if not ids and not fanning:
            return None
        existing = await runs.children(conn, ids) if ids else {}
        outputs = await children.outputs_of(conn, list(existing.values())) if existing else {}
        return Children(self.child_rules, existing, outputs,
                        await fan_outs.of_parents(conn, fanning))

    def _after(self, events: Sequence[NewEvent], finished: Sequence[uuid.UUID],
               rows: Mapping[uuid.UUID, LockedRun | ReportedRun] | None = None) -> None:
        """After the commit: slots freed wake the claim loop; metrics and log lines (the run
        duration from the locked rows' `started_at`, when the report had them)."""
        if finished:
            self.on_finished()
        now = self.clock.now()
        succeeded: Counter[uuid.UUID] = Counter()
        durations: dict[tuple[uuid.UUID, str, str], list[float]] = defaultdict(list)
        debug = log.is_enabled_for(DEBUG)
        for e in events:
            if isinstance(e.event, ev.RunSucceeded):  # most reports: counted per tenant below
                succeeded[e.tenant_id] += 1
                if debug:
                    log.debug("run succeeded", tenant_id=str(e.tenant_id),
                              run_id=str(e.stream_id), attempt=e.event.attempt)
            else:
                _observe(e)
            row = rows.get(e.stream_id) if rows else None
            if row is not None and row.started_at is not None \
                    and isinstance(e.event, ev.RunSucceeded | ev.RunFailed):
                outcome = "succeeded" if isinstance(e.event, ev.RunSucceeded) else "failed"
                durations[e.tenant_id, row.pool, outcome].append(
                    max(0.0, (now - row.started_at).total_seconds()))
        # One labelled child per batch and label set, not one lookup per run.
        for tenant_id, n in succeeded.items():
            metrics.RUNS_COMPLETED.labels(tenant=str(tenant_id), outcome="succeeded").inc(n)
        for (tenant_id, pool, outcome), values in durations.items():
            observe = metrics.RUN_DURATION.labels(tenant=str(tenant_id), pool=pool,
                                                  outcome=outcome).observe
            for value in values:
                observe(value)

    async def recorded_steps(self, tenant_id: uuid.UUID | None, run_id: str,
                             req: p.StepsRequest) -> p.StepsResponse | int:
        """A page of the run's recorded steps for the attempt holding its lease, or the status
        refusing it (404 unknown run, 409 another attempt's token)."""
        rid = parse_run_id(run_id)
        if rid is None:
            return 404
        async with self.pool.acquire() as conn:
            row = await runs.token_of(conn, rid)
            if row is None or (tenant_id is not None and row.tenant_id != tenant_id):
                return 404
            if row.fencing_token != req.fencing_token:
                return 409
            page = await steps.page(conn, row.tenant_id, rid, after=req.after, limit=req.limit)
            refs = [s.output_ref for s in page if s.output_ref is not None]
            blobs = await get_blobs(conn, refs, row.tenant_id) if refs else {}
        return step_records(page, blobs)

    async def _reject_stale(
        self, conn: asyncpg.Connection, tenant_id: uuid.UUID | None, worker_id: str,
        operation: str,
        attempts: Sequence[tuple[p.HeartbeatItem, uuid.UUID]],
    ) -> dict[uuid.UUID, int]:
        """Record StaleWriteRejected for runs that exist; returns run id → current token."""
        if not attempts:
            return {}
        rows = _visible(await runs.lock(conn, [a[1] for a in attempts]), tenant_id)
        current: dict[uuid.UUID, int] = {}
        heads = {rid: StreamHead.of(row) for rid, row in rows.items()}
        events = []
        for item, rid in attempts:
            row = rows.get(rid)
            if row is None:
                continue
            events.append(heads[rid].next(
                ev.StaleWriteRejected(operation=operation, presented_token=item.fencing_token,
                                      current_token=row.fencing_token, worker_id=worker_id),
                f"worker:{worker_id}", epoch=item.fencing_token))
            current[rid] = row.fencing_token
        await self.store.append(conn, events)
        for e in events:
            _log_stale(e.tenant_id, e.stream_id, e.event)  # type: ignore[arg-type]
        return current


async def _with_payloads(conn: asyncpg.Connection,
                         pending: dict[tuple[uuid.UUID, str], signals.PendingSignal],
                         ) -> dict[tuple[uuid.UUID, str], signals.PendingSignal]:
    """Pending signals with the payloads kept in the blob store put back (their events keep
    the reference; the workflow gets the payload)."""
    kept = [s for s in pending.values() if s.payload_ref is not None]
    if not kept:
        return pending
    docs = await get_blobs(conn, [s.payload_ref for s in kept if s.payload_ref], None)
    return {k: s if s.payload_ref is None else msgspec.structs.replace(
        s, payload=docs.get(s.payload_ref)) for k, s in pending.items()}


async def _stage(conn: asyncpg.Connection, tenant_id: uuid.UUID | None,
                 values: Sequence[tuple[uuid.UUID, bytes]]) -> StagedBlobs:
    """Put a report's values over the inline limit in the object store before its transaction
    locks the runs (`stage_blobs`): a stalled store holds no run's lock. Each under its run's
    tenant (the worker's key's, or read unlocked from the run: a run of another tenant is
    refused by the transaction, and its object is the collector's after the grace)."""
    big = [(rid, data) for rid, data in values if kept_in_objects(len(data))]
    if not big:
        return NOTHING_STAGED
    tenants: dict[uuid.UUID, uuid.UUID] = {}
    for rid in {rid for rid, _ in big}:
        if tenant_id is not None:
            tenants[rid] = tenant_id
        elif (token := await runs.token_of(conn, rid)) is not None:
            tenants[rid] = token.tenant_id
    return await stage_blobs(conn, [(tenants[rid], data) for rid, data in big if rid in tenants])


def _visible(rows: Sequence[R], tenant_id: uuid.UUID | None) -> dict[uuid.UUID, R]:
    """The locked rows this worker may act on: its tenant's, or all for a shared worker."""
    return {r.id: r for r in rows if tenant_id is None or r.tenant_id == tenant_id}


def _observe(e: NewEvent) -> None:
    """Metrics and log lines of one recorded event other than a success (`_after`)."""
    ids = {"tenant_id": str(e.tenant_id), "run_id": str(e.stream_id)}
    tenant = metrics.tenant_label(str(e.tenant_id))
    match e.event:
        case ev.RunFailed(attempt=attempt, error_type=error_type):
            metrics.RUNS_COMPLETED.labels(tenant=tenant, outcome="failed").inc()
            log.info("attempt failed", **ids, attempt=attempt, error_type=error_type)
        case ev.StaleWriteRejected() as rejected:
            _log_stale(e.tenant_id, e.stream_id, rejected)
        case ev.StepCompleted():
            metrics.WORKFLOW_STEPS.labels(outcome="completed").inc()
        case ev.StepFailed(name=name, error_type=error_type):
            metrics.WORKFLOW_STEPS.labels(outcome="failed").inc()
            log.info("workflow step failed", **ids, step=name, error_type=error_type)
        case ev.RunSuspended(reason=reason, name=name, wake_at=wake_at):
            metrics.WORKFLOW_SUSPENSIONS.labels(reason=reason).inc()
            log.debug("workflow suspended", **ids, step=name, reason=reason,
                      wake_at=wake_at.isoformat() if wake_at else None)
        case _:
            observe(e.tenant_id, e.stream_id, e.event)


def _log_stale(tenant_id: uuid.UUID, run_id: uuid.UUID, e: ev.StaleWriteRejected) -> None:
    metrics.STALE_WRITES_REJECTED.inc()
    log.warning("stale write rejected", tenant_id=str(tenant_id), run_id=str(run_id),
                operation=e.operation, presented_token=e.presented_token,
                current_token=e.current_token, worker_id=e.worker_id)


def _failed_item(raw_run_id: str, kind: str, current_token: int | None) -> p.BatchItemResult:
    if current_token is None:
        return p.BatchItemResult(run_id=raw_run_id, kind=kind,  # type: ignore[arg-type]
                                 status=404, detail="no such run for this tenant")
    return p.BatchItemResult(
        run_id=raw_run_id, kind=kind, status=409,  # type: ignore[arg-type]
        detail=f"stale fencing token: the lease is held with token {current_token} "
               "or the run is no longer running",
    )

