"""How every Ostinato process runs: on uvloop (libuv) when installed, else asyncio's loop, and
with its heap settled once it has started (`settle_heap`).

Services, SDK workers and benchmarks spend most of their time in socket I/O to PostgreSQL,
Kafka and HTTP peers; uvloop does that I/O with less interpreter work per call (under load it
took the services from 1,210 to 1,570 runs/s end to end, `python -m bench.throughput`).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def settle_heap() -> None:
    """Once a long-running process has started (modules, app, pools): move everything
    allocated so far out of the cyclic collector's reach and collect less often, so that
    collections stop re-walking a large, stable heap. Reference counting still frees what is
    dropped at once; only cyclic garbage waits longer. In the services collections took ~4 % of
    the machine under load; in an SDK worker process, a quarter of its CPU in a burst
    (bench/README.md)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
