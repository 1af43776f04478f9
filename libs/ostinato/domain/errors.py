"""One error taxonomy. Each error has a stable `code`, an HTTP status and a problem `type` URI,
so the API can render RFC 9457 problem details from one table."""

from __future__ import annotations

from typing import Any

PROBLEM_BASE = "https://ostinato.dev/problems/"


class OstinatoError(Exception):
    code: str = "internal"
    status: int = 500
    title: str = "Internal error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra

    @property
    def problem_type(self) -> str:
        return PROBLEM_BASE + self.code


class InvalidInput(OstinatoError):
    code = "invalid-input"
    status = 422
    title = "Invalid input"

    def __init__(self, detail: str, errors: list[dict[str, str]]) -> None:
        super().__init__(detail, errors=errors)
        self.errors = errors


class UnstorableText(OstinatoError):
    """Strings holding U+0000 (NUL), which PostgreSQL's text, json and jsonb cannot store: a bad
    request naming each field (`ostinato.domain.text`), refused before any statement."""

    code = "bad-request"
    status = 400
    title = "Bad request"

    def __init__(self, fields: list[str]) -> None:
        message = "holds U+0000 (NUL), which cannot be stored"
        super().__init__(f"{', '.join(fields[:10])}: a text value {message}",
                         errors=[{"field": f, "message": message} for f in fields])
        self.fields = fields


class PayloadTooLarge(OstinatoError):
    code = "payload-too-large"
    status = 413
    title = "Payload too large"


class Unauthorized(OstinatoError):
    code = "unauthorized"
    status = 401
    title = "Missing or unknown API key"


class Forbidden(OstinatoError):
    code = "forbidden"
    status = 403
    title = "Not allowed for this key"


class NotFound(OstinatoError):
    code = "not-found"
    status = 404
    title = "Not found"


class Conflict(OstinatoError):
    code = "conflict"
    status = 409
    title = "Conflict"


class VersionConflict(Conflict):
    """An append found the stream at another version than expected."""

    code = "version-conflict"
    title = "Concurrent modification"


class IdempotencyConflict(Conflict):
    """An idempotency key used again with another request than the one it first came with."""

    code = "idempotency-conflict"
    title = "Idempotency key reused with another request"


class InvalidState(Conflict):
    code = "invalid-state"
    title = "Not allowed in the current state"



class RunArchived(Conflict):
    """An action on a run that has left the hot database for the archive
    (docs/RETENTION.md): it can still be read, never changed."""

    code = "run-archived"
    title = "The run is archived: it can be read, not changed"


class ArchiveUnreadable(OstinatoError):
    """A run's archive object is there but fails its checks (bad gzip, bad JSON, checksum,
    format, ids not its key's: `ostinato.archive.ArchiveCorrupt`). A 4xx, not a 5xx: the object
    will not read better on a retry; an operator restores it (docs/RETENTION.md)."""

    code = "archive-unreadable"
    status = 424
    title = "The run's archive object cannot be read"


class BlobUnreadable(OstinatoError):
    """A blob kept in the object store (an output, payload, signal payload, step output or
    captured log over the inline limit) whose object is gone or is not the bytes its reference
    names (length, SHA-256). A 4xx, not a 5xx: a retry reads the same; an operator restores the
    object from a backup (docs/RETENTION.md "Blobs")."""

    code = "blob-unreadable"
    status = 424
    title = "A value kept in object storage cannot be read"


class ServiceUnavailable(OstinatoError):
    """Something this answer needs cannot serve now (the object store down or throttling):
    a 503 with `Retry-After` (`retry_after_seconds`), which clients retry."""

    code = "service-unavailable"
    status = 503
    title = "Service unavailable"

    def __init__(self, detail: str, retry_after_seconds: float = 5.0) -> None:
        super().__init__(detail, retry_after_seconds=retry_after_seconds)
        self.retry_after_seconds = retry_after_seconds


class PreconditionFailed(OstinatoError):
    """An If-Match naming another version than the current one (an edit made meanwhile by
    someone else): read the resource again and decide on its current version."""

    code = "precondition-failed"
    status = 412
    title = "The resource changed since the version you named"


class RateLimited(OstinatoError):
    """A key sent more requests than its tenant's API rate: retry after `retry_after_seconds`
    (also the `Retry-After` header, in whole seconds)."""

    code = "rate-limited"
    status = 429
    title = "Too many requests"

    def __init__(self, detail: str, retry_after_seconds: float) -> None:
        super().__init__(detail, retry_after_seconds=round(retry_after_seconds, 3))
        self.retry_after_seconds = retry_after_seconds


class StorageFull(ServiceUnavailable):
    """New work refused while the database's storage is over its refuse watermark (the level
    the reconciler recorded: docs/RETENTION.md "The disk"). Nothing was written; runs in flight
    finish, reads and cancels answer. `Retry-After`: when retention may have made room."""

    code = "storage-full"
    title = "Storage full: new work refused"
