"""Tracked bulk operations: create one (freezing its selection), work through it a batch per
transaction, cancel it. The api runs `work_once` as its `operations` duty.

One batch is one transaction: lock the oldest running operation (SKIP LOCKED, so several api
processes share the work), take the next `batch` items after its position, act on them with
the single-item commands' rules (cancels in one lock and one multi-row append,
`runs.cancel_runs`; `runs.rerun` and `jobs.pause_job` one item each, in a savepoint of its
own), record the ones skipped or refused, and move the position. A crash rolls the
whole batch back and the next api to tick does it again from the same position: each item is
acted on once. Retries and replays carry the request key `operation:<id>`, so even a re-run of
the same item would name the same new run."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from ostinato import jobs, runs
from ostinato.clock import Clock
from ostinato.domain.errors import InvalidState, NotFound, OstinatoError
from ostinato.domain.ids import new_id
from ostinato.eventlog.store import EventStore
from ostinato.operations import filters
from ostinato.stores import attributes as attribute_store
from ostinato.stores import operations as op_store
from ostinato.stores.operations import Failure, OperationRow
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger
from ostinato.wire.api import OperationFilter

BATCH = 200  # items per transaction: a crash repeats at most this much work
log = get_logger("ostinato.operations")


async def _declared(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                    f: OperationFilter) -> dict[str, str]:
    """The tenant's search attributes, when the filter has `where` expressions to parse."""
    return await attribute_store.types_of(conn, tenant_id) if f.where else {}


async def count(conn: asyncpg.Connection, *, tenant_id: uuid.UUID, kind: str,
                f: OperationFilter, at_most: int | None = None) -> int:
    """How many items the operation would act on now (the dry run); of runs, at most
    `at_most` (None: all)."""
    return await op_store.count(conn, kind, tenant_id,
                                filters.selection(kind, f, await _declared(conn, tenant_id, f)),
                                at_most)


async def start(conn: asyncpg.Connection, *, tenant_id: uuid.UUID, kind: str, f: OperationFilter,
                actor: str, now: datetime) -> OperationRow:
    """A new operation over what the filter selects at this moment (frozen)."""
    args = filters.selection(kind, f, await _declared(conn, tenant_id, f))
    op_id = new_id()
    async with conn.transaction():
        total = await op_store.create(conn, op_id=op_id, tenant_id=tenant_id, kind=kind,
                                      filter_doc=filters.given(f), args=args, actor=actor,
                                      now=now)
    log.info("operation_created", operation_id=str(op_id), tenant_id=str(tenant_id), kind=kind,
             total=total, actor=actor)
    row = await op_store.by_id(conn, tenant_id, op_id)
    assert row is not None
    return row


async def cancel(conn: asyncpg.Connection, *, tenant_id: uuid.UUID, op_id: uuid.UUID,
                 actor: str, now: datetime) -> OperationRow:
    """Stop after the batch in hand; the items not reached are left as they are."""
    if not await op_store.cancel(conn, tenant_id, op_id, actor=actor, now=now):
        row = await op_store.by_id(conn, tenant_id, op_id)
        if row is None:
            raise NotFound(f"no operation {op_id}")
        raise InvalidState(f"operation {op_id} is already {row.state}")
    log.info("operation_cancelled", operation_id=str(op_id), tenant_id=str(tenant_id),
             actor=actor)
    row = await op_store.by_id(conn, tenant_id, op_id)
    assert row is not None
    return row


async def _act(conn: asyncpg.Connection, store: EventStore, clock: Clock, op: OperationRow,
               item_id: uuid.UUID) -> None:
    key = f"operation:{op.id}"
    if op.kind in ("retry", "replay"):
        await runs.rerun(conn, store, clock, tenant_id=op.tenant_id, run_id=item_id,
                         actor=op.actor, request_key=key,
                         trigger="replay" if op.kind == "replay" else "retry")
    else:
        await jobs.pause_job(conn, store, tenant_id=op.tenant_id, job_id=item_id,
                             actor=op.actor, reason=f"paused by {key}")


async def _act_all(conn: asyncpg.Connection, store: EventStore, clock: Clock, op: OperationRow,
                   item_ids: list[uuid.UUID]) -> dict[uuid.UUID, OstinatoError | None]:
    """Each item's refusal, or None: cancels in one multi-row append (`runs.cancel_runs`), the
    other kinds one command each, each in a savepoint of its own."""
    if op.kind == "cancel":
        answers = await runs.cancel_runs(conn, store, tenant_id=op.tenant_id, run_ids=item_ids,
                                         actor=op.actor)
        return {i: a if isinstance(a, OstinatoError) else None for i, a in answers.items()}
    out: dict[uuid.UUID, OstinatoError | None] = {}
    for item_id in item_ids:
        try:
            await _act(conn, store, clock, op, item_id)
            out[item_id] = None
        except OstinatoError as exc:
            out[item_id] = exc
    return out


async def work_once(pool: asyncpg.Pool, store: EventStore, clock: Clock,
                    batch: int = BATCH) -> int:
    """One batch of the oldest running operation: the items handled (0: nothing to do)."""
    async with pool.acquire() as conn, conn.transaction():
        op = await op_store.claim_running(conn)
        if op is None:
            return 0
        items = await op_store.items_after(conn, op.id, op.position, batch)
        done = 0
        failures: list[Failure] = []
        results = await _act_all(conn, store, clock, op, [i.item_id for i in items])
        for item in items:
            result = results[item.item_id]
            if isinstance(result, InvalidState):  # it finished meanwhile, or is paused already
                failures.append(Failure(item.seq, item.item_id, "skipped", result.detail))
            elif isinstance(result, OstinatoError):
                failures.append(Failure(item.seq, item.item_id, "failed", result.detail))
            else:
                done += 1
        now = clock.now()
        await op_store.advance(conn, op.id, handled=len(items), done=done, failures=failures,
                               now=now)
    skipped = sum(f.outcome == "skipped" for f in failures)
    for outcome, n in (("done", done), ("skipped", skipped),
                       ("failed", len(failures) - skipped)):
        if n:
            metrics.OPERATION_ITEMS.labels(op.kind, outcome).inc(n)
    if op.position + len(items) >= op.total:
        log.info("operation_completed", operation_id=str(op.id), tenant_id=str(op.tenant_id),
                 kind=op.kind, total=op.total, done=op.done + done,
                 skipped=op.skipped + skipped, failed=op.failed + len(failures) - skipped)
    return max(len(items), 1)  # a claimed operation is work done, even when it had no items
