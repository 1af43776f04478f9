"""The object store's metrics (docs/OBSERVABILITY.md, `ostinato.objects.measured`), read from a
real reconciler process's /metrics after its archiver moved runs to the real S3 server
(SeaweedFS): every put it made is counted as ok, timed, and its bytes are the bytes of the
objects the bucket holds."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ostinato.objects import open_object_store
from tests.helpers.env import KAFKA_BOOTSTRAP, app_url_for
from tests.helpers.expired_runs import days_ago, finished_run
from tests.helpers.integration import new_tenant
from tests.helpers.lab.cluster import Cluster
from tests.helpers.objects import empty, s3_url
from tests.helpers.privileges import database
from tests.helpers.waiting import until

pytestmark = pytest.mark.integration


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def test_a_reconciler_exports_its_object_store_calls_after_an_archive_round(
        pool: asyncpg.Pool, db_url: str, topic_prefix: str, tmp_path: Path) -> None:
    tenant_id, _ = await new_tenant(pool)
    runs = [await finished_run(pool, tenant_id, ended=days_ago(40)) for _ in range(3)]
    prefix = f"tests/{uuid.uuid4().hex}"
    objects = open_object_store(s3_url(prefix))
    cluster = Cluster(database_url=app_url_for(database(db_url)),
                      kafka_bootstrap=KAFKA_BOOTSTRAP, topic_prefix=topic_prefix,
                      log_dir=tmp_path / "logs",
                      extra_env={"OSTINATO_OBJECT_STORE_URL": s3_url(prefix),
                                 "OSTINATO_ARCHIVE_BATCH": "50",
                                 "OSTINATO_ARCHIVE_INTERVAL_SECONDS": "0.2"})
    try:
        await asyncio.to_thread(cluster.start, ("reconciler",))

        async def archived() -> bool:
            return await pool.fetchval("SELECT count(*) FROM runs WHERE id = ANY($1)",
                                       runs) == 0
        await until(archived, within=120, what="the reconciler's archive round")
        keys = [k async for k in objects.list(f"tenants/{tenant_id}/")]
        sizes = [len(await objects.get(k)) for k in keys]
        assert len(keys) == len(runs) + 1  # an object a run, the batch's index
        async with httpx.AsyncClient() as http:
            r = await http.get(f"http://127.0.0.1:{cluster.ports['reconciler']}/metrics")
        assert r.status_code == 200
        found = samples(r.text)
        s3 = {"backend": "s3"}
        assert value(found, "ostinato_object_store_requests_total", **s3, op="put",
                     outcome="ok") == len(keys)
        assert value(found, "ostinato_object_store_bytes_total", **s3, op="put") == sum(sizes)
        # every put was timed (how long it took is bench/object_store.py's to print)
        assert value(found, "ostinato_object_store_request_seconds_count", **s3,
                     op="put") == len(keys)
        for outcome in ("unavailable", "error"):  # nothing failed
            assert value(found, "ostinato_object_store_requests_total", **s3, op="put",
                         outcome=outcome) == 0
    finally:
        await asyncio.to_thread(cluster.stop)
        await empty(objects)
        await objects.close()
