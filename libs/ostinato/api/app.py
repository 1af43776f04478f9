"""The public API application: routes, auth, problem details, OpenAPI at /schema."""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig

from ostinato.api import control, dispatching, failures
from ostinato.api.problems import EXCEPTION_HANDLERS
from ostinato.api.routes import DEPENDENCIES, ROUTES
from ostinato.eventlog.store import EventStore
from ostinato.runtime.ops import instrument_http, ops_route_handlers, tracing_middleware
from ostinato.runtime.service import Service

VERSION = "0.1.0"


def create_app(service: Service, store: EventStore) -> Litestar:
    app = Litestar(
        route_handlers=[
            *ROUTES,
            *control.ROUTES,
            *failures.ROUTES,
            *dispatching.ROUTES,
            *ops_route_handlers(lambda: service.readiness(kafka=True)),
        ],
        dependencies=DEPENDENCIES,
        exception_handlers=EXCEPTION_HANDLERS,
        middleware=tracing_middleware(),
        openapi_config=OpenAPIConfig(
            title="Ostinato API", version=VERSION, path="/schema",
            description="Jobs, runs and their timelines, tenant-scoped. Errors are RFC 9457 "
                        "problem details.",
        ),
        logging_config=None,  # logging is configured once, by telemetry.logging
        state=State({"pool": service.pool, "store": store, "clock": service.clock,
                     "settings": service.settings}),
        request_max_body_size=4 * 1024 * 1024,
    )
    return instrument_http(app)
