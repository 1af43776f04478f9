"""Wake-ups for the long polls of `GET /v1/runs/{id}/state` and `/updates/{id}`: the append
that records a value a workflow published, an update's answer or a run's end notifies its run
on the run-end channel (`ostinato.eventlog.ended.wakes`); one listener per api process wakes
the waiters of that run, which then read again (a notice only wakes: a lost or late one costs
a read after a reconnect, never a wrong answer).

The listener's connection is held only while someone waits: it is opened by the first waiter
and closed once none has waited for a few seconds. Waiting holds no pooled connection and runs
no statement. (The run-end listener of `GET /v1/runs/{id}/result`, `results.RunEnds`,
answers its waiters with the run's final answer only, so these waits, which need the news
before the end, have their own.)
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable

import asyncpg

from ostinato.eventlog import ended
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.news")

Connect = Callable[[], Awaitable[asyncpg.Connection]]
CHECK_SECONDS = 1.0  # how often the listener looks whether anyone still waits
IDLE_CHECKS = 5  # checks with nobody waiting before the listener closes its connection
PING_EVERY = 30  # checks between two liveness pings (`SELECT 1`) of its connection
RETRY_SECONDS = 1.0  # after a failed connection: waiters read for themselves, then again


class RunNews:
    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._waiters: dict[uuid.UUID, set[asyncio.Future[None]]] = {}
        self._task: asyncio.Task[None] | None = None
        self.notices = 0  # notices heard (tests)
        self.connects = 0  # times the listener connected (tests)

    def watch(self, run_id: uuid.UUID) -> asyncio.Future[None]:
        """A future done when news of `run_id` may have come: register it BEFORE reading, so
        news committed after the read is heard."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.setdefault(run_id, set()).add(fut)
        if self._task is None:
            self._task = loop.create_task(self._listen(), name="run-news-listener")
        return fut

    def forget(self, run_id: uuid.UUID, fut: asyncio.Future[None]) -> None:
        waiting = self._waiters.get(run_id)
        if waiting is not None:
            waiting.discard(fut)
            if not waiting:
                del self._waiters[run_id]

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    def wake(self, run_ids: list[uuid.UUID]) -> int:
        woken = 0
        for run_id in run_ids:
            for fut in self._waiters.pop(run_id, ()):
                if not fut.done():
                    fut.set_result(None)
                    woken += 1
        return woken

    def _on_notice(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self.notices += 1
        self.wake(ended.parse(payload))

    async def _listen(self) -> None:
        conn: asyncpg.Connection | None = None
        try:
            conn = await self._connect()
            await conn.add_listener(ended.CHANNEL, self._on_notice)
            self.connects += 1
            self.wake(list(self._waiters))  # news while not listening yet: read again
            checks = idle = 0
            while idle < IDLE_CHECKS:  # woken waiters watch again after their read
                await asyncio.sleep(CHECK_SECONDS)
                checks += 1
                idle = 0 if self._waiters else idle + 1
                if checks % PING_EVERY == 0:
                    await conn.execute("SELECT 1")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database away: each waiter reads for itself
            log.warning("run-news listener failed", error=f"{type(exc).__name__}: {exc}",
                        waiting=self.waiting)
            await asyncio.sleep(RETRY_SECONDS)
            self.wake(list(self._waiters))
        finally:
            self._task = None  # a waiter from now on starts a new listener
            if conn is not None and not conn.is_closed():
                with contextlib.suppress(Exception):
                    await asyncio.shield(conn.close(timeout=2))


def connector(dsn: str) -> Connect:
    """Its own connection (LISTEN is per session; a pooled one is reset on release)."""
    async def connect() -> asyncpg.Connection:
        return await asyncpg.connect(dsn, timeout=10)
    return connect


def news_of(state: object, dsn: str) -> RunNews:
    """The api process's listener, made on first use and kept on the app's state."""
    news = getattr(state, "run_news", None)
    if news is None:
        news = RunNews(connector(dsn))
        state.run_news = news  # type: ignore[attr-defined]
    return news
