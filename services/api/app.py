"""The public API application: routes, auth, problem details, OpenAPI at /schema."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from litestar import Litestar
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.static_files import create_static_files_router

from ostinato.eventlog.store import EventStore
from ostinato.objects import ObjectStore
from ostinato.runtime.contract import apply_contract
from ostinato.runtime.instants import check_instants
from ostinato.runtime.ops import (
    BodyLimit,
    Check,
    instrument_http,
    ops_route_handlers,
    tracing_middleware,
)
from ostinato.runtime.problems import EXCEPTION_HANDLERS
from ostinato.runtime.request_ids import RequestIds
from ostinato.runtime.service import Service
from services.api import (
    alert_sinks,
    archived,
    audit,
    capacity,
    dags,
    failures,
    interventions,
    job_control,
    job_health,
    job_history,
    job_ledger,
    kafka_access,
    keys,
    operations,
    results,
    retention,
    search_attributes,
    tasks,
    ui,
    usage,
    workflow_ids,
    workflows,
)
from services.api.ratelimit import KeyRateLimits, Rate
from services.api.routes import DEPENDENCIES, ROUTES
from services.api.storage import StorageGate, refuse_new_work_when_full

VERSION = "0.1.0"
MAX_BODY_BYTES = 4 << 20  # a declared longer body is a 413 before the app reads it
# Swagger UI is served from this package's own copy (infra/swagger_ui.sh fetches it once into
# .cache), never from a CDN: the page works on a machine without internet access.
SWAGGER_UI_VERSION = "5.35.0"  # the one infra/swagger_ui.sh pins
SWAGGER_UI_DIR = Path(__file__).resolve().parents[2] / ".cache" / "swagger-ui" / SWAGGER_UI_VERSION
SWAGGER_ASSETS = "/schema/swagger/assets"


def swagger_ui() -> SwaggerRenderPlugin:
    return SwaggerRenderPlugin(
        version=SWAGGER_UI_VERSION, path="/swagger",
        js_url=f"{SWAGGER_ASSETS}/swagger-ui-bundle.js",
        css_url=f"{SWAGGER_ASSETS}/swagger-ui.css",
        standalone_preset_js_url=f"{SWAGGER_ASSETS}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{SWAGGER_ASSETS}/favicon-32x32.png'>")


def create_app(service: Service, store: EventStore,
               wake_operations: Callable[[], None] | None = None,
               storage: StorageGate | None = None,
               objects: ObjectStore | None = None) -> Litestar:
    """`storage`: the storage level as this process reads it (one made here when not given;
    the api's Kafka ingest shares the service's). `objects`: the object store archived runs
    are read from (none given: the one OSTINATO_OBJECT_STORE_URL names, opened at its first
    use and closed with the app)."""
    gate = storage or StorageGate(lambda: service.pool,
                                  service.settings.storage_retry_after_seconds)

    async def readiness() -> dict[str, Check]:  # the storage check beside the others
        checks, storage_ok = await asyncio.gather(service.readiness(kafka=True), gate.check())
        return {**checks, "storage": storage_ok}

    # The run-end listener of GET /v1/runs/{id}/result (started by its first waiter).
    run_ends = results.RunEnds(results.connector(service.settings.database_url),
                               results.reader(lambda: service.pool),
                               stopping=service.stopping)
    archive = archived.Archive(service.settings.object_store_url, objects)
    app = Litestar(
        route_handlers=[
            *ROUTES,
            *job_control.ROUTES,
            *failures.ROUTES,
            *capacity.ROUTES,
            *workflows.ROUTES,
            *interventions.ROUTES,
            *tasks.ROUTES,
            *job_history.ROUTES,
            *keys.ROUTES,
            *job_ledger.ROUTES,
            *kafka_access.ROUTES,
            *audit.ROUTES,
            *operations.ROUTES,
            *search_attributes.ROUTES,
            *workflow_ids.ROUTES,
            *dags.ROUTES,
            *alert_sinks.ROUTES,
            *job_health.ROUTES,
            *usage.ROUTES,
            *results.ROUTES,
            *retention.ROUTES,
            *ui.routes(),  # the web UI under /ui (docs/UI.md)
            *ops_route_handlers(readiness),
            create_static_files_router(SWAGGER_ASSETS, [SWAGGER_UI_DIR], name="swagger-assets"),
        ],
        dependencies=DEPENDENCIES,
        exception_handlers=ui.with_ui_pages(EXCEPTION_HANDLERS),  # /ui errors: HTML pages
        before_request=check_instants,
        guards=[refuse_new_work_when_full],  # 503 storage-full while the storage is full
        middleware=tracing_middleware(),
        openapi_config=OpenAPIConfig(
            title="Ostinato API", version=VERSION, path="/schema",
            description="Jobs, runs and their timelines, tenant-scoped. Errors are RFC 9457 "
                        "problem details.",
            render_plugins=[swagger_ui()],
            components=Components(security_schemes={"bearer": SecurityScheme(
                type="http", scheme="bearer", description="An API key: the admin key, or a "
                "tenant's key with its role (POST /v1/tenants returns the first, an operator's; "
                "POST /v1/keys issues more).")}),
            security=[{"bearer": []}],
        ),
        logging_config=None,  # logging is configured once, by telemetry.logging
        state=State({"pool": service.pool, "store": store, "clock": service.clock,
                     "wake_operations": wake_operations, "run_ends": run_ends,
                     "settings": service.settings, "storage": gate, "archive": archive,
                     # set at SIGTERM: a long poll answers at once (the drain, ops.Drain)
                     "stopping": service.stopping,
                     "rate_limits": KeyRateLimits(service.clock, Rate(
                         service.settings.api_rate_per_second, service.settings.api_burst))}),
        request_max_body_size=MAX_BODY_BYTES,  # a chunked body is cut off there too
        on_shutdown=[run_ends.close, archive.close],
    )
    instrument_http(app)
    apply_contract(app)
    app.asgi_handler = RequestIds(BodyLimit(app.asgi_handler, MAX_BODY_BYTES))
    return app
