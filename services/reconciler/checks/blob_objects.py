"""Blob objects nothing references any more, deleted (issue 38 item 4, docs/RETENTION.md
"Blobs"): an output or captured log expired, a run removed without an archive (a tenant whose
retention says archive=false), an orphan of a transaction that put its object and then rolled
back or died. An object stays while a hot `blobs` row or an archived run's document references
it (content addressing shares one object among them), and for the grace period after its last
write, so a writer about to record a reference never loses its object."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg

from ostinato.eventlog.store import collect_blob_objects
from ostinato.objects import ObjectStore
from ostinato.runtime.duties import Duty

COLLECT_BATCH = 500  # objects deleted per transaction; a full batch runs again at once


async def collect_once(pool: asyncpg.Pool, objects: ObjectStore, grace: timedelta,
                       limit: int = COLLECT_BATCH) -> int:
    """One pass: how many objects went."""
    async with pool.acquire() as conn:
        return await collect_blob_objects(conn, objects, grace, limit)


def blob_collect_duty(pool: asyncpg.Pool, objects: ObjectStore, *, grace: timedelta,
                      interval: timedelta) -> Duty:
    """The collector as a duty: a pass every `interval`, again at once after a full batch; the
    object store away is transient for the duties' policy (nothing is forgotten: the rows of
    objects not deleted stay)."""

    async def run_once(now: datetime) -> int:
        return await collect_once(pool, objects, grace)

    return Duty("reconcile_blob_objects", interval.total_seconds(), run_once,
                batch=COLLECT_BATCH)
