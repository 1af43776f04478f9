"""Append to and read from the log. `append` must run inside the caller's transaction: it writes
the events, updates the read models and fills the outbox, so all commit or none do."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from ostinato.archive import (
    BlobCorrupt,
    BlobRef,
    checked,
    goes_to_objects,
    parse_blob_key,
    reference,
    reference_document,
)
from ostinato.archive.sweep import ROOT as SWEEP_ROOT
from ostinato.archive.sweep import sweep_step
from ostinato.bus.topics import Topics
from ostinato.clock import Clock
from ostinato.db.queries import load
from ostinato.domain.errors import BlobUnreadable, ServiceUnavailable, VersionConflict
from ostinato.domain.events import StepCompleted, StepFailed, encode_event, event_type
from ostinato.eventlog import ended, outbox, readmodels
from ostinato.eventlog.records import NewEvent, RecordedEvent
from ostinato.objects import (
    MAX_PAGE,
    LazyObjectStore,
    ObjectMissing,
    ObjectStore,
    ObjectStoreError,
)
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

Q = load("ostinato.eventlog", "eventlog.sql")
_json = msgspec.json.Encoder()
log = get_logger("ostinato.blobs")
BLOB_RETRY_AFTER_SECONDS = 5  # an object store restarting or throttling: ask again soon
MAX_CONCURRENT_OBJECT_CALLS = 32  # a fan-out's thousand chunk payloads: 32 puts at a time


class EventStore:
    def __init__(self, clock: Clock, topics: Topics) -> None:
        self.clock = clock
        self.topics = topics

    async def append(
        self, conn: asyncpg.Connection, events: Sequence[NewEvent]
    ) -> list[RecordedEvent]:
        """Append `events` (each at its expected version) or raise VersionConflict."""
        if not events:
            return []
        if not conn.is_in_transaction():
            raise RuntimeError("EventStore.append must run inside a transaction")
        occurred_at = self.clock.now()
        data = [encode_event(e.event).decode() for e in events]
        try:
            # No savepoint (two round trips per append): a conflict aborts the caller's
            # transaction, which every caller rolls back anyway.
            rows = await conn.fetch(
                Q["append_events"],
                [e.stream_id for e in events],
                [e.version for e in events],
                [e.event.stream_type for e in events],
                [e.tenant_id for e in events],
                [e.event_id for e in events],
                [event_type(e.event) for e in events],
                data,
                [e.actor for e in events],
                [e.epoch for e in events],
                [e.traceparent for e in events],
                occurred_at,
                *outbox.messages(self.topics, events, occurred_at),
                ended.notices(events),
            )
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name == "events_pkey":
                raise VersionConflict(
                    "the stream was changed concurrently; re-read it and try again"
                ) from exc
            raise
        by_id = {row["event_id"]: row for row in rows}  # RETURNING order is not promised
        recorded = [
            RecordedEvent(
                seq=by_id[e.event_id]["seq"], event_id=e.event_id, stream_id=e.stream_id,
                stream_type=e.event.stream_type, version=e.version,
                tenant_id=e.tenant_id, type=event_type(e.event), event=e.event, actor=e.actor,
                epoch=e.epoch, traceparent=e.traceparent, occurred_at=occurred_at,
                recorded_at=by_id[e.event_id]["recorded_at"],
            )
            for e in events
        ]
        await readmodels.apply(conn, recorded)
        metrics.EVENTS_APPENDED.inc(len(recorded))
        return recorded


async def append_step_if(store: EventStore, conn: asyncpg.Connection, e: NewEvent,
                         token: int) -> bool:
    """Append one workflow step's record (StepCompleted / StepFailed) with its read model, in
    ONE statement outside any transaction (`append_step_if` in eventlog.sql: no BEGIN, lock or
    COMMIT round trip), if its run still stands where its writer predicted: at version
    `e.version - 1`, running, under the fencing token `token`. False, nothing written, when it
    does not (the caller decides again on the locked row), or when the event is not such a
    record or notifies (`ended.wakes`). What it writes is what `append` and the projector
    write for the event (`project_step_recorded`); the outbox row too when the event travels."""
    event = e.event
    if not isinstance(event, StepCompleted | StepFailed) or ended.wakes(e):
        return False
    occurred_at = store.clock.now()
    topics, keys, payloads, headers = outbox.messages(store.topics, [e], occurred_at)
    if isinstance(event, StepCompleted):  # a step that returned null stores NULL
        step = (event.seq, event.name, True, None if event.output_ref else event.output,
                event.output_ref, None, None)
        compensable = event.compensable
    else:
        step = (event.seq, event.name, False, None, None, event.error_type, event.message)
        compensable = False
    try:
        row = await conn.fetchrow(
            Q["append_step_if"], e.stream_id, e.version, event.stream_type, e.tenant_id,
            e.event_id, event_type(event), encode_event(event).decode(), e.actor, token,
            e.traceparent, occurred_at, topics, keys, payloads, headers,
            *step, event.attempt, event.tries, event.duration_ms, compensable)
    except asyncpg.UniqueViolationError:
        # the position or the version taken by a writer the run's row did not show: nothing
        # was written (one statement); the locked path decides again
        return False
    if row is None:
        return False
    metrics.EVENTS_APPENDED.inc()
    return True


async def read_stream(
    conn: asyncpg.Connection, stream_id: uuid.UUID, tenant_id: uuid.UUID
) -> list[RecordedEvent]:
    return [RecordedEvent.from_row(r) for r in await conn.fetch(Q["read_stream"], stream_id,
                                                                 tenant_id)]


async def read_stream_page(conn: asyncpg.Connection, stream_id: uuid.UUID,
                           tenant_id: uuid.UUID, after: int, limit: int) -> list[RecordedEvent]:
    """Up to `limit` of the stream's events after version `after`, in order."""
    return [RecordedEvent.from_row(r) for r in await conn.fetch(
        Q["read_stream_page"], stream_id, tenant_id, after, limit)]


async def read_all_after(conn: asyncpg.Connection, after: int, limit: int) -> list[RecordedEvent]:
    return [RecordedEvent.from_row(r) for r in await conn.fetch(Q["read_all_after"], after, limit)]


class BlobObjects:
    """Where this process puts blobs over `inline_max_bytes` (issue 38 item 4): an object store,
    given or opened from its URL at its first use (a process that never meets a large blob
    contacts no store). Installed for the process by `use_blob_objects` (each service at its
    start); none installed: every blob inline, as before object storage."""

    def __init__(self, store: ObjectStore | str, inline_max_bytes: int) -> None:
        if inline_max_bytes < 0:
            raise ValueError("the inline limit of blobs is a number of bytes, at least 0")
        self._handle = LazyObjectStore(store)
        self.inline_max_bytes = inline_max_bytes

    @property
    def store(self) -> ObjectStore:
        return self._handle.store

    async def close(self) -> None:
        await self._handle.close()


_blob_objects: BlobObjects | None = None


def use_blob_objects(objects: BlobObjects | None) -> BlobObjects | None:
    """Install where this process keeps large blobs (None: inline); returns what was there."""
    global _blob_objects
    previous, _blob_objects = _blob_objects, objects
    return previous


def blob_objects() -> BlobObjects | None:
    return _blob_objects


def kept_in_objects(size: int) -> bool:
    """Whether a blob of `size` bytes goes to this process's object store (none: inline)."""
    objects = _blob_objects
    return goes_to_objects(size, objects.inline_max_bytes if objects is not None else None)


def _unavailable(exc: ObjectStoreError, op: str, keys: Sequence[str]) -> ServiceUnavailable:
    metrics.BLOB_OBJECTS.labels(op=op, outcome="unavailable").inc()
    log.warning("object store unavailable for blobs", op=op, error=str(exc), keys=list(keys)[:5])
    return ServiceUnavailable(
        f"the object store that keeps large values cannot be reached ({type(exc).__name__}); "
        f"nothing was recorded: retry after {BLOB_RETRY_AFTER_SECONDS} s",
        retry_after_seconds=BLOB_RETRY_AFTER_SECONDS)


# A put made before its transaction (`stage_blobs`) is trusted if the transaction locks the
# object's row within this long of the first touch: the collector's least grace is 60 s
# (OSTINATO_BLOB_COLLECT_GRACE_SECONDS), so no collector can have deleted the object meanwhile.
CONFIRM_WITHIN = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class StagedBlobs:
    """Objects put before the transaction that references them (`stage_blobs`): each key with
    the moment its `blob_objects` row was touched, before the put."""

    touched: Mapping[str, datetime] = field(default_factory=dict)
    # touched inside the caller's transaction (an audited route's, a Kafka submission's): the
    # rows stay locked until it ends, so no collector can have come between
    held: bool = False


NOTHING_STAGED = StagedBlobs()
_Big = tuple[uuid.UUID, bytes, BlobRef]


def _big(objects: BlobObjects, values: Iterable[tuple[uuid.UUID, bytes]]) -> dict[str, _Big]:
    """The values over the inline limit by object key (one per content)."""
    limit = objects.inline_max_bytes
    found: dict[str, _Big] = {}
    for tenant_id, data in values:
        if goes_to_objects(len(data), limit):
            ref = reference(tenant_id, data)
            found[ref.key] = (tenant_id, data, ref)
    return found


async def _touch(conn: asyncpg.Connection, rows: Sequence[_Big]) -> list[asyncpg.Record]:
    rows = sorted(rows, key=lambda r: (r[0], r[2].sha256))
    return await conn.fetch(Q["touch_blob_objects"], [r[0] for r in rows],
                            [r[2].sha256 for r in rows], [r[2].key for r in rows],
                            [r[2].size for r in rows])


async def _put_all(objects: BlobObjects, rows: Sequence[_Big], outcome: str) -> None:
    """Put each object and await the store's confirmation; the store away is a 503."""
    gate = asyncio.Semaphore(MAX_CONCURRENT_OBJECT_CALLS)

    async def put(key: str, data: bytes) -> None:
        async with gate:
            await objects.store.put(key, data, content_type="application/json")

    try:
        await asyncio.gather(*(put(ref.key, data) for _, data, ref in rows))
    except ObjectStoreError as exc:
        raise _unavailable(exc, "put", [r[2].key for r in rows]) from exc
    metrics.BLOB_OBJECTS.labels(op="put", outcome=outcome).inc(len(rows))
    metrics.BLOB_OBJECT_BYTES.labels(op="put").inc(sum(r[2].size for r in rows))


async def stage_blobs(conn: asyncpg.Connection,
                      values: Iterable[tuple[uuid.UUID, bytes]]) -> StagedBlobs:
    """Put the values ((tenant, JSON bytes)) over the inline limit in the object store BEFORE
    the transaction that references them (`put_blobs(..., staged=...)`): a slow or stalled
    store then holds none of its locks (a run's, a job's). Each object's row is touched first,
    committed on its own (`conn` in no transaction), so the collector leaves the object alone
    for its grace; `put_blobs` checks under the row's lock that it did. Called inside an outer
    transaction (an audited route's), the touch holds the row's lock until that one ends: the
    put still comes before the caller's own locks, not before the outer transaction's. A crash
    or a rollback after the put leaves a row with no reference (the collector's after the
    grace), or, in an outer transaction, no row (the bucket sweep's). The store unavailable: a
    503 and nothing referenced. Nothing over the limit: no statement."""
    objects = _blob_objects
    if objects is None:
        return NOTHING_STAGED
    big = _big(objects, values)
    if not big:
        return NOTHING_STAGED
    held = conn.is_in_transaction()
    rows = await _touch(conn, list(big.values()))
    await _put_all(objects, list(big.values()), "stored")
    return StagedBlobs({r["object_key"]: r["touched_at"] for r in rows}, held)


async def _record_objects(conn: asyncpg.Connection, objects: BlobObjects, big: dict[str, _Big],
                          staged: StagedBlobs) -> None:
    """In the transaction recording the references: lock each object's row (touched), then
    make sure each object is in the store before the references commit. One staged and locked
    within CONFIRM_WITHIN of its first touch is; one a committed reference vouches for is;
    any other (not staged, or its row deleted or late since) is put now, under the lock."""
    missing: dict[str, bool] = {}  # key: its row was inserted (gone since the first touch)
    for r in await _touch(conn, list(big.values())):
        when = staged.touched.get(r["object_key"])
        late = not staged.held and r["touched_at"] - when >= CONFIRM_WITHIN \
            if when is not None else True
        if late or r["inserted"]:
            missing[r["object_key"]] = r["inserted"]
    if not missing:
        return
    ask = [big[k] for k, inserted in missing.items() if not inserted]
    vouched = {r["object_key"] for r in await conn.fetch(
        Q["vouched_blob_objects"], [b[0] for b in ask], [b[2].sha256 for b in ask])} \
        if ask else set()
    if vouched:
        metrics.BLOB_OBJECTS.labels(op="put", outcome="reused").inc(len(vouched))
    todo = [big[k] for k in missing if k not in vouched]
    if todo:
        await _put_all(objects, todo, "stored_in_transaction")


async def put_blobs(
    conn: asyncpg.Connection, items: Sequence[tuple[uuid.UUID, uuid.UUID, bytes]],
    kind: str | Sequence[str] = "payload", *, staged: StagedBlobs = NOTHING_STAGED,
) -> None:
    """Store many (blob_id, tenant_id, json bytes) documents at once, in the caller's
    transaction; `kind` is one of payload, output, logs, step (one for all, or one per item):
    outputs and logs expire. One over the process's inline limit is kept in the object store
    (`BlobObjects`) and its row keeps the reference: put before the transaction by
    `stage_blobs` (`staged`), else now, under the transaction's locks (unless a committed
    reference shows the object is there). The store unavailable is a 503 `ServiceUnavailable`
    before any row is written (the caller's transaction rolls back: nothing accepted by half)."""
    if not items:
        return
    kinds = [kind] * len(items) if isinstance(kind, str) else list(kind)
    objects = _blob_objects
    limit = objects.inline_max_bytes if objects is not None else None
    refs = [reference(t, d) if goes_to_objects(len(d), limit) else None for _, t, d in items]
    big = {r.key: (t, d, r) for (_, t, d), r in zip(items, refs, strict=True) if r is not None}
    if big:
        assert objects is not None
        await _record_objects(conn, objects, big, staged)
    await conn.execute(
        Q["insert_blobs"], [i[0] for i in items], [i[1] for i in items],
        [(reference_document(r) if r else i[2]).decode() for i, r in zip(items, refs,
                                                                           strict=True)],
        [len(i[2]) for i in items], kinds, [r.sha256 if r else None for r in refs],
        [r.key if r else None for r in refs],
    )


async def expire_blobs(conn: asyncpg.Connection, older_than: datetime, limit: int = 5000) -> int:
    """Delete outputs and logs created before `older_than`; returns how many went."""
    status = await conn.execute(Q["expire_blobs"], older_than, limit)
    return int(status.split()[-1])


async def get_blobs(
    conn: asyncpg.Connection, ids: Sequence[uuid.UUID], tenant_id: uuid.UUID | None, *,
    unreadable: set[uuid.UUID] | None = None,
) -> dict[uuid.UUID, Any]:
    """Documents by id; `tenant_id=None` only for callers that already checked the tenant.
    Values kept in the object store are read from it (their tenant's key, checked against the
    reference): one gone or not the bytes named is a 424 `BlobUnreadable`, the store away a
    503 `ServiceUnavailable`; with `unreadable`, such blobs' ids are added to it instead (the
    claim leaves their runs queued rather than failing every run it would hand out)."""
    if tenant_id is None:
        rows = await conn.fetch(Q["get_blobs_any_tenant"], list(ids))
    else:
        rows = await conn.fetch(Q["get_blobs"], list(ids), tenant_id)
    found: dict[uuid.UUID, Any] = {}
    refs: dict[uuid.UUID, tuple[uuid.UUID, BlobRef]] = {}
    for r in rows:
        if r["sha256"] is None:
            found[r["id"]] = msgspec.json.decode(r["data"])
        else:
            refs[r["id"]] = (r["tenant_id"], BlobRef(key=r["object_key"], sha256=r["sha256"],
                                                     size=r["size_bytes"]))
    if refs:
        found |= await read_blob_objects(refs, unreadable)
    return found


async def read_blob_objects(
    refs: Mapping[uuid.UUID, tuple[uuid.UUID, BlobRef]],
    unreadable: set[uuid.UUID] | None = None,
) -> dict[uuid.UUID, Any]:
    """The documents of blobs kept in the object store ({blob id: (tenant, reference)}), each
    object read once however many blobs share it. Also what reads an archived run's blobs.
    `unreadable`: collects the ids of those that cannot be read instead of raising."""
    objects = _blob_objects
    keys = {ref.key: (tenant_id, ref) for tenant_id, ref in refs.values()}
    if objects is None:
        problem = BlobUnreadable(
            "a value is kept in the object store, and this process has none configured "
            "(OSTINATO_OBJECT_STORE_URL)", key=next(iter(keys)))
        if unreadable is None:
            raise problem
        unreadable.update(refs)
        return {}

    async def one(key: str, tenant_id: uuid.UUID, ref: BlobRef) -> Any:
        try:
            if parse_blob_key(key)[0] != tenant_id:
                raise BlobCorrupt("the key is not its tenant's", key=key)
            try:
                data = await objects.store.get(key)
            except ObjectMissing:
                raise BlobCorrupt("the object is gone", key=key) from None
            return msgspec.json.decode(checked(ref, data))
        except (BlobCorrupt, ValueError, msgspec.DecodeError) as exc:
            what = exc.what if isinstance(exc, BlobCorrupt) else f"not readable ({exc})"
            metrics.BLOB_OBJECTS.labels(op="get", outcome="unreadable").inc()
            log.error("blob object unreadable", tenant_id=str(tenant_id), key=key,
                      problem=what)
            raise BlobUnreadable(
                f"a value kept in the object store cannot be read: {what} (key {key}); an "
                "operator restores the object (docs/RETENTION.md)", key=key) from None

    gate = asyncio.Semaphore(MAX_CONCURRENT_OBJECT_CALLS)

    async def gated(key: str, tenant_id: uuid.UUID, ref: BlobRef) -> Any:
        async with gate:
            return await one(key, tenant_id, ref)

    pairs = list(keys.items())
    if unreadable is not None:  # each object on its own: what cannot be read is told apart
        outcomes = await asyncio.gather(*(gated(k, t, r) for k, (t, r) in pairs),
                                        return_exceptions=True)
        by_key: dict[str, Any] = {}
        for (key, _), outcome in zip(pairs, outcomes, strict=True):
            if isinstance(outcome, ObjectStoreError):
                _unavailable(outcome, "get", [key])  # counted and logged
            elif isinstance(outcome, BaseException) and not isinstance(outcome, BlobUnreadable):
                raise outcome
            if isinstance(outcome, BaseException):
                unreadable.update(b for b, (_, ref) in refs.items() if ref.key == key)
            else:
                by_key[key] = outcome
        metrics.BLOB_OBJECTS.labels(op="get", outcome="read").inc(len(by_key))
        return {b: by_key[ref.key] for b, (_, ref) in refs.items() if ref.key in by_key}
    try:
        values = await asyncio.gather(*(gated(k, t, r) for k, (t, r) in pairs))
    except ObjectStoreError as exc:
        raise _unavailable(exc, "get", list(keys)) from exc
    metrics.BLOB_OBJECTS.labels(op="get", outcome="read").inc(len(pairs))
    read = {k: v for (k, _), v in zip(pairs, values, strict=True)}
    return {blob_id: read[ref.key] for blob_id, (_, ref) in refs.items()}


async def pin_blob_objects(conn: asyncpg.Connection,
                           objects: Sequence[tuple[uuid.UUID, str]]) -> None:
    """Keep these blob objects ((tenant, sha256): archive documents reference them) from the
    collector for as long as the archive is kept; in the archiver's removal transaction."""
    if objects:
        await conn.execute(Q["pin_blob_objects"], [o[0] for o in objects],
                           [o[1] for o in objects])


async def _delete_locked(conn: asyncpg.Connection, store: ObjectStore,
                         rows: Sequence[asyncpg.Record], op: str) -> None:
    """Delete the objects of `rows` (tenant_id, sha256, object_key), whose `blob_objects` rows
    this transaction has locked, then those rows: a delete that fails raises (transient for
    the duties' policy) and the transaction rolls back, forgetting nothing."""
    gate = asyncio.Semaphore(MAX_CONCURRENT_OBJECT_CALLS)

    async def delete(key: str) -> None:
        async with gate:
            await store.delete(key)

    try:
        await asyncio.gather(*(delete(r["object_key"]) for r in rows))
    except ObjectStoreError:
        metrics.BLOB_OBJECTS.labels(op=op, outcome="unavailable").inc()
        raise
    await conn.execute(Q["forget_blob_objects"], [r["tenant_id"] for r in rows],
                       [r["sha256"] for r in rows])


async def collect_blob_objects(conn: asyncpg.Connection, store: ObjectStore, grace: timedelta,
                               limit: int = 500) -> int:
    """Delete up to `limit` blob objects nothing references: no `blobs` row (hot), no archive
    document (`archived_at`), nothing touched for `grace`. Each object is deleted under its
    `blob_objects` row's lock, before the row goes, in one transaction: a writer touching one
    waits, then puts it again; a delete that fails leaves every row (the next pass retries).
    Returns how many went."""
    async with conn.transaction():
        rows = await conn.fetch(Q["collectable_blob_objects"], grace, limit)
        if not rows:
            return 0
        await _delete_locked(conn, store, rows, "collect")
    metrics.BLOB_OBJECTS.labels(op="collect", outcome="deleted").inc(len(rows))
    log.info("blob objects collected", count=len(rows),
             tenants=sorted({str(r["tenant_id"]) for r in rows}))
    return len(rows)


async def sweep_blob_objects(conn: asyncpg.Connection, store: ObjectStore, grace: timedelta,
                             after: str | None, limit: int = MAX_PAGE) -> tuple[int, str | None]:
    """One page of the bucket sweep: list up to `limit` keys under `tenants/` after the cursor
    `after`, and delete the blob objects among them that have no `blob_objects` row, no
    `blobs` row naming them and no write for `grace` (the store's last-modified): orphans of
    a put whose transaction rolled back or died without its row (a previous release's writer,
    a put under a transaction's lock, a put that outlived its row's grace). Each orphan gets
    a row in one transaction first, and is deleted under it (`adopt_orphan_blob_objects`): a
    writer about to reference the same content waits, then puts it again. Returns (objects
    deleted, the next page's cursor; None: the pass is over)."""
    page = await store.list_page(SWEEP_ROOT, start_after=after, limit=limit)
    step = sweep_step([o.key for o in page], full=len(page) >= limit)
    if not step.blobs:
        return 0, step.next_after
    info = {o.key: o for o in page}
    async with conn.transaction():
        rows = await conn.fetch(
            Q["adopt_orphan_blob_objects"], [b[1] for b in step.blobs],
            [b[2] for b in step.blobs], [b[0] for b in step.blobs],
            [info[b[0]].size for b in step.blobs],
            [info[b[0]].last_modified for b in step.blobs], grace)
        if not rows:
            return 0, step.next_after
        await _delete_locked(conn, store, rows, "sweep")
    metrics.BLOB_OBJECTS.labels(op="sweep", outcome="deleted").inc(len(rows))
    metrics.BLOB_OBJECT_BYTES.labels(op="sweep").inc(sum(info[r["object_key"]].size
                                                         for r in rows))
    log.info("orphan blob objects swept", count=len(rows),
             tenants=sorted({str(r["tenant_id"]) for r in rows}))
    return len(rows), step.next_after
