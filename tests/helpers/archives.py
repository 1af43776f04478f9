"""Archive objects for tests of reading archived runs: a real run's history, read from the hot
tables by the archiver's own read (`stores.archive.histories`) and encoded with
`ostinato.archive` as the archiver encodes it, optionally under another run id (a run only the
archive knows), put on a real object store; the API in-process or served, reading archives
from a store."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

import asyncpg
import httpx
import msgspec

from ostinato.archive import ArchivedRun, build_indexes, encode_index, encode_run, run_key
from ostinato.objects import ObjectStore
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service
from ostinato.runtime.settings import Settings
from ostinato.stores import archive as archive_store
from services.api.app import create_app
from tests.helpers.api import ADMIN
from tests.helpers.integration import store


async def history(pool: asyncpg.Pool, tenant_id: uuid.UUID, run_id: uuid.UUID,
                  archived_at: datetime, *, as_id: uuid.UUID | None = None) -> ArchivedRun:
    """The run's whole history as the archiver reads it (`stores.archive.histories`);
    `as_id`: filed as that run instead (its `runs` row's id and the document's run id;
    events, steps and blobs as they are)."""
    async with pool.acquire() as conn:
        found = (await archive_store.histories(conn, [run_id], archived_at))[run_id]
    assert found.tenant_id == tenant_id
    if as_id is None:
        return found
    return msgspec.structs.replace(found, run_id=as_id, run={**found.run, "id": str(as_id)})


async def put_archived(store: ObjectStore, *runs: ArchivedRun,
                       batch_id: uuid.UUID | None = None) -> list[str]:
    """Each run's object and the batch's index objects, as the archiver writes them; returns
    the index keys."""
    for run in runs:
        await store.put(run_key(run.tenant_id, run.run_id), encode_run(run),
                        content_type="application/gzip")
    indexes = build_indexes(batch_id or uuid.uuid4(), max(r.archived_at for r in runs), runs)
    for key, index in indexes:
        await store.put(key, encode_index(index), content_type="application/gzip")
    return [key for key, _ in indexes]


@asynccontextmanager
async def api(pool: asyncpg.Pool, db_url: str,
              objects: ObjectStore) -> AsyncIterator[httpx.AsyncClient]:
    """The public API in-process over the test's pool, reading archives from `objects`."""
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    app = create_app(service, store(), objects=objects)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://api.test") as c:
        yield c


@asynccontextmanager
async def served(pool: asyncpg.Pool, db_url: str, objects: ObjectStore) -> AsyncIterator[str]:
    """The same API served on a free port of 127.0.0.1 (for the CLI and the clients): its URL."""
    service = Service("api", Settings(database_url=db_url, admin_key=ADMIN))
    service.pool = pool
    server = HttpServer(create_app(service, store(), objects=objects), "127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()
