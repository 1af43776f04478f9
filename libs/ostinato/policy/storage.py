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
Levels: `ok` < `filling` (at or over the alert watermark: an alert) < `full` (at or over the
refuse watermark: the api refuses new work with a 503 until the level falls back under it).
"""

from __future__ import annotations

import math
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


@dataclass(frozen=True, slots=True)
class Usage:
    database_bytes: int
    total_bytes: int | None  # the volume's (as `Volume`), or the capacity
    free_bytes: int | None
    used_ratio: float | None  # None: unmeasured; may pass 1 when a database outgrows its quota
    source: str  # "volume", "capacity" or "none"


def usage(database_bytes: int, volume: Volume | None = None,
          capacity_bytes: int | None = None) -> Usage:
    """The storage's use by each configured measure, the fuller one (the volume on a tie)."""
    measured: list[Usage] = []
    if volume is not None and volume.total_bytes > 0:
        free = min(volume.available_bytes, volume.total_bytes)
        measured.append(Usage(database_bytes, volume.total_bytes, free,
                              (volume.total_bytes - free) / volume.total_bytes, "volume"))
    if capacity_bytes is not None and capacity_bytes > 0:
        measured.append(Usage(database_bytes, capacity_bytes,
                              max(0, capacity_bytes - database_bytes),
                              database_bytes / capacity_bytes, "capacity"))
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
