"""dispatcher: consumes runs.due, queues runs, publishes them to runs.ready.<pool>.
Ops endpoints on OSTINATO_OPS_HOST:OSTINATO_DISPATCHER_PORT (127.0.0.1:8083)."""

from __future__ import annotations

import asyncio

from ostinato.bus.consumer import BatchConsumer, Delivered
from ostinato.dispatch import CONSUMER, EpochFence, queue_due_runs
from ostinato.eventlog.outbox import OutboxRelay
from ostinato.eventlog.store import EventStore
from ostinato.runtime.service import Service, run_until_stopped


async def amain() -> None:
    service = Service("dispatcher")
    settings = service.settings
    pool = await service.connect_database()
    producer = await service.start_producer()
    relay = OutboxRelay(pool, producer, settings.topics)
    store = EventStore(service.clock, settings.topics)

    fence = EpochFence()

    async def handle(batch: list[Delivered]) -> None:
        if await queue_due_runs(pool, store, batch, fence):
            relay.wake()

    consumer = BatchConsumer(bootstrap=settings.kafka_bootstrap,
                             group=f"{settings.topic_prefix}ostinato-{CONSUMER}",
                             topics=[settings.topics.due], handler=handle)
    await consumer.start()
    ops = service.ops_server(settings.dispatcher_port)
    await ops.start()

    async def stop() -> None:
        consumer.stop()
        relay.stop()
        await ops.stop()

    await run_until_stopped(service, [consumer.run(), relay.run()], on_stop=stop)
    await consumer.close()
    await producer.stop()


def main() -> None:
    asyncio.run(amain())


if __name__ == "__main__":
    main()
