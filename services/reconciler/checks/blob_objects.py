"""Blob objects nothing references any more, deleted (issue 38 item 4, docs/RETENTION.md
"Blobs"): an output or captured log expired, a run removed without an archive (a tenant whose
retention says archive=false), an orphan of a transaction that put its object and then rolled
back or died. An object stays while a hot `blobs` row or an archived run's document references
it (content addressing shares one object among them), and for the grace period after its last
write, so a writer about to record a reference never loses its object.

The same duty sweeps the bucket, a page at a time (`sweep_blob_objects`): an object put whose
row never committed (a previous release's writer that rolled back, a process killed between
a put under its transaction's lock and the commit) has no row for the collector to walk; the
sweep finds it by listing `tenants/*/blobs/` from a cursor kept in this process (a restart
begins a new pass), one page of 1,000 keys every `sweep_interval`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from ostinato.eventlog.store import collect_blob_objects, sweep_blob_objects
from ostinato.objects import MAX_PAGE, ObjectStore
from ostinato.runtime.duties import Duty

COLLECT_BATCH = 500  # objects deleted per transaction; a full batch runs again at once
SWEEP_PAGE = MAX_PAGE  # keys listed per sweep step: one S3 ListObjectsV2 request


async def collect_once(pool: asyncpg.Pool, objects: ObjectStore, grace: timedelta,
                       limit: int = COLLECT_BATCH) -> int:
    """One pass: how many objects went."""
    async with pool.acquire() as conn:
        return await collect_blob_objects(conn, objects, grace, limit)


@dataclass
class Sweep:
    """Where the bucket sweep is: the cursor of its next page and when that page is due."""

    after: str | None = None
    due: datetime | None = None
    passes: int = 0  # passes completed since this process started

    async def step(self, pool: asyncpg.Pool, objects: ObjectStore, grace: timedelta,
                   limit: int = SWEEP_PAGE) -> int:
        """One page: how many orphans went."""
        async with pool.acquire() as conn:
            swept, self.after = await sweep_blob_objects(conn, objects, grace, self.after,
                                                         limit)
        if self.after is None:
            self.passes += 1
        return swept


def blob_collect_duty(pool: asyncpg.Pool, objects: ObjectStore, *, grace: timedelta,
                      interval: timedelta, sweep_interval: timedelta | None = None) -> Duty:
    """The collector as a duty: a pass every `interval`, again at once after a full batch, and
    a page of the bucket sweep every `sweep_interval` (None: no sweep); the object store away
    is transient for the duties' policy (nothing is forgotten: the rows of objects not
    deleted stay, the sweep's cursor stays where it was)."""
    sweep = Sweep()

    async def run_once(now: datetime) -> int:
        done = await collect_once(pool, objects, grace)
        if sweep_interval is not None and (sweep.due is None or now >= sweep.due):
            done += await sweep.step(pool, objects, grace)
            sweep.due = now + sweep_interval
        return done

    return Duty("reconcile_blob_objects", interval.total_seconds(), run_once,
                batch=COLLECT_BATCH)
