"""Editing a job in place (PATCH /v1/jobs/{id}): same id, same history, one `JobUpdated` event.

The rules (docs/SCHEDULES.md, "Editing a job"):

- **Which occurrences a new schedule owns.** The edit's switch instant is the earlier of the
  edit's time and the job's next undecided slot (`switch_instant`). Slots before it were the
  old schedule's (fired, skipped or, for a paused job, left to the resume); the new schedule's
  occurrences count from it (its `start_at` is moved up to it; an `every` keeps its anchor, so
  pass `start_at` to keep a phase). A slot the old schedule had due but the scheduler had not
  decided yet is decided by the new schedule: fired if the new schedule has it, else never
  expected. So no slot is fired twice (every fired slot lies before the switch) and none the
  new schedule has from the switch on is left out (the scheduler and the reconciler both read
  the new schedule from there).
- **Runs already created** keep the payload, pool, priority and limits they were created with,
  and run at their slot even when the new schedule has no such slot (cancel them with
  POST /v1/runs/{id}/cancel). With `apply_to_scheduled`, those still waiting to be dispatched
  (state `scheduled`) take the new settings (`RunAmended` each, in the edit's transaction);
  runs already queued, running or waiting for a retry keep theirs.
- **Concurrency.** The job's row is locked for the edit, and `if_match` (the definition
  version the caller read: the API's ETag) must still be current, else `PreconditionFailed`
  (412). The scheduler's due poll skips a locked job (SKIP LOCKED) and reads the new row after
  the commit: it keeps no schedule of its own between polls.
- **Dry run** decides everything the same way and appends nothing.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato import schedules
from ostinato.clock import Clock
from ostinato.domain import events as ev
from ostinato.domain.errors import (
    Conflict,
    InvalidInput,
    InvalidState,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    UnstorableText,
)
from ostinato.domain.ids import new_id
from ostinato.domain.text import fields_holding_nul
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import (
    NOTHING_STAGED,
    EventStore,
    get_blobs,
    put_blobs,
    stage_blobs,
)
from ostinato.jobs import payloads
from ostinato.jobs.submit import calendar_errors
from ostinato.policy import retry
from ostinato.stores import calendars as calendar_store
from ostinato.stores import job_edits
from ostinato.stores import jobs as job_store
from ostinato.stores.jobs import JobRow
from ostinato.wire.api import JobUpdateRequest

_json = msgspec.json.Encoder()
UNSET = msgspec.UNSET
# Request fields that are not settings of the job: what to do, not what to change.
CONTROLS = ("reason", "apply_to_scheduled", "dry_run", "preview_count")
# Duration settings: request field -> JobRow attribute (seconds)
DURATIONS = {"timeout": "timeout_seconds", "queue_wait_timeout": "queue_wait_seconds",
             "complete_within": "complete_within_seconds",
             "max_staleness": "max_staleness_seconds"}


@dataclasses.dataclass(frozen=True, slots=True)
class Edited:
    """What an edit did (or, `dry_run`, would do): the job before and after (`after` as the
    projection will hold it), the fields that changed, the definition versions, the switch
    instant of a new schedule and the runs amended."""

    before: JobRow
    after: JobRow
    payload: Any
    changed: list[str]
    version_before: int
    version: int
    dry_run: bool
    switch_at: datetime | None
    runs_amended: int


def parse_if_match(header: str | None) -> int | None:
    """The definition version an If-Match names: `"3"`, `W/"3"` or `3`; None for no header or
    `*` (any version). Anything else is a 400-class InvalidInput naming the header."""
    if header is None or header.strip() == "*":
        return None
    text = header.strip().removeprefix("W/").strip('"')
    if not text.isdigit() or len(text) > 9:
        raise InvalidInput("If-Match must name the job's version as its ETag does, e.g. \"3\"",
                           errors=[{"field": "If-Match", "message": f"not a version: {header!r}"}])
    return int(text)


def etag(version: int) -> str:
    """The ETag of a job at definition version `version` (a strong validator)."""
    return f'"{version}"'


def switch_instant(now: datetime, next_slot: datetime | None) -> datetime:
    """Where a new schedule takes over: the edit's instant, or the job's next slot when that
    slot is already due and undecided (the scheduler is behind, or the job is paused). Pure."""
    return now if next_slot is None else min(now, next_slot)


def switched(s: schedules.Schedule, at: datetime) -> schedules.Schedule:
    """`s` owning only its occurrences from `at` on: its start moved up to `at` (an `every`
    keeps its anchor, hence its phase). Pure."""
    return s if s.start_at >= at else dataclasses.replace(s, start_at=at)


def same_schedule(old: Mapping[str, Any], new: Mapping[str, Any], *, start_given: bool) -> bool:
    """Whether a schedule sent again is the one the job has: its start and anchor compared only
    when the request named a start (else they are the edit's instant by default). Pure."""
    ignored = set() if start_given else {"start_at", "anchor"}
    return ({k: v for k, v in old.items() if k not in ignored}
            == {k: v for k, v in new.items() if k not in ignored})


def given_fields(patch: JobUpdateRequest) -> list[str]:
    """The settings a patch names (controls such as `reason` excluded), in field order."""
    return [f for f in patch.__struct_fields__
            if f not in CONTROLS and getattr(patch, f) is not UNSET]


def _seconds(name: str, value: str | None, errors: list[dict[str, str]]) -> float | None:
    if value is None:
        return None
    try:
        seconds = schedules.parse_duration(value).total_seconds()
    except (InvalidInput, ValueError) as exc:
        errors.append({"field": name, "message": str(exc)})
        return None
    if seconds <= 0:
        errors.append({"field": name, "message": "must be longer than 0s"})
    return seconds


async def update_job(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    job_id: uuid.UUID, patch: JobUpdateRequest, actor: str, pools: Sequence[str],
    classes: Sequence[str], max_payload_bytes: int, if_match: int | None = None,
    dry_run: bool = False, pool_retry: Mapping[str, retry.RetryPolicy] | None = None,
    payload_schemas: payloads.PayloadSchemas | None = None,
) -> Edited:
    """Edit the job (module docstring); `dry_run` (or `patch.dry_run`) appends nothing.
    Raises NotFound (not this tenant's), PreconditionFailed (stale `if_match`), InvalidState
    (deleted), InvalidInput (an empty patch, or each bad field named)."""
    for attempt in range(3):
        try:
            return await _update_once(
                conn, store, clock, tenant_id=tenant_id, job_id=job_id, patch=patch,
                actor=actor, pools=pools, classes=classes, max_payload_bytes=max_payload_bytes,
                if_match=if_match, dry_run=dry_run, pool_retry=pool_retry,
                payload_schemas=payload_schemas)
        except (asyncpg.DeadlockDetectedError, asyncpg.UniqueViolationError):
            # With apply_to_scheduled, a run locked here may be dispatched at the same moment
            # (the dispatcher appends RunQueued, then waits for the run's row): one of the two
            # transactions is rolled back (to this savepoint). Decide again: the run is queued
            # now and keeps its settings.
            if not patch.apply_to_scheduled or attempt == 2:
                raise Conflict(f"job {job_id}'s runs were being dispatched during the edit; "
                               "send it again") from None
    raise AssertionError("unreachable")


async def _update_once(
    conn: asyncpg.Connection, store: EventStore, clock: Clock, *, tenant_id: uuid.UUID,
    job_id: uuid.UUID, patch: JobUpdateRequest, actor: str, pools: Sequence[str],
    classes: Sequence[str], max_payload_bytes: int, if_match: int | None,
    dry_run: bool, pool_retry: Mapping[str, retry.RetryPolicy] | None,
    payload_schemas: payloads.PayloadSchemas | None,
) -> Edited:
    dry_run = dry_run or patch.dry_run
    given = given_fields(patch)
    nul = fields_holding_nul(msgspec.to_builtins(msgspec.structs.replace(patch, payload=None)))
    if nul:
        raise UnstorableText(nul)
    staged = NOTHING_STAGED  # a large new payload, put before the job's row is locked
    if patch.payload is not UNSET and not dry_run:
        body = _json.encode(patch.payload)
        if len(body) <= max_payload_bytes:
            staged = await stage_blobs(conn, [(tenant_id, body)])
    async with conn.transaction():
        head = await job_store.lock(conn, tenant_id, job_id)
        if head is None:
            raise NotFound(f"no job {job_id}")
        job = await job_store.by_id(conn, tenant_id, job_id)
        assert job is not None  # locked above
        version = await job_edits.definition_version(conn, job_id)
        if if_match is not None and if_match != version:
            raise PreconditionFailed(
                f"job {job_id} is at version {version}, not {if_match}: someone edited it "
                "since you read it; read it again (GET /v1/jobs/{id}) and decide on that",
                current_version=version)
        if job.status == "deleted":
            raise InvalidState(f"job {job_id} is deleted; a deleted job cannot be edited")
        if not given:
            raise InvalidInput("nothing to change: name at least one setting (schedule, "
                               "payload, pool, priority, retry, timeout, ...)",
                               errors=[{"field": "", "message": "empty patch"}])
        old_payload = (await get_blobs(conn, [job.payload_ref], tenant_id)).get(job.payload_ref)
        after, payload_bytes, switch_at, changed = await _decide(
            conn, clock, job, patch, given, old_payload, pools=pools, classes=classes,
            max_payload_bytes=max_payload_bytes, pool_retry=pool_retry or {},
            schemas=payload_schemas or payloads.schemas)
        new_version = version + 1 if changed else version
        payload = patch.payload if "payload" in changed else old_payload
        if dry_run or not changed:  # the same settings again: nothing to record
            waiting = len(await job_edits.lock_scheduled_runs(conn, tenant_id, job_id)) \
                if patch.apply_to_scheduled and changed else 0
            return Edited(job, after if changed else job, payload, changed, version,
                          new_version, dry_run, switch_at, waiting)
        if payload_bytes is not None:
            await put_blobs(conn, [(after.payload_ref, tenant_id, payload_bytes)],
                            staged=staged)
        waiting_runs = (await job_edits.lock_scheduled_runs(conn, tenant_id, job_id)
                        if patch.apply_to_scheduled else [])
        stream = StreamHead(job_id, tenant_id, head.version)
        events: list[NewEvent] = [stream.next(_updated(after, new_version, changed, patch,
                                                       len(waiting_runs)), actor)]
        for run in waiting_runs:
            events.append(StreamHead.of(run).next(_amended(after, new_version), actor))
        await store.append(conn, events)
    return Edited(job, after, payload, changed, version, new_version, False, switch_at,
                  len(waiting_runs))


async def _decide(
    conn: asyncpg.Connection, clock: Clock, job: JobRow, patch: JobUpdateRequest,
    given: list[str], old_payload: Any, *, pools: Sequence[str], classes: Sequence[str],
    max_payload_bytes: int, pool_retry: Mapping[str, retry.RetryPolicy],
    schemas: payloads.PayloadSchemas,
) -> tuple[JobRow, bytes | None, datetime | None, list[str]]:
    """The job's row as the edit leaves it, the new payload's bytes (None: unchanged), the
    switch instant of a new schedule and the settings that changed; every bad field named."""
    errors: list[dict[str, str]] = []
    new: dict[str, Any] = {}
    changed: list[str] = []
    switch_at = None
    if patch.schedule is not UNSET:
        now = clock.now()
        schedule = None
        try:
            schedule = schedules.parse_schedule(patch.schedule, now=now)
        except InvalidInput as exc:
            errors += exc.errors
        if schedule is not None:
            known = (await calendar_store.existing_names(conn, job.tenant_id, [schedule.calendar])
                     if schedule.calendar else set())
            errors += calendar_errors(schedule, known)
            document = schedules.to_document(schedule)
            if not same_schedule(job.schedule, document,
                                 start_given=patch.schedule.start_at is not None):
                switch_at = switch_instant(now, job.next_slot)
                schedule = switched(schedule, switch_at)
                first = schedules.next_occurrence(schedule, None)
                if first is None:
                    errors.append({"field": "schedule", "message": "no occurrence at or after "
                                   f"{switch_at.isoformat()}: the new schedule would never "
                                   "run (a one-off `at` in the past? trigger the job instead)"})
                else:
                    document = schedules.to_document(schedule)
                    changed.append("schedule")
                    if job.status == "completed":  # done, and the new schedule has more
                        new["status"] = "active"
                    new.update(schedule=document, kind=document["kind"],
                               calendar=schedule.calendar, overlap=schedule.overlap,
                               next_slot=first, next_run_at=first + schedules.jitter_offset(
                                   schedule, job.id, first))
    kind = new.get("kind", job.kind)
    pool = job.pool
    if patch.pool is not UNSET:
        if patch.pool not in pools:
            errors.append({"field": "pool", "message": f"unknown pool; configured: "
                                                       f"{', '.join(pools)}"})
        pool = patch.pool
    if patch.priority is not UNSET and patch.priority not in classes:
        errors.append({"field": "priority", "message": "unknown priority class; configured: "
                                                       f"{', '.join(classes)}"})
    for field in ("pool", "priority", "on_queue_wait", "concurrency_key", "resource", "owner"):
        value = getattr(patch, field)
        if value is not UNSET and value != getattr(job, field):
            new[field] = value
            changed.append(field)
    if patch.retry is not UNSET:
        try:
            policy = (pool_retry.get(pool, retry.DEFAULT) if patch.retry is None
                      else retry.parse_retry(patch.retry))
            document = retry.to_document(policy)
            if document != job.retry_policy:
                new["retry_policy"] = document
                changed.append("retry")
        except InvalidInput as exc:
            errors += exc.errors
    for field, column in DURATIONS.items():
        value = getattr(patch, field)
        if value is UNSET:
            continue
        seconds = _seconds(field, value, errors)
        if seconds != getattr(job, column):
            new[column] = seconds
            changed.append(field)
    staleness = new.get("max_staleness_seconds", job.max_staleness_seconds)
    if staleness is not None and kind not in ("cron", "every"):
        errors.append({"field": "max_staleness", "message": "only a recurring job (cron or "
                       "every) has a staleness; a one-off job declares complete_within"})
    payload_bytes = None
    if patch.payload is not UNSET and patch.payload != old_payload:
        payload_bytes = _json.encode(patch.payload)
        if len(payload_bytes) > max_payload_bytes:
            raise PayloadTooLarge(f"payload: larger than {max_payload_bytes} bytes", errors=[
                {"field": "payload", "message": f"larger than {max_payload_bytes} bytes"}])
        verdict, = await schemas.check(conn, job.tenant_id, [(job.task, patch.payload)],
                                       path="edit")
        errors += verdict.errors
        new.update(payload_ref=new_id(), payload_version=verdict.payload_version)
        changed.append("payload")
    if errors:
        raise InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors[:10]),
                           errors=errors)
    return msgspec.structs.replace(job, **new), payload_bytes, switch_at, changed


def _updated(job: JobRow, version: int, changed: list[str], patch: JobUpdateRequest,
             amended: int) -> ev.JobUpdated:
    return ev.JobUpdated(
        definition_version=version, changed=changed, schedule=job.schedule,
        payload_ref=job.payload_ref, pool=job.pool, priority=job.priority,
        next_run_at=job.next_run_at, next_slot=job.next_slot, retry=job.retry_policy,
        timeout_seconds=job.timeout_seconds, queue_wait_seconds=job.queue_wait_seconds,
        on_queue_wait=job.on_queue_wait, concurrency_key=job.concurrency_key,
        resource=job.resource, payload_version=job.payload_version,
        complete_within_seconds=job.complete_within_seconds,
        max_staleness_seconds=job.max_staleness_seconds, owner=job.owner, reason=patch.reason,
        apply_to_scheduled=patch.apply_to_scheduled, runs_amended=amended)


def _amended(job: JobRow, version: int) -> ev.RunAmended:
    return ev.RunAmended(
        job_id=job.id, definition_version=version, payload_ref=job.payload_ref, pool=job.pool,
        priority=job.priority, retry=job.retry_policy, timeout_seconds=job.timeout_seconds,
        queue_wait_seconds=job.queue_wait_seconds, on_queue_wait=job.on_queue_wait,
        concurrency_key=job.concurrency_key, resource=job.resource,
        payload_version=job.payload_version)
