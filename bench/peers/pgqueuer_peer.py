"""pgqueuer (PostgreSQL, asyncpg, LISTEN/NOTIFY + SKIP LOCKED batches) as a peer.

Worker setup for 2 cores: two worker processes (one per core), each one `QueueManager` on its
own asyncpg connection with pgqueuer's defaults (`batch_size=10`, no concurrency cap), an
async no-op entrypoint. Enqueue: `Queries.enqueue` with lists (one multi-row INSERT per batch
of 1,000), `execute_after` for due jobs.

    python -m bench.peers.pgqueuer_peer worker <database url> <out dir>   (one worker process)
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

import asyncpg

from bench.peers.harness import Items, Peer, Recorder, python_module
from ostinato import eventloop


async def setup(url: str) -> None:
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(url)
    try:
        await Queries(AsyncpgDriver(conn)).install()
    finally:
        await conn.close()


async def enqueue(url: str, items: Items) -> None:
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(url)
    try:
        now = time.time()
        await Queries(AsyncpgDriver(conn)).enqueue(
            ["noop"] * len(items),
            [json.dumps({"i": i, "due": due}).encode() for i, due in items],
            [0] * len(items),
            execute_after=[None if due is None else timedelta(seconds=max(0.0, due - now))
                           for _, due in items])
    finally:
        await conn.close()


def worker_commands(url: str, out: Path) -> list[list[str]]:
    return [python_module("bench.peers.pgqueuer_peer", "worker", url, str(out))
            for _ in range(2)]


async def worker(url: str, out: str) -> None:
    from pgqueuer import QueueManager
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    record = Recorder(out)
    conn = await asyncpg.connect(url)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))

    @qm.entrypoint("noop")
    async def noop(job: object) -> None:
        payload = json.loads(job.payload)  # type: ignore[attr-defined]
        record(payload["due"])

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, qm.shutdown.set)
    await qm.run()
    await conn.close()


PEER = Peer("pgqueuer", setup, enqueue, worker_commands,
            workers="2 processes x QueueManager(batch_size=10), async handler")

if __name__ == "__main__":
    eventloop.run(worker(sys.argv[2], sys.argv[3]))
