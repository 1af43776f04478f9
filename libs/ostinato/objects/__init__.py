"""Object storage: where archived runs and (later) outputs, payloads and logs live, by key.

One interface, `ObjectStore`, and two backends chosen by URL (`open_object_store`):

- `file:///abs/dir`: a local directory, the embedded default of `make up` (one machine, no
  server); writes are atomic and durable (temp file, fsync, rename, fsync of the folder).
- `s3://bucket/prefix?endpoint=http://127.0.0.1:18333&region=us-east-1`: any server speaking
  the S3 API (production; the tests' SeaweedFS under infra/s3).

Keys are relative, `/`-separated paths with the same rules on every backend (`check_key`), so
code written against one backend never meets a key the other refuses. A store's caller gets two
errors to act on: `ObjectMissing` (the key is not there: a fact) and `ObjectStoreUnavailable`
(connection refused, timeout, 5xx, throttling: transient, try again later).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "LazyObjectStore",
    "LocalLocation",
    "ObjectInfo",
    "ObjectMissing",
    "ObjectStore",
    "ObjectStoreError",
    "ObjectStoreUnavailable",
    "S3Location",
    "check_key",
    "check_page",
    "check_prefix",
    "open_object_store",
    "parse_object_store_url",
]

# S3's most keys in one listing answer (ListObjectsV2's max-keys): `list_page`'s largest page.
MAX_PAGE = 1000
# S3's limit on a key (bytes of UTF-8), and the usual file-system limit on one path segment
# (ext4, xfs): both enforced everywhere, so a key good on one backend is good on the other.
MAX_KEY_BYTES = 1024
MAX_SEGMENT_BYTES = 255
# The local backend's temp files carry this in their name; keys may not, so a half-written
# file is never mistaken for an object.
RESERVED_SEGMENT_PREFIX = ".ostinato-tmp-"


class ObjectStoreError(Exception):
    """Base of the object store's errors."""


class ObjectMissing(ObjectStoreError):
    """No object under this key (never written, or deleted)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no object under key {key!r}")
        self.key = key


class ObjectStoreUnavailable(ObjectStoreError):
    """The store did not answer, or answered that it cannot now (refused, timeout, 5xx,
    throttled): transient; nothing is known to have been written or deleted."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One listed object: its key, length and last write (the store's clock, UTC)."""

    key: str
    size: int
    last_modified: datetime


@runtime_checkable
class ObjectStore(Protocol):
    async def put(self, key: str, data: bytes, *,
                  content_type: str = "application/octet-stream") -> None:
        """Store `data` under `key` (replacing what was there); returns only once the store
        has confirmed the write durable."""

    async def get(self, key: str) -> bytes:
        """The object's bytes; `ObjectMissing` if there is none."""

    async def exists(self, key: str) -> bool: ...

    async def delete(self, key: str) -> None:
        """Remove the object; a missing one is no error (idempotent)."""

    def list(self, prefix: str) -> AsyncIterator[str]:
        """Every key starting with `prefix` (a plain string prefix, as in S3), in key order
        (by UTF-8 bytes)."""

    async def list_page(self, prefix: str, *, start_after: str | None = None,
                        limit: int = MAX_PAGE) -> list[ObjectInfo]:
        """Up to `limit` (1..1000) objects whose keys start with `prefix` and sort after
        `start_after` (any string), in key order, with size and last write: about one request
        to S3, so a caller walks a large bucket a page at a time from a cursor it keeps."""

    async def close(self) -> None: ...


def check_key(key: str) -> str:
    """`key` if it is a valid object key, else a ValueError saying what is wrong.

    Relative (no leading `/`), non-empty `/`-separated segments, none `.` or `..` (a key never
    reaches outside its store's root or prefix), no NUL, at most 1024 bytes of UTF-8 and 255
    a segment."""
    if not isinstance(key, str):
        raise ValueError(f"object key must be a string, not {type(key).__name__}")
    if not key:
        raise ValueError("object key is empty")
    if "\x00" in key:
        raise ValueError(f"object key {key!r} contains NUL")
    if key.startswith("/"):
        raise ValueError(f"object key {key!r} is absolute (starts with '/'): keys are relative")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise ValueError(f"object key is longer than {MAX_KEY_BYTES} bytes of UTF-8")
    for segment in key.split("/"):
        _check_segment(key, segment)
    return key


def check_page(start_after: str | None, limit: int) -> None:
    """A ValueError unless `list_page`'s cursor and page size are usable on every backend."""
    if start_after is not None and (not isinstance(start_after, str) or "\x00" in start_after):
        raise ValueError("a listing's start_after is a string without NUL")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"a listing's page holds 1 to {MAX_PAGE} objects")


def check_prefix(prefix: str) -> str:
    """`prefix` if it can begin valid keys ("" lists everything), else a ValueError: the key
    rules, except that the last segment may be empty or partial ("tenants/", "tenants/ab")."""
    if not isinstance(prefix, str):
        raise ValueError(f"object key prefix must be a string, not {type(prefix).__name__}")
    if "\x00" in prefix:
        raise ValueError(f"object key prefix {prefix!r} contains NUL")
    if prefix.startswith("/"):
        raise ValueError(f"object key prefix {prefix!r} is absolute (starts with '/')")
    if len(prefix.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise ValueError(f"object key prefix is longer than {MAX_KEY_BYTES} bytes of UTF-8")
    *whole, _last = prefix.split("/")
    for segment in whole:
        _check_segment(prefix, segment)
    return prefix


def _check_segment(key: str, segment: str) -> None:
    if not segment:
        raise ValueError(f"object key {key!r} has an empty segment ('//' or a trailing '/')")
    if segment in (".", ".."):
        raise ValueError(f"object key {key!r} has a {segment!r} segment: keys are plain paths")
    if segment.startswith(RESERVED_SEGMENT_PREFIX):
        raise ValueError(f"object key {key!r}: segments starting {RESERVED_SEGMENT_PREFIX!r} "
                         "are reserved (the local backend's temp files)")
    if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
        raise ValueError(f"object key {key!r} has a segment longer than {MAX_SEGMENT_BYTES} "
                         "bytes")


@dataclass(frozen=True, slots=True)
class LocalLocation:
    """`file:///abs/dir`: objects are files under `root`."""

    root: Path


@dataclass(frozen=True, slots=True)
class S3Location:
    """`s3://bucket/prefix?endpoint=...&region=...`: objects under `prefix` in `bucket`.

    Credentials: `access_key_id` and `secret_access_key` in the query, else the client's usual
    sources (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY ...). `timeout` (seconds) bounds each
    request, connecting included; `create_bucket=false` leaves a missing bucket an error."""

    bucket: str
    prefix: str  # "" or ends with "/"
    endpoint: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: str | None = None
    timeout_seconds: float = 30.0
    create_bucket: bool = True

    def __repr__(self) -> str:  # never print the secret
        secret = "***" if self.secret_access_key else None
        return (f"S3Location(bucket={self.bucket!r}, prefix={self.prefix!r}, "
                f"endpoint={self.endpoint!r}, region={self.region!r}, "
                f"access_key_id={self.access_key_id!r}, secret_access_key={secret!r}, "
                f"timeout_seconds={self.timeout_seconds!r}, "
                f"create_bucket={self.create_bucket!r})")


_S3_PARAMS = {"endpoint", "region", "access_key_id", "secret_access_key", "timeout",
              "create_bucket"}


def parse_object_store_url(url: str) -> LocalLocation | S3Location:
    """The location a store URL names, or a ValueError saying what is wrong with it."""
    if not isinstance(url, str) or not url:
        raise ValueError("object store URL is empty (file:///abs/dir or s3://bucket/prefix)")
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"object store URL {url!r}: a file URL names an absolute path "
                             "(file:///abs/dir), not a host")
        if parts.query or parts.fragment:
            raise ValueError(f"object store URL {url!r}: a file URL takes no query")
        path = unquote(parts.path)
        if not path.startswith("/") or "\x00" in path:
            raise ValueError(f"object store URL {url!r}: the folder must be an absolute path")
        return LocalLocation(Path(path))
    if parts.scheme == "s3":
        return _parse_s3(url, parts.netloc, unquote(parts.path), parts.query, parts.fragment)
    raise ValueError(f"object store URL {url!r}: scheme must be file or s3")


def _parse_s3(url: str, bucket: str, path: str, query: str, fragment: str) -> S3Location:
    if fragment:
        raise ValueError(f"object store URL {url!r}: no fragment allowed")
    # S3's bucket naming rules (3-63 of lowercase letters, digits, '-', '.'; letter or digit at
    # both ends): a bad name fails here, at start, not at the first write
    if not (3 <= len(bucket) <= 63 and all(c.islower() or c.isdigit() or c in "-." for c in bucket)
            and bucket.isascii() and bucket[0].isalnum() and bucket[-1].isalnum()):
        raise ValueError(f"object store URL {url!r}: bucket {bucket!r} is not a valid S3 bucket "
                         "name (3-63 lowercase letters, digits, '-', '.')")
    prefix = path.strip("/")
    if prefix:
        check_key(prefix)
        prefix += "/"
    params: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        if name not in _S3_PARAMS:
            raise ValueError(f"object store URL: unknown parameter {name!r} "
                             f"(known: {', '.join(sorted(_S3_PARAMS))})")
        if name in params:
            raise ValueError(f"object store URL: parameter {name!r} given twice")
        params[name] = value
    endpoint = params.get("endpoint") or None
    if endpoint is not None:
        ep = urlsplit(endpoint)
        if ep.scheme not in ("http", "https") or not ep.netloc or ep.path not in ("", "/"):
            raise ValueError(f"object store URL: endpoint {endpoint!r} must be "
                             "http(s)://host[:port]")
        endpoint = endpoint.rstrip("/")
    try:
        timeout = float(params.get("timeout", "30"))
    except ValueError:
        raise ValueError(f"object store URL: timeout {params['timeout']!r} is not a number "
                         "of seconds") from None
    if not 0 < timeout <= 3600:
        raise ValueError("object store URL: timeout must be in (0, 3600] seconds")
    create = params.get("create_bucket", "true").lower()
    if create not in ("true", "false", "1", "0"):
        raise ValueError("object store URL: create_bucket must be true or false")
    key_id, secret = params.get("access_key_id") or None, params.get("secret_access_key") or None
    if (key_id is None) != (secret is None):
        raise ValueError("object store URL: give both access_key_id and secret_access_key, "
                         "or neither")
    return S3Location(bucket=bucket, prefix=prefix, endpoint=endpoint,
                      region=params.get("region") or "us-east-1", access_key_id=key_id,
                      secret_access_key=secret, timeout_seconds=timeout,
                      create_bucket=create in ("true", "1"))


def open_object_store(url: str) -> ObjectStore:
    """The store a URL names (`parse_object_store_url`); nothing is contacted until first use."""
    location = parse_object_store_url(url)
    if isinstance(location, LocalLocation):
        from ostinato.objects.local import LocalObjectStore

        return LocalObjectStore(location.root)
    from ostinato.objects.s3 import S3ObjectStore

    return S3ObjectStore(location)


class LazyObjectStore:
    """A process's handle on a store: opened from its URL at the first use (a process that
    never needs it contacts no store), or a store handed in, which its maker closes."""

    def __init__(self, source: ObjectStore | str) -> None:
        self._url = source if isinstance(source, str) else None
        self._store = None if isinstance(source, str) else source
        self._owned = isinstance(source, str)

    @property
    def store(self) -> ObjectStore:
        if self._store is None:
            assert self._url is not None
            self._store = open_object_store(self._url)
        return self._store

    async def close(self) -> None:
        if self._store is not None and self._owned:
            await self._store.close()
            self._store = None
