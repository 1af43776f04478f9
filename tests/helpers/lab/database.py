"""The test database as a fault scenario sees it: `Db`, a small pool whose calls are retried
while the server restarts (a scenario may stop the shared PostgreSQL under its own checks)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from ostinato.db.pool import create_pool

__all__ = ["DB_ERRORS", "Db"]

# What a restarting server looks like to a client (not: errors in the SQL itself).
DB_ERRORS = (OSError, TimeoutError, asyncpg.exceptions.PostgresConnectionError,
             asyncpg.exceptions.OperatorInterventionError, asyncpg.InterfaceError)


class Db:
    """A small pool on one database whose calls are retried while the server restarts."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._pool: asyncpg.Pool | None = None

    async def _call(self, method: str, sql: str, *args: Any, within: float) -> Any:
        deadline = time.monotonic() + within
        while True:
            try:
                if self._pool is None:
                    self._pool = await asyncio.wait_for(
                        create_pool(self.url, min_size=0, max_size=4), 5)
                async with self._pool.acquire(timeout=5) as conn:
                    return await getattr(conn, method)(sql, *args)
            except (*DB_ERRORS, asyncpg.InternalClientError):
                # A call cut short (the server went away, or the acquire's timeout fell inside
                # a new connection's set-up on a busy machine) may leave a connection
                # mid-protocol, which the next call would meet: start again on a new pool.
                self._discard()
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    def _discard(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.terminate()

    async def fetch(self, sql: str, *args: Any, within: float = 30) -> list[asyncpg.Record]:
        return await self._call("fetch", sql, *args, within=within)

    async def fetchval(self, sql: str, *args: Any, within: float = 30) -> Any:
        return await self._call("fetchval", sql, *args, within=within)

    async def execute(self, sql: str, *args: Any, within: float = 30) -> str:
        return await self._call("execute", sql, *args, within=within)

    async def now(self) -> Any:
        """The database clock (`clock_timestamp()`): the one time authority a scenario's
        ordering checks compare recorded times with."""
        return await self.fetchval("SELECT clock_timestamp()")

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), 5)
            except (*DB_ERRORS, asyncio.CancelledError):
                pool.terminate()
