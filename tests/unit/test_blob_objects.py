"""Blobs in object storage (issue 38 item 4), the pure parts: the content-addressed key, the
inline limit, the reference a `blobs` row keeps and the check of what is read back, the archive
document keeping a reference rather than a copy, the settings."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime

import msgspec
import pytest

from ostinato.archive import (
    ArchivedBlob,
    ArchivedEvent,
    ArchivedRun,
    BlobCorrupt,
    BlobRef,
    blob_key,
    checked,
    decode_run,
    encode_run,
    goes_to_objects,
    parse_blob_key,
    reference,
    reference_document,
    tenant_prefix,
)
from ostinato.archive.blobs import REFERENCE_FIELD
from ostinato.runtime.settings import load_settings

TENANT = uuid.UUID("11111111-1111-4111-8111-111111111111")
OTHER = uuid.UUID("22222222-2222-4222-8222-222222222222")
RUN = uuid.UUID("33333333-3333-4333-8333-333333333333")
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DIGEST = hashlib.sha256(b'{"big": true}').hexdigest()


def test_a_blob_key_is_the_tenants_content_address():
    key = blob_key(TENANT, DIGEST)
    assert key == f"tenants/{TENANT}/blobs/sha256/{DIGEST[:2]}/{DIGEST}"
    assert key.startswith(tenant_prefix(TENANT))  # leaves with the tenant's prefix
    assert parse_blob_key(key) == (TENANT, DIGEST)
    assert blob_key(str(TENANT).upper(), DIGEST) == key  # one id, one key
    assert blob_key(OTHER, DIGEST) != key  # two tenants' equal values: two objects


@pytest.mark.parametrize("bad", ["", "abc", DIGEST.upper(), DIGEST[:-1] + "g", DIGEST + "0",
                                 "../" + DIGEST[3:], None])
def test_a_blob_key_is_never_built_from_what_is_not_a_digest(bad: object):
    with pytest.raises(ValueError, match="SHA-256"):
        blob_key(TENANT, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", [
    f"tenants/{TENANT}/blobs/sha256/{DIGEST}",  # no fan-out folder
    f"tenants/{TENANT}/blobs/sha256/00/{DIGEST}" if not DIGEST.startswith("00") else "x",
    f"tenants/{TENANT}/runs/{RUN}.json.gz",
    f"tenants/not-a-uuid/blobs/sha256/{DIGEST[:2]}/{DIGEST}",
    f"/tenants/{TENANT}/blobs/sha256/{DIGEST[:2]}/{DIGEST}",
])
def test_parse_blob_key_refuses_what_is_not_a_blob_key(key: str):
    with pytest.raises(ValueError):
        parse_blob_key(key)


def test_the_inline_limit_is_inclusive_and_none_keeps_everything_inline():
    assert not goes_to_objects(4096, 4096)
    assert goes_to_objects(4097, 4096)
    assert goes_to_objects(1, 0)  # 0: every non-empty value in the object store
    assert not goes_to_objects(10 ** 9, None)  # no object store configured


def test_a_reference_names_the_content_and_its_document_is_json_never_the_value():
    data = b'{"big": true}'
    ref = reference(TENANT, data)
    assert ref == BlobRef(key=blob_key(TENANT, DIGEST), sha256=DIGEST, size=len(data))
    assert reference(TENANT, data) == ref  # content addressed: equal values, one object
    document = msgspec.json.decode(reference_document(ref))
    assert document == {REFERENCE_FIELD: {"key": ref.key, "sha256": DIGEST, "size": len(data)}}


def test_what_is_read_back_must_be_the_bytes_the_reference_names():
    data = b'{"big": true}'
    ref = reference(TENANT, data)
    assert checked(ref, data) == data
    with pytest.raises(BlobCorrupt, match="bytes where the reference says") as torn:
        checked(ref, data[:-1])
    assert torn.value.key == ref.key
    with pytest.raises(BlobCorrupt, match="SHA-256"):
        checked(ref, b'{"big": 1234}')  # same length, other bytes


def _archived(blobs: list[ArchivedBlob]) -> ArchivedRun:
    return ArchivedRun(
        tenant_id=TENANT, run_id=RUN, archived_at=T0, run={"id": RUN, "tenant_id": TENANT},
        events=[ArchivedEvent(seq=1, version=1, type="RunScheduled", data={}, actor="s",
                              epoch=None, traceparent=None, occurred_at=T0, recorded_at=T0,
                              event_id=uuid.UUID(int=1))],
        blobs=blobs)


def test_the_archive_keeps_a_reference_not_a_copy_and_reads_older_documents():
    ref = reference(TENANT, b'{"big": true}')
    run = _archived([
        ArchivedBlob(id=uuid.UUID(int=1), kind="output", data=None, size_bytes=ref.size,
                     created_at=T0, ref=ref),
        ArchivedBlob(id=uuid.UUID(int=2), kind="payload", data={"small": 1}, size_bytes=12,
                     created_at=T0)])
    back = decode_run(encode_run(run))
    assert back.blobs[0].ref == ref and back.blobs[0].data is None
    assert back.blobs[1].ref is None and back.blobs[1].data == {"small": 1}
    # a document written before references existed has no `ref`: read as inline
    old = msgspec.json.decode(msgspec.json.encode(
        {"id": str(uuid.UUID(int=3)), "kind": "payload", "data": [1]}), type=ArchivedBlob)
    assert old.ref is None and old.data == [1]


def test_the_settings_default_and_refuse_a_negative_limit():
    settings = load_settings({})
    assert settings.blob_objects and settings.blob_inline_max_bytes == 4096
    assert load_settings({"OSTINATO_BLOB_INLINE_MAX_BYTES": "0"}).blob_inline_max_bytes == 0
    assert not load_settings({"OSTINATO_BLOB_OBJECTS": "false"}).blob_objects
    with pytest.raises(SystemExit, match="OSTINATO_BLOB_INLINE_MAX_BYTES"):
        load_settings({"OSTINATO_BLOB_INLINE_MAX_BYTES": "-1"})
