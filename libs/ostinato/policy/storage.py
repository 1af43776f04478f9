"""Never let the disk decide (docs/RETENTION.md, "The disk"): how full the database's storage
is, from what the reconciler measured, and what follows from it. Pure: values in, a level out.

Two measures, either or both (the fuller one counts):

- the **volume**: statvfs of a path on the database's volume, read where the reconciler shares
  the host (the local profile, a sidecar). Used is `df`'s Use%: (blocks − free) over (blocks −
  free + available), so 100 % is exactly where an unprivileged process (PostgreSQL) can write
  no more (the blocks reserved for root are not PostgreSQL's to use);
- a **capacity**: a quota in bytes the database's size (`pg_database_size`) is compared with,
  for a managed database whose volume nobody here can see.

Neither configured: `unmeasured`, and nothing is refused (the metrics still carry the size).

Room is also what the database's own files can take before any of them grows: PostgreSQL never
gives back the space removed rows held (neither the volume nor `pg_database_size` shrink after a
DELETE); VACUUM makes it free for new rows of the same table. A database at its refuse
watermark whose runs retention removed would otherwise stay "full" for ever. `reusable_bytes`
estimates that space from the statistics (`RelationSpace`: each table's and TOAST table's size,
live and dead tuple counts and average tuple width) and `usage` counts it as room: free space
once VACUUM freed it, never dead tuples still waiting for it, never indexes.
Levels: `ok` < `filling` (at or over the alert watermark: an alert) < `full` (at or over the
refuse watermark: the api refuses new work with a 503 until the level falls back under it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Level(StrEnum):
    OK = "ok"
    FILLING = "filling"  # at or over the alert watermark
    FULL = "full"  # at or over the refuse watermark: no new work
    UNMEASURED = "unmeasured"  # no volume path and no capacity configured


@dataclass(frozen=True, slots=True)
class Watermarks:
    alert: float = 0.80
    refuse: float = 0.95

    def __post_init__(self) -> None:
        if not (math.isfinite(self.alert) and math.isfinite(self.refuse)
                and 0 < self.alert <= self.refuse <= 1):
            raise ValueError("storage watermarks must satisfy 0 < alert <= refuse <= 1, got "
                             f"alert={self.alert!r} refuse={self.refuse!r}")


@dataclass(frozen=True, slots=True)
class Volume:
    """A filesystem as PostgreSQL sees it: what it may fill in all, what it may still write."""

    total_bytes: int
    available_bytes: int

    @classmethod
    def of_statvfs(cls, blocks: int, free: int, available: int, fragment_size: int) -> Volume:
        """From statvfs's f_blocks, f_bfree, f_bavail and f_frsize, as `df` counts: the blocks
        reserved for root (free but not available) belong to nobody here."""
        used = max(0, blocks - free)
        return cls(total_bytes=(used + max(0, available)) * fragment_size,
                   available_bytes=max(0, available) * fragment_size)


# PostgreSQL's heap page (the default BLCKSZ), its header, a tuple's line pointer, and the
# alignment of a tuple's header and data (MAXALIGN on 64-bit).
PAGE_BYTES = 8192
PAGE_HEADER_BYTES = 24
LINE_POINTER_BYTES = 4
ALIGN = 8
# A TOAST chunk row at its largest (chunk_id, chunk_seq and TOAST_MAX_CHUNK_SIZE = 1996 bytes of
# data with its varlena header, under a tuple header), the width every live chunk is counted at:
# the last chunk of a value is smaller, so this over-counts what is live, never the room.
TOAST_CHUNK_BYTES = 2032 + LINE_POINTER_BYTES


def _aligned(n: float) -> int:
    return -(-math.ceil(n) // ALIGN) * ALIGN


def tuple_bytes(columns: int, data_width: float) -> int:
    """What one row takes on a heap page: its header (23 bytes and a null bitmap of one bit a
    column, aligned), its data (`data_width`: the sum of the columns' average widths that
    ANALYZE recorded, `pg_stats.avg_width`, as stored: compressed or a TOAST pointer), aligned,
    and its line pointer. Rounded up at each step, so what is live is never under-counted."""
    return (_aligned(23 + math.ceil(max(0, columns) / 8)) + _aligned(max(0.0, data_width))
            + LINE_POINTER_BYTES)


@dataclass(frozen=True, slots=True)
class RelationSpace:
    """One table (or TOAST table) as the statistics see it: its main fork's size
    (`pg_relation_size`), its live and dead tuples (`n_live_tup`, `n_dead_tup`), what one tuple
    takes (`tuple_bytes`; None: no statistics yet, the table counts no room) and its fillfactor
    (what inserts may fill of a page)."""

    size_bytes: int
    live_tuples: int
    dead_tuples: int
    tuple_bytes: int | None
    fillfactor: int = 100


def relation_reusable_bytes(r: RelationSpace) -> int:
    """The room new rows of this table take before its file grows: what its pages may hold
    (less page headers and the fillfactor's reserve) beyond its live and dead tuples. Dead
    tuples count as used until VACUUM frees them (a vacuum held back by a long transaction
    frees nothing, and nothing is counted); never below zero (statistics a little behind)."""
    if r.tuple_bytes is None or r.tuple_bytes <= 0 or r.size_bytes <= 0:
        return 0
    pages = r.size_bytes // PAGE_BYTES
    fill = min(100, max(10, r.fillfactor))
    usable = pages * (PAGE_BYTES - PAGE_HEADER_BYTES) * fill // 100
    held = (max(0, r.live_tuples) + max(0, r.dead_tuples)) * r.tuple_bytes
    return max(0, usable - held)


def reusable_bytes(relations: Iterable[RelationSpace]) -> int:
    """The space inside the database's files new rows take before any file grows: the sum of
    `relation_reusable_bytes` over its tables and their TOAST tables (indexes are not counted:
    a B-tree's freed room is reused by keys in the same range only)."""
    return sum(relation_reusable_bytes(r) for r in relations)


@dataclass(frozen=True, slots=True)
class Usage:
    database_bytes: int
    total_bytes: int | None  # the volume's (as `Volume`), or the capacity
    # the room: what PostgreSQL may still write to the volume (or is left of the capacity),
    # plus the space reusable inside its files
    free_bytes: int | None
    used_ratio: float | None  # None: unmeasured; may pass 1 when a database outgrows its quota
    source: str  # "volume", "capacity" or "none"
    reusable_bytes: int = 0  # of the room, what is inside the database's files (counted)


def usage(database_bytes: int, volume: Volume | None = None,
          capacity_bytes: int | None = None, reusable: int = 0) -> Usage:
    """The storage's use by each configured measure, the fuller one (the volume on a tie).
    `reusable` (`reusable_bytes`): space inside the database's files new rows take before they
    grow, counted as room, at most the database's size (and at most what the volume has in
    use)."""
    reusable = max(0, min(reusable, database_bytes))
    measured: list[Usage] = []
    if volume is not None and volume.total_bytes > 0:
        free = min(volume.available_bytes, volume.total_bytes)
        inside = min(reusable, volume.total_bytes - free)
        measured.append(Usage(database_bytes, volume.total_bytes, free + inside,
                              (volume.total_bytes - free - inside) / volume.total_bytes,
                              "volume", inside))
    if capacity_bytes is not None and capacity_bytes > 0:
        used = database_bytes - reusable
        measured.append(Usage(database_bytes, capacity_bytes, max(0, capacity_bytes - used),
                              used / capacity_bytes, "capacity", reusable))
    if not measured:
        return Usage(database_bytes, None, None, None, "none")
    return max(measured, key=lambda u: u.used_ratio or 0.0)


def level(used_ratio: float | None, marks: Watermarks) -> Level:
    """At a watermark is over it: 80 % of 80 % alerts, 95 % of 95 % refuses."""
    if used_ratio is None or math.isnan(used_ratio):
        return Level.UNMEASURED
    if used_ratio >= marks.refuse:
        return Level.FULL
    if used_ratio >= marks.alert:
        return Level.FILLING
    return Level.OK


def refuses_new_work(level_: str) -> bool:
    """Whether the api refuses new work at this level (only `full`; an unknown level, from a
    newer release's reconciler, is taken at its word only when it says full)."""
    return level_ == Level.FULL


def alerting(level_: str) -> bool:
    """Whether the storage alert fires at this level (the alert watermark passed)."""
    return level_ in (Level.FILLING, Level.FULL)
