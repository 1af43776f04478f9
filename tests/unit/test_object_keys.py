"""The object store's pure rules (issue 38, `ostinato.objects`): which keys and prefixes every
backend accepts (a relative path that cannot climb out of its root or prefix), how a store URL
is read (`file:///abs/dir`, `s3://bucket/prefix?endpoint=...`), and that a bad
OSTINATO_OBJECT_STORE_URL stops a service at start naming the variable. No server, no I/O:
the stores' behaviour is tested on the real S3 server (tests/integration/test_object_store.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ostinato.objects import (
    LocalLocation,
    S3Location,
    check_key,
    check_prefix,
    open_object_store,
    parse_object_store_url,
)
from ostinato.objects.local import LocalObjectStore
from ostinato.runtime.settings import DEFAULT_OBJECT_STORE_URL, load_settings

GOOD_KEYS = [
    "a",
    "tenants/0b5e/runs/7f3a.json.gz",
    "blobs/sha256/ab/cdef",
    "with space/and-ünïcode/ключ",
    "dots.in.names/..ok/...",  # only "." and ".." themselves are refused
    "x" * 255 + "/y",
]

BAD_KEYS = [
    ("", "empty"),
    ("/abs/key", "absolute"),
    ("a//b", "empty segment"),
    ("a/b/", "empty segment"),
    ("../etc/passwd", "'..' segment"),
    ("a/../../b", "'..' segment"),
    ("a/./b", "'.' segment"),
    (".", "'.' segment"),
    ("a\x00b", "NUL"),
    ("a/.ostinato-tmp-x", "reserved"),
    ("x" * 256, "longer than 255"),
    ("/".join(["y" * 200] * 6), "longer than 1024"),
]


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_a_relative_path_of_plain_segments_is_a_key(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize(("key", "says"), BAD_KEYS)
def test_a_key_that_could_leave_its_root_or_is_malformed_is_refused_saying_why(
        key: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        check_key(key)


def test_a_key_must_be_a_string() -> None:
    with pytest.raises(ValueError, match="string"):
        check_key(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["", "tenants/", "tenants/ab", "tenants/ab/runs/"])
def test_a_prefix_may_end_in_a_partial_or_empty_segment(prefix: str) -> None:
    assert check_prefix(prefix) == prefix


@pytest.mark.parametrize(("prefix", "says"), [
    ("/tenants/", "absolute"), ("a//b", "empty segment"), ("../", "'..' segment"),
    ("a/../b/", "'..' segment"), ("a\x00", "NUL"),
])
def test_a_bad_prefix_is_refused(prefix: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        check_prefix(prefix)


async def test_the_local_store_refuses_a_bad_key_or_prefix_before_touching_the_disk(
        tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "root")
    for call in (lambda: store.put("../escape", b"x"), lambda: store.get("/etc/passwd"),
                 lambda: store.exists("a//b"), lambda: store.delete("a/..")):
        with pytest.raises(ValueError):
            await call()
    with pytest.raises(ValueError, match=re.escape("'..' segment")):
        store.list("../")  # at the call, not at the first item
    assert not (tmp_path / "root").exists()
    assert not (tmp_path / "escape").exists()


def test_a_file_url_names_an_absolute_folder() -> None:
    assert parse_object_store_url("file:///var/lib/ostinato/objects") == LocalLocation(
        Path("/var/lib/ostinato/objects"))
    assert parse_object_store_url("file://localhost/srv/o%20bjects") == LocalLocation(
        Path("/srv/o bjects"))
    assert isinstance(open_object_store("file:///tmp/x"), LocalObjectStore)


def test_an_s3_url_names_bucket_prefix_endpoint_region_credentials_and_timeout() -> None:
    url = ("s3://ostinato-archive/prod/eu?endpoint=http://127.0.0.1:18333/&region=eu-west-1"
           "&access_key_id=AK&secret_access_key=S%2Fx&timeout=2.5&create_bucket=false")
    assert parse_object_store_url(url) == S3Location(
        bucket="ostinato-archive", prefix="prod/eu/", endpoint="http://127.0.0.1:18333",
        region="eu-west-1", access_key_id="AK", secret_access_key="S/x", timeout_seconds=2.5,
        create_bucket=False)
    bare = parse_object_store_url("s3://bucket")
    assert bare == S3Location(bucket="bucket", prefix="")
    assert (bare.endpoint, bare.region, bare.timeout_seconds, bare.create_bucket) == (
        None, "us-east-1", 30.0, True)


def test_an_s3_location_never_shows_its_secret() -> None:
    loc = parse_object_store_url("s3://bucket?access_key_id=AK&secret_access_key=hunter2")
    assert "hunter2" not in repr(loc)


@pytest.mark.parametrize(("url", "says"), [
    ("", "empty"),
    ("/abs/dir", "scheme"),
    ("gs://bucket", "scheme"),
    ("file://relative/dir", "not a host"),
    ("file:///dir?x=1", "no query"),
    ("s3://Bad_Bucket/x", "bucket"),
    ("s3://ab", "bucket"),
    ("s3://bucket/a/../b", "'..' segment"),
    ("s3://bucket?endpoint=ftp://h:1", "endpoint"),
    ("s3://bucket?endpoint=http://h:1/path", "endpoint"),
    ("s3://bucket?region=x&region=y", "twice"),
    ("s3://bucket?sekret=1", "unknown parameter"),
    ("s3://bucket?timeout=soon", "number"),
    ("s3://bucket?timeout=0", "timeout"),
    ("s3://bucket?create_bucket=maybe", "create_bucket"),
    ("s3://bucket?access_key_id=AK", "both"),
])
def test_a_bad_store_url_is_refused_saying_why(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_object_store_url(url)


def test_the_setting_defaults_to_the_checkouts_local_folder_and_a_bad_one_stops_the_start(
) -> None:
    checkout = Path(__file__).resolve().parents[2]
    assert DEFAULT_OBJECT_STORE_URL == (checkout / ".cache" / "objects").as_uri()
    assert load_settings({}).object_store_url == DEFAULT_OBJECT_STORE_URL
    url = "s3://bucket/p?endpoint=http://127.0.0.1:18333"
    assert load_settings({"OSTINATO_OBJECT_STORE_URL": url}).object_store_url == url
    with pytest.raises(SystemExit, match=r"OSTINATO_OBJECT_STORE_URL: .*scheme"):
        load_settings({"OSTINATO_OBJECT_STORE_URL": "ftp://nowhere"})
