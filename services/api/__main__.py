"""api: the public HTTP API on OSTINATO_API_HOST:OSTINATO_API_PORT (127.0.0.1:8080)."""

from __future__ import annotations

from ostinato.eventlog.store import EventStore
from ostinato.operations import work
from ostinato.runtime.duties import Duty
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service, run_service, run_until_stopped
from services.api.app import create_app
from services.api.ingest import SubmitIngest


async def amain() -> None:
    service = Service("api")
    await service.connect_database()
    store = EventStore(service.clock, service.settings.topics)
    pool, batch = service.pool, service.settings.operation_batch_size
    # Bulk operations (POST /v1/operations): a batch per tick, resumed after a restart.
    operations = service.add_duty(Duty(
        "operations", 1.0, lambda now: work.work_once(pool, store, service.clock, batch),
        batch=batch))
    app = create_app(service, store, wake_operations=operations.wake)
    server = HttpServer(app, service.settings.api_host, service.settings.api_port)
    await server.start()
    service.log.info("listening", url=f"http://{service.settings.api_host}:{server.port}",
                     openapi=f"http://{service.settings.api_host}:{server.port}/schema")
    # No duties of its own: the other services' relays publish the api's outbox rows. With
    # Kafka submission on, it consumes the tenants' submit topics (docs/KAFKA.md).
    tasks = []
    ingest = None
    if service.settings.kafka_tenant_bootstrap:
        ingest = SubmitIngest(service.pool, store, service.clock, service.settings)
        tasks.append(ingest.run())

    async def stop() -> None:
        await server.stop()
        if ingest is not None:
            ingest.stop()
            await ingest.close()

    await run_until_stopped(service, tasks, on_stop=stop)


def main() -> None:
    run_service(amain)


if __name__ == "__main__":
    main()
