"""api: the public HTTP API on OSTINATO_API_HOST:OSTINATO_API_PORT (127.0.0.1:8080)."""

from __future__ import annotations

from contextlib import suppress

from aiokafka.errors import KafkaError

from ostinato.eventlog.outbox import OutboxRelay
from ostinato.eventlog.store import EventStore
from ostinato.operations import work
from ostinato.runtime.duties import Duty, outbox_relay
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service, run_service, run_until_stopped
from services.api.app import create_app
from services.api.ingest import SubmitIngest
from services.api.storage import StorageGate


async def amain() -> None:
    service = Service("api")
    service.use_blob_objects()  # large blobs in the object store (issue 38)
    await service.connect_database()
    store = EventStore(service.clock, service.settings.topics)
    pool, batch = service.pool, service.settings.operation_batch_size
    # Its own outbox relay (added first: stopped last, it publishes what the others appended),
    # connected at its first tick so that the HTTP API serves while the broker is away.
    producer = service.make_producer()
    service.add_duty(outbox_relay(OutboxRelay(pool, producer, service.settings.topics),
                                  connect=lambda: service.connect_producer(producer)))
    # Bulk operations (POST /v1/operations): a batch per tick, resumed after a restart.
    operations = service.add_duty(Duty(
        "operations", 1.0, lambda now: work.work_once(pool, store, service.clock, batch),
        batch=batch))
    # The storage level as this process reads it (services.api.storage): the HTTP API and the
    # Kafka ingest refuse new work through the one gate while the storage is full.
    storage = StorageGate(lambda: service.pool, service.settings.storage_retry_after_seconds)
    app = create_app(service, store, wake_operations=operations.wake, storage=storage)
    server = HttpServer(app, service.settings.api_host, service.settings.api_port,
                        drain_seconds=service.settings.drain_seconds)
    await server.start()
    service.log.info("listening", url=f"http://{service.settings.api_host}:{server.port}",
                     openapi=f"http://{service.settings.api_host}:{server.port}/schema")
    # With Kafka submission on, the `kafka_ingest` duty consumes the tenants' submit topics
    # (docs/KAFKA.md); stopped first, it commits what it settled.
    if service.settings.kafka_tenant_bootstrap:
        service.add_duty(SubmitIngest(service.pool, store, service.clock,
                                      service.settings, storage).duty())

    await run_until_stopped(service, on_stop=server.stop)
    with suppress(KafkaError):
        await producer.stop()


def main() -> None:
    run_service(amain)


if __name__ == "__main__":
    main()
