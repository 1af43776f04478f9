"""scheduler: finds due occurrences, creates their runs, publishes them to runs.due.
Ops endpoints on OSTINATO_OPS_HOST:OSTINATO_SCHEDULER_PORT (127.0.0.1:8082)."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from ostinato.eventlog.outbox import OutboxRelay
from ostinato.eventlog.store import EventStore
from ostinato.leases.shard import ShardLeases
from ostinato.runs.dags import Rules
from ostinato.runtime.duties import outbox_relay
from ostinato.runtime.service import Service, run_service, run_until_stopped
from services.scheduler import tick
from services.scheduler.work import WorkGate


async def amain() -> None:
    service = Service("scheduler")
    service.use_blob_objects()  # large blobs in the object store (issue 38)
    settings = service.settings
    pool = await service.connect_database()
    producer = await service.start_producer()
    store = EventStore(service.clock, settings.topics)
    leases = ShardLeases(pool, service.clock, f"{socket.gethostname()}-{os.getpid()}",
                         ttl=timedelta(seconds=settings.shard_lease_ttl_seconds))

    relay = service.add_duty(outbox_relay(OutboxRelay(pool, producer, settings.topics)))
    gate = WorkGate(service.clock, max_age=settings.scheduler_poll_seconds)
    runners = service.add_duties(tick.duties(
        pool, store, service.clock, batch_size=settings.scheduler_batch_size,
        poll_seconds=settings.scheduler_poll_seconds, on_created=relay.wake, leases=leases,
        dag_rules=Rules(pool_retry=settings.pool_retry), gate=gate))
    gate.wake_with({r.name: r.wake for r in runners})  # work found starts its duty at once

    ops = service.ops_server(settings.scheduler_port)
    await ops.start()
    service.log.info("scheduling", batch_size=settings.scheduler_batch_size)
    await run_until_stopped(service, on_stop=ops.stop)
    await producer.stop()


def main() -> None:
    run_service(amain)


if __name__ == "__main__":
    main()
