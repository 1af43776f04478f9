"""Never let the disk decide, the pure part (ostinato.policy.storage): measurements → how full
the database's storage is → the level (ok, filling, full, unmeasured) the reconciler records and
the api obeys. Boundaries exactly at the watermarks. No servers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ostinato.policy.storage import (
    Level,
    Volume,
    Watermarks,
    alerting,
    level,
    refuses_new_work,
    usage,
)

MARKS = Watermarks()  # 80 % alert, 95 % refuse


def test_defaults_are_80_and_95_percent() -> None:
    assert (MARKS.alert, MARKS.refuse) == (0.80, 0.95)


@pytest.mark.parametrize(("ratio", "expected"), [
    (0.0, Level.OK),
    (0.7999999, Level.OK),
    (0.80, Level.FILLING),  # at the alert watermark: the alert fires
    (0.9499999, Level.FILLING),
    (0.95, Level.FULL),  # at the refuse watermark: new work refused
    (1.0, Level.FULL),
    (1.7, Level.FULL),  # a database grown past its quota
    (None, Level.UNMEASURED),
    (math.nan, Level.UNMEASURED),
])
def test_level_at_the_boundaries(ratio: float | None, expected: Level) -> None:
    assert level(ratio, MARKS) is expected


def test_back_under_the_refuse_watermark_accepts_again() -> None:
    """No memory: the level follows the measurement both ways (refusing is not latched)."""
    assert refuses_new_work(level(0.96, MARKS))
    assert not refuses_new_work(level(0.9499, MARKS))
    assert alerting(level(0.9499, MARKS)) and not alerting(level(0.7999, MARKS))


def test_only_full_refuses_and_unmeasured_neither_refuses_nor_alerts() -> None:
    assert [refuses_new_work(v) for v in Level] == [False, False, True, False]
    assert [alerting(v) for v in Level] == [False, True, True, False]
    assert not refuses_new_work("some-newer-level")


@pytest.mark.parametrize(("alert", "refuse"), [
    (0.0, 0.95), (0.96, 0.95), (0.8, 1.01), (-0.1, 0.5), (math.nan, 0.95), (0.8, math.inf)])
def test_bad_watermarks_are_refused(alert: float, refuse: float) -> None:
    with pytest.raises(ValueError, match="watermarks"):
        Watermarks(alert, refuse)


def test_equal_watermarks_are_allowed() -> None:
    assert level(0.9, Watermarks(0.9, 0.9)) is Level.FULL


def test_volume_counts_as_df_does() -> None:
    """df's Use%: (blocks − free) / (blocks − free + available); the root-reserved blocks (free,
    not available) are nobody's here. 1,000 blocks of 4 KiB, 300 free of which 250 available:
    700 used, 950 usable in all, 73.68 %."""
    v = Volume.of_statvfs(blocks=1000, free=300, available=250, fragment_size=4096)
    assert (v.total_bytes, v.available_bytes) == (950 * 4096, 250 * 4096)
    u = usage(123, volume=v)
    assert u.source == "volume" and u.database_bytes == 123
    assert u.used_ratio == pytest.approx(700 / 950)
    assert (u.total_bytes, u.free_bytes) == (950 * 4096, 250 * 4096)


def test_volume_with_nothing_available_is_full_even_with_root_reserve_left() -> None:
    v = Volume.of_statvfs(blocks=1000, free=50, available=0, fragment_size=512)
    assert level(usage(1, volume=v).used_ratio, MARKS) is Level.FULL


def test_capacity_compares_the_database_size_with_the_quota() -> None:
    u = usage(800, capacity_bytes=1000)
    assert (u.source, u.used_ratio, u.total_bytes, u.free_bytes) == ("capacity", 0.8, 1000, 200)
    over = usage(1500, capacity_bytes=1000)
    assert over.used_ratio == 1.5 and over.free_bytes == 0


def test_with_both_the_fuller_counts() -> None:
    half = Volume(total_bytes=1000, available_bytes=500)
    assert usage(960, volume=half, capacity_bytes=1000).source == "capacity"
    assert usage(100, volume=half, capacity_bytes=1000).source == "volume"
    assert usage(500, volume=half, capacity_bytes=1000).source == "volume"  # a tie: the volume


def test_nothing_configured_is_unmeasured() -> None:
    u = usage(4242)
    assert (u.source, u.used_ratio, u.total_bytes, u.free_bytes) == ("none", None, None, None)
    assert usage(1, volume=Volume(0, 0), capacity_bytes=0).source == "none"


@given(st.floats(0, 2), st.floats(0.01, 1), st.floats(0.01, 1))
def test_level_is_monotonic_in_the_ratio(ratio: float, a: float, b: float) -> None:
    marks = Watermarks(min(a, b), max(a, b))
    order = [Level.OK, Level.FILLING, Level.FULL]
    assert order.index(level(ratio, marks)) <= order.index(level(ratio + 0.01, marks))
