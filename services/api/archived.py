"""Archived runs read back (docs/RETENTION.md, "Reading an archived run").

A finished run leaves the hot tables after its tenant's retention, its whole history first
written to the object store (`ostinato.archive`: one object per run, an index object per batch
and day). `GET /v1/runs/{id}`, `/events`, `/steps`, the UI's run page and
`GET /v1/runs?include=archived` fall back to it here: keys are always built from the caller's
tenant (another tenant's run is never read: a 404), and what is read is turned into the hot
side's own rows (`RunRow`, `RecordedEvent`, `StepRow`) so the views are built by the code that
builds the hot ones. An action on an archived run is a 409 `run-archived` (`refuses_archived`).

Outcomes, each counted in `ostinato_archive_reads_total{outcome}`: no object, a 404; an object
failing its checks (`ArchiveCorrupt`), a 424 `archive-unreadable` naming what is wrong (the
alert OstinatoArchiveUnreadable); the object store down, a 503 with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

import msgspec

from ostinato.archive import (
    ArchiveCorrupt,
    ArchivedDagRun,
    ArchivedEvent,
    ArchivedRun,
    ArchivedRunSummary,
    dag_run_key,
    decode_dag_run,
    decode_index,
    decode_run,
    index_prefix,
    run_key,
)
from ostinato.domain import attributes, fanout
from ostinato.domain import events as ev
from ostinato.domain import workflow as wf
from ostinato.domain.attributes import AttributeFilter
from ostinato.domain.errors import (
    ArchiveUnreadable,
    InvalidInput,
    NotFound,
    RunArchived,
    ServiceUnavailable,
)
from ostinato.domain.events import Event, decode_event
from ostinato.eventlog.records import RecordedEvent
from ostinato.eventlog.store import read_blob_objects
from ostinato.objects import LazyObjectStore, ObjectMissing, ObjectStore, ObjectStoreError
from ostinato.runs.updates import UpdateOutcome
from ostinato.stores.dags import DagNodeRow, DagRunRow
from ostinato.stores.runs import RunRow
from ostinato.stores.steps import SetAsideStepRow, StateRow, StepRow
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.api.archive")

RETRY_AFTER_SECONDS = 5  # an object store restarting or throttling: ask again in a few seconds
MAX_RANGE = timedelta(days=31)  # of `ended_after`..`ended_before` in one archived listing
MAX_INDEX_READS = 64  # index objects one listing page opens; then it ends with a cursor
MAX_CONCURRENT_READS = 16  # run objects a listing page reads at once
CURSOR_MARK = "a."  # an archived listing's cursor (a hot one is base64 of "<instant>|<id>")

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class Archive:
    """The api's one handle on the object store: opened at its first use (an api that never
    reads an archived run contacts no store), closed when the app stops."""

    def __init__(self, url: str, store: ObjectStore | None = None) -> None:
        self._handle = LazyObjectStore(url if store is None else store)

    @property
    def store(self) -> ObjectStore:
        return self._handle.store

    async def close(self) -> None:
        await self._handle.close()

    async def run(self, tenant_id: uuid.UUID, run_id: uuid.UUID) -> ArchivedRun | None:
        """The tenant's archived run; None when its archive holds no such run."""
        key = run_key(tenant_id, run_id)
        data = await self._get(key, tenant_id, run_id=str(run_id))
        if data is None:
            return None
        try:
            found = decode_run(data, key=key)
        except ArchiveCorrupt as exc:
            raise _unreadable(exc, tenant_id, f"run {run_id}", run_id=str(run_id)) from None
        metrics.ARCHIVE_READS.labels("read").inc()
        return await with_blob_values(found)

    async def dag_run(self, tenant_id: uuid.UUID,
                      dag_run_id: uuid.UUID) -> ArchivedDagRun | None:
        """The tenant's archived DAG run (migration 0052); None when its archive has none."""
        key = dag_run_key(tenant_id, dag_run_id)
        data = await self._get(key, tenant_id, dag_run_id=str(dag_run_id))
        if data is None:
            return None
        try:
            found = decode_dag_run(data, key=key)
        except ArchiveCorrupt as exc:
            raise _unreadable(exc, tenant_id, f"DAG run {dag_run_id}",
                              dag_run_id=str(dag_run_id)) from None
        metrics.ARCHIVE_READS.labels("read").inc()
        return found

    async def holds(self, tenant_id: uuid.UUID, run_id: uuid.UUID) -> bool:
        """Whether the tenant's archive has the run (no read of the object)."""
        return await self._exists(run_key(tenant_id, run_id), tenant_id, run_id=str(run_id))

    async def holds_dag_run(self, tenant_id: uuid.UUID, dag_run_id: uuid.UUID) -> bool:
        """Whether the tenant's archive has the DAG run (no read of the object)."""
        return await self._exists(dag_run_key(tenant_id, dag_run_id), tenant_id,
                                  dag_run_id=str(dag_run_id))

    async def _exists(self, key: str, tenant_id: uuid.UUID, **ids: str) -> bool:
        try:
            return await self.store.exists(key)
        except ObjectStoreError as exc:
            raise _unavailable(exc, tenant_id, **ids) from None

    async def _get(self, key: str, tenant_id: uuid.UUID, **ids: str) -> bytes | None:
        try:
            return await self.store.get(key)
        except ObjectMissing:
            metrics.ARCHIVE_READS.labels("missing").inc()
            return None
        except ObjectStoreError as exc:
            raise _unavailable(exc, tenant_id, **ids) from None


async def with_blob_values(archived: ArchivedRun) -> ArchivedRun:
    """The archived run with the values of its blobs kept in the object store read in (the
    document keeps their references, key and SHA-256, never a copy: issue 38): `blobs()` then
    answers as for any archived run. One gone or not the bytes named: 424 blob-unreadable."""
    refs = {b.id: (archived.tenant_id, b.ref) for b in archived.blobs if b.ref is not None}
    if not refs:
        return archived
    values = await read_blob_objects(refs)
    return msgspec.structs.replace(archived, blobs=[
        msgspec.structs.replace(b, data=values[b.id]) if b.id in values else b
        for b in archived.blobs])


def _unreadable(exc: ArchiveCorrupt, tenant_id: uuid.UUID, what: str,
                **ids: str) -> ArchiveUnreadable:
    metrics.ARCHIVE_READS.labels("unreadable").inc()
    log.error("archive object unreadable", tenant_id=str(tenant_id), key=exc.key,
              problem=exc.what, **ids)
    return ArchiveUnreadable(f"the archive object of {what} cannot be read: {exc.what} "
                             f"(key {exc.key}); an operator restores it (docs/RETENTION.md)",
                             key=exc.key)


def _unavailable(exc: Exception, tenant_id: uuid.UUID, **ids: str) -> ServiceUnavailable:
    metrics.ARCHIVE_READS.labels("unavailable").inc()
    log.warning("object store unavailable", tenant_id=str(tenant_id), error=str(exc), **ids)
    return ServiceUnavailable(f"the archive (object store) cannot serve this request now "
                              f"({type(exc).__name__}); retry after {RETRY_AFTER_SECONDS} s",
                              retry_after_seconds=RETRY_AFTER_SECONDS)


def archive_of(state: Any) -> Archive | None:
    """The app's archive handle (None in an app made without one)."""
    return getattr(state, "archive", None)


async def read(archive: Archive | None, tenant_id: uuid.UUID, run_id: uuid.UUID) -> ArchivedRun:
    """The tenant's archived run, or the usual 404 when neither the hot tables (the caller
    looked there first) nor the archive know it."""
    found = None if archive is None else await archive.run(tenant_id, run_id)
    if found is None:
        raise NotFound(f"no run {run_id}")
    return found


# The hot side's rows, from an archived run: the views are built by the hot side's code.

def run_row(archived: ArchivedRun) -> RunRow:
    """The `runs` row as it stood when archived."""
    try:
        return msgspec.convert(archived.run, RunRow, strict=False)
    except msgspec.ValidationError as exc:
        raise _unreadable(ArchiveCorrupt(f"its runs row does not read as one ({exc})",
                                         key=run_key(archived.tenant_id, archived.run_id)),
                          archived.tenant_id, f"run {archived.run_id}",
                          run_id=str(archived.run_id)) from None


def _event(data: Any) -> Event:
    return decode_event(data if isinstance(data, str | bytes) else msgspec.json.encode(data))


def _recorded(tenant_id: uuid.UUID, stream_id: uuid.UUID, stream_type: str,
              events: Sequence[ArchivedEvent], key: str, what: str,
              **ids: str) -> list[RecordedEvent]:
    """An archived stream as the log held it, in version order (a 424 if an event does not
    read as one)."""
    try:
        return [RecordedEvent(seq=e.seq, event_id=e.event_id, stream_id=stream_id,
                              stream_type=stream_type, version=e.version, tenant_id=tenant_id,
                              type=e.type, event=_event(e.data), actor=e.actor, epoch=e.epoch,
                              traceparent=e.traceparent, occurred_at=e.occurred_at,
                              recorded_at=e.recorded_at) for e in events]
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _unreadable(ArchiveCorrupt(f"an event does not read as one ({exc})", key=key),
                          tenant_id, what, **ids) from None


def recorded_events(archived: ArchivedRun) -> list[RecordedEvent]:
    """The run's stream as the log held it, in version order."""
    return _recorded(archived.tenant_id, archived.run_id, "run", archived.events,
                     run_key(archived.tenant_id, archived.run_id), f"run {archived.run_id}",
                     run_id=str(archived.run_id))


# An archived DAG run (migration 0052): GET /v1/dag-runs/{id} and /events from its object.

async def read_dag_run(archive: Archive | None, tenant_id: uuid.UUID,
                       dag_run_id: uuid.UUID) -> ArchivedDagRun:
    """The tenant's archived DAG run, or the usual 404 when neither the hot tables (the caller
    looked there first) nor the archive know it."""
    found = None if archive is None else await archive.dag_run(tenant_id, dag_run_id)
    if found is None:
        raise NotFound(f"no DAG run {dag_run_id}")
    return found


def _dag_unreadable(doc: ArchivedDagRun, what: str) -> ArchiveUnreadable:
    return _unreadable(ArchiveCorrupt(what, key=dag_run_key(doc.tenant_id, doc.dag_run_id)),
                       doc.tenant_id, f"DAG run {doc.dag_run_id}",
                       dag_run_id=str(doc.dag_run_id))


def dag_run_row(doc: ArchivedDagRun) -> DagRunRow:
    """The `dag_runs` row as it stood when archived."""
    try:
        return msgspec.convert(doc.dag_run, DagRunRow, strict=False)
    except msgspec.ValidationError as exc:
        raise _dag_unreadable(doc, f"its dag_runs row does not read as one ({exc})") from None


def dag_run_events(doc: ArchivedDagRun) -> list[RecordedEvent]:
    """The DAG run's stream as the log held it, in version order."""
    return _recorded(doc.tenant_id, doc.dag_run_id, "dag_run", doc.events,
                     dag_run_key(doc.tenant_id, doc.dag_run_id), f"DAG run {doc.dag_run_id}",
                     dag_run_id=str(doc.dag_run_id))


class _NodeColumns(msgspec.Struct):
    """The columns of a `dag_run_nodes` row the view reads."""

    dag_run_id: uuid.UUID
    key: str
    state: str
    run_id: uuid.UUID | None = None
    generation: int = 0
    ready_at: datetime | None = None
    finished_at: datetime | None = None


async def dag_node_rows(archive: Archive, doc: ArchivedDagRun) -> list[DagNodeRow]:
    """The nodes as `stores.dags.nodes` reads them hot: each node's row with its current run's
    state, attempts, times, output and error, read from that run's own archive object (node
    runs leave before their DAG run; one removed without an object, under archive=false,
    leaves those fields empty). Up to MAX_CONCURRENT_READS objects at once."""
    try:
        nodes = [msgspec.convert(n, _NodeColumns, strict=False) for n in doc.nodes]
    except msgspec.ValidationError as exc:
        raise _dag_unreadable(doc, f"a dag_run_nodes row does not read as one ({exc})") from None
    runs = {r.run_id: run_row(r) for r in await runs_of(
        archive, doc.tenant_id, [n.run_id for n in nodes if n.run_id is not None])}
    out = []
    for n in nodes:
        run = runs.get(n.run_id) if n.run_id is not None else None
        out.append(DagNodeRow(
            dag_run_id=n.dag_run_id, key=n.key, state=n.state, run_id=n.run_id,
            generation=n.generation, ready_at=n.ready_at, finished_at=n.finished_at,
            run_state=run.state if run else None, attempt=run.attempt if run else 0,
            run_started_at=run.started_at if run else None,
            run_finished_at=run.finished_at if run else None,
            output_ref=run.output_ref if run else None,
            last_error=run.last_error if run else None))
    return out


def step_rows(archived: ArchivedRun) -> list[StepRow]:
    """The workflow's current steps (`run_steps`), in position order."""
    return [StepRow(seq=s.seq, name=s.name, succeeded=s.succeeded, output=s.output,
                    output_ref=s.output_ref, error_type=s.error_type, message=s.message,
                    attempt=s.attempt, tries=s.tries, duration_ms=s.duration_ms,
                    recorded_at=s.recorded_at, supplied_by=s.supplied_by)
            for s in sorted(archived.steps, key=lambda s: s.seq)]


def set_aside_rows(archived: ArchivedRun, *, after: tuple[int, int],
                   limit: int) -> list[SetAsideStepRow]:
    """The records interventions set aside, a page after the (set_aside_version, seq) cursor
    `after`, in that order, as `stores.steps.set_aside_page` reads them."""
    rows = sorted((SetAsideStepRow(
        set_aside_version=s.set_aside_version, seq=s.seq, name=s.name, succeeded=s.succeeded,
        output=s.output, output_ref=s.output_ref, error_type=s.error_type, message=s.message,
        attempt=s.attempt, tries=s.tries, duration_ms=s.duration_ms, recorded_at=s.recorded_at,
        supplied_by=s.supplied_by, set_aside_at=s.set_aside_at)
        for s in archived.set_aside_steps
        if s.set_aside_version is not None and s.set_aside_at is not None),
        key=lambda r: (r.set_aside_version, r.seq))
    return [r for r in rows if (r.set_aside_version, r.seq) > after][:limit]


def blobs(archived: ArchivedRun) -> dict[uuid.UUID, Any]:
    """The documents the run referenced (payload, output, logs, step outputs), by id: what
    `get_blobs` answers for a hot run."""
    return {b.id: b.data for b in archived.blobs}


def logs(archived: ArchivedRun) -> list[Any]:
    """The captured log lines of the run's latest reported attempt, as `GET .../logs` answers
    a hot run: the document `logs_ref` names, none when it had none."""
    ref = run_row(archived).logs_ref
    if ref is None:
        return []
    lines = blobs(archived).get(ref, [])
    return lines if isinstance(lines, list) else []


def state_values(archived: ArchivedRun, name: str | None = None) -> list[StateRow]:
    """The latest value of each name the workflow published (`ctx.set`: steps `set:<name>`), by
    name, as `stores.steps.state` reads them from `run_steps`; `name`: that one only."""
    latest: dict[str, StateRow] = {}
    for s in step_rows(archived):
        if not s.name.startswith(wf.STATE_PREFIX):
            continue
        published = s.name[len(wf.STATE_PREFIX):]
        if name is not None and published != name:
            continue
        if published not in latest or s.seq > latest[published].seq:
            latest[published] = StateRow(name=published, value=s.output, seq=s.seq,
                                         set_at=s.recorded_at)
    return [latest[n] for n in sorted(latest)]


def update_outcome(archived: ArchivedRun, update_id: uuid.UUID) -> UpdateOutcome:
    """Where an update to the archived run stands, from its stream (the `SignalReceived` on
    the update channel that carried it, its `SignalDelivered`) and its `reply:<id>` step, as
    `runs.updates.outcome` reads them from the hot tables; NotFound when it never had it."""
    sent: ev.SignalReceived | None = None
    taken = False
    for r in recorded_events(archived):
        match r.event:
            case ev.SignalReceived(signal_id=sid, name=wf.UPDATE_SIGNAL) if sid == update_id:
                sent = r.event
            case ev.SignalDelivered(signal_id=sid) if sid == update_id:
                taken = True
    if sent is None:
        raise NotFound(f"no update {update_id} on run {archived.run_id}")
    envelope = sent.payload
    if envelope is None and sent.payload_ref is not None:
        envelope = blobs(archived).get(sent.payload_ref)
    reply = wf.reply_step(update_id)
    answer = next((s.output for s in step_rows(archived) if s.name == reply), None)
    return UpdateOutcome(update_id, str((envelope or {}).get("name", ""))
                         if isinstance(envelope, dict) else "",
                         wf.update_state(answer if isinstance(answer, dict) else None, True),
                         taken, answer if isinstance(answer, dict) else None)


def child_ids(archived: ArchivedRun) -> list[uuid.UUID]:
    """The ids of the runs the workflow made as its children, in id order, from its stream:
    `ChildStarted` (ctx.child, ctx.start_child), each fan-out's admitted chunk runs (their ids
    derive from the parent, the position and the index) and its completion run. A parent
    leaves the hot tables with or after its children (migration 0046), so they are archived
    too; the archive keeps no index by parent, the parent's stream is that index."""
    found: set[uuid.UUID] = set()
    admitted: dict[int, int] = {}
    for r in recorded_events(archived):
        match r.event:
            case ev.ChildStarted(child_run_id=child):
                found.add(child)
            case ev.FanOutStarted(seq=seq, admitted=n) | ev.FanOutProgressed(seq=seq, admitted=n):
                admitted[seq] = max(admitted.get(seq, 0), n)
            case ev.FanOutCompleted(completion_run_id=child) if child is not None:
                found.add(child)
    for seq, n in admitted.items():
        found.update(fanout.chunk_run_id(archived.run_id, seq, i) for i in range(n))
    return sorted(found)


def refuses_archived(fn: F) -> F:
    """A control action on one run (path parameter `run_id`, dependency `tenant`): when the run
    is not hot (the action raised NotFound) but its archive holds it, a 409 `run-archived`
    instead, raised inside the route so that its audit row says so."""
    return _refusing(fn, "run_id", "holds", "run", "/v1/runs")


def refuses_archived_dag_run(fn: F) -> F:
    """The same for an action on one DAG run (path parameter `dag_run_id`): cancel, retry
    from a node."""
    return _refusing(fn, "dag_run_id", "holds_dag_run", "DAG run", "/v1/dag-runs")


def _refusing(fn: F, param: str, holds: str, what: str, path: str) -> F:
    """`fn` answering a 409 for an item (path parameter `param`) its archive's `holds` has."""
    @functools.wraps(fn)
    async def action(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except NotFound:
            tenant, item_id = kwargs["tenant"], kwargs[param]
            archive = tenant.archive
            if archive is not None and await getattr(archive, holds)(tenant.tenant_id, item_id):
                raise RunArchived(f"{what} {item_id} is archived: it can be read (GET "
                                  f"{path}/{item_id}), not changed") from None
            raise

    return action  # type: ignore[return-value]


# GET /v1/runs?include=archived: the archived part of the listing, from the index objects.

@dataclass(frozen=True, slots=True)
class SummaryFilter:
    """What an archived listing keeps: runs that ended in [ended_after, ended_before) and
    pass the filters an index row carries the fields of."""

    ended_after: datetime
    ended_before: datetime
    job_id: uuid.UUID | None = None
    state: str | None = None
    task: str | None = None
    since: datetime | None = None  # scheduled for at or after
    until: datetime | None = None  # scheduled for before
    where: AttributeFilter = field(default_factory=AttributeFilter)

    def days(self) -> list[date]:
        """The UTC days the range spans, latest first: the index prefixes to read."""
        first = self.ended_after.astimezone(UTC).date()
        last = (self.ended_before.astimezone(UTC) - timedelta(microseconds=1)).date()
        return [last - timedelta(days=n) for n in range((last - first).days + 1)]

    def keeps(self, row: ArchivedRunSummary, archived_at: datetime) -> bool:
        ended = row.ended_at or archived_at  # as the index files it (build_indexes)
        return (self.ended_after <= ended < self.ended_before
                and (self.job_id is None or row.job_id == self.job_id)
                and (self.state is None or row.state == self.state)
                and (self.task is None or row.task == self.task)
                and (self.since is None or row.scheduled_for >= self.since)
                and (self.until is None or row.scheduled_for < self.until)
                and (not self.where or attributes.matches(self.where, row.attributes)))


def summary_filter(ended_after: datetime | None, ended_before: datetime | None,
                   **filters: Any) -> SummaryFilter:
    """The archived part's filter; a range missing, reversed or longer than `MAX_RANGE` is a
    422 naming the parameter."""
    for name, value in (("ended_after", ended_after), ("ended_before", ended_before)):
        if value is None:
            raise InvalidInput(f"include=archived takes a time range: {name} is missing",
                               errors=[{"field": name, "message": "required with "
                                        "include=archived (RFC 3339)"}])
    assert ended_after is not None and ended_before is not None
    if ended_before <= ended_after:
        raise InvalidInput("ended_before must be after ended_after", errors=[
            {"field": "ended_before", "message": "not after ended_after"}])
    if ended_before - ended_after > MAX_RANGE:
        raise InvalidInput(f"an archived listing spans at most {MAX_RANGE.days} days",
                           errors=[{"field": "ended_before", "message": "at most "
                                    f"{MAX_RANGE.days} days after ended_after"}])
    return SummaryFilter(ended_after=ended_after, ended_before=ended_before, **filters)


class ArchiveCursor(msgspec.Struct, array_like=True, frozen=True):
    """Where an archived listing goes on: the day, the index key and the row in it."""

    day: date
    key: str
    row: int


def encode_cursor(at: ArchiveCursor) -> str:
    return CURSOR_MARK + base64.urlsafe_b64encode(msgspec.json.encode(at)).decode()


def decode_cursor(cursor: str) -> ArchiveCursor:
    try:
        return msgspec.json.decode(base64.urlsafe_b64decode(cursor[len(CURSOR_MARK):]),
                                   type=ArchiveCursor)
    except (ValueError, msgspec.DecodeError) as exc:
        raise InvalidInput("cursor is not one this API returned", errors=[
            {"field": "cursor", "message": "invalid cursor"}]) from exc


def is_archive_cursor(cursor: str | None) -> bool:
    return bool(cursor) and cursor.startswith(CURSOR_MARK)  # type: ignore[union-attr]


@dataclass(slots=True)
class ArchivedPage:
    rows: list[ArchivedRunSummary]
    next_cursor: str | None


async def summaries(archive: Archive, tenant_id: uuid.UUID, f: SummaryFilter,
                    after: ArchiveCursor | None, limit: int) -> ArchivedPage:
    """Up to `limit` index rows passing `f`, by the day the runs ended (latest first), then
    index key and row; at most `MAX_INDEX_READS` index objects are opened, so a page may be
    short (even empty) and still name a next cursor. A run archived twice (an archiver that
    crashed between its puts and the removal, then ran again) is listed once in a page."""
    rows: list[ArchivedRunSummary] = []
    seen: set[uuid.UUID] = set()
    reads = 0
    for day in f.days():
        if after is not None and day > after.day:
            continue
        prefix = index_prefix(tenant_id, day)
        try:
            keys = [k async for k in archive.store.list(prefix)]
        except ObjectStoreError as exc:
            raise _unavailable(exc, tenant_id) from None
        for key in keys:
            start = 0
            if after is not None and day == after.day:
                if key < after.key:
                    continue
                start = after.row if key == after.key else 0
            if reads == MAX_INDEX_READS:
                return ArchivedPage(rows, encode_cursor(ArchiveCursor(day, key, start)))
            reads += 1
            data = await archive._get(key, tenant_id)
            if data is None:
                continue  # deleted since it was listed
            try:
                index = decode_index(data, key=key)
            except ArchiveCorrupt as exc:
                raise _unreadable(exc, tenant_id, f"index {key}") from None
            metrics.ARCHIVE_READS.labels("read").inc()
            for n in range(start, len(index.rows)):
                row = index.rows[n]
                if row.id in seen or not f.keeps(row, index.archived_at):
                    continue
                seen.add(row.id)
                rows.append(row)
                if len(rows) == limit:
                    return ArchivedPage(rows, encode_cursor(ArchiveCursor(day, key, n + 1)))
    return ArchivedPage(rows, None)


async def runs_of(archive: Archive, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID],
                  skip: Collection[uuid.UUID] = ()) -> list[ArchivedRun]:
    """The archived runs of a listing page, in the page's order, read a few at a time; a run
    in `skip` (still hot: the hot part lists it) or whose object is gone is left out."""
    gate = asyncio.Semaphore(MAX_CONCURRENT_READS)

    async def one(run_id: uuid.UUID) -> ArchivedRun | None:
        async with gate:
            return await archive.run(tenant_id, run_id)

    wanted = [i for i in ids if i not in skip]
    found = await asyncio.gather(*(one(i) for i in wanted))
    return [r for r in found if r is not None]
