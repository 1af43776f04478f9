"""Waiting for something observable instead of sleeping for a guessed time.

`eventually` polls a plain predicate (in-process state: a fake gateway's requests, a flag);
`until` polls an async probe (a query, a scrape) and returns what it found. Their timeouts only
catch a hang: they are generous on purpose and are never the assertion a test makes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["eventually", "until"]

T = TypeVar("T")


async def eventually(predicate: Callable[[], object], within: float = 5.0,
                     what: str = "condition", every: float = 0.002) -> None:
    """Return once `predicate()` is truthy; fail after `within` seconds."""
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached within {within}s"
        await asyncio.sleep(every)


async def until(probe: Callable[[], Awaitable[T]], within: float, what: str,
                every: float = 0.1) -> T:
    """Poll `await probe()` until it returns something truthy and return it; fail after
    `within` seconds, naming `what` was awaited."""
    deadline = time.monotonic() + within
    while True:
        found = await probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(every)
