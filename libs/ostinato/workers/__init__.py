"""The worker registry: which workers are connected, for which tenant (or every tenant), in which
pools and with how many slots. Fair dispatch reads pool capacity from it (`live_capacity`)."""

from ostinato.workers.registry import (
    PoolCapacity,
    WorkerInfo,
    forget,
    forget_stale,
    list_workers,
    live_capacity,
    seen,
    touch,
    unserved,
)

__all__ = ["PoolCapacity", "WorkerInfo", "forget", "forget_stale", "list_workers",
           "live_capacity", "seen", "touch", "unserved"]
