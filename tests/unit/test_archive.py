"""The archive format (ostinato.archive): keys scoped by tenant, a run's document and a batch's
index round-trip exactly, and every way an object can be wrong is an ArchiveCorrupt naming it,
never a half-read run nor another tenant's."""

from __future__ import annotations

import gzip
import hashlib
import json
import uuid
from datetime import UTC, date, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ostinato.archive import (
    FORMAT_VERSION,
    ArchiveCorrupt,
    ArchivedBlob,
    ArchivedEvent,
    ArchivedRun,
    ArchivedStep,
    ArchiveIndex,
    build_indexes,
    decode_index,
    decode_run,
    encode_index,
    encode_run,
    index_key,
    index_prefix,
    parse_index_key,
    parse_run_key,
    run_key,
    summary_of,
    tenant_prefix,
)

TENANT = uuid.UUID("11111111-1111-4111-8111-111111111111")
OTHER = uuid.UUID("22222222-2222-4222-8222-222222222222")
RUN = uuid.UUID("33333333-3333-4333-8333-333333333333")
JOB = uuid.UUID("44444444-4444-4444-8444-444444444444")
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def event(version: int, type_: str = "RunQueued", data: object = None, seq: int | None = None
          ) -> ArchivedEvent:
    return ArchivedEvent(
        seq=seq if seq is not None else 100 + version * 7, version=version, type=type_,
        data={"run_id": str(RUN), "n": version} if data is None else data, actor="scheduler",
        epoch=version if version % 2 else None, traceparent=None if version % 3 else "00-ab-cd-01",
        occurred_at=T0 + timedelta(seconds=version),
        recorded_at=T0 + timedelta(seconds=version, microseconds=5),
        event_id=uuid.UUID(int=version))


def runs_row(**overrides: object) -> dict[str, object]:
    """A `runs` row as asyncpg hands it over: typed values (UUID, datetime, decoded jsonb)."""
    row: dict[str, object] = {
        "id": RUN, "tenant_id": TENANT, "job_id": JOB, "task": "billing.charge", "pool": "default",
        "priority": "normal", "payload_ref": uuid.UUID(int=9), "scheduled_for": T0,
        "state": "succeeded", "attempt": 2, "fencing_token": 7, "worker_id": "w-1",
        "output_ref": None, "last_error": {"type": "Timeout", "message": "é ✓"},
        "scheduled_at": T0 - timedelta(seconds=1), "finished_at": T0 + timedelta(minutes=3),
        "timeout_seconds": 12.5, "cancel_requested": False, "wake_at": None,
    }
    row.update(overrides)
    return row


def archived(**overrides: object) -> ArchivedRun:
    fields: dict[str, object] = {
        "tenant_id": TENANT, "run_id": RUN, "archived_at": T0 + timedelta(days=31),
        "run": runs_row(),
        "events": [event(1, "RunScheduled"), event(2),
                   event(3, "RunSucceeded", {"output": [1, 2.5, None, "x"]})],
        "steps": [ArchivedStep(seq=1, name="charge", succeeded=True, attempt=1, tries=1,
                               duration_ms=3.25, recorded_at=T0, output={"ok": True})],
        "set_aside_steps": [ArchivedStep(seq=1, name="charge", succeeded=False, attempt=1, tries=2,
                                         duration_ms=1.0, recorded_at=T0, error_type="E",
                                         message="m", set_aside_version=2, set_aside_at=T0)],
        "blobs": [ArchivedBlob(id=uuid.UUID(int=9), kind="payload", data={"amount": 12},
                               size_bytes=14, created_at=T0)],
        "workflow_id": "order-17", "attributes": {"region": "eu", "amount": 12},
        "job": {"id": JOB, "kind": "at", "status": "completed"},
        "job_events": [event(1, "JobCreated", {"name": "charge"}, seq=3)],
    }
    fields.update(overrides)
    return ArchivedRun(**fields)  # type: ignore[arg-type]


def envelope(body: bytes, *, fmt: int = FORMAT_VERSION, sha: str | None = None) -> bytes:
    digest = sha if sha is not None else hashlib.sha256(body).hexdigest()
    head = b'{"format":%d,"sha256":"%s","body":' % (fmt, digest.encode())
    return gzip.compress(head + body + b"}")


def body_of(data: bytes) -> dict:
    return json.loads(gzip.decompress(data))["body"]


def corrupt(data: bytes, *, key: str | None = None) -> str:
    with pytest.raises(ArchiveCorrupt) as caught:
        decode_run(data, key=key)
    return caught.value.what


# -- keys ---------------------------------------------------------------------------------------


def test_run_key_is_under_the_tenants_prefix_and_parses_back():
    key = run_key(TENANT, RUN)
    assert key == f"tenants/{TENANT}/runs/{RUN}.json.gz"
    assert key.startswith(tenant_prefix(TENANT))
    assert parse_run_key(key) == (TENANT, RUN)


def test_keys_are_canonical_whatever_the_ids_spelling():
    assert run_key(str(TENANT).upper(), "{" + str(RUN) + "}") == run_key(TENANT, RUN)
    assert run_key(TENANT.hex, RUN.hex) == run_key(TENANT, RUN)


@pytest.mark.parametrize("bad", ["../x", "", "tenants", "1111", str(TENANT) + "/.."])
def test_a_key_is_never_built_from_what_is_not_an_id(bad: str):
    with pytest.raises(ValueError, match="not a UUID"):
        run_key(bad, RUN)
    with pytest.raises(ValueError, match="not a UUID"):
        run_key(TENANT, bad)
    with pytest.raises(ValueError, match="not a UUID"):
        index_key(TENANT, date(2026, 1, 1), bad)


def test_index_key_files_by_day_in_key_order_and_parses_back():
    batch = uuid.uuid4()
    key = index_key(TENANT, date(2026, 3, 9), batch)
    assert key == f"tenants/{TENANT}/index/2026/03/09/{batch}.json.gz"
    assert key.startswith(index_prefix(TENANT, date(2026, 3, 9)))
    assert key.startswith(index_prefix(TENANT))
    assert parse_index_key(key) == (TENANT, date(2026, 3, 9), batch)
    days = [date(2026, 1, 2), date(2026, 1, 10), date(2026, 10, 1), date(2027, 2, 1)]
    keys = [index_key(TENANT, d, batch) for d in days]
    assert keys == sorted(keys)


@pytest.mark.parametrize("key", [
    f"tenants/{TENANT}/runs/{RUN}.json",
    f"tenants/{TENANT}/runs/{RUN}.json.gz/x",
    f"tenants/{TENANT}/index/2026/01/01/{RUN}.json.gz",
    f"tenants/{'AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA'}/runs/{RUN}.json.gz",
    f"/tenants/{TENANT}/runs/{RUN}.json.gz",
    "runs/x.json.gz",
])
def test_parse_run_key_refuses_what_is_not_a_run_key(key: str):
    with pytest.raises(ValueError, match="not an archived run's key"):
        parse_run_key(key)


@pytest.mark.parametrize("key", [
    f"tenants/{TENANT}/index/2026/13/01/{RUN}.json.gz",
    f"tenants/{TENANT}/index/2026/1/01/{RUN}.json.gz",
    f"tenants/{TENANT}/runs/{RUN}.json.gz",
])
def test_parse_index_key_refuses_what_is_not_an_index_key(key: str):
    with pytest.raises(ValueError):
        parse_index_key(key)


# -- a run's document ---------------------------------------------------------------------------


def test_a_run_round_trips_and_its_runs_row_comes_back_as_json_values():
    run = archived()
    back = decode_run(encode_run(run), key=run_key(TENANT, RUN))
    assert back.events == run.events
    assert back.steps == run.steps
    assert back.set_aside_steps == run.set_aside_steps
    assert back.blobs == run.blobs
    assert back.job_events == run.job_events
    assert back.job == {"id": str(JOB), "kind": "at", "status": "completed"}
    assert (back.tenant_id, back.run_id, back.archived_at) == (TENANT, RUN, run.archived_at)
    assert (back.workflow_id, back.attributes) == ("order-17", run.attributes)
    assert back.format_version == 1
    # the row's uuids and timestamps are their ISO text; typed again by a convert
    assert back.run["id"] == str(RUN)
    assert back.run["scheduled_for"] == "2026-12-01T09:00:00Z"
    assert back.run["last_error"] == {"type": "Timeout", "message": "é ✓"}
    assert msgspec.convert(back.run, dict[str, object]) == back.run
    assert back.run.keys() == run.run.keys()
    typed = msgspec.convert(back.run, _Row, strict=False)
    assert (typed.id, typed.scheduled_for, typed.timeout_seconds) == (RUN, T0, 12.5)


class _Row(msgspec.Struct):
    id: uuid.UUID
    scheduled_for: datetime
    timeout_seconds: float


def test_the_object_is_gzip_json_with_the_bodys_digest_beside_it():
    data = encode_run(archived())
    document = gzip.decompress(data)
    outer = json.loads(document)
    assert outer["format"] == FORMAT_VERSION
    body = document[document.index(b'"body":') + len(b'"body":'):-1]
    assert hashlib.sha256(body).hexdigest() == outer["sha256"]
    assert outer["body"]["run_id"] == str(RUN)


def test_encoding_is_deterministic():
    assert encode_run(archived()) == encode_run(archived())


@settings(max_examples=60, deadline=None)
@given(data=st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20))
def test_any_json_event_data_round_trips(data: object):
    run = archived(events=[event(1, "RunScheduled", data), event(2, "RunSucceeded", [data])])
    assert decode_run(encode_run(run)).events == run.events


def test_a_run_with_only_its_events_round_trips():
    run = ArchivedRun(tenant_id=TENANT, run_id=RUN, archived_at=T0, run={"id": RUN},
                      events=[event(1)])
    back = decode_run(encode_run(run))
    assert (back.steps, back.set_aside_steps, back.blobs) == ([], [], [])
    assert (back.workflow_id, back.attributes) == (None, {})
    assert (back.job, back.job_events) == (None, [])


# -- what encode refuses: a partial history would be the only copy once removed -----------------


@pytest.mark.parametrize(("events", "message"), [
    ([], "no events"),
    ([event(1), event(3)], "version 3 at position 2"),
    ([event(2), event(3)], "version 2 at position 1"),
    ([event(1, seq=50), event(2, seq=40)], "seq 40 after 50"),
    ([event(1, seq=50), event(2, seq=50)], "seq 50 after 50"),
])
def test_encode_refuses_a_history_that_is_not_whole_and_ordered(events: list, message: str):
    with pytest.raises(ValueError, match=message):
        encode_run(archived(events=events))


def test_encode_refuses_a_runs_row_of_another_run_or_tenant():
    with pytest.raises(ValueError, match="runs row is run"):
        encode_run(archived(run=runs_row(id=OTHER)))
    with pytest.raises(ValueError, match="runs row is tenant"):
        encode_run(archived(run=runs_row(tenant_id=OTHER)))


def test_encode_refuses_a_format_it_does_not_write():
    with pytest.raises(ValueError, match="writes format 1"):
        encode_run(archived(format_version=2))


# -- every corruption -----------------------------------------------------------------------------


def test_not_gzip_is_corrupt():
    assert "not a gzip object" in corrupt(b'{"format":1}')
    assert "not a gzip object" in corrupt(b"")


def test_a_truncated_object_is_corrupt():
    data = encode_run(archived())
    for cut in (len(data) - 1, len(data) // 2, 10):
        assert "not a gzip object" in corrupt(data[:cut])


def test_a_flipped_byte_is_corrupt():
    data = bytearray(encode_run(archived()))
    data[len(data) // 2] ^= 0x40
    with pytest.raises(ArchiveCorrupt):
        decode_run(bytes(data))


def test_gzip_of_what_is_not_json_is_corrupt():
    assert "not an archive envelope" in corrupt(gzip.compress(b"\x00hello"))


@pytest.mark.parametrize("document", [
    b"[1,2]",
    b'{"format":1,"body":{}}',
    b'{"format":1,"sha256":"x"}',
    b'{"format":"1","sha256":"x","body":{}}',
    b'{"format":1,"sha256":"x","body":{},"extra":1}',
])
def test_json_that_is_not_an_envelope_is_corrupt(document: bytes):
    assert "not an archive envelope" in corrupt(gzip.compress(document))


def test_a_format_this_release_does_not_read_is_named():
    body = msgspec.json.encode(archived())
    assert corrupt(envelope(body, fmt=2)) == "format version 2: this release reads 1"
    assert "format version 0" in corrupt(envelope(body, fmt=0))


def test_a_body_that_is_not_what_was_digested_is_a_checksum_mismatch():
    good = encode_run(archived())
    body = body_of(good)
    digest = json.loads(gzip.decompress(good))["sha256"]
    body["events"][1]["data"]["n"] = 99  # edited by hand, re-gzipped, digest kept
    what = corrupt(envelope(json.dumps(body).encode(), sha=digest))
    assert what.startswith("checksum mismatch")
    assert "checksum mismatch" in corrupt(envelope(msgspec.json.encode(archived()), sha="0" * 64))


@pytest.mark.parametrize("damage", [
    lambda b: b.pop("events"),
    lambda b: b.pop("run_id"),
    lambda b: b.update(run_id="not-a-uuid"),
    lambda b: b.update(archived_at="yesterday"),
    lambda b: b["events"][0].update(version="one"),
    lambda b: b["events"][0].pop("event_id"),
    lambda b: b.update(steps=[{"seq": 1}]),
    lambda b: b.update(blobs=[{"id": "x", "kind": "payload", "data": 1}]),
])
def test_a_body_not_of_the_formats_shape_is_corrupt(damage):
    body = body_of(encode_run(archived()))
    damage(body)
    assert "the body is not an archived run" in corrupt(envelope(json.dumps(body).encode()))


def test_a_body_whose_format_is_not_the_envelopes_is_corrupt():
    body = body_of(encode_run(archived()))
    body["format_version"] = 2
    assert "body format version 2" in corrupt(envelope(json.dumps(body).encode()))


@pytest.mark.parametrize(("damage", "message"), [
    (lambda b: b.update(events=[]), "no events"),
    (lambda b: b["events"].pop(1), "version 3 at position 2"),
    (lambda b: b["events"].reverse(), "version 3 at position 1"),
    (lambda b: b["events"][1].update(seq=1), "seq 1 after"),
    (lambda b: b["run"].update(id=str(OTHER)), "runs row is run"),
    (lambda b: b["run"].update(tenant_id=str(OTHER)), "runs row is tenant"),
])
def test_a_history_that_is_not_whole_and_ordered_is_corrupt(damage, message: str):
    body = body_of(encode_run(archived()))
    damage(body)
    assert message in corrupt(envelope(json.dumps(body).encode()))


def test_another_tenants_document_under_this_key_is_corrupt_never_answered():
    data = encode_run(archived())
    what = corrupt(data, key=run_key(OTHER, RUN))
    assert what == f"tenant {TENANT}, not the key's {OTHER}"
    with pytest.raises(ArchiveCorrupt) as caught:
        decode_run(data, key=run_key(OTHER, RUN))
    assert caught.value.key == run_key(OTHER, RUN)
    assert run_key(OTHER, RUN) in str(caught.value)


def test_another_runs_document_under_this_key_is_corrupt():
    other_run = uuid.uuid4()
    assert corrupt(encode_run(archived()), key=run_key(TENANT, other_run)) == \
        f"run {RUN}, not the key's {other_run}"


def test_a_key_that_is_not_a_run_key_is_corrupt_not_a_crash():
    assert "not an archived run's key" in corrupt(encode_run(archived()), key="elsewhere/x.json.gz")


# -- index rows -----------------------------------------------------------------------------------


def test_summary_reads_the_runs_row_typed_or_decoded():
    run = archived()
    summary = summary_of(run)
    assert (summary.id, summary.job_id, summary.task, summary.state, summary.attempts) == \
        (RUN, JOB, "billing.charge", "succeeded", 2)
    assert summary.created_at == T0 - timedelta(seconds=1)
    assert summary.ended_at == T0 + timedelta(minutes=3)
    assert (summary.workflow_id, summary.attributes) == ("order-17", {"region": "eu", "amount": 12})
    assert summary_of(decode_run(encode_run(run))) == summary


def test_summary_of_a_row_without_what_an_index_needs_is_refused():
    with pytest.raises(ValueError, match="lacks what an index row needs"):
        summary_of(archived(run={"id": RUN, "tenant_id": TENANT}))


def test_build_indexes_groups_by_tenant_and_utc_day_rows_in_run_order():
    batch = uuid.uuid4()
    late = datetime(2026, 12, 1, 23, 30, tzinfo=timezone(timedelta(hours=-2)))  # Dec 2 in UTC
    ids = [uuid.uuid4() for _ in range(4)]
    runs = [
        archived(run_id=ids[0], run=runs_row(id=ids[0], finished_at=T0)),
        archived(run_id=ids[1], tenant_id=OTHER,
                 run=runs_row(id=ids[1], tenant_id=OTHER, finished_at=T0)),
        archived(run_id=ids[2], run=runs_row(id=ids[2], finished_at=late)),
        archived(run_id=ids[3], run=runs_row(id=ids[3], finished_at=T0 + timedelta(hours=1))),
    ]
    indexes = build_indexes(batch, T0 + timedelta(days=30), runs)
    keys = [key for key, _ in indexes]
    assert keys == sorted(keys)
    got = {key: [row.id for row in index.rows] for key, index in indexes}
    assert got == {
        index_key(TENANT, date(2026, 12, 1), batch): [ids[0], ids[3]],
        index_key(TENANT, date(2026, 12, 2), batch): [ids[2]],
        index_key(OTHER, date(2026, 12, 1), batch): [ids[1]],
    }
    for key, index in indexes:
        assert parse_index_key(key) == (index.tenant_id, index.ended_day, batch)


def test_a_run_without_an_end_time_files_under_the_day_it_was_archived():
    [(key, index)] = build_indexes(RUN, T0, [archived(run=runs_row(finished_at=None))])
    assert key == index_key(TENANT, T0.date(), RUN)
    assert index.rows[0].ended_at is None


def test_an_index_round_trips():
    batch = uuid.uuid4()
    [(key, index)] = build_indexes(batch, T0, [archived()])
    assert decode_index(encode_index(index), key=key) == index


@pytest.mark.parametrize("which", ["tenant", "day", "batch"])
def test_an_index_under_another_key_is_corrupt(which: str):
    batch = uuid.uuid4()
    [(_, index)] = build_indexes(batch, T0, [archived()])
    tenant, day = TENANT, index.ended_day
    if which == "tenant":
        tenant = OTHER
    elif which == "day":
        day = day + timedelta(days=1)
    else:
        batch = uuid.uuid4()
    with pytest.raises(ArchiveCorrupt, match=f"{which} .*not the key's"):
        decode_index(encode_index(index), key=index_key(tenant, day, batch))


def test_a_run_object_is_not_an_index_and_the_reverse():
    [(_, index)] = build_indexes(uuid.uuid4(), T0, [archived()])
    with pytest.raises(ArchiveCorrupt, match="not an archive index"):
        decode_index(encode_run(archived()))
    with pytest.raises(ArchiveCorrupt, match="not an archived run"):
        decode_run(encode_index(index))
    with pytest.raises(ArchiveCorrupt, match="not an archive index key"):
        decode_index(encode_index(index), key=run_key(TENANT, RUN))


def test_an_index_corrupted_is_named():
    [(_, index)] = build_indexes(uuid.uuid4(), T0, [archived()])
    data = encode_index(index)
    with pytest.raises(ArchiveCorrupt, match="not a gzip object"):
        decode_index(data[:-3])
    body = body_of(data)
    body["rows"][0]["state"] = "cancelled"
    with pytest.raises(ArchiveCorrupt, match="checksum mismatch"):
        digest = json.loads(gzip.decompress(data))["sha256"]
        decode_index(envelope(json.dumps(body).encode(), sha=digest))
    with pytest.raises(ArchiveCorrupt, match="format version 3"):
        decode_index(envelope(json.dumps(body).encode(), fmt=3))


def test_encode_index_refuses_a_format_it_does_not_write():
    with pytest.raises(ValueError, match="writes format 1"):
        encode_index(ArchiveIndex(tenant_id=TENANT, ended_day=T0.date(), batch_id=RUN,
                                  archived_at=T0, rows=[], format_version=2))
