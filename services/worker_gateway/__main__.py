"""worker-gateway: the worker protocol on OSTINATO_GATEWAY_HOST:OSTINATO_GATEWAY_PORT
(127.0.0.1:8081); wakes long polls from runs.ready.<pool>; publishes runs.finished."""

from __future__ import annotations

from ostinato.bus.consumer import BatchConsumer
from ostinato.eventlog.outbox import OutboxRelay
from ostinato.eventlog.store import EventStore
from ostinato.runs.children import ChildRules
from ostinato.runtime.duties import kafka_consumer, outbox_relay
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service, run_service, run_until_stopped
from services.worker_gateway.app import create_app
from services.worker_gateway.attempts import Attempts
from services.worker_gateway.presence import instance_duty
from services.worker_gateway.wakeups import ReadySignals


async def amain() -> None:
    service = Service("worker-gateway")
    service.use_blob_objects()  # large blobs in the object store (issue 38)
    settings = service.settings
    pool = await service.connect_database()
    producer = await service.start_producer()
    store = EventStore(service.clock, settings.topics)
    relay = service.add_duty(outbox_relay(OutboxRelay(pool, producer, settings.topics)))
    service.add_duty(instance_duty(pool, service.clock))
    signals = ReadySignals()
    attempts = Attempts(pool, store, service.clock, lease_ttl_seconds=settings.lease_ttl_seconds,
                        on_finished=relay.wake, child_rules=ChildRules(
                            pools=frozenset(settings.pool_names),
                            classes=frozenset(c.name for c in settings.classes),
                            pool_retry=settings.pool_retry,
                            max_payload_bytes=settings.max_payload_bytes))
    consumer = BatchConsumer(bootstrap=settings.kafka_bootstrap, group=None,
                             name="worker-gateway",
                             topics=[settings.topics.ready(p) for p in settings.pool_names],
                             handler=signals.on_ready_messages, auth=settings.kafka_auth)
    await consumer.start()
    service.add_duty(kafka_consumer("kafka_consumer", consumer))
    server = HttpServer(create_app(service, attempts, signals), settings.gateway_host,
                        settings.gateway_port, drain_seconds=settings.drain_seconds)
    await server.start()
    service.log.info("listening", url=f"http://{settings.gateway_host}:{server.port}")

    async def stop() -> None:
        # The drain (long polls answered at once, new requests a 503 with Retry-After, the
        # reports in flight finished); the relay, stopped next, publishes what they appended.
        await server.stop()

    await run_until_stopped(service, on_stop=stop)
    await producer.stop()


def main() -> None:
    run_service(amain)


if __name__ == "__main__":
    main()
