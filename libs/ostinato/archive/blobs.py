"""Blobs in object storage by content address (issue 38 item 4, docs/RETENTION.md "Blobs").

A blob (a job's payload, a run's output, a signal's payload, a step's large output, captured
logs) is kept inline in PostgreSQL's `blobs` row while it is small; over the inline limit its
bytes go to the object store under `blob_key(tenant, sha256)` and the row keeps only the
reference (`sha256`, `object_key`, `size_bytes`, and in `data` the reference document, so a
reader of the previous release, which reads `data` as the value, meets a JSON document and
never a NULL). Pure: the decision, the reference and the check of what is read back.
"""

from __future__ import annotations

import hashlib
import uuid

import msgspec

from ostinato.archive.keys import blob_key

# Values up to this many bytes (their JSON) stay inline in PostgreSQL: a row read with the run
# costs less than a request to the object store, and most payloads and outputs are this small.
DEFAULT_INLINE_MAX_BYTES = 4096
# The one field of the document a reference row holds in `blobs.data` (what a reader that knows
# nothing of object storage shows instead of the value: docs/UPGRADES.md).
REFERENCE_FIELD = "ostinato_blob_ref"


class BlobRef(msgspec.Struct, frozen=True, kw_only=True):
    """Where a blob's bytes are: its object's key, their SHA-256 (hex) and length."""

    key: str
    sha256: str
    size: int


class BlobCorrupt(Exception):
    """A blob's object that is not the bytes its reference names (another length, another
    digest), or is gone. `what` says which; `key` names the object."""

    def __init__(self, what: str, *, key: str) -> None:
        self.what = what
        self.key = key
        super().__init__(f"{key}: {what}")


def goes_to_objects(size: int, inline_max_bytes: int | None) -> bool:
    """Whether a blob of `size` bytes is put in the object store (None: no store configured,
    everything inline)."""
    return inline_max_bytes is not None and size > inline_max_bytes


def reference(tenant_id: uuid.UUID, data: bytes) -> BlobRef:
    """The content address of `data` within its tenant."""
    digest = hashlib.sha256(data).hexdigest()
    return BlobRef(key=blob_key(tenant_id, digest), sha256=digest, size=len(data))


def reference_document(ref: BlobRef) -> bytes:
    """What a reference row keeps in `blobs.data`: JSON naming the object (never the value)."""
    return msgspec.json.encode({REFERENCE_FIELD: ref})


def checked(ref: BlobRef, data: bytes) -> bytes:
    """`data` read from `ref.key` if it is what the reference names; BlobCorrupt otherwise (a
    torn or replaced object reads as a clear problem, never as another value)."""
    if len(data) != ref.size:
        raise BlobCorrupt(f"{len(data)} bytes where the reference says {ref.size}", key=ref.key)
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise BlobCorrupt("its SHA-256 is not the reference's", key=ref.key)
    return data
