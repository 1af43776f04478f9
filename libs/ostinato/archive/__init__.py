"""The archive of finished runs (docs/RETENTION.md): the object keys (`keys`) and the archive
document, one gzip'd JSON object per run and an index object per batch (`document`). Pure: no
I/O; the archiver duty (services/reconciler/checks/archive.py) writes these objects, the api
reads them back (V). Kept on the ground floor so both sides share one format."""

from ostinato.archive.blobs import (
    DEFAULT_INLINE_MAX_BYTES,
    BlobCorrupt,
    BlobRef,
    checked,
    goes_to_objects,
    reference,
    reference_document,
)
from ostinato.archive.document import (
    FORMAT_VERSION,
    ArchiveCorrupt,
    ArchivedBlob,
    ArchivedEvent,
    ArchivedRun,
    ArchivedRunSummary,
    ArchivedStep,
    ArchiveIndex,
    build_indexes,
    decode_index,
    decode_run,
    encode_index,
    encode_run,
    summary_of,
)
from ostinato.archive.keys import (
    blob_key,
    index_key,
    index_prefix,
    parse_blob_key,
    parse_index_key,
    parse_run_key,
    run_key,
    tenant_prefix,
)

__all__ = [
    "DEFAULT_INLINE_MAX_BYTES",
    "FORMAT_VERSION",
    "ArchiveCorrupt",
    "ArchiveIndex",
    "ArchivedBlob",
    "ArchivedEvent",
    "ArchivedRun",
    "ArchivedRunSummary",
    "ArchivedStep",
    "BlobCorrupt",
    "BlobRef",
    "blob_key",
    "build_indexes",
    "checked",
    "decode_index",
    "decode_run",
    "encode_index",
    "encode_run",
    "goes_to_objects",
    "index_key",
    "index_prefix",
    "parse_blob_key",
    "parse_index_key",
    "parse_run_key",
    "reference",
    "reference_document",
    "run_key",
    "summary_of",
    "tenant_prefix",
]
