"""The bucket sweep's walk (ostinato.archive.sweep, issue 38 item 4): which listed keys are blob
objects, and where the next page starts: after the last key while a tenant's blobs go on, at
the next tenant once a page reaches the tenant's archive objects (never listing through them),
at the tenant's blobs for a key that sorts before them, and nowhere once a page comes back
short (the pass is over). And its cadence, a setting."""

from __future__ import annotations

import uuid

import pytest

from ostinato.archive import blob_key, run_key
from ostinato.archive.sweep import ROOT, sweep_step
from ostinato.runtime.settings import load_settings

T1 = uuid.UUID("10000000-0000-4000-8000-000000000000")
T2 = uuid.UUID("20000000-0000-4000-8000-000000000000")
A = "a" * 64
B = "b" * 64


def test_blob_keys_are_named_with_tenant_and_digest_and_others_are_left_alone() -> None:
    keys = [blob_key(T1, A), blob_key(T1, B), run_key(T1, uuid.uuid4()),
            f"{ROOT}{T2}/blobs/sha256/aa/not-a-digest", "tenants/stray", blob_key(T2, A)]
    step = sweep_step(keys, full=False)
    assert step.blobs == [(blob_key(T1, A), T1, A), (blob_key(T1, B), T1, B),
                          (blob_key(T2, A), T2, A)]
    assert step.next_after is None  # a short page: the pass is over


def test_a_full_page_inside_a_tenants_blobs_goes_on_after_its_last_key() -> None:
    keys = [blob_key(T1, A), blob_key(T1, B)]
    assert sweep_step(keys, full=True).next_after == blob_key(T1, B)


def test_a_full_page_ending_in_a_tenants_archives_jumps_to_the_next_tenant() -> None:
    keys = [blob_key(T1, B), run_key(T1, uuid.uuid4())]
    after = sweep_step(keys, full=True).next_after
    assert after == f"{ROOT}{T1}0"
    # past every key of T1 (archives included), before every key of the next tenant
    assert run_key(T1, uuid.UUID(int=(1 << 128) - 1)) < after < blob_key(T2, "0" * 64)
    assert f"{ROOT}{T1}/zzz" < after


def test_a_key_that_sorts_before_a_tenants_blobs_starts_the_next_page_at_them() -> None:
    early = f"{ROOT}{T1}/archive-notes.txt"
    after = sweep_step([early], full=True).next_after
    assert after == f"{ROOT}{T1}/blobs/"
    assert early < after < blob_key(T1, "0" * 64)


def test_an_empty_page_ends_the_pass() -> None:
    assert sweep_step([], full=False).next_after is None
    assert sweep_step([], full=True).next_after is None


def test_the_sweeps_cadence_is_a_setting_zero_turns_it_off() -> None:
    assert load_settings({}).blob_sweep_interval_seconds == 60
    assert load_settings({"OSTINATO_BLOB_SWEEP_INTERVAL_SECONDS": "0"}
                         ).blob_sweep_interval_seconds == 0
    with pytest.raises(SystemExit, match="OSTINATO_BLOB_SWEEP_INTERVAL_SECONDS"):
        load_settings({"OSTINATO_BLOB_SWEEP_INTERVAL_SECONDS": "-1"})
