"""procrastinate (PostgreSQL, psycopg 3, LISTEN/NOTIFY, one job fetched per query) as a peer.

Worker setup for 2 cores: two worker processes (one per core), each `run_worker_async(
concurrency=10)` (async no-op tasks; procrastinate's concurrency option is for async tasks),
LISTEN/NOTIFY on (the default). Enqueue: `batch_defer_async` (one multi-row insert per batch)
for jobs due now or at the same instant; jobs with distinct due instants are deferred one by one
with `configure(schedule_at=...)`, as procrastinate's API offers.

    python -m bench.peers.procrastinate_peer worker <database url> <out dir>
"""

from __future__ import annotations

import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.peers.harness import Items, Peer, Recorder, python_module
from ostinato import eventloop

_record: Recorder | None = None


def make_app(url: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop")
    async def noop(i: int, due: float | None) -> None:
        if _record is not None:
            _record(due)

    return app


async def setup(url: str) -> None:
    app = make_app(url)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def enqueue(url: str, items: Items) -> None:
    app = make_app(url)
    task = app.tasks["noop"]
    groups: dict[float | None, list[dict[str, Any]]] = defaultdict(list)
    for i, due in items:
        groups[due].append({"i": i, "due": due})
    async with app.open_async():
        for due, kwargs in groups.items():
            deferrer = task if due is None else task.configure(
                schedule_at=datetime.fromtimestamp(due, UTC))
            if len(kwargs) == 1:
                await deferrer.defer_async(**kwargs[0])
            else:
                await deferrer.batch_defer_async(*kwargs)


def worker_commands(url: str, out: Path) -> list[list[str]]:
    return [python_module("bench.peers.procrastinate_peer", "worker", url, str(out))
            for _ in range(2)]


async def worker(url: str, out: str) -> None:
    global _record
    _record = Recorder(out)
    app = make_app(url)
    async with app.open_async():
        await app.run_worker_async(concurrency=10)  # stops on SIGTERM (its own handler)


PEER = Peer("procrastinate", setup, enqueue, worker_commands, enqueuers=4,
            workers="2 processes x run_worker_async(concurrency=10), async handler")

if __name__ == "__main__":
    eventloop.run(worker(sys.argv[2], sys.argv[3]))
