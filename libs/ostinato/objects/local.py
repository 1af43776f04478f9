"""The local-directory backend: one file per object under a root folder.

The embedded default (`make up` without S3): no server to start. A write is atomic and durable:
the bytes go to a temp file in the object's folder, are fsynced, renamed over the key's file,
and the folder is fsynced, so a crash (kill -9, power loss) leaves the old object or the new
one, never a torn one. A crash may leave a temp file (named `.ostinato-tmp-...`, a segment no
key may have): `list` never shows it. File I/O runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

from ostinato.objects import (
    MAX_PAGE,
    RESERVED_SEGMENT_PREFIX,
    ObjectInfo,
    ObjectMissing,
    ObjectStoreUnavailable,
    check_key,
    check_page,
    check_prefix,
)
from ostinato.objects.measured import measured, measured_list


class LocalObjectStore:
    """Objects as files under `root` (created at the first write)."""

    BACKEND = "file"  # the `backend` label of its metrics (ostinato.objects.measured)

    def __init__(self, root: Path) -> None:
        if not root.is_absolute():
            raise ValueError(f"local object store root {str(root)!r} must be absolute")
        self.root = root

    def __repr__(self) -> str:
        return f"LocalObjectStore({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*check_key(key).split("/"))

    @measured("put")
    async def put(self, key: str, data: bytes, *,
                  content_type: str = "application/octet-stream") -> None:
        """Write atomically and durably (the content type is not kept: files have none)."""
        path = self._path(key)
        payload = bytes(data)
        try:
            await asyncio.to_thread(_write_atomically, path, payload)
        except OSError as exc:
            raise ObjectStoreUnavailable(f"writing {key!r} under {self.root}: {exc}") from exc

    @measured("get")
    async def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectMissing(key) from None
        except OSError as exc:
            raise ObjectStoreUnavailable(f"reading {key!r} under {self.root}: {exc}") from exc

    @measured("head")
    async def exists(self, key: str) -> bool:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.is_file)
        except OSError as exc:
            raise ObjectStoreUnavailable(f"checking {key!r} under {self.root}: {exc}") from exc

    @measured("delete")
    async def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            await asyncio.to_thread(_remove_durably, path)
        except OSError as exc:
            raise ObjectStoreUnavailable(f"deleting {key!r} under {self.root}: {exc}") from exc

    def list(self, prefix: str) -> AsyncIterator[str]:
        """Keys starting with `prefix`, in key order, read one folder at a time (a bad prefix
        is a ValueError at the call, not at the first item)."""
        return self._list(check_prefix(prefix))

    @measured_list
    async def _list(self, prefix: str) -> AsyncIterator[str]:
        folder, _, _ = prefix.rpartition("/")
        start = self.root.joinpath(*folder.split("/")) if folder else self.root
        base = f"{folder}/" if folder else ""
        # a stack of folders still to read, each with its entries in key order: a folder `d`
        # sorts as "d/" (every key under it starts so), which is what makes the walk ordered
        stack = [iter(await self._entries(start, base))]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
                continue
            key, is_dir = entry
            if is_dir:
                if key.startswith(prefix) or prefix.startswith(key):
                    stack.append(iter(await self._entries(self.root / key, key)))
            elif key.startswith(prefix):
                yield key

    @measured("list")
    async def list_page(self, prefix: str, *, start_after: str | None = None,
                        limit: int = MAX_PAGE) -> list[ObjectInfo]:
        """A page of the keys `list` walks, after `start_after`: folders whose keys all sort
        before it are not read, so a walk by pages reads each folder about once."""
        check_prefix(prefix)
        check_page(start_after, limit)
        try:
            return await asyncio.to_thread(_page, self.root, prefix, start_after or "", limit)
        except OSError as exc:
            raise ObjectStoreUnavailable(f"listing {prefix!r} under {self.root}: {exc}") from exc

    async def _entries(self, folder: Path, base: str) -> list[tuple[str, bool]]:
        try:
            return await asyncio.to_thread(_scan, folder, base)
        except OSError as exc:
            raise ObjectStoreUnavailable(f"listing {folder}: {exc}") from exc

    async def close(self) -> None:
        return None


def _scan(folder: Path, base: str) -> list[tuple[str, bool]]:
    """(key or key + "/", is a folder) of each entry of `folder`, sorted by key bytes."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        if entry.name.startswith(RESERVED_SEGMENT_PREFIX):
            continue
        if entry.is_dir(follow_symlinks=False):
            found.append((f"{base}{entry.name}/", True))
        elif entry.is_file(follow_symlinks=False):
            found.append((f"{base}{entry.name}", False))
    found.sort(key=lambda e: e[0].encode("utf-8", "surrogateescape"))
    return found


def _bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def _page(root: Path, prefix: str, after: str, limit: int) -> list[ObjectInfo]:
    """Up to `limit` objects under `root` whose keys start with `prefix` and sort after
    `after` (by UTF-8 bytes), in key order."""
    found: list[ObjectInfo] = []
    after_b = _bytes(after)
    folder, _, _ = prefix.rpartition("/")

    def walk(path: Path, base: str) -> None:
        for key, is_dir in _scan(path, base):
            if len(found) >= limit:
                return
            key_b = _bytes(key)
            if is_dir:
                inside = key.startswith(prefix) or prefix.startswith(key)
                # every key in the folder starts with `key`: all sort before `after` when it
                # sorts after `key` without starting with it
                passed = after_b > key_b and not after_b.startswith(key_b)
                if inside and not passed:
                    walk(root / key, key)
            elif key.startswith(prefix) and key_b > after_b:
                try:
                    st = (root / key).stat()
                except FileNotFoundError:  # deleted since the folder was read
                    continue
                found.append(ObjectInfo(key, st.st_size,
                                        datetime.fromtimestamp(st.st_mtime, UTC)))

    walk(root.joinpath(*folder.split("/")) if folder else root, f"{folder}/" if folder else "")
    return found


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    folder = path.parent
    if not folder.is_dir():
        created = []
        existing = folder
        while not existing.exists():
            created.append(existing)
            existing = existing.parent
        folder.mkdir(parents=True, exist_ok=True)
        # the new folders' entries are durable too: each one and the folder that holds them
        for made in (*created, existing):
            _fsync_folder(made)
    tmp = folder / f"{RESERVED_SEGMENT_PREFIX}{path.name[:64]}.{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(folder)


def _remove_durably(path: Path) -> None:
    try:
        path.unlink()
    except (FileNotFoundError, NotADirectoryError):
        return
    except IsADirectoryError:  # a key's folder, not an object: nothing to delete
        return
    _fsync_folder(path.parent)
