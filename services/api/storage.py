"""Never let the disk decide, the api's side (docs/RETENTION.md, "The disk"). The reconciler
measures the database's storage and records its level in the one row of `storage_state`; each
api process reads that row through `StorageGate`, at most once per CACHE_SECONDS whatever the
request rate (one read in flight at a time), and never measures anything itself.

While the level is `full`, new work is refused with a 503 `storage-full` problem and
`Retry-After` (`refuse_new_work_when_full`, the app's guard): the control actions in NEW_WORK,
judged by the route's audited action name, so the API's routes and the UI's alike. It runs
before the route's dependencies: nothing is written, not even an audit row. Everything else
goes on — reads, cancels, pauses, signals and updates to running workflows, and the worker
gateway's claims and outcomes — so work in flight finishes and retention can make room. The
Kafka ingest leaves submissions pending on their topic meanwhile (`services.api.ingest`).
/readyz reports the state as `storage` (degraded, a 200: a pod refusing new work still serves
reads, so it stays in its load balancer).

A read that fails (the database away) keeps the last level read: the gate itself never turns
a request into a 5xx, and with no level ever read nothing is refused."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import asyncpg
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler

from ostinato.domain.errors import StorageFull
from ostinato.policy.storage import refuses_new_work
from ostinato.runtime.ops import Check, Degraded
from ostinato.stores import storage as storage_store
from ostinato.stores.storage import StorageRow
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import RateLimitedLogger, get_logger
from services.api.auditing import AuditSpec

CACHE_SECONDS = 2.0  # how stale a level an api process may act on
READ_BUDGET_SECONDS = 0.5  # what /readyz waits for a read of the level (the probe's budget)
# The control actions that make new work (runs, jobs, workflow starts); anything else goes on.
NEW_WORK = frozenset({
    "job.create", "job.create_batch", "job.trigger", "job.backfill", "dag.run",
    "dag_run.retry_node", "workflow.start", "workflow.signal_with_start", "run.retry",
    "dead_letter.replay", "dead_letter.replay_many"})
log = get_logger("ostinato.api.storage")
_unreadable = RateLimitedLogger("ostinato.api.storage")


def _percent(ratio: float | None) -> str:
    return "an unknown share" if ratio is None else f"{100 * ratio:.1f} %"


class StorageGate:
    """The storage level as this api process last read it (`state`), refusing new work while it
    is full (`admit`) and saying so on /readyz (`check`)."""

    def __init__(self, pool: Callable[[], asyncpg.Pool | None], retry_after_seconds: int, *,
                 cache_seconds: float = CACHE_SECONDS,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._pool, self.retry_after_seconds = pool, retry_after_seconds
        self._cache_seconds, self._monotonic = cache_seconds, monotonic
        self._row: StorageRow | None = None
        self._read_at = float("-inf")
        self._reading: asyncio.Future[None] | None = None
        self._refusing = False

    async def state(self, wait: float | None = None) -> StorageRow | None:
        """The level recorded by the reconciler, at most CACHE_SECONDS old (None: never);
        `wait`: how long to wait for a read under way at most (then the last level read)."""
        if self._monotonic() - self._read_at < self._cache_seconds:
            return self._row
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reading), wait)
        return self._row

    async def _read(self) -> None:
        pool = self._pool()
        if pool is None:
            return
        try:
            async with pool.acquire() as conn:
                row = await storage_store.read(conn)
        except Exception as exc:  # the last level stands; asked again after the cache time
            _unreadable.warning("storage level not read; the last one read stands", exc)
            self._read_at = self._monotonic()
            return
        self._row, self._read_at = row, self._monotonic()
        refusing = row is not None and refuses_new_work(row.level)
        metrics.STORAGE_REFUSING.set(1 if refusing else 0)
        if refusing != self._refusing:
            self._refusing = refusing
            if refusing:
                log.warning("storage full: new work refused", used=_percent(row.used_ratio),
                            refuse_at=_percent(row.refuse_ratio if row else None),
                            alert="ostinato_new_work_refused")
            else:
                log.info("storage back under the refuse watermark: new work accepted again")

    async def refusal(self) -> StorageFull | None:
        """What refuses new work now (None: nothing; it is not counted here)."""
        row = await self.state()
        if row is None or not refuses_new_work(row.level):
            return None
        return StorageFull(
            f"the database's storage is {_percent(row.used_ratio)} used, over the "
            f"{_percent(row.refuse_ratio)} at which new work is refused until retention has "
            "made room; nothing was written; runs already in flight go on",
            retry_after_seconds=self.retry_after_seconds)

    async def admit(self) -> None:
        """Raise StorageFull (counted) while the recorded level is full."""
        refused = await self.refusal()
        if refused is not None:
            metrics.STORAGE_REFUSED.inc()
            raise refused

    async def check(self) -> Check:
        """/readyz's `storage`: True, or Degraded while new work is refused (a read that
        hangs, the database frozen, is not waited for past READ_BUDGET_SECONDS)."""
        row = await self.state(wait=READ_BUDGET_SECONDS)
        if row is None or not refuses_new_work(row.level):
            return True
        return Degraded(f"storage full: {_percent(row.used_ratio)} used, new work refused "
                        f"(503 storage-full) from {_percent(row.refuse_ratio)}; reads, cancels "
                        "and runs in flight go on")


async def refuse_new_work_when_full(connection: ASGIConnection, handler: BaseRouteHandler,
                                    ) -> None:
    """The app's guard: a route whose audited action makes new work is refused while the
    storage is full (before its dependencies run: nothing is written)."""
    spec = handler.opt.get("audit")
    if isinstance(spec, AuditSpec) and spec.action in NEW_WORK:
        await connection.app.state.storage.admit()
