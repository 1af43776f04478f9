"""Whether the database refuses this process's writes.

A server whose disk is full answers `SELECT 1` and refuses every INSERT (SQLSTATE 53100
disk_full); one switched to read-only answers reads and refuses writes with 25006. A write probe
cannot prove that a data file can still grow without itself growing one, so the proof used here
is the work's own: every statement of the service's pools (`TrackedConnection`) reports an error
of that kind to `WRITES`, and /readyz is not ready while the last one is under
`WRITE_FAILURE_WINDOW_SECONDS` old (the readiness probe also records a read-only server, which
it sees without writing). The window, not a later success, ends it: a pod out of its load
balancer gets no requests that could succeed, and its duties write on their own anyway.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from ostinato.db.sqlstate import IO_ERROR, READ_ONLY
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

__all__ = ["WRITES", "WRITE_FAILURE_WINDOW_SECONDS", "TrackedConnection", "WriteHealth",
           "refuses_writes"]

# Longer than a Kubernetes readiness probe's 3 failures 5 s apart, so a pod is taken out, and
# short enough that a pod comes back within half a minute of space being freed.
WRITE_FAILURE_WINDOW_SECONDS = 30.0
_log = get_logger("ostinato.db.health")


def refuses_writes(sqlstate: str | None) -> bool:
    """The SQLSTATEs that mean "the server cannot take writes now", whatever the statement:
    class 53 (insufficient resources: 53100 disk_full, 53200 out_of_memory, ...), 58030 io_error
    and 25006 read_only_sql_transaction. A constraint or a syntax error is the statement's own
    fault and says nothing about the server."""
    return bool(sqlstate) and (sqlstate[:2] == "53" or sqlstate in (IO_ERROR, READ_ONLY))


@dataclass(frozen=True, slots=True)
class WriteFailure:
    sqlstate: str
    error: str
    at: float  # monotonic seconds


class WriteHealth:
    """The last refused write of this process; `failing()` names it while it is recent."""

    def __init__(self, window: float = WRITE_FAILURE_WINDOW_SECONDS,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.monotonic = monotonic
        self.last: WriteFailure | None = None

    def note(self, exc: BaseException) -> bool:
        """Record `exc` if it is a refused write (counted by SQLSTATE); True if it was."""
        code = getattr(exc, "sqlstate", None)
        if not isinstance(code, str) or not refuses_writes(code):
            return False
        metrics.DATABASE_WRITE_ERRORS.labels(sqlstate=code).inc()
        self.record(code, f"{type(exc).__name__}: {exc}"[:300])
        return True

    def record(self, sqlstate: str, error: str) -> None:
        """Remember a refusal now (a statement's, or a read-only server the probe saw)."""
        if self.failing() is None:
            _log.error("database refuses writes", sqlstate=sqlstate, error=error,
                       alert="ostinato_database_writes_failing")
        self.last = WriteFailure(sqlstate, error, self.monotonic())
        metrics.DATABASE_WRITES_FAILING.set(1)

    def failing(self) -> str | None:
        """The last refusal with its age while it is under `window` old, else None."""
        last = self.last
        if last is None:
            return None
        age = self.monotonic() - last.at
        if age >= self.window:
            return None
        return f"{last.sqlstate} {last.error} ({age:.1f} s ago)"

    def clear(self) -> None:
        self.last = None
        metrics.DATABASE_WRITES_FAILING.set(0)


WRITES = WriteHealth()  # one per process: every pool's connections report here


def _tracked(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """`method` of asyncpg.Connection, reporting a refused write to `WRITES` as it raises."""

    async def tracked(self: TrackedConnection, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except asyncpg.PostgresError as exc:
            if WRITES.note(exc) and exc.sqlstate == READ_ONLY:
                self.read_only_seen = True
            raise

    tracked.__name__ = method.__name__
    tracked.__doc__ = method.__doc__
    return tracked


class TrackedConnection(asyncpg.Connection):
    """An asyncpg connection whose statements report refused writes to `WRITES` (the pools of
    `ostinato.db.pool.create_pool`). The public statement methods are wrapped, COMMIT (sent by
    `execute`) among them; none calls another, so an error is reported once. Costs one
    coroutine frame a statement (a few hundred ns against the tens of µs of asyncpg's own
    work), and nothing more unless it fails.

    A connection that met a read-only server (25006: a primary demoted to a standby after a
    failover, or one set read-only) says so in `read_only_seen`; the pool closes it on release
    (`ostinato.db.pool`) so that the next one is opened by the multi-host URL's rule
    (target_session_attrs=read-write): on the writable primary, wherever it is now."""

    __slots__ = ("read_only_seen",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_only_seen = False

    execute = _tracked(asyncpg.Connection.execute)
    executemany = _tracked(asyncpg.Connection.executemany)
    fetch = _tracked(asyncpg.Connection.fetch)
    fetchval = _tracked(asyncpg.Connection.fetchval)
    fetchrow = _tracked(asyncpg.Connection.fetchrow)
    fetchmany = _tracked(asyncpg.Connection.fetchmany)
