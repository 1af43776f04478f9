"""The public API application: routes, auth, problem details, OpenAPI at /schema."""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig

from ostinato.eventlog.store import EventStore
from ostinato.runtime.ops import instrument_http, ops_route_handlers, tracing_middleware
from ostinato.runtime.problems import EXCEPTION_HANDLERS
from ostinato.runtime.service import Service
from services.api import capacity, failures, job_control, workflows
from services.api.routes import DEPENDENCIES, ROUTES

VERSION = "0.1.0"


def create_app(service: Service, store: EventStore) -> Litestar:
    app = Litestar(
        route_handlers=[
            *ROUTES,
            *job_control.ROUTES,
            *failures.ROUTES,
            *capacity.ROUTES,
            *workflows.ROUTES,
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
