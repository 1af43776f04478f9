"""The five services on a fresh database, for end-to-end tests: one helper instead of a copy
per test module."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from ostinato.testing.cluster import Cluster
from tests.conftest import (
    KAFKA_BOOTSTRAP,
    drop_database,
    fresh_database,
    slots_out_of_step,
    url_for,
)


@asynccontextmanager
async def running_cluster(template_db: str, topic_prefix: str, log_dir: Path, *,
                          env: Mapping[str, str] | None = None,
                          clean_exit: bool = True) -> AsyncIterator[Cluster]:
    """Start the services on a database cloned from the template; afterwards stop them, check
    that the dispatch slots followed every run (as after every integration test), drop the
    database, and (`clean_exit`) require every service to have exited with 0."""
    name = await fresh_database(template_db)
    cluster = Cluster(database_url=url_for(name), kafka_bootstrap=KAFKA_BOOTSTRAP,
                      topic_prefix=topic_prefix, log_dir=log_dir, extra_env=dict(env or {}))
    try:
        await asyncio.to_thread(cluster.start)
        yield cluster
    finally:
        codes = await asyncio.to_thread(cluster.stop)
        try:
            out_of_step = await slots_out_of_step(url_for(name))
        finally:
            await drop_database(name)
    assert not out_of_step, out_of_step
    if clean_exit:
        assert codes == {s: 0 for s in codes}, f"unclean exits: {codes}"
