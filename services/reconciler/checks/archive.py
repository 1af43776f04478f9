"""Archive, then remove (docs/RETENTION.md, issue 38 item 2): the reconciler's duty that moves
finished runs past their tenant's retention out of the hot tables.

One pass: take the cluster-wide advisory lock (two reconcilers never archive the same batch: the
other one skips its pass); pick up to `batch` runs no rule keeps (stores/archive.sql, oldest end
first); read each one's whole history in one snapshot; put one object per run
(`ostinato.archive.run_key`) and the batch's index objects; and only once the object store has
confirmed every put, call migration 0046's owner-role procedure, which re-checks every rule under
the row lock and removes what may go in one transaction. Then the same for finished DAG runs
whose node runs have left (migration 0052: one object each, `ostinato.archive.dag_run_key`,
then ostinato_remove_dag_runs), so a DAG run's node runs may leave and the DAG run follow in
one pass. A tenant whose policy says archive=false has its runs removed without an object.

Faults: a put that fails (the store down, erroring, slow past its timeout) removes nothing of
the batch and raises: the duty's transient policy retries with backoff, `archive_state` records
since when passes fail, and OstinatoArchiveFailing fires once that lasts `failing_after`. A kill
-9 between the puts and the procedure leaves the runs hot and their objects written: the next
pass writes the same keys again (same content but `archived_at`) and removes them. A run that
moved after it was read (`changed`) is archived again next pass."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg
from prometheus_client import Counter

from ostinato.alerts import Signal
from ostinato.archive import (
    ArchivedRun,
    build_indexes,
    dag_run_key,
    encode_dag_run,
    encode_index,
    encode_run,
    run_key,
)
from ostinato.clock import Clock
from ostinato.domain.retention import MIN_KEEP_SECONDS
from ostinato.eventlog.store import pin_blob_objects
from ostinato.objects import ObjectStore, ObjectStoreError, ObjectStoreUnavailable
from ostinato.runtime.duties import Duty
from ostinato.stores import archive as archive_store
from ostinato.stores.tenants import TenantWeight
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger

log = get_logger("ostinato.reconciler")
# pg_advisory_lock key of the archiver: one pass at a time across the reconcilers
ARCHIVER_LOCK = 0x05717A72
_NAMESPACE = uuid.UUID("6f0b3f2e-3c1a-4d5e-9b7a-1e2d3c4b5a69")


@dataclass(frozen=True, slots=True)
class ArchiveConfig:
    enabled: bool = True
    batch: int = 200  # runs a pass (the procedure takes at most 1000)
    interval: timedelta = timedelta(seconds=10)  # between passes that found less than a batch
    concurrency: int = 16  # puts in flight
    put_timeout: timedelta = timedelta(seconds=30)  # one put; past it the pass fails
    # the reconciler's gap/ledger window: runs whose slot or deadline its checks still read
    checks_window: timedelta = timedelta(hours=24)
    # the operator's retention floor (OSTINATO_RETENTION_FLOOR_SECONDS): no run leaves sooner
    floor_seconds: int = MIN_KEEP_SECONDS


def batch_id_of(run_ids: Sequence[uuid.UUID]) -> uuid.UUID:
    """The same runs make the same batch id: a pass retried after a failure or a crash writes
    the same index keys again rather than a second index listing the same runs."""
    return uuid.uuid5(_NAMESPACE, ",".join(sorted(str(r) for r in run_ids)))


DEFAULT_ARCHIVE = ArchiveConfig()


class Archiver:
    """The duty's state: the pool, the object store, the clock and the settings."""

    def __init__(self, pool: asyncpg.Pool, objects: ObjectStore, clock: Clock,
                 config: ArchiveConfig) -> None:
        self.pool = pool
        self.objects = objects
        self.clock = clock
        self.config = config

    async def tick(self) -> int:
        """One pass; returns how many runs it handled (removed or found kept), so a full batch
        means more are waiting. A failed pass raises after recording it."""
        async with self._lock() as conn:
            if conn is None:
                return 0  # another reconciler is archiving
            try:
                handled = await self._pass(conn)
                handled += await self._dag_pass(conn)
            except Exception as exc:
                metrics.ARCHIVE_FAILURES.labels(
                    kind="store" if isinstance(exc, ObjectStoreError) else "database").inc()
                with contextlib.suppress(Exception):
                    await archive_store.failed(conn, f"{type(exc).__name__}: {exc}")
                raise
            await archive_store.passed(conn)
            return handled

    @contextlib.asynccontextmanager
    async def _lock(self) -> AsyncIterator[asyncpg.Connection | None]:
        """A connection holding the archiver's advisory lock for the pass, or None when
        another holds it. Session-level, released before the connection goes back (a killed
        process's connection ends, and the lock with it)."""
        async with self.pool.acquire() as conn:
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", ARCHIVER_LOCK):
                yield None
                return
            try:
                yield conn
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", ARCHIVER_LOCK)

    async def _pass(self, conn: asyncpg.Connection) -> int:
        picked = await archive_store.candidates(conn, self.config.batch,
                                                self.config.checks_window,
                                                self.config.floor_seconds)
        if not picked:
            return 0
        archived_at = self.clock.now()
        to_archive = [c for c in picked if c.archive]
        documents = await archive_store.histories(conn, [c.run_id for c in to_archive],
                                                  archived_at)
        versions: dict[uuid.UUID, int] = {c.run_id: c.version for c in picked if not c.archive}
        written: list[ArchivedRun] = []
        for c in to_archive:
            doc = documents.get(c.run_id)
            if doc is None or not doc.events:
                continue  # gone since the pick (another path removed it): nothing to do
            # the version archived is the one the removal expects: a run that moved between
            # the pick and the read is removed only if nothing moves it again
            versions[c.run_id] = doc.events[-1].version
            written.append(doc)
        size = await self._put_all(written, archived_at)
        # the blob objects the documents reference stay while the archive does (issue 38)
        pin = sorted({(d.tenant_id, b.ref.sha256) for d in written for b in d.blobs if b.ref})
        removals = await self._remove(conn, versions, pin)
        self._account(picked, removals, size, len(written))
        return len(picked)

    async def _dag_pass(self, conn: asyncpg.Connection) -> int:
        """The finished DAG runs no rule keeps: each one's object put and confirmed, then
        migration 0052's procedure; returns how many it handled."""
        picked = await archive_store.dag_run_candidates(conn, self.config.batch,
                                                        self.config.checks_window,
                                                        self.config.floor_seconds)
        if not picked:
            return 0
        archived_at = self.clock.now()
        documents = await archive_store.dag_run_histories(
            conn, [c.dag_run_id for c in picked if c.archive], archived_at)
        versions = {c.dag_run_id: c.version for c in picked if not c.archive}
        items: list[tuple[str, bytes]] = []
        for c in picked:
            doc = documents.get(c.dag_run_id)
            if not c.archive or doc is None or not doc.events:
                continue  # gone since the pick: nothing to do
            versions[c.dag_run_id] = doc.events[-1].version
            items.append((dag_run_key(doc.tenant_id, doc.dag_run_id), encode_dag_run(doc)))
        size = await self._put_items(items)
        removals: list[archive_store.DagRunRemoval] = []
        if versions:
            ids = sorted(versions)
            async with conn.transaction():
                removals = await archive_store.remove_dag_runs(
                    conn, ids, [versions[i] for i in ids], self.config.checks_window)
        metrics.ARCHIVE_BYTES.inc(size)
        metrics.ARCHIVE_DAG_RUNS.labels(outcome="archived", reason="").inc(len(items))
        tenant_of = {c.dag_run_id: c.tenant_id for c in picked}
        removed = [r.dag_run_id for r in removals if r.removed]
        metrics.ARCHIVE_DAG_RUNS.labels(outcome="removed", reason="").inc(len(removed))
        kept = _count_kept(metrics.ARCHIVE_DAG_RUNS, [r.kept_because for r in removals
                                                      if not r.removed])
        for dag_run_id in removed:
            log.debug("DAG run archived and removed", tenant_id=str(tenant_of.get(dag_run_id)),
                      dag_run_id=str(dag_run_id))
        if removals:
            log.info("DAG runs archived and removed", removed=len(removed), objects=len(items),
                     bytes=size, kept=kept or None,
                     tenants=sorted({str(tenant_of[r]) for r in removed}) or None)
        return len(picked)

    async def _put_all(self, documents: list[ArchivedRun], archived_at: datetime) -> int:
        """Every run's object and the batch's index objects, `concurrency` puts at a time;
        returns the bytes written. Raises at the first put not confirmed (a timeout is the
        store being unavailable: transient, like a refused connection or a 5xx)."""
        if not documents:
            return 0
        items = [(run_key(d.tenant_id, d.run_id), encode_run(d)) for d in documents]
        batch = batch_id_of([d.run_id for d in documents])
        items += [(key, encode_index(index))
                  for key, index in build_indexes(batch, archived_at, documents)]
        return await self._put_items(items)

    async def _put_items(self, items: list[tuple[str, bytes]]) -> int:
        """Put every (key, object), `concurrency` at a time; the bytes written. Raises at the
        first put not confirmed within `put_timeout` (ObjectStoreUnavailable: transient)."""
        if not items:
            return 0
        gate = asyncio.Semaphore(self.config.concurrency)
        timeout = self.config.put_timeout.total_seconds()

        async def put(key: str, data: bytes) -> None:
            async with gate:
                try:
                    await asyncio.wait_for(
                        self.objects.put(key, data, content_type="application/gzip"), timeout)
                except TimeoutError:
                    raise ObjectStoreUnavailable(
                        f"put {key}: no confirmation within {timeout:g}s") from None

        tasks = [asyncio.ensure_future(put(k, d)) for k, d in items]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return sum(len(d) for _, d in items)

    async def _remove(self, conn: asyncpg.Connection, versions: dict[uuid.UUID, int],
                      pin: list[tuple[uuid.UUID, str]]) -> list[archive_store.Removal]:
        if not versions:
            return []
        ids = sorted(versions)
        async with conn.transaction():
            # the objects first: a run kept after all leaves them pinned (they stay: harmless)
            await pin_blob_objects(conn, pin)
            return await archive_store.remove(conn, ids, [versions[i] for i in ids],
                                              self.config.checks_window)

    def _account(self, picked: list[archive_store.Candidate],
                 removals: list[archive_store.Removal], size: int, objects: int) -> None:
        tenant_of = {c.run_id: c.tenant_id for c in picked}
        archived = {c.run_id for c in picked if c.archive}
        removed = [r.run_id for r in removals if r.removed]
        metrics.ARCHIVE_BYTES.inc(size)
        metrics.ARCHIVE_RUNS.labels(outcome="archived", reason="").inc(objects)
        metrics.ARCHIVE_RUNS.labels(outcome="removed", reason="").inc(len(removed))
        kept = _count_kept(metrics.ARCHIVE_RUNS, [r.kept_because for r in removals
                                                  if not r.removed])
        for run_id in removed:
            log.debug("run archived and removed", tenant_id=str(tenant_of.get(run_id)),
                      run_id=str(run_id), archived=run_id in archived)
        if removals:
            log.info("runs archived and removed", removed=len(removed), objects=objects,
                     bytes=size, kept=kept or None,
                     tenants=sorted({str(tenant_of[r]) for r in removed}) or None)


def _count_kept(counter: Counter, reasons: Sequence[str | None]) -> dict[str, int]:
    """Count what the removal procedure kept, by reason, in `counter` and for the pass's log."""
    kept: dict[str, int] = {}
    for reason in reasons:
        why = reason or "unknown"
        kept[why] = kept.get(why, 0) + 1
        counter.labels(outcome="kept", reason=why).inc()
    return kept


def archive_duty(pool: asyncpg.Pool, objects: ObjectStore, clock: Clock,
                 config: ArchiveConfig) -> Duty:
    """The archiver as a duty: a pass every `interval`, again at once after a full batch.
    Outside the checks' turns: its puts wait on the object store, and no repair should wait
    on them. Its errors follow the duties' policy (`ostinato.runtime.duties.transient`: the
    object store unavailable is transient)."""
    archiver = Archiver(pool, objects, clock, config)

    async def run_once(now: datetime) -> int:
        return await archiver.tick()

    return Duty("reconcile_archive", config.interval.total_seconds(), run_once,
                batch=config.batch)


def archive_signals(health: archive_store.ArchiveHealth | None, tenants: Sequence[TenantWeight],
                    failing_after: timedelta) -> list[Signal]:
    """OstinatoArchiveFailing for every tenant once the archiver's passes have failed for
    `failing_after` (by the database's clock): retention is paused, the hot tables grow, and
    nothing is removed that was not confirmed archived. None while its passes succeed."""
    if health is None or health.failing_seconds is None \
            or health.failing_seconds < failing_after.total_seconds():
        return []
    notes = {"failing_since": health.failing_since.isoformat() if health.failing_since else "",
             "last_error": health.last_error or "",
             "last_success_at": (health.last_success_at.isoformat()
                                 if health.last_success_at else "never"),
             "runbook": "docs/RETENTION.md#failure-modes: is the object store up and "
                        "answering (OSTINATO_OBJECT_STORE_URL)? runs stay hot meanwhile"}
    return [Signal("OstinatoArchiveFailing", str(t.id), {"tenant": t.name,
                                                          "tenant_id": str(t.id)}, None, notes)
            for t in tenants]
