"""api: the public HTTP API on OSTINATO_API_HOST:OSTINATO_API_PORT (127.0.0.1:8080)."""

from __future__ import annotations

from ostinato.eventlog.store import EventStore
from ostinato.runtime.ops import HttpServer
from ostinato.runtime.service import Service, run_service, run_until_stopped
from services.api.app import create_app


async def amain() -> None:
    service = Service("api")
    await service.connect_database()
    app = create_app(service, EventStore(service.clock, service.settings.topics))
    server = HttpServer(app, service.settings.api_host, service.settings.api_port)
    await server.start()
    service.log.info("listening", url=f"http://{service.settings.api_host}:{server.port}",
                     openapi=f"http://{service.settings.api_host}:{server.port}/schema")
    # No duties of its own: the other services' relays publish the api's outbox rows.
    await run_until_stopped(service, on_stop=server.stop)


def main() -> None:
    run_service(amain)


if __name__ == "__main__":
    main()
