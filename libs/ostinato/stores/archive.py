"""The archiver's store (docs/RETENTION.md "Archive, then remove"): the pick of runs due to leave
the hot tables, each one's whole history read as `ostinato.archive` documents in a few
statements per batch, and the call of migration 0046's owner-role procedure that removes them.
The services' role can do nothing else to the log: it has no UPDATE or DELETE on `events`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from ostinato.archive import (
    ArchivedBlob,
    ArchivedDagRun,
    ArchivedEvent,
    ArchivedRun,
    ArchivedStep,
    BlobRef,
)
from ostinato.db.queries import load
from ostinato.domain.retention import MIN_KEEP_SECONDS
from ostinato.stores.rows import many

Q = load("ostinato.stores", "archive.sql")
NO_JIT = "SET LOCAL jit = off"  # for the pick's transaction only (candidates)


class Candidate(msgspec.Struct, frozen=True):
    """A run past its tenant's retention that no rule keeps, as the pick saw it."""

    run_id: uuid.UUID
    tenant_id: uuid.UUID
    version: int  # the run's stream version: what is archived, what the removal expects
    archive: bool  # the tenant's policy: archive first (True) or only remove
    finished_at: datetime


class DocumentRow(msgspec.Struct, frozen=True):
    id: uuid.UUID
    row: dict[str, Any]  # every column, as JSON (to_json)


class EventRow(msgspec.Struct, frozen=True):
    stream_id: uuid.UUID
    seq: int
    version: int
    type: str
    data: Any
    actor: str
    epoch: int | None
    traceparent: str | None
    occurred_at: datetime
    recorded_at: datetime
    event_id: uuid.UUID


class StepRow(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    seq: int
    name: str
    succeeded: bool
    attempt: int
    tries: int
    duration_ms: float
    recorded_at: datetime
    output: Any
    output_ref: uuid.UUID | None
    error_type: str | None
    message: str | None
    supplied_by: str | None
    set_aside_version: int | None
    set_aside_at: datetime | None


class BlobRow(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    id: uuid.UUID
    kind: str
    data: Any
    size_bytes: int
    created_at: datetime
    sha256: str | None
    object_key: str | None


class LabelRow(msgspec.Struct, frozen=True):
    run_id: uuid.UUID
    workflow_id: str | None
    attributes: dict[str, Any] | None


class Removal(msgspec.Struct, frozen=True):
    """The procedure's verdict on one run: removed, or the reason it stays."""

    run_id: uuid.UUID
    removed: bool
    kept_because: str | None


async def candidates(conn: asyncpg.Connection, limit: int, checks_window: timedelta,
                     floor_seconds: int = MIN_KEEP_SECONDS) -> list[Candidate]:
    """Up to `limit` runs due to leave, in one statement applying every rule (the tenant with
    the oldest end first, each tenant's oldest end first; the database's clock decides); none
    before `floor_seconds` (the operator's retention floor) whatever its tenant's keep.
    Without JIT: the planner's estimate (every expired run's probes, not the batch's) is far
    above jit_above_cost, and compiling the statement's expressions took 2.9 s against 20 ms
    to run it (bench/archive_plan.py, 200,000 runs)."""
    async with conn.transaction(readonly=True):
        await conn.execute(NO_JIT)
        return many(Candidate, await conn.fetch(Q["archive_candidates"], limit, checks_window,
                                                floor_seconds))


def _event(row: EventRow) -> ArchivedEvent:
    return ArchivedEvent(seq=row.seq, version=row.version, type=row.type, data=row.data,
                         actor=row.actor, epoch=row.epoch, traceparent=row.traceparent,
                         occurred_at=row.occurred_at, recorded_at=row.recorded_at,
                         event_id=row.event_id)


def _step(row: StepRow) -> ArchivedStep:
    return ArchivedStep(seq=row.seq, name=row.name, succeeded=row.succeeded,
                        attempt=row.attempt, tries=row.tries, duration_ms=row.duration_ms,
                        recorded_at=row.recorded_at, output=row.output,
                        output_ref=row.output_ref, error_type=row.error_type,
                        message=row.message, supplied_by=row.supplied_by,
                        set_aside_version=row.set_aside_version, set_aside_at=row.set_aside_at)


def _by_stream(rows: Sequence[EventRow]) -> dict[uuid.UUID, list[ArchivedEvent]]:
    """Events read in (stream, version) order, each stream's as its archive keeps them."""
    out: dict[uuid.UUID, list[ArchivedEvent]] = {}
    for e in rows:
        out.setdefault(e.stream_id, []).append(_event(e))
    return out


async def histories(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID],
                    archived_at: datetime) -> dict[uuid.UUID, ArchivedRun]:
    """The whole history of each run still hot, as its archive document: its runs row, every
    event of its stream, its steps (set-aside ones too), the blobs it references, its
    workflow id and attributes, and a one-off job's row and stream. Read in one repeatable-
    read snapshot, so the parts agree with each other."""
    ids = list(run_ids)
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        runs = many(DocumentRow, await conn.fetch(Q["archive_run_rows"], ids))
        events = many(EventRow, await conn.fetch(Q["archive_run_events"], ids))
        steps = many(StepRow, await conn.fetch(Q["archive_run_steps"], ids))
        blobs = many(BlobRow, await conn.fetch(Q["archive_run_blobs"], ids))
        labels = many(LabelRow, await conn.fetch(Q["archive_run_labels"], ids))
        job_ids = sorted({uuid.UUID(str(r.row["job_id"])) for r in runs})
        jobs = many(DocumentRow, await conn.fetch(Q["archive_job_rows"], job_ids))
        job_events = many(EventRow, await conn.fetch(
            Q["archive_job_events"], [j.id for j in jobs]))
    events_of, job_events_of = _by_stream(events), _by_stream(job_events)
    steps_of: dict[uuid.UUID, list[ArchivedStep]] = {}
    set_aside_of: dict[uuid.UUID, list[ArchivedStep]] = {}
    for s in steps:
        into = steps_of if s.set_aside_version is None else set_aside_of
        into.setdefault(s.run_id, []).append(_step(s))
    blobs_of: dict[uuid.UUID, list[ArchivedBlob]] = {}
    for b in blobs:
        ref = (BlobRef(key=b.object_key, sha256=b.sha256, size=b.size_bytes)
               if b.sha256 is not None and b.object_key is not None else None)
        blobs_of.setdefault(b.run_id, []).append(ArchivedBlob(  # an object's: its reference
            id=b.id, kind=b.kind, data=None if ref else b.data, size_bytes=b.size_bytes,
            created_at=b.created_at, ref=ref))
    labels_of = {label.run_id: label for label in labels}
    jobs_by_id = {j.id: j.row for j in jobs}
    documents: dict[uuid.UUID, ArchivedRun] = {}
    for r in runs:
        label = labels_of.get(r.id)
        job_id = uuid.UUID(str(r.row["job_id"]))
        documents[r.id] = ArchivedRun(
            tenant_id=uuid.UUID(str(r.row["tenant_id"])), run_id=r.id, archived_at=archived_at,
            run=r.row, events=events_of.get(r.id, []), steps=steps_of.get(r.id, []),
            set_aside_steps=set_aside_of.get(r.id, []), blobs=blobs_of.get(r.id, []),
            workflow_id=label.workflow_id if label else None,
            attributes=(label.attributes or {}) if label else {},
            job=jobs_by_id.get(job_id), job_events=job_events_of.get(job_id, []))
    return documents


async def remove(conn: asyncpg.Connection, run_ids: Sequence[uuid.UUID],
                 versions: Sequence[int], checks_window: timedelta) -> list[Removal]:
    """Migration 0046's procedure on these runs, each at the stream version archived: removed
    in the caller's transaction, or kept with the reason (a rule, `busy`, `changed`, ...)."""
    return many(Removal, await conn.fetch(Q["archive_remove_runs"], list(run_ids),
                                          list(versions), checks_window))


class DagRunCandidate(msgspec.Struct, frozen=True):
    """A finished DAG run past its tenant's retention that no rule keeps (its node runs gone)."""

    dag_run_id: uuid.UUID
    tenant_id: uuid.UUID
    version: int  # its stream's head: what is archived, what the removal expects
    archive: bool
    finished_at: datetime


class DagRunRemoval(msgspec.Struct, frozen=True):
    """Migration 0052's verdict on one DAG run: removed, or the reason it stays."""

    dag_run_id: uuid.UUID
    removed: bool
    kept_because: str | None


async def dag_run_candidates(conn: asyncpg.Connection, limit: int, checks_window: timedelta,
                             floor_seconds: int = MIN_KEEP_SECONDS) -> list[DagRunCandidate]:
    """Up to `limit` finished DAG runs due to leave (oldest end first, the tenant with the
    oldest first; none before `floor_seconds`), every rule of migration 0052 applied in the
    one statement: a DAG run whose node runs are still hot is not picked."""
    async with conn.transaction(readonly=True):
        await conn.execute(NO_JIT)
        return many(DagRunCandidate, await conn.fetch(
            Q["dag_run_candidates"], limit, checks_window, floor_seconds))


async def dag_run_histories(conn: asyncpg.Connection, dag_run_ids: Sequence[uuid.UUID],
                            archived_at: datetime) -> dict[uuid.UUID, ArchivedDagRun]:
    """Each DAG run still hot as its archive document: its row, its nodes, every event of its
    stream, and a one-off DAG job's row and stream (it leaves with its last DAG run). One
    repeatable-read snapshot, so the parts agree."""
    ids = list(dag_run_ids)
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        rows = many(DocumentRow, await conn.fetch(Q["archive_dag_run_rows"], ids))
        nodes = many(DocumentRow, await conn.fetch(Q["archive_dag_run_nodes"], ids))
        events = many(EventRow, await conn.fetch(Q["archive_dag_run_events"], ids))
        job_ids = sorted({uuid.UUID(str(r.row["job_id"])) for r in rows
                          if r.row.get("job_id") is not None})
        jobs = many(DocumentRow, await conn.fetch(Q["archive_job_rows"], job_ids))
        job_events = many(EventRow, await conn.fetch(
            Q["archive_job_events"], [j.id for j in jobs]))
    nodes_of: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for n in nodes:
        nodes_of.setdefault(n.id, []).append(n.row)
    events_of, job_events_of = _by_stream(events), _by_stream(job_events)
    jobs_by_id = {j.id: j.row for j in jobs}
    documents: dict[uuid.UUID, ArchivedDagRun] = {}
    for r in rows:
        job_id = uuid.UUID(str(r.row["job_id"])) if r.row.get("job_id") is not None else None
        job = jobs_by_id.get(job_id) if job_id is not None else None  # a one-off job's only
        documents[r.id] = ArchivedDagRun(
            tenant_id=uuid.UUID(str(r.row["tenant_id"])), dag_run_id=r.id,
            archived_at=archived_at, dag_run=r.row, nodes=nodes_of.get(r.id, []),
            events=events_of.get(r.id, []), job=job,
            job_events=job_events_of.get(job_id, []) if job is not None and job_id else [])
    return documents


async def remove_dag_runs(conn: asyncpg.Connection, dag_run_ids: Sequence[uuid.UUID],
                          versions: Sequence[int],
                          checks_window: timedelta) -> list[DagRunRemoval]:
    """Migration 0052's procedure on these DAG runs, each at the stream version archived."""
    return many(DagRunRemoval, await conn.fetch(Q["archive_remove_dag_runs"], list(dag_run_ids),
                                                list(versions), checks_window))


class ArchiveHealth(msgspec.Struct, frozen=True):
    failing_since: datetime | None
    last_error: str | None
    last_success_at: datetime | None
    failing_seconds: float | None  # None: not failing


async def passed(conn: asyncpg.Connection) -> None:
    """Record a pass that reached its end."""
    await conn.execute(Q["archive_passed"])


async def failed(conn: asyncpg.Connection, error: str) -> None:
    """Record a failed pass (kept failing since its first failure)."""
    await conn.execute(Q["archive_failed"], error[:500])


async def health(conn: asyncpg.Connection) -> ArchiveHealth | None:
    """The archiver's last word, or None before its first pass."""
    rows = many(ArchiveHealth, await conn.fetch(Q["archive_health"]))
    return rows[0] if rows else None
