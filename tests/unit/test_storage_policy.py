"""Never let the disk decide, the pure part (ostinato.policy.storage): measurements → how full
the database's storage is → the level (ok, filling, full, unmeasured) the reconciler records and
the api obeys. Boundaries exactly at the watermarks. No servers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ostinato.policy.storage import (
    PAGE_BYTES,
    PAGE_HEADER_BYTES,
    TOAST_CHUNK_BYTES,
    Level,
    RelationSpace,
    Volume,
    Watermarks,
    alerting,
    level,
    refuses_new_work,
    relation_reusable_bytes,
    reusable_bytes,
    tuple_bytes,
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


# Room inside the database's files (issue 38 item 9 after removals): PostgreSQL keeps the space
# removed rows held; once VACUUM freed it, new rows take it before any file grows.

PAGE_ROOM = PAGE_BYTES - PAGE_HEADER_BYTES


def rel(pages: int, live: int = 0, dead: int = 0, width: int | None = 100,
        fillfactor: int = 100) -> RelationSpace:
    return RelationSpace(size_bytes=pages * PAGE_BYTES, live_tuples=live, dead_tuples=dead,
                         tuple_bytes=width, fillfactor=fillfactor)


@pytest.mark.parametrize(("columns", "width", "expected"), [
    (0, 0, 24 + 0 + 4),  # a header alone (23 bytes, aligned), a line pointer
    (1, 1, 24 + 8 + 4),  # data aligned up
    (8, 8, 24 + 8 + 4),  # eight columns' null bitmap still fits the header's 24
    (9, 8, 32 + 8 + 4),  # a ninth column's bit takes the header to 25: aligned to 32
    (50, 300.2, 32 + 304 + 4),  # an average width rounds up, then aligns (7-byte bitmap)
    (3, -5, 24 + 0 + 4),  # nonsense width: no data, never negative
])
def test_a_tuple_takes_its_header_its_aligned_data_and_a_line_pointer(
        columns: int, width: float, expected: int) -> None:
    assert tuple_bytes(columns, width) == expected


def test_a_toast_chunk_is_counted_at_its_largest() -> None:
    # four full chunks fill a page, as TOAST_MAX_CHUNK_SIZE is made for
    assert 4 * TOAST_CHUNK_BYTES <= PAGE_ROOM < 5 * TOAST_CHUNK_BYTES


def test_a_table_s_room_is_its_pages_less_its_live_and_dead_tuples() -> None:
    assert relation_reusable_bytes(rel(10)) == 10 * PAGE_ROOM  # empty pages: all room
    assert relation_reusable_bytes(rel(10, live=100)) == 10 * PAGE_ROOM - 100 * 100
    # dead tuples are not room until VACUUM frees them (they count as used)
    assert relation_reusable_bytes(rel(10, live=100, dead=50)) == 10 * PAGE_ROOM - 150 * 100
    # after VACUUM the same 50 are free again
    assert relation_reusable_bytes(rel(10, live=100, dead=0)) > \
        relation_reusable_bytes(rel(10, live=100, dead=50))


def test_a_full_table_or_statistics_behind_it_count_no_room_never_less() -> None:
    full = PAGE_ROOM // 100
    assert relation_reusable_bytes(rel(1, live=full)) == PAGE_ROOM - full * 100
    assert relation_reusable_bytes(rel(1, live=full + 1)) == 0
    assert relation_reusable_bytes(rel(1, live=10**9, dead=10**9)) == 0


def test_a_table_without_statistics_or_pages_counts_no_room() -> None:
    assert relation_reusable_bytes(rel(10, width=None)) == 0  # never analyzed: width unknown
    assert relation_reusable_bytes(rel(10, width=0)) == 0
    assert relation_reusable_bytes(rel(0)) == 0
    # a partial page (a size not a whole number of pages) is not counted
    assert relation_reusable_bytes(RelationSpace(PAGE_BYTES - 1, 0, 0, 100)) == 0


@pytest.mark.parametrize(("fillfactor", "room"), [
    (100, PAGE_ROOM), (90, PAGE_ROOM * 90 // 100), (10, PAGE_ROOM * 10 // 100),
    (5, PAGE_ROOM * 10 // 100), (150, PAGE_ROOM),  # out of PostgreSQL's 10..100: clamped
])
def test_the_fillfactor_s_reserve_is_no_room_for_inserts(fillfactor: int, room: int) -> None:
    assert relation_reusable_bytes(rel(1, fillfactor=fillfactor)) == room


def test_the_database_s_room_is_the_sum_of_its_tables() -> None:
    tables = [rel(10, live=100), rel(4, live=10**6), rel(3, width=None), rel(2)]
    assert reusable_bytes(tables) == (10 * PAGE_ROOM - 100 * 100) + 0 + 0 + 2 * PAGE_ROOM
    assert reusable_bytes([]) == 0


def test_reusable_room_brings_a_full_volume_back_under_the_refuse_watermark() -> None:
    """A 1,000-byte volume 96 % used: full. Retention removed rows and VACUUM freed 100 bytes
    inside the database's files: the volume is still 96 % used by df, but 86 % by the room new
    rows have, so new work is accepted again; 10 bytes are not enough (95 %: still full)."""
    v = Volume(total_bytes=1000, available_bytes=40)
    assert level(usage(900, volume=v).used_ratio, MARKS) is Level.FULL
    after = usage(900, volume=v, reusable=100)
    assert after.used_ratio == pytest.approx(0.86) and level(after.used_ratio, MARKS) \
        is Level.FILLING
    assert (after.free_bytes, after.reusable_bytes) == (140, 100)
    assert level(usage(900, volume=v, reusable=10).used_ratio, MARKS) is Level.FULL  # 95 %
    assert level(usage(900, volume=v, reusable=11).used_ratio, MARKS) is Level.FILLING


def test_reusable_room_counts_against_a_capacity_too() -> None:
    assert usage(960, capacity_bytes=1000).used_ratio == 0.96
    u = usage(960, capacity_bytes=1000, reusable=200)
    assert (u.used_ratio, u.free_bytes, u.reusable_bytes) == (0.76, 240, 200)


def test_reusable_room_is_at_most_the_database_and_what_the_volume_has_in_use() -> None:
    assert usage(100, capacity_bytes=1000, reusable=10**9).used_ratio == 0.0
    assert usage(100, capacity_bytes=1000, reusable=-5).used_ratio == 0.1  # nonsense: none
    v = Volume(total_bytes=1000, available_bytes=950)  # 50 used, whatever the estimate says
    u = usage(500, volume=v, reusable=400)
    assert (u.used_ratio, u.free_bytes, u.reusable_bytes) == (0.0, 1000, 50)
    assert usage(1, reusable=10).source == "none"  # unmeasured stays unmeasured


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6),
       st.integers(1, 10**6))
def test_more_reusable_room_never_raises_the_use(database: int, r1: int, r2: int,
                                                 capacity: int) -> None:
    v = Volume(total_bytes=2 * 10**6, available_bytes=10**6)
    lo, hi = sorted((r1, r2))
    for kw in ({"volume": v}, {"capacity_bytes": capacity}):
        assert (usage(database, reusable=hi, **kw).used_ratio or 0) <= \
            (usage(database, reusable=lo, **kw).used_ratio or 0)
