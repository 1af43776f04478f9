"""Job submission, one or many at a time. A batch is validated whole first (every error named
with its item's index, nothing written if any item is bad), then written in one transaction
with multi-row inserts: bulk submission costs a few statements, not a few per job. Payloads are
checked against their tasks' registered schemas (`ostinato.jobs.payloads`, one query per
batch), and the job records the payload version it was checked against."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato import schedules
from ostinato.clock import Clock
from ostinato.dags import targets
from ostinato.domain import attributes
from ostinato.domain import events as ev
from ostinato.domain.errors import (
    IdempotencyConflict,
    InvalidInput,
    PayloadTooLarge,
    UnstorableText,
)
from ostinato.domain.ids import new_id
from ostinato.domain.text import fields_holding_nul
from ostinato.eventlog.records import StreamHead
from ostinato.eventlog.store import EventStore, put_blobs, stage_blobs
from ostinato.jobs import payloads
from ostinato.jobs.request import JobRequest
from ostinato.policy import retry
from ostinato.stores import attributes as attribute_store
from ostinato.stores import calendars as calendar_store
from ostinato.stores import dags as dag_store
from ostinato.stores import jobs as job_store
from ostinato.stores.jobs import JobRow

_json = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Submitted:
    id: uuid.UUID
    created: bool  # False: an earlier job with the same idempotency key
    next_run_at: datetime | None


Fresh = tuple[uuid.UUID, JobRequest, schedules.Schedule, datetime, bytes, dict[str, Any]]


def _limits(request: JobRequest, pool_default: retry.RetryPolicy) -> dict[str, Any]:
    """The job's retry policy and time limits as stored in JobCreated (field errors named)."""
    errors: list[dict[str, str]] = []
    seconds: dict[str, float | None] = {"timeout": None, "queue_wait_timeout": None,
                                        "complete_within": None, "max_staleness": None}
    for name in seconds:
        text = getattr(request, name)
        if text is not None:
            try:
                seconds[name] = schedules.parse_duration(text).total_seconds()
            except (InvalidInput, ValueError) as exc:
                errors.append({"field": name, "message": str(exc)})
    recurring = request.schedule is not None and (request.schedule.cron is not None
                                                  or request.schedule.every is not None)
    if request.max_staleness is not None and not recurring:
        errors.append({"field": "max_staleness", "message": "only a recurring job (cron or "
                       "every) has a staleness; a one-off job declares complete_within"})
    policy = pool_default
    if request.retry is not None:
        try:
            policy = retry.parse_retry(request.retry)
        except InvalidInput as exc:
            errors += exc.errors
    if errors:
        raise InvalidInput("; ".join(e["message"] for e in errors), errors)
    return {"retry": retry.to_document(policy), "timeout_seconds": seconds["timeout"],
            "queue_wait_seconds": seconds["queue_wait_timeout"],
            "on_queue_wait": request.on_queue_wait, "concurrency_key": request.concurrency_key,
            "resource": request.resource,
            "complete_within_seconds": seconds["complete_within"],
            "max_staleness_seconds": seconds["max_staleness"], "owner": request.owner}


def _prefixed(errors: list[dict[str, str]], prefix: str) -> list[dict[str, str]]:
    return [{**e, "field": prefix + e["field"]} for e in errors]


def request_hash(request: JobRequest) -> str:
    """SHA-256 of the request's canonical JSON (keys sorted at every level): what an
    idempotency key stands for."""
    return hashlib.sha256(msgspec.json.encode(msgspec.to_builtins(request),
                                              order="sorted")).hexdigest()


def unstorable_fields(request: JobRequest) -> list[str]:
    """The fields of a request whose strings hold NUL. The payload is not one of them: it is
    kept as bytes (a blob), so any JSON string reaches the worker as sent, NUL included."""
    rest = msgspec.structs.replace(request, payload=None)
    if b"\\u0000" not in _json.encode(rest):  # the common case: no NUL anywhere
        return []
    return fields_holding_nul(msgspec.to_builtins(rest))


def calendar_errors(schedule: schedules.Schedule, known: set[str]) -> list[dict[str, str]]:
    """A schedule naming a calendar the tenant has not defined (job creation and preview)."""
    if not schedule.calendar or schedule.calendar in known:
        return []
    return [{"field": "schedule.calendar", "message": "unknown calendar; define it with "
             f"PUT /v1/calendars/{schedule.calendar}"}]


async def submit_jobs(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    requests: Sequence[JobRequest], pools: Sequence[str], max_payload_bytes: int, actor: str,
    traceparent: str | None = None, field_prefix: str = "jobs[{i}].",
    pool_retry: Mapping[str, retry.RetryPolicy] | None = None,
    classes: Sequence[str] = ("critical", "default", "bulk"),
    payload_schemas: payloads.PayloadSchemas | None = None, _retries: int = 3,
) -> list[Submitted]:
    """Create jobs; one result per request, in order. A repeated idempotency key (earlier, or
    earlier in the same batch, or by a concurrent request) returns the first job with
    created=False (its payload is not checked again); the same key with another request is a
    conflict (409). `payload_schemas`: the process's compiled schemas by default. A string
    holding NUL outside the payload is refused before any statement (`UnstorableText`)."""
    unstorable = [field_prefix.format(i=i) + f
                  for i, request in enumerate(requests) for f in unstorable_fields(request)]
    if unstorable:
        raise UnstorableText(unstorable)
    keys = [r.idempotency_key for r in requests if r.idempotency_key is not None]
    existing = {row.idempotency_key: row for row in
                await job_store.by_idempotency_keys(conn, tenant_id, keys)} if keys else {}
    verdicts = await _check_payloads(conn, tenant_id, requests, existing,
                                     payload_schemas or payloads.schemas)
    names = {r.schedule.calendar for r in requests if r.schedule and r.schedule.calendar}
    known = await calendar_store.existing_names(conn, tenant_id, list(names)) if names else set()
    wanted = {d for d in (_dag_target(r) for r in requests) if isinstance(d, uuid.UUID)}
    dags = await dag_store.existing_ids(conn, tenant_id, list(wanted)) if wanted else set()
    declared = (await attribute_store.types_of(conn, tenant_id)
                if any(r.attributes for r in requests) else {})
    now = clock.now()
    errors: list[dict[str, str]] = []
    too_large = False
    results: list[Submitted | int] = []  # int: index of the earlier item with the same key
    fresh: list[Fresh] = []
    first_with_key: dict[str, int] = {}
    hashes: dict[int, str | None] = {}
    conflicts: list[str] = []
    for i, request in enumerate(requests):
        prefix = field_prefix.format(i=i)
        key = request.idempotency_key
        digest = request_hash(request) if key is not None else None
        if key is not None and key in existing:
            row = existing[key]
            if row.request_hash is not None and row.request_hash != digest:
                conflicts.append(f"{prefix}idempotency_key {key!r}")
            results.append(Submitted(row.id, False, row.next_run_at))
            continue
        if key is not None and key in first_with_key:
            if hashes[first_with_key[key]] != digest:
                conflicts.append(f"{prefix}idempotency_key {key!r}")
            results.append(first_with_key[key])
            continue
        hashes[i] = digest
        item_errors: list[dict[str, str]] = []
        if request.pool not in pools:
            item_errors.append({"field": "pool", "message": f"unknown pool; configured: "
                                                            f"{', '.join(pools)}"})
        target = _dag_target(request)
        if target == "bad" or (isinstance(target, uuid.UUID) and target not in dags):
            item_errors.append({"field": "task", "message": "names no DAG of this tenant; "
                                f"a DAG job's task is {targets.DAG_TASK_PREFIX}<DAG id>"})
        if request.priority not in classes:
            item_errors.append({"field": "priority", "message": "unknown priority class; "
                                f"configured: {', '.join(classes)}"})
        try:
            schedule = schedules.parse_schedule(request.schedule, now=now)
        except InvalidInput as exc:
            item_errors += exc.errors
            schedule = None
        first = schedules.next_occurrence(schedule, None) if schedule else None
        if schedule is not None and first is None:
            item_errors.append({"field": "schedule.end_at", "message": "no occurrence left"})
        if schedule is not None:
            item_errors += calendar_errors(schedule, known)
        limits: dict[str, Any] = {}
        try:
            limits = _limits(request, (pool_retry or {}).get(request.pool, retry.DEFAULT))
        except InvalidInput as exc:
            item_errors += exc.errors
        payload = _json.encode(request.payload)
        if len(payload) > max_payload_bytes:
            too_large = True
            item_errors.append({"field": "payload",
                                "message": f"larger than {max_payload_bytes} bytes"})
        verdict = verdicts.get(i, payloads.Verdict(None, []))
        item_errors += verdict.errors
        limits["payload_version"] = verdict.payload_version
        try:  # searchable attributes, checked against the tenant's declarations
            limits["attributes"] = attributes.normalise(request.attributes, declared)
        except InvalidInput as exc:
            item_errors += exc.errors
        if item_errors:
            errors += _prefixed(item_errors, prefix)
            results.append(Submitted(uuid.UUID(int=0), False, None))
            continue
        assert schedule is not None and first is not None
        job_id = new_id()
        if key is not None:
            first_with_key[key] = i
        fresh.append((job_id, request, schedule, first, payload, limits))
        results.append(Submitted(job_id, True, first + schedules.jitter_offset(schedule, job_id,
                                                                                first)))
    if conflicts:
        raise IdempotencyConflict(
            f"{', '.join(conflicts[:10])} already came with another request: a key names one "
            "request; use a new key for a different one")
    if errors:
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:10])
        if too_large and all(e["field"].endswith("payload") for e in errors):
            raise PayloadTooLarge(detail, errors=errors)
        raise InvalidInput(detail, errors=errors)
    try:
        await _write(conn, store, tenant_id, fresh, actor, traceparent)
    except asyncpg.UniqueViolationError:
        if not first_with_key or _retries <= 0:
            raise
        # A concurrent submission with one of these keys committed first (the write rolled
        # back to its savepoint): decide again; those items are repeats of its jobs now.
        return await submit_jobs(
            conn, store, clock, tenant_id=tenant_id, requests=requests, pools=pools,
            max_payload_bytes=max_payload_bytes, actor=actor, traceparent=traceparent,
            field_prefix=field_prefix, pool_retry=pool_retry, classes=classes,
            payload_schemas=payload_schemas, _retries=_retries - 1)
    return [r if isinstance(r, Submitted) else _repeat(results[r]) for r in results]


def _dag_target(request: JobRequest) -> uuid.UUID | str | None:
    """The DAG a job targets (task `dag:<id>`), "bad" for `dag:` with no id, None for a task."""
    try:
        return targets.dag_of_task(request.task)
    except ValueError:
        return "bad"


async def _check_payloads(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                          requests: Sequence[JobRequest],
                          existing: Mapping[str, job_store.KeyedJob],
                          schemas: payloads.PayloadSchemas) -> dict[int, payloads.Verdict]:
    """The payload verdicts of the items that would create a job (not the repeats of an
    idempotency key, earlier or in this batch), by index."""
    fresh: list[int] = []
    keys: set[str] = set()
    for i, request in enumerate(requests):
        key = request.idempotency_key
        if key is not None and (key in existing or key in keys):
            continue
        if key is not None:
            keys.add(key)
        fresh.append(i)
    found = await schemas.check(conn, tenant_id, [
        (requests[i].task or requests[i].name, requests[i].payload) for i in fresh])
    return dict(zip(fresh, found, strict=True))


def _repeat(first: Submitted | int) -> Submitted:
    assert isinstance(first, Submitted)
    return Submitted(first.id, False, first.next_run_at)


async def _write(conn: asyncpg.Connection, store: EventStore, tenant_id: uuid.UUID,
                 fresh: list[Fresh],
                 actor: str, traceparent: str | None) -> None:
    if not fresh:
        return
    refs = [new_id() for _ in fresh]
    events = [
        StreamHead(job_id, tenant_id).next(ev.JobCreated(
            name=request.name, task=request.task or request.name,
            schedule=schedules.to_document(schedule), payload_ref=ref, pool=request.pool,
            priority=request.priority,
            next_run_at=first + schedules.jitter_offset(schedule, job_id, first),
            next_slot=first, idempotency_key=request.idempotency_key,
            request_hash=request_hash(request) if request.idempotency_key else None, **limits,
        ), actor, traceparent=traceparent)
        for ref, (job_id, request, schedule, first, _, limits) in zip(refs, fresh, strict=True)
    ]
    # large payloads put before the transaction: a stalled store holds none of its locks
    staged = await stage_blobs(conn, [(tenant_id, item[4]) for item in fresh])
    async with conn.transaction():
        await put_blobs(conn, [(ref, tenant_id, item[4]) for ref, item in
                               zip(refs, fresh, strict=True)], staged=staged)
        await store.append(conn, events)


async def submit_job(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    request: JobRequest, pools: Sequence[str], max_payload_bytes: int, actor: str,
    traceparent: str | None = None, pool_retry: Mapping[str, retry.RetryPolicy] | None = None,
    classes: Sequence[str] = ("critical", "default", "bulk"),
) -> tuple[JobRow, bool]:
    """Create one job; returns (job row, created). A repeated idempotency key returns the first
    job with created=False and writes nothing."""
    try:
        [done] = await submit_jobs(conn, store, clock, tenant_id=tenant_id, requests=[request],
                                   pools=pools, max_payload_bytes=max_payload_bytes,
                                   actor=actor, traceparent=traceparent, field_prefix="",
                                   pool_retry=pool_retry, classes=classes)
    except asyncpg.UniqueViolationError:
        # A concurrent submission with the same idempotency key committed first.
        first = None
        if request.idempotency_key is not None:
            first = await job_store.by_idempotency_key(conn, tenant_id, request.idempotency_key)
        if first is None:
            raise
        return first, False
    job = await job_store.by_id(conn, tenant_id, done.id)
    assert job is not None  # created or found in this transaction's snapshot
    return job, done.created
