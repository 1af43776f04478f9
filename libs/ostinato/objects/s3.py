"""The S3 backend: any server speaking the S3 API (AWS S3, SeaweedFS, MinIO, Ceph RGW ...).

Client: obstore (Rust's `object_store` crate; chosen by bench/object_store.py, figures in
docs/RETENTION.md "Object storage"): async, its HTTP and signing off the Python event loop, no
Python dependencies. Requests are bounded by the URL's `timeout` (each attempt, connecting
included); connection errors, timeouts and 5xx are retried by obstore for up to that long again
(so a call gives up within about twice `timeout`), then surface as `ObjectStoreUnavailable`.

The bucket is created at the first use if it is absent (`create_bucket=false` in the URL turns
that off: a missing bucket is then an error), with a request signed by the same credentials: a
production deployment may instead create it beforehand and grant the key no CreateBucket.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import re
import weakref
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import obstore
from obstore.exceptions import (
    BaseError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from obstore.store import S3Store

from ostinato.objects import (
    MAX_PAGE,
    ObjectInfo,
    ObjectMissing,
    ObjectStoreError,
    ObjectStoreUnavailable,
    S3Location,
    check_key,
    check_page,
    check_prefix,
)
from ostinato.objects.measured import measured, measured_list

# a status a server may answer when it cannot now (throttling, overload, its own timeout)
_TRANSIENT_STATUS = re.compile(r"status(?: code)?:? (408|429|5\d\d)\b")
_CLIENT_STATUS = re.compile(r"status(?: code)?:? 4\d\d\b")


# obstore's clients live on a shared Tokio runtime whose worker threads are never told that the
# interpreter exits: one still busy with a client's connection pool as Py_Finalize tears the
# interpreter down panics, and the process aborts (SIGABRT, exit 134) after its work is done
# (measured here: 7 of 16 short processes). Dropping the clients while the interpreter is
# whole ends that work (0 of 16): `close()` does, and so, for a store never closed, this hook
# at exit.
_OPEN: weakref.WeakSet[S3ObjectStore] = weakref.WeakSet()


@atexit.register
def _drop_open_clients() -> None:
    for store in list(_OPEN):
        store._drop()
    gc.collect()


class S3ObjectStore:
    """Objects under `location.prefix` in `location.bucket`."""

    BACKEND = "s3"  # the `backend` label of its metrics (ostinato.objects.measured)

    def __init__(self, location: S3Location) -> None:
        self.location = location
        config: dict[str, Any] = {"region": location.region}
        if location.endpoint:
            config["endpoint"] = location.endpoint
            # a private endpoint is addressed by path (http://host:port/bucket/key): it has no
            # wildcard DNS for bucket.host
            config["virtual_hosted_style_request"] = False
        if location.access_key_id and location.secret_access_key:
            config["access_key_id"] = location.access_key_id
            config["secret_access_key"] = location.secret_access_key
        timeout = f"{location.timeout_seconds:g}s"
        client = {"timeout": timeout, "connect_timeout": timeout,
                  "allow_http": bool(location.endpoint and location.endpoint.startswith("http:"))}
        retry = {"max_retries": 3,
                 "retry_timeout": timedelta(seconds=location.timeout_seconds),
                 "backoff": {"init_backoff": timedelta(milliseconds=100),
                             "max_backoff": timedelta(seconds=2), "base": 2}}
        self._store: S3Store | None = S3Store(
            location.bucket, prefix=location.prefix.rstrip("/") or None, config=config,
            client_options=client, retry_config=retry)
        # for the bucket requests (no prefix: a signed URL of the bucket itself)
        self._bucket_store: S3Store | None = S3Store(
            location.bucket, config=config, client_options=client, retry_config=retry)
        self._bucket_checked = not location.create_bucket
        self._bucket_lock = asyncio.Lock()
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"S3ObjectStore({self.location!r})"

    @measured("put")
    async def put(self, key: str, data: bytes, *,
                  content_type: str = "application/octet-stream") -> None:
        check_key(key)
        await self._ensure_bucket()
        try:
            await obstore.put_async(self._store, key, bytes(data),
                                    attributes={"Content-Type": content_type})
        except Exception as exc:
            raise _mapped(exc, "put", key) from exc

    @measured("get")
    async def get(self, key: str) -> bytes:
        check_key(key)
        await self._ensure_bucket()
        try:
            result = await obstore.get_async(self._store, key)
            return bytes(await result.bytes_async())
        except FileNotFoundError:
            raise ObjectMissing(key) from None
        except Exception as exc:
            raise _mapped(exc, "get", key) from exc

    @measured("head")
    async def exists(self, key: str) -> bool:
        check_key(key)
        await self._ensure_bucket()
        try:
            await obstore.head_async(self._store, key)
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise _mapped(exc, "head", key) from exc
        return True

    @measured("delete")
    async def delete(self, key: str) -> None:
        check_key(key)
        await self._ensure_bucket()
        try:
            await obstore.delete_async(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise _mapped(exc, "delete", key) from exc

    def list(self, prefix: str) -> AsyncIterator[str]:
        """Keys starting with `prefix` (a string prefix, as S3's), in key order (S3 lists in
        UTF-8 byte order). A bad prefix is a ValueError at the call."""
        return self._list(check_prefix(prefix))

    @measured_list
    async def _list(self, prefix: str) -> AsyncIterator[str]:
        await self._ensure_bucket()
        # obstore lists whole path segments: ask for the folder, keep what the prefix begins
        folder = prefix.rpartition("/")[0]
        try:
            stream = obstore.list(self._store, folder or None, chunk_size=1000)
            async for chunk in stream:
                for meta in chunk:
                    key = meta["path"]
                    if key.startswith(prefix):
                        yield key
        except Exception as exc:
            raise _mapped(exc, "list", prefix) from exc

    @measured("list")
    async def list_page(self, prefix: str, *, start_after: str | None = None,
                        limit: int = MAX_PAGE) -> list[ObjectInfo]:
        """One ListObjectsV2 page from `start_after` (S3's StartAfter) on: keys starting with
        `prefix` after it, in key order (UTF-8 bytes, as S3 lists), at most `limit`."""
        check_prefix(prefix)
        check_page(start_after, limit)
        await self._ensure_bucket()
        folder = prefix.rpartition("/")[0]
        found: list[ObjectInfo] = []
        try:
            stream = obstore.list(self._store, folder or None, offset=start_after or None,
                                  chunk_size=limit)
            async for chunk in stream:
                for meta in chunk:
                    key = meta["path"]
                    if key.startswith(prefix) and (start_after is None or key > start_after):
                        found.append(ObjectInfo(key, int(meta["size"]), meta["last_modified"]))
                if len(found) >= limit:
                    break
        except Exception as exc:
            raise _mapped(exc, "list", prefix) from exc
        return found[:limit]

    async def close(self) -> None:
        """Drop the clients (and their connections); the store is unusable afterwards."""
        self._drop()
        gc.collect()

    def _drop(self) -> None:
        self._store = self._bucket_store = None
        _OPEN.discard(self)

    async def _ensure_bucket(self) -> None:
        """Create the bucket once, at the first use, if it is absent (an error once closed)."""
        if self._store is None:
            raise ObjectStoreError(f"{self!r} is closed")
        if self._bucket_checked:
            return
        async with self._bucket_lock:
            if self._bucket_checked:
                return
            await self._create_bucket_if_absent()
            self._bucket_checked = True

    async def _create_bucket_if_absent(self) -> None:
        loc = self.location
        # a presigned URL of the bucket (path ""): HEAD tells whether it exists, PUT creates it
        # (S3's CreateBucket); both signed by obstore with the store's own credentials
        expires = timedelta(minutes=5)
        head_url, put_url = await asyncio.gather(
            obstore.sign_async(self._bucket_store, "HEAD", "", expires),
            obstore.sign_async(self._bucket_store, "PUT", "", expires))
        body = b""
        if loc.region != "us-east-1":
            body = ("<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                    f"<LocationConstraint>{loc.region}</LocationConstraint>"
                    "</CreateBucketConfiguration>").encode()
        try:
            async with httpx.AsyncClient(timeout=loc.timeout_seconds) as http:
                head = await http.head(head_url)
                if head.status_code == 200:
                    return
                if head.status_code != 404:
                    raise _status_error(head.status_code, f"HEAD bucket {loc.bucket}")
                made = await http.put(put_url, content=body)
        except httpx.TransportError as exc:
            raise ObjectStoreUnavailable(
                f"S3 at {loc.endpoint or 'AWS'}: bucket {loc.bucket}: {exc!r}") from exc
        # 409 BucketAlreadyOwnedByYou: another process made it first
        if made.status_code not in (200, 409):
            raise _status_error(made.status_code,
                                f"creating bucket {loc.bucket}: {made.text[:300]}")


def _status_error(status: int, what: str) -> ObjectStoreError:
    if status in (408, 429) or status >= 500:
        return ObjectStoreUnavailable(f"S3 answered {status} to {what}")
    return ObjectStoreError(f"S3 answered {status} to {what}")


def _mapped(exc: BaseException, op: str, key: str) -> ObjectStoreError:
    """obstore's error as ours: credentials refused and other 4xx are errors of configuration
    (retrying will not help); connection failures, timeouts, 5xx and throttling are transient."""
    what = f"S3 {op} {key!r}: {exc}"
    if isinstance(exc, ObjectStoreError):
        return exc
    if isinstance(exc, PermissionDeniedError | UnauthenticatedError):
        return ObjectStoreError(what)
    message = str(exc)
    if _CLIENT_STATUS.search(message) and not _TRANSIENT_STATUS.search(message):
        return ObjectStoreError(what)
    if isinstance(exc, BaseError | OSError | TimeoutError):
        return ObjectStoreUnavailable(what)
    return ObjectStoreError(what)
