"""`ObjectStore.list_page` (issue 38 item 4: the bucket sweep walks the store with it) on both
backends: the real S3 server (SeaweedFS, tests/helpers/objects.py) and the local folder. A
page holds the keys after a cursor (any string, not only a key) in key order with each
object's size and last write, at most `limit` of them, honouring string prefixes; walking page
by page from each page's last key yields every key once; S3's one-request page (1,000) holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest

from ostinato.objects import MAX_PAGE, ObjectInfo, ObjectStore
from ostinato.objects.local import LocalObjectStore
from tests.helpers.objects import empty, s3_store

pytestmark = pytest.mark.integration

NAMES = ["a/b", "a-c", "a/b2/x", "ab", "z", "a/b1", "a/ba", "a/b2/y/z"]


@pytest.fixture(params=["s3", "local"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    if request.param == "s3":
        async with s3_store() as store:
            yield store
    else:
        store = LocalObjectStore(tmp_path / "objects")
        yield store
        await store.close()


async def walk(store: ObjectStore, prefix: str, limit: int) -> list[list[ObjectInfo]]:
    pages, after = [], None
    while True:
        page = await store.list_page(prefix, start_after=after, limit=limit)
        pages.append(page)
        if len(page) < limit:
            return pages
        after = page[-1].key


async def test_a_page_holds_the_keys_after_the_cursor_in_order_with_size_and_time(
        backend: ObjectStore) -> None:
    await asyncio.gather(*(backend.put(k, k.encode() * 3) for k in NAMES))
    page = await backend.list_page("")
    assert [o.key for o in page] == sorted(NAMES)
    for o in page:
        assert o.size == 3 * len(o.key.encode())
        assert isinstance(o.last_modified, datetime) and o.last_modified.tzinfo is not None
    assert [o.key for o in await backend.list_page("", start_after="a/b1")] == \
        ["a/b2/x", "a/b2/y/z", "a/ba", "ab", "z"]
    # a cursor that is no key: what sorts after it
    assert [o.key for o in await backend.list_page("", start_after="a/b2")] == \
        ["a/b2/x", "a/b2/y/z", "a/ba", "ab", "z"]
    assert [o.key for o in await backend.list_page("", start_after="a/b20")] == \
        ["a/ba", "ab", "z"]
    assert [o.key for o in await backend.list_page("a/b", start_after="a/b1", limit=2)] == \
        ["a/b2/x", "a/b2/y/z"]
    assert [o.key for o in await backend.list_page("a/", limit=1)] == ["a/b"]
    assert await backend.list_page("", start_after="z") == []
    assert await backend.list_page("q") == []
    pages = await walk(backend, "", 3)
    assert [o.key for p in pages for o in p] == sorted(NAMES)
    assert [len(p) for p in pages] == [3, 3, 2]
    for bad in (0, MAX_PAGE + 1):
        with pytest.raises(ValueError):
            await backend.list_page("", limit=bad)


async def test_a_walk_by_full_pages_meets_every_key_once(backend: ObjectStore) -> None:
    many = [f"many/{i:05d}" for i in range(MAX_PAGE + 5)]  # more than one S3 answer holds
    for start in range(0, len(many), 64):
        await asyncio.gather(*(backend.put(k, b"") for k in many[start:start + 64]))
    pages = await walk(backend, "many/", MAX_PAGE)
    assert [len(p) for p in pages] == [MAX_PAGE, 5]
    assert [o.key for p in pages for o in p] == many
    await empty(backend, "many/")
