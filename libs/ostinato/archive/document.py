"""The archive documents: a finished run's whole history (`ArchivedRun`, one object per run) and
a batch's summary rows for listing (`ArchiveIndex`, one object per tenant, day and batch).

The bytes are gzip'd JSON, readable with `zcat | jq`: an envelope
`{"format": 1, "sha256": "<hex>", "body": {...}}` whose `sha256` is the digest of the body's
bytes exactly as they stand in the envelope. gzip's CRC catches a torn or flipped object; the
digest catches a body rewritten by hand or by a faulty tool that re-gzipped it, and the format
number lets a later release read what an earlier one wrote (or refuse it by name). Decoding
never answers a half-read document: any fault is `ArchiveCorrupt` saying what is wrong.

Values are JSON: in `ArchivedRun.run` (the `runs` row, column by column, as it stood when
archived) uuids and timestamps come back as their ISO text; read a typed view of it with
`msgspec.convert(run, Type, strict=False)`. Events, steps and blobs are typed structs.
"""

from __future__ import annotations

import gzip
import hashlib
import uuid
import zlib
from collections.abc import Callable, Iterable
from datetime import date, datetime
from typing import Any, TypeVar

import msgspec

from ostinato.archive.blobs import BlobRef
from ostinato.archive.keys import index_key, parse_dag_run_key, parse_index_key, parse_run_key

K = TypeVar("K")  # what a key names
D = TypeVar("D", "ArchivedRun", "ArchiveIndex", "ArchivedDagRun")  # a sealed document

FORMAT_VERSION = 1

_ENVELOPE_HEAD = b'{"format":%d,"sha256":"%s","body":'
_GZIP_LEVEL = 6  # level 9 costs about twice the CPU for a few per cent less on JSON this size


class ArchiveCorrupt(Exception):
    """An archive object that cannot be read as what its key says: not gzip, not JSON, a
    format this release does not read, a checksum that does not match, a body that is not the
    format's shape, or a tenant or run id that is not its key's. `what` says which."""

    def __init__(self, what: str, *, key: str | None = None) -> None:
        self.what = what
        self.key = key
        super().__init__(f"{key}: {what}" if key else what)


class ArchivedEvent(msgspec.Struct, kw_only=True, frozen=True):
    """One event of the run's stream, every column of `events` but the stream's own (its id is
    the run id, its type `run`, its tenant the document's)."""

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


class ArchivedStep(msgspec.Struct, kw_only=True, frozen=True):
    """A workflow step as `run_steps` held it; a set-aside one (`run_steps_set_aside`, an
    operator's reset) also carries the version of the event that set it aside and when."""

    seq: int
    name: str
    succeeded: bool
    attempt: int
    tries: int
    duration_ms: float
    recorded_at: datetime
    output: Any = None
    output_ref: uuid.UUID | None = None
    error_type: str | None = None
    message: str | None = None
    supplied_by: str | None = None
    set_aside_version: int | None = None
    set_aside_at: datetime | None = None


class ArchivedBlob(msgspec.Struct, kw_only=True, frozen=True):
    """A blob the run referenced (its payload, output, captured logs, step outputs). One kept
    in the object store (over the inline limit) is kept there: `ref` names its object (key and
    SHA-256, which a reader checks) and `data` is None; the archive never copies it."""

    id: uuid.UUID
    kind: str
    data: Any
    size_bytes: int | None = None
    created_at: datetime | None = None
    ref: BlobRef | None = None


class ArchivedRun(msgspec.Struct, kw_only=True, frozen=True):
    """A finished run's whole history: enough to answer GET /v1/runs/{id}, /events and /steps
    without the hot database, and to re-check it against the log it came from."""

    tenant_id: uuid.UUID
    run_id: uuid.UUID
    archived_at: datetime
    run: dict[str, Any]
    events: list[ArchivedEvent]
    steps: list[ArchivedStep] = []
    set_aside_steps: list[ArchivedStep] = []
    blobs: list[ArchivedBlob] = []
    workflow_id: str | None = None
    attributes: dict[str, Any] = {}
    # A one-off job leaves the hot tables with its last run (migration 0046): its `jobs` row
    # and its stream's events travel in its runs' objects (None / empty for a recurring job,
    # which stays hot).
    job: dict[str, Any] | None = None
    job_events: list[ArchivedEvent] = []
    format_version: int = FORMAT_VERSION


class ArchivedDagRun(msgspec.Struct, kw_only=True, frozen=True):
    """A finished DAG run's history (migration 0052): its `dag_runs` row and `dag_run_nodes`
    rows as they stood (JSON, column by column), every event of its stream, and a one-off DAG
    job's row and stream when the job leaves with it. Its node runs are archived first, each in
    its own run object; the definition (`dags`, `dag_versions`) stays hot with its DAG."""

    tenant_id: uuid.UUID
    dag_run_id: uuid.UUID
    archived_at: datetime
    dag_run: dict[str, Any]
    nodes: list[dict[str, Any]]
    events: list[ArchivedEvent]
    job: dict[str, Any] | None = None
    job_events: list[ArchivedEvent] = []
    format_version: int = FORMAT_VERSION


class ArchivedRunSummary(msgspec.Struct, kw_only=True, frozen=True):
    """A run's row in an index object: what `GET /v1/runs?include=archived` filters and lists
    without opening the run's own object."""

    id: uuid.UUID
    job_id: uuid.UUID
    task: str
    state: str
    scheduled_for: datetime
    created_at: datetime | None
    ended_at: datetime | None
    attempts: int
    workflow_id: str | None = None
    attributes: dict[str, Any] | None = None


class ArchiveIndex(msgspec.Struct, kw_only=True, frozen=True):
    """One batch's summary rows of one tenant's runs that ended on one day (UTC)."""

    tenant_id: uuid.UUID
    ended_day: date
    batch_id: uuid.UUID
    archived_at: datetime
    rows: list[ArchivedRunSummary]
    format_version: int = FORMAT_VERSION


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    format: int
    sha256: str
    body: msgspec.Raw


class _RunColumns(msgspec.Struct):
    """The columns of a `runs` row a summary reads (the rest are ignored)."""

    id: uuid.UUID
    job_id: uuid.UUID
    task: str
    state: str
    scheduled_for: datetime
    attempt: int
    scheduled_at: datetime | None = None
    finished_at: datetime | None = None


_encoder = msgspec.json.Encoder()


def _seal(body: bytes) -> bytes:
    digest = hashlib.sha256(body).hexdigest().encode()
    document = (_ENVELOPE_HEAD % (FORMAT_VERSION, digest)) + body + b"}"
    return gzip.compress(document, compresslevel=_GZIP_LEVEL, mtime=0)


def _open(data: bytes, key: str | None) -> bytes:
    """The body's bytes once the gzip, the envelope, the format and the digest are checked."""
    if not data:
        raise ArchiveCorrupt("not a gzip object (empty)", key=key)
    try:
        document = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise ArchiveCorrupt(f"not a gzip object ({exc})", key=key) from None
    try:
        envelope = msgspec.json.decode(document, type=_Envelope)
    except msgspec.DecodeError as exc:
        raise ArchiveCorrupt(f"not an archive envelope ({exc})", key=key) from None
    if envelope.format != FORMAT_VERSION:
        raise ArchiveCorrupt(
            f"format version {envelope.format}: this release reads {FORMAT_VERSION}", key=key
        )
    body = bytes(envelope.body)
    if hashlib.sha256(body).hexdigest() != envelope.sha256:
        raise ArchiveCorrupt("checksum mismatch: the body is not what was archived", key=key)
    return body


def _check_history(run: ArchivedRun) -> str | None:
    """Why the document is not a whole, ordered history of its run, or None."""
    if str(run.run.get("id")) != str(run.run_id):
        return f"the runs row is run {run.run.get('id')}, not {run.run_id}"
    if run.run.get("tenant_id") is not None and str(run.run["tenant_id"]) != str(run.tenant_id):
        return f"the runs row is tenant {run.run['tenant_id']}'s, not {run.tenant_id}'s"
    if not run.events:
        return "no events: a run's history starts with RunScheduled"
    for expected, event in enumerate(run.events, start=1):
        if event.version != expected:
            return f"events out of order or missing: version {event.version} at position {expected}"
    for before, after in zip(run.events, run.events[1:], strict=False):
        if after.seq <= before.seq:
            return f"events out of log order: seq {after.seq} after {before.seq}"
    return None


def encode_run(run: ArchivedRun) -> bytes:
    """The object to store at `run_key(run.tenant_id, run.run_id)`. Refuses (ValueError) a
    document that is not a whole history in order: an archive written from a partial read
    would be the only copy once the run is removed."""
    if run.format_version != FORMAT_VERSION:
        raise ValueError(f"this release writes format {FORMAT_VERSION}, not {run.format_version}")
    fault = _check_history(run)
    if fault is not None:
        raise ValueError(fault)
    return _seal(_encoder.encode(run))


def _expected(parse: Callable[[str], K], key: str | None) -> K | None:
    """What `key` names (tenant, run or day and batch), or None without a key; a key that
    is not one of ours makes the object corrupt."""
    if key is None:
        return None
    try:
        return parse(key)
    except ValueError as exc:
        raise ArchiveCorrupt(str(exc), key=key) from None


def _document(data: bytes, key: str | None, type_: type[D], what: str) -> D:
    """The sealed body decoded as `type_`, of this format version."""
    try:
        doc = msgspec.json.decode(_open(data, key), type=type_)
    except msgspec.DecodeError as exc:
        raise ArchiveCorrupt(f"the body is not {what} ({exc})", key=key) from None
    if doc.format_version != FORMAT_VERSION:
        raise ArchiveCorrupt(
            f"body format version {doc.format_version}: the envelope says {FORMAT_VERSION}",
            key=key,
        )
    return doc


def decode_run(data: bytes, *, key: str | None = None) -> ArchivedRun:
    """The run archived in `data`. With `key` (where it was read from) the document must be
    that key's tenant's and run's: an object copied or restored under the wrong key is
    corrupt, never another tenant's run answered."""
    expected = _expected(parse_run_key, key)
    run = _document(data, key, ArchivedRun, "an archived run")
    if expected is not None:
        tenant_id, run_id = expected
        if run.tenant_id != tenant_id:
            raise ArchiveCorrupt(f"tenant {run.tenant_id}, not the key's {tenant_id}", key=key)
        if run.run_id != run_id:
            raise ArchiveCorrupt(f"run {run.run_id}, not the key's {run_id}", key=key)
    fault = _check_history(run)
    if fault is not None:
        raise ArchiveCorrupt(fault, key=key)
    return run


def _check_dag_run(doc: ArchivedDagRun) -> str | None:
    """Why the document is not a whole, ordered history of its DAG run, or None."""
    if str(doc.dag_run.get("id")) != str(doc.dag_run_id):
        return f"the dag_runs row is DAG run {doc.dag_run.get('id')}, not {doc.dag_run_id}"
    if str(doc.dag_run.get("tenant_id")) != str(doc.tenant_id):
        return f"the dag_runs row is tenant {doc.dag_run.get('tenant_id')}'s, not {doc.tenant_id}'s"
    for node in doc.nodes:
        if str(node.get("dag_run_id")) != str(doc.dag_run_id):
            return f"node {node.get('key')!r} is DAG run {node.get('dag_run_id')}'s"
    if not doc.events:
        return "no events: a DAG run's history starts with DagRunStarted"
    for expected, event in enumerate(doc.events, start=1):
        if event.version != expected:
            return f"events out of order or missing: version {event.version} at position {expected}"
    return None


def encode_dag_run(doc: ArchivedDagRun) -> bytes:
    """The object to store at `dag_run_key(doc.tenant_id, doc.dag_run_id)`; ValueError for a
    document that is not its DAG run's whole history in order."""
    if doc.format_version != FORMAT_VERSION:
        raise ValueError(f"this release writes format {FORMAT_VERSION}, not {doc.format_version}")
    fault = _check_dag_run(doc)
    if fault is not None:
        raise ValueError(fault)
    return _seal(_encoder.encode(doc))


def decode_dag_run(data: bytes, *, key: str | None = None) -> ArchivedDagRun:
    """The DAG run archived in `data`; with `key`, it must be that key's tenant's and DAG
    run's (ArchiveCorrupt otherwise, as for a run)."""
    expected = _expected(parse_dag_run_key, key)
    doc = _document(data, key, ArchivedDagRun, "an archived DAG run")
    if expected is not None:
        tenant_id, dag_run_id = expected
        if doc.tenant_id != tenant_id:
            raise ArchiveCorrupt(f"tenant {doc.tenant_id}, not the key's {tenant_id}", key=key)
        if doc.dag_run_id != dag_run_id:
            raise ArchiveCorrupt(f"DAG run {doc.dag_run_id}, not the key's {dag_run_id}",
                                 key=key)
    fault = _check_dag_run(doc)
    if fault is not None:
        raise ArchiveCorrupt(fault, key=key)
    return doc


def summary_of(run: ArchivedRun) -> ArchivedRunSummary:
    """The index row of an archived run, read from its `runs` row (typed or JSON values)."""
    try:
        columns = msgspec.convert(run.run, _RunColumns, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(f"run {run.run_id}'s row lacks what an index row needs: {exc}") from None
    return ArchivedRunSummary(
        id=columns.id,
        job_id=columns.job_id,
        task=columns.task,
        state=columns.state,
        scheduled_for=columns.scheduled_for,
        created_at=columns.scheduled_at,
        ended_at=columns.finished_at,
        attempts=columns.attempt,
        workflow_id=run.workflow_id,
        attributes=dict(run.attributes) or None,
    )


def build_indexes(
    batch_id: uuid.UUID, archived_at: datetime, runs: Iterable[ArchivedRun]
) -> list[tuple[str, ArchiveIndex]]:
    """A batch's index objects, keyed: one per tenant and day its runs ended (UTC; a run with
    no end time files under the day it was archived), rows in run order, keys in key order."""
    groups: dict[tuple[uuid.UUID, date], list[ArchivedRunSummary]] = {}
    for run in runs:
        summary = summary_of(run)
        ended = summary.ended_at or archived_at
        day = _utc_day(ended)
        groups.setdefault((run.tenant_id, day), []).append(summary)
    indexes = [
        (
            index_key(tenant_id, day, batch_id),
            ArchiveIndex(tenant_id=tenant_id, ended_day=day, batch_id=batch_id,
                         archived_at=archived_at, rows=rows),
        )
        for (tenant_id, day), rows in groups.items()
    ]
    return sorted(indexes, key=lambda pair: pair[0])


def _utc_day(moment: datetime) -> date:
    """The UTC day of a moment (a naive one is taken as UTC already)."""
    offset = moment.utcoffset()
    return (moment - offset).date() if offset else moment.date()


def encode_index(index: ArchiveIndex) -> bytes:
    """The object to store at `index_key(index.tenant_id, index.ended_day, index.batch_id)`."""
    if index.format_version != FORMAT_VERSION:
        raise ValueError(f"this release writes format {FORMAT_VERSION}, not {index.format_version}")
    return _seal(_encoder.encode(index))


def decode_index(data: bytes, *, key: str | None = None) -> ArchiveIndex:
    """The index archived in `data`; with `key`, it must be that key's tenant, day and batch."""
    expected = _expected(parse_index_key, key)
    index = _document(data, key, ArchiveIndex, "an archive index")
    if expected is not None:
        tenant_id, day, batch_id = expected
        if index.tenant_id != tenant_id:
            raise ArchiveCorrupt(f"tenant {index.tenant_id}, not the key's {tenant_id}", key=key)
        if index.ended_day != day:
            raise ArchiveCorrupt(f"day {index.ended_day}, not the key's {day}", key=key)
        if index.batch_id != batch_id:
            raise ArchiveCorrupt(f"batch {index.batch_id}, not the key's {batch_id}", key=key)
    return index
