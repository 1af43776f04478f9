"""Celery with a local Redis broker (infra/redis/up.sh) as a peer.

Worker setup for 2 cores: Celery's default and recommended one, one `celery worker` with the
prefork pool and `--concurrency 2` (one child per core; Celery's default is the core count),
default prefetch multiplier (4), results ignored (no result backend). Due jobs use `eta` (the
worker holds them in memory until due, as Celery does). Enqueue: `apply_async` per job over one
producer connection per batch (Celery has no bulk insert). Redis: the Debian package, default
persistence; Redis database 0 is flushed before each measurement.

    celery -A bench.peers.celery_peer worker ...   (what worker_commands starts)
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from celery import Celery

from bench.peers.harness import Items, Peer, Recorder

BROKER = f"redis://127.0.0.1:{os.environ.get('OSTINATO_REDIS_PORT', '16379')}/0"
app = Celery("bench", broker=BROKER)
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False,
                broker_connection_retry_on_startup=True)
_record = Recorder(os.environ.get("BENCH_CELERY_OUT", "."))


@app.task(name="noop")
def noop(i: int, due: float | None) -> None:
    _record(due)


async def setup(url: str) -> None:
    import redis

    client = redis.Redis.from_url(BROKER)
    try:
        await asyncio.to_thread(client.flushdb)
    finally:
        client.close()


def _send(items: Items) -> None:
    with app.producer_or_acquire() as producer:
        for i, due in items:
            eta = None if due is None else datetime.fromtimestamp(due, UTC)
            noop.apply_async((i, due), eta=eta, producer=producer)


async def enqueue(url: str, items: Items) -> None:
    await asyncio.to_thread(_send, items)


def worker_commands(url: str, out: Path) -> list[list[str]]:
    return [["env", f"BENCH_CELERY_OUT={out}", sys.executable, "-m", "celery", "-A",
             "bench.peers.celery_peer", "worker", "-P", "prefork", "--concurrency", "2",
             "--loglevel", "WARNING", "-n", f"bench-{os.getpid()}@%h"]]


PEER = Peer("celery", setup, enqueue, worker_commands, enqueuers=2,
            workers="1 celery worker, prefork pool, --concurrency 2, Redis broker")
