"""dispatcher: admits waiting runs fairly and publishes them to runs.ready.<pool>; woken by
runs.due and runs.finished. Ops endpoints on OSTINATO_OPS_HOST:OSTINATO_DISPATCHER_PORT
(127.0.0.1:8083)."""

from __future__ import annotations

from datetime import timedelta

from ostinato.bus.consumer import BatchConsumer, Delivered
from ostinato.eventlog.outbox import OutboxRelay
from ostinato.eventlog.store import EventStore
from ostinato.runtime.duties import kafka_consumer, outbox_relay
from ostinato.runtime.service import Service, run_service, run_until_stopped
from services.dispatcher.dispatcher import Dispatcher, live_versions, live_workers
from services.dispatcher.fence import EpochFence


async def amain() -> None:
    service = Service("dispatcher")
    service.use_blob_objects()  # large blobs in the object store (issue 38)
    settings = service.settings
    pool = await service.connect_database()
    producer = await service.start_producer()
    store = EventStore(service.clock, settings.topics)

    relay = service.add_duty(outbox_relay(OutboxRelay(pool, producer, settings.topics)))
    dispatcher = Dispatcher(
        pool, store, service.clock, classes=settings.classes,
        capacity=live_workers(timedelta(seconds=settings.worker_ttl_seconds)),
        candidates=settings.dispatch_candidates, key_concurrency=settings.key_concurrency,
        prefetch=settings.dispatch_prefetch, on_queued=relay.wake,
        serving=live_versions(timedelta(seconds=settings.worker_ttl_seconds)))
    rounds = service.add_duty(dispatcher.duty(settings.dispatch_interval_seconds))
    fence = EpochFence()

    async def handle(batch: list[Delivered]) -> None:
        if fence.fresh(batch):
            rounds.wake()

    consumer = BatchConsumer(bootstrap=settings.kafka_bootstrap,
                             group=f"{settings.topic_prefix}ostinato-dispatcher",
                             topics=[settings.topics.due, settings.topics.finished],
                             handler=handle, commit_every_seconds=1.0,  # wake-ups only
                             auth=settings.kafka_auth)
    await consumer.start()
    service.add_duty(kafka_consumer("kafka_consumer", consumer))
    ops = service.ops_server(settings.dispatcher_port)
    await ops.start()

    await run_until_stopped(service, on_stop=ops.stop)
    await producer.stop()


def main() -> None:
    run_service(amain)


if __name__ == "__main__":
    main()
