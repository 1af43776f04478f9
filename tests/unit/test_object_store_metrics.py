"""The object store's metrics as a backend records them (`ostinato.objects.measured`, both
backends alike; the S3 one is read from a real reconciler in tests/integration/
test_object_store_metrics.py): each call by operation and outcome, its latency, the bytes a
put wrote and a get read. The local backend on a temporary folder: no server."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from ostinato.objects import ObjectMissing, ObjectStoreUnavailable
from ostinato.objects.local import LocalObjectStore
from ostinato.objects.measured import outcome_of


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"backend": "file", **labels}) or 0.0


def calls(op: str, outcome: str) -> float:
    return sample("ostinato_object_store_requests_total", op=op, outcome=outcome)


async def test_each_call_is_counted_by_outcome_timed_and_its_bytes_added(
        tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    before = {(op, o): calls(op, o) for op in ("put", "get", "head", "delete", "list")
              for o in ("ok", "missing", "unavailable", "error")}
    put_bytes = sample("ostinato_object_store_bytes_total", op="put")
    got_bytes = sample("ostinato_object_store_bytes_total", op="get")
    timed = sample("ostinato_object_store_request_seconds_count", op="put")

    await store.put("a/one", b"12345")
    await store.put("a/two", data=b"xy")
    assert await store.get("a/one") == b"12345"
    with pytest.raises(ObjectMissing):
        await store.get("a/none")
    assert await store.exists("a/two") and not await store.exists("a/none")
    assert [k async for k in store.list("a/")] == ["a/one", "a/two"]
    await store.delete("a/one")
    with pytest.raises(ValueError):
        await store.put("/absolute", b"z")  # refused before any I/O: an error

    def delta(op: str, outcome: str) -> float:
        return calls(op, outcome) - before[(op, outcome)]

    assert (delta("put", "ok"), delta("put", "error")) == (2, 1)
    assert (delta("get", "ok"), delta("get", "missing")) == (1, 1)
    assert (delta("head", "ok"), delta("delete", "ok"), delta("list", "ok")) == (2, 1, 1)
    assert sample("ostinato_object_store_bytes_total", op="put") - put_bytes == 7
    assert sample("ostinato_object_store_bytes_total", op="get") - got_bytes == 5
    assert sample("ostinato_object_store_request_seconds_count", op="put") - timed == 3


async def test_a_listing_abandoned_is_counted_once_and_a_failure_as_unavailable(
        tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "objects")
    for n in range(3):
        await store.put(f"k/{n}", b"x")
    before = calls("list", "ok")
    listing = store.list("k/")
    assert await anext(listing) == "k/0"
    await listing.aclose()  # the caller stopped after one key
    assert calls("list", "ok") - before == 1
    (tmp_path / "objects" / "file").write_bytes(b"")  # a file where a folder is needed
    failed = calls("put", "unavailable")
    with pytest.raises(ObjectStoreUnavailable):
        await store.put("file/under", b"x")
    assert calls("put", "unavailable") - failed == 1


def test_outcomes() -> None:
    assert outcome_of(None) == "ok"
    assert outcome_of(ObjectMissing("k")) == "missing"
    assert outcome_of(ObjectStoreUnavailable("down")) == "unavailable"
    assert outcome_of(PermissionError("no")) == "error"
