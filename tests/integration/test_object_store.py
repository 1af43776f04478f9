"""The object store (issue 38, `ostinato.objects`) on the real S3 server: SeaweedFS's S3
gateway started by infra/s3 (the shared one, each test under its own prefix; a private one of
the test's own for the faults). What archiving relies on: a put is read back whole, an
overwrite replaces, listing is ordered and honours string prefixes across pages, a missing key
is `ObjectMissing`, a store that cannot answer is `ObjectStoreUnavailable` (stopped: refused;
SIGSTOPped: the client's timeout) and works again once it is back, and the bucket is made when
absent. Plus the local backend's one promise no server can show: a kill -9 mid-write leaves the
old object or none, never a torn one (a real subprocess)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from ostinato.objects import (
    ObjectMissing,
    ObjectStore,
    ObjectStoreError,
    ObjectStoreUnavailable,
    open_object_store,
)
from ostinato.objects.local import LocalObjectStore
from tests.helpers.objects import S3_SECRET_KEY, PrivateS3, empty, s3_url

pytestmark = pytest.mark.integration

KEYS = [
    "tenants/0b5e/runs/7f3a.json.gz",
    "with space/and-ünïcode/ключ",
    "dots.in.names/..ok/...",
    "symbols/a+b=c&d;e,f(g)!'*~@$",
    "x" * 200,
]


async def test_a_put_is_read_back_whole_and_an_overwrite_replaces_it(
        object_store: ObjectStore) -> None:
    big = os.urandom(3 * 1024 * 1024 + 17)
    for key in KEYS:
        await object_store.put(key, key.encode() * 3)
    await object_store.put("big", big)
    for key in KEYS:
        assert await object_store.exists(key)
        assert await object_store.get(key) == key.encode() * 3
    assert await object_store.get("big") == big
    await object_store.put(KEYS[0], b"second", content_type="application/gzip")
    assert await object_store.get(KEYS[0]) == b"second"
    await object_store.put("empty", b"")
    assert await object_store.get("empty") == b""


async def test_a_missing_key_is_object_missing_and_a_delete_is_idempotent(
        object_store: ObjectStore) -> None:
    with pytest.raises(ObjectMissing) as missing:
        await object_store.get("never/written")
    assert missing.value.key == "never/written"
    assert not await object_store.exists("never/written")
    await object_store.put("gone", b"x")
    await object_store.delete("gone")
    await object_store.delete("gone")
    await object_store.delete("never/written")
    assert not await object_store.exists("gone")
    with pytest.raises(ObjectMissing):
        await object_store.get("gone")
    # a "folder" (a prefix of other keys) is no object
    await object_store.put("folder/inside", b"x")
    assert not await object_store.exists("folder")
    with pytest.raises(ObjectMissing):
        await object_store.get("folder")


async def test_listing_is_in_key_order_with_string_prefixes_across_pages(
        object_store: ObjectStore) -> None:
    names = ["a/b", "a-c", "a/b2/x", "ab", "z", "a/b1", "a/ba"]
    await asyncio.gather(*(object_store.put(k, b"1") for k in names))
    assert [k async for k in object_store.list("")] == sorted(names)
    assert [k async for k in object_store.list("a/b")] == ["a/b", "a/b1", "a/b2/x", "a/ba"]
    assert [k async for k in object_store.list("a/b/")] == []
    assert [k async for k in object_store.list("a")] == ["a-c", "a/b", "a/b1", "a/b2/x",
                                                         "a/ba", "ab"]
    assert [k async for k in object_store.list("q")] == []
    # more keys than S3 returns in one page (1,000)
    many = [f"many/{i:05d}" for i in range(1_100)]
    for start in range(0, len(many), 64):
        await asyncio.gather(*(object_store.put(k, b"") for k in many[start:start + 64]))
    assert [k async for k in object_store.list("many/")] == many
    await empty(object_store, "many/")
    assert [k async for k in object_store.list("many/")] == []


async def test_two_prefixes_of_one_bucket_do_not_see_each_other(
        private_s3: PrivateS3) -> None:
    one, two = private_s3.store("one"), private_s3.store("one-two")
    await one.put("k", b"1")
    await two.put("k", b"2")
    assert await one.get("k") == b"1" and await two.get("k") == b"2"
    assert [k async for k in one.list("")] == ["k"]
    assert [k async for k in two.list("")] == ["k"]


async def test_the_bucket_is_created_at_the_first_use_when_absent(
        private_s3: PrivateS3) -> None:
    bucket = f"fresh-{uuid.uuid4().hex[:12]}"
    store = private_s3.store("p", bucket=bucket)
    assert not await store.exists("k")  # made by this first call
    await store.put("k", b"v")
    again = private_s3.store("p", bucket=bucket)  # a second process: it exists already
    assert await again.get("k") == b"v"
    assert (private_s3.folder / "data").exists()


async def test_a_stopped_server_is_unavailable_and_the_store_works_once_it_is_back(
        private_s3: PrivateS3) -> None:
    store = private_s3.store("faults", timeout=2)
    await store.put("before", b"1")
    await private_s3.stop()
    for call in (lambda: store.put("k", b"v"), lambda: store.get("before"),
                 lambda: store.exists("before"), lambda: store.delete("before"),
                 lambda: _drain(store.list(""))):
        with pytest.raises(ObjectStoreUnavailable) as down:
            await call()
        assert _caused_by(down.value, "connect"), repr(down.value.__cause__)
    await private_s3.start()
    assert await store.get("before") == b"1"
    await store.put("after", b"2")
    assert [k async for k in store.list("")] == ["after", "before"]


async def test_a_server_that_stops_answering_is_unavailable_within_the_client_timeout(
        private_s3: PrivateS3) -> None:
    store = private_s3.store("paused", timeout=1)
    await store.put("k", b"v")
    private_s3.pause()
    try:
        for call in (lambda: store.put("k2", b"v"), lambda: store.get("k")):
            with pytest.raises(ObjectStoreUnavailable) as hung:
                # a generous give-up: the client's own timeout (1 s, retried) must end it first
                async with asyncio.timeout(60):
                    await call()
            assert _caused_by(hung.value, "timed out", "timeout"), repr(hung.value.__cause__)
    finally:
        private_s3.resume()
    assert await store.get("k") == b"v"


async def test_a_key_the_server_refuses_is_an_error_of_configuration_not_unavailable(
        object_store: ObjectStore) -> None:
    """Credentials refused (403) are no transient fault: retrying later will not help, so the
    caller must not take it for the store being down."""
    await object_store.put("k", b"v")  # the bucket exists, the server answers
    wrong = open_object_store(s3_url("refused").replace(
        f"secret_access_key={S3_SECRET_KEY}", "secret_access_key=not-the-secret"))
    for call in (lambda: wrong.put("k", b"v"), lambda: wrong.get("k")):
        with pytest.raises(ObjectStoreError) as refused:
            await call()
        assert not isinstance(refused.value, ObjectStoreUnavailable | ObjectMissing), \
            repr(refused.value)


async def test_a_closed_store_refuses_further_use(object_store: ObjectStore) -> None:
    store = open_object_store(s3_url("closed"))
    await store.put("k", b"v")
    await store.delete("k")
    await store.close()
    with pytest.raises(ObjectStoreError, match="closed"):
        await store.get("k")


EXITS = textwrap.dedent("""
    import asyncio, sys
    from ostinato.runtime.settings import load_settings  # a service's imports
    from ostinato.objects import open_object_store

    async def main() -> None:
        store = open_object_store(sys.argv[1])  # never closed, as a process that just ends
        await store.put("k", b"v")
        print(await store.get("k"))
        await store.delete("k")
        print([k async for k in store.list("")])

    load_settings()
    asyncio.run(main())
""")


async def test_a_process_that_used_the_store_exits_cleanly(object_store: ObjectStore) -> None:
    """obstore's Tokio threads, left busy with a client's connections as the interpreter
    finalizes, aborted short processes (exit 134, after their work was done) in about one run
    of three; a process must end with its own exit code."""
    url = s3_url(f"exits/{uuid.uuid4().hex}")
    codes = []
    for _ in range(16):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", EXITS, url, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        codes.append((proc.returncode, err.decode()[-300:]))
    assert [c for c in codes if c[0] != 0] == []
    cleanup = open_object_store(url)
    await empty(cleanup)
    await cleanup.close()


def _caused_by(exc: BaseException, *words: str) -> bool:
    """A word of `words` in the message of the exception or of one of its causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if any(w in str(seen).lower() for w in words):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def _drain(keys: object) -> list[str]:
    return [k async for k in keys]  # type: ignore[attr-defined]


WRITER = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from ostinato.objects.local import LocalObjectStore

    async def main() -> None:
        store = LocalObjectStore(Path(sys.argv[1]))
        size, version = int(sys.argv[2]), int(sys.argv[3])
        blobs = [bytes([v % 251 + 1]) * size for v in range(version, version + 2)]
        print("ready", flush=True)
        while True:  # nearly all of its time inside put: a kill lands mid-write
            for blob in blobs:
                await store.put("runs/the-object", blob)

    asyncio.run(main())
""")


async def test_a_kill_9_mid_write_leaves_the_old_object_or_none_never_a_torn_one(
        tmp_path: Path) -> None:
    """The local backend's atomicity, with a real process killed by SIGKILL while it writes."""
    size = 8 * 1024 * 1024
    root = tmp_path / "objects"
    store = LocalObjectStore(root)
    mid_write = 0
    folder = root / "runs"
    for round_ in range(8):
        before = set(folder.iterdir()) if folder.exists() else set()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WRITER, str(root), str(size), str(round_ * 2),
            stdout=asyncio.subprocess.PIPE)
        try:
            assert proc.stdout is not None
            assert (await proc.stdout.readline()).strip() == b"ready"
            await asyncio.sleep(0.05 + 0.03 * round_)
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        # a temp file this round left behind: the kill landed inside a put
        mid_write += any(p.name != "the-object" for p in set(folder.iterdir()) - before) \
            if folder.exists() else 0
        try:
            data = await store.get("runs/the-object")
        except ObjectMissing:
            continue  # killed before its first write completed: none, which is allowed
        assert len(data) == size, f"round {round_}: a torn object of {len(data)} bytes"
        assert data.count(data[:1]) == size, f"round {round_}: two versions mixed"
        # the leftover temp files are never listed as objects
        assert [k async for k in store.list("")] == ["runs/the-object"]
    assert mid_write, "no kill landed mid-write: the test proved nothing"
