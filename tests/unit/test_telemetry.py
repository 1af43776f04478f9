"""Telemetry and ops surface: JSON logs, context propagation, probes, metrics, the HTTP server."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import subprocess
import sys
import textwrap

import httpx
import pytest
import structlog
from litestar import Litestar, get
from litestar.params import FromPath
from litestar.testing import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import REGISTRY
from structlog.contextvars import clear_contextvars, get_contextvars

from ostinato.runtime import ops
from ostinato.runtime.ops import (
    HttpServer,
    instrument_http,
    ops_app,
    ops_route_handlers,
    tracing_middleware,
)
from ostinato.telemetry import tracing
from ostinato.telemetry.logging import bind_run, bound, configure_logging, get_logger

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def isolated_logging():
    """configure_logging is process-global: put structlog and the root logger back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    clear_contextvars()
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)
    clear_contextvars()


@pytest.fixture
def local_tracer():
    """An SDK tracer that records in memory without touching the global provider."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test"), exporter
    provider.shutdown()


def _json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_json_log_line_carries_service_run_ids_and_trace(capsys, isolated_logging, local_tracer):
    configure_logging("dispatcher", level="info")
    log = get_logger("ostinato.test")
    test_tracer, _ = local_tracer
    with bound(tenant_id="t-1", run_id="r-1", attempt=2), test_tracer.start_as_current_span("s"):
        log.info("run.dispatched", queue="default")
        log.debug("dropped below the level")
    (line,) = _json_lines(capsys.readouterr().out)
    assert line["event"] == "run.dispatched"
    assert line["service"] == "dispatcher"
    assert (line["tenant_id"], line["run_id"], line["attempt"]) == ("t-1", "r-1", 2)
    assert line["level"] == "info" and line["logger"] == "ostinato.test"
    assert line["timestamp"].endswith("Z") and line["queue"] == "default"
    assert len(line["trace_id"]) == 32 and len(line["span_id"]) == 16


def test_exceptions_and_stdlib_records_render_as_json(capsys, isolated_logging):
    configure_logging("api")
    try:
        raise ValueError("bad input")
    except ValueError:
        get_logger().exception("request.failed")
    logging.getLogger("aiokafka").info("chatter below WARNING is dropped")
    logging.getLogger("aiokafka").warning("coordinator %s lost", "b-1")
    failed, kafka = _json_lines(capsys.readouterr().out)
    assert failed["level"] == "error"
    assert failed["exception"][0]["exc_type"] == "ValueError"
    assert kafka["event"] == "coordinator b-1 lost"
    assert (kafka["service"], kafka["logger"], kafka["level"]) == ("api", "aiokafka", "warning")


def test_api_keys_are_redacted_from_every_line(capsys, isolated_logging, monkeypatch):
    admin = "adm_" + "Zq9" * 12
    tenant_key = "ost_" + "k" * 43
    monkeypatch.setenv("OSTINATO_ADMIN_KEY", admin)
    configure_logging("api")
    log = get_logger("ostinato.test")
    log.info("request.seen", header=f"Bearer {tenant_key}", note=f"admin {admin} used")
    try:
        raise PermissionError(f"key {tenant_key} refused")
    except PermissionError:
        log.exception("request.failed")
    logging.getLogger("uvicorn").warning("GET /?key=%s", admin)
    out = capsys.readouterr().out
    assert tenant_key not in out and admin not in out
    seen, failed, stdlib = _json_lines(out)
    assert seen["header"] == "Bearer [redacted key]" and seen["note"] == "admin [redacted key] used"
    assert failed["exception"][0]["exc_value"] == "key [redacted key] refused"
    assert stdlib["event"] == "GET /?key=[redacted key]"


def test_the_services_kafka_password_is_redacted_too(capsys, isolated_logging, monkeypatch):
    password = "Kp" * 20
    monkeypatch.setenv("OSTINATO_KAFKA_PASSWORD", password)
    configure_logging("scheduler")
    get_logger("ostinato.test").warning("kafka refused", error=f"SASL as x:{password} failed")
    out = capsys.readouterr().out
    assert password not in out
    assert _json_lines(out)[0]["error"] == "SASL as x:[redacted key] failed"


def test_bound_restores_previous_context(isolated_logging):
    bind_run(tenant_id="t-0", run_id="r-0", job_id=None)
    assert get_contextvars() == {"tenant_id": "t-0", "run_id": "r-0"}
    with bound(run_id="r-1", attempt=3, job_id=None):
        assert get_contextvars() == {"tenant_id": "t-0", "run_id": "r-1", "attempt": 3}
    assert get_contextvars() == {"tenant_id": "t-0", "run_id": "r-0"}


async def test_bindings_stay_inside_their_task(isolated_logging):
    async def handle(run_id: str) -> dict:
        bind_run(run_id=run_id)
        await asyncio.sleep(0)
        return get_contextvars()

    first, second = await asyncio.gather(handle("r-a"), handle("r-b"))
    assert (first["run_id"], second["run_id"]) == ("r-a", "r-b")
    assert "run_id" not in get_contextvars()


def test_kafka_headers_round_trip_the_trace_context(local_tracer):
    test_tracer, _ = local_tracer
    with test_tracer.start_as_current_span("send ostinato.runs.due") as span:
        headers = tracing.inject_kafka_headers([("traceparent", b"stale"), ("k", b"v")])
        stored = tracing.current_traceparent()
    sent = span.get_span_context()
    assert [k for k, _ in headers].count("traceparent") == 1 and ("k", b"v") in headers
    assert dict(headers)["traceparent"].decode() == stored

    received = trace.get_current_span(tracing.extract_kafka_headers(headers)).get_span_context()
    assert (received.trace_id, received.span_id) == (sent.trace_id, sent.span_id)
    assert received.is_remote
    restored = trace.get_current_span(tracing.context_from_traceparent(stored))
    assert restored.get_span_context().trace_id == sent.trace_id
    assert (
        not trace.get_current_span(tracing.extract_kafka_headers(None)).get_span_context().is_valid
    )
    assert tracing.context_from_traceparent("garbage") == tracing.context_from_traceparent(None)


def test_consumer_span_is_child_of_the_producer(local_tracer, monkeypatch):
    test_tracer, exporter = local_tracer
    monkeypatch.setattr(tracing, "tracer", lambda name="ostinato": test_tracer)
    headers = [("traceparent", TRACEPARENT.encode())]
    with tracing.consumer_span("ostinato.runs.due", headers, batch_size=3):
        with tracing.producer_span("ostinato.runs.ready.default"):
            pass
    producer, consumer = exporter.get_finished_spans()
    assert consumer.name == "process ostinato.runs.due" and consumer.kind is SpanKind.CONSUMER
    assert consumer.attributes["messaging.system"] == "kafka"
    assert consumer.attributes["messaging.operation.type"] == "process"
    assert consumer.attributes["messaging.destination.name"] == "ostinato.runs.due"
    assert consumer.attributes["messaging.batch.message_count"] == 3
    assert format(consumer.context.trace_id, "032x") == TRACEPARENT.split("-")[1]
    assert format(consumer.parent.span_id, "016x") == TRACEPARENT.split("-")[2]
    assert consumer.links[0].context.span_id == consumer.parent.span_id
    assert producer.name == "send ostinato.runs.ready.default"
    assert (
        producer.kind is SpanKind.PRODUCER and producer.parent.span_id == consumer.context.span_id
    )


def test_context_passes_through_a_service_without_tracing():
    """No SDK installed: the no-op tracer still hands the upstream context to the next hop."""
    headers = [("traceparent", TRACEPARENT.encode())]
    with tracing.consumer_span("ostinato.runs.due", headers, batch_size=1):
        assert tracing.current_traceparent() == TRACEPARENT
        assert dict(tracing.inject_kafka_headers())["traceparent"] == TRACEPARENT.encode()


def test_init_tracing_without_endpoint_leaves_the_noop_provider(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OSTINATO_OTLP_ENDPOINT", raising=False)
    tracing.init_tracing("api")
    monkeypatch.setenv("OSTINATO_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    tracing.init_tracing("api")
    assert not tracing.tracing_enabled()
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    assert not tracing.tracer().start_span("x").is_recording()
    assert tracing_middleware() == []


def _ready(checks: dict[str, bool]):
    async def readiness() -> dict[str, bool]:
        return checks

    return readiness


def test_readyz_reports_each_check():
    with TestClient(ops_app("reconciler", _ready({"postgres": True, "kafka": False}))) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json() == {
            "status": "not ready",
            "checks": {"postgres": True, "kafka": False},
        }
        assert client.get("/livez").json() == {"status": "ok"}
        assert client.get("/healthz").status_code == 200
    with TestClient(ops_app("reconciler", _ready({"postgres": True, "kafka": True}))) as client:
        response = client.get("/readyz")
        assert response.status_code == 200 and response.json()["status"] == "ready"


def test_readyz_fails_closed_on_error_and_timeout(monkeypatch):
    async def broken() -> dict[str, bool]:
        raise ConnectionError("pg down")

    async def slow() -> dict[str, bool]:
        await asyncio.sleep(5)
        return {}

    monkeypatch.setattr(ops, "READINESS_TIMEOUT_S", 0.05)
    for readiness in (broken, slow):
        with TestClient(ops_app("scheduler", readiness)) as client:
            response = client.get("/readyz")
            assert response.status_code == 503
            assert response.json()["checks"] == {"readiness": False}


def test_metrics_endpoint_exposes_build_info():
    with TestClient(ops_app("scheduler", _ready({}))) as client:
        response = client.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        assert "ostinato_build_info{version=" in response.text


def test_ops_routes_stay_out_of_the_openapi_schema():
    app = Litestar(ops_route_handlers(_ready({})), logging_config=None)
    with TestClient(app) as client:
        assert client.get("/schema/openapi.json").json().get("paths", {}) == {}


def _count(route: str, status: str) -> float:
    labels = {"method": "GET", "route": route, "status": status}
    return REGISTRY.get_sample_value("ostinato_http_request_duration_seconds_count", labels) or 0


def test_http_metrics_label_by_route_template_never_raw_path():
    @get("/items/{id:int}")
    async def item(id: FromPath[int]) -> dict[str, int]:
        return {"id": id}

    # Litestar's template omits the converter: /items/{id:int} is reported as /items/{id}.
    before_ok, before_404 = _count("/items/{id}", "200"), _count("unmatched", "404")
    app = instrument_http(Litestar([item], logging_config=None, openapi_config=None))
    with TestClient(app) as client:
        assert client.get("/items/123").status_code == 200
        assert client.get("/no/such/path").status_code == 404
    assert _count("/items/{id}", "200") == before_ok + 1
    assert _count("unmatched", "404") == before_404 + 1
    assert _count("/items/123", "200") == 0


async def test_http_server_serves_and_stops_without_taking_signals():
    sigterm_before = signal.getsignal(signal.SIGTERM)
    server = HttpServer(ops_app("dispatcher", _ready({})), "127.0.0.1", 0)
    await server.start()
    try:
        assert server.started and server.port > 0
        assert signal.getsignal(signal.SIGTERM) is sigterm_before
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            response = await client.get("/livez")
        assert response.status_code == 200 and response.json() == {"status": "ok"}
    finally:
        await server.stop()
    assert not server.started


async def test_http_server_start_raises_when_the_port_is_taken():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = HttpServer(ops_app("dispatcher", _ready({})), "127.0.0.1", taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="failed to start"):
            await server.start()


_TRACED_APP = textwrap.dedent(
    """
    import json, os
    from litestar import Litestar, get
    from litestar.params import FromPath
    from litestar.testing import TestClient
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from ostinato.runtime.ops import instrument_http, ops_route_handlers, tracing_middleware
    from ostinato.telemetry.tracing import init_tracing

    init_tracing("api")
    exporter = InMemorySpanExporter()
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))

    @get("/items/{id:int}")
    async def item(id: FromPath[int]) -> dict[str, int]:
        return {"id": id}

    async def ready():
        return {}

    handlers = [item, *ops_route_handlers(ready)]
    app = Litestar(handlers, middleware=tracing_middleware(), logging_config=None)
    with TestClient(instrument_http(app)) as client:
        client.get("/items/7", headers={"traceparent": os.environ["TP"]})
        client.get("/nope")
        client.get("/livez")
    spans = [
        {"name": s.name, "route": s.attributes.get("http.route"),
         "trace_id": format(s.context.trace_id, "032x"),
         "service": s.resource.attributes["service.name"]}
        for s in exporter.get_finished_spans()
    ]
    print(json.dumps(spans), flush=True)
    os._exit(0)  # skip the exit-time flush to the unreachable collector
    """
)


def test_traced_http_spans_are_named_by_route_template():
    """In a subprocess, so the SDK provider it installs never reaches the other tests."""
    env = {
        "PATH": "/usr/bin:/bin",
        "OSTINATO_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "TP": TRACEPARENT,
    }
    done = subprocess.run(
        [sys.executable, "-c", _TRACED_APP], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    item, unmatched = json.loads(done.stdout.strip().splitlines()[-1])  # /livez is not traced
    assert (item["name"], item["route"]) == ("GET /items/{id}", "/items/{id}")
    assert item["trace_id"] == TRACEPARENT.split("-")[1]
    assert item["service"] == "ostinato-api"
    assert (unmatched["name"], unmatched["route"]) == ("GET", None)


def test_tenant_labels_are_capped_with_an_other_bucket(monkeypatch):
    """The first TENANT_LABEL_CAP tenants keep their id as label; later ones are "other"."""
    from ostinato.telemetry import metrics

    monkeypatch.setattr(metrics, "TENANT_LABEL_CAP", 2)
    monkeypatch.setattr(metrics, "_labelled_tenants", set())
    assert [metrics.tenant_label(t) for t in ("a", "b", "c", "a", "d", "b")] == \
        ["a", "b", "other", "a", "other", "b"]


def test_every_tenant_labelled_metric_caps_its_tenant_label_and_none_has_a_job_label(
        monkeypatch):
    """The cap is applied by the metric itself (whoever sets it): past the cap a tenant's
    samples land in "other"; no metric carries a job or run id label."""
    from prometheus_client import REGISTRY

    from ostinato.telemetry import metrics

    tenant_labelled = [m for m in vars(metrics).values()
                       if hasattr(m, "_labelnames") and "tenant" in m._labelnames]
    assert len(tenant_labelled) >= 10
    assert all(isinstance(m, metrics._TenantCapped) for m in tenant_labelled)
    for m in vars(metrics).values():
        if hasattr(m, "_labelnames"):
            assert not {"job", "job_id", "run", "run_id"} & set(m._labelnames), m
    monkeypatch.setattr(metrics, "TENANT_LABEL_CAP", 1)
    monkeypatch.setattr(metrics, "_labelled_tenants", set())
    metrics.DEAD_LETTERS.labels(tenant="cap-a").inc()
    before = REGISTRY.get_sample_value("ostinato_dead_letters_total", {"tenant": "other"}) or 0
    metrics.DEAD_LETTERS.labels(tenant="cap-b").inc()
    metrics.DEAD_LETTERS.labels(tenant="cap-c").inc()
    assert REGISTRY.get_sample_value("ostinato_dead_letters_total", {"tenant": "other"}) == \
        before + 2
    assert REGISTRY.get_sample_value("ostinato_dead_letters_total", {"tenant": "cap-b"}) is None
    assert REGISTRY.get_sample_value("ostinato_dead_letters_total", {"tenant": "cap-a"}) == 1


def test_a_runs_hop_continues_its_trace_only_when_tracing_is_on(monkeypatch, local_tracer):
    # Off (no exporting provider installed): the stored traceparent passes through untouched.
    assert not tracing.tracing_enabled()
    assert tracing.run_hop("claim run", TRACEPARENT, run_id="r-1") == TRACEPARENT
    assert tracing.run_hop("claim run", None, run_id="r-1") is None
    # On: a span in the run's trace, child of the stored one; its context is what is stored.
    test_tracer, exporter = local_tracer
    monkeypatch.setattr(tracing, "_provider", object())
    monkeypatch.setattr(tracing, "tracer", lambda name="ostinato": test_tracer)
    stored = tracing.run_hop("claim run", TRACEPARENT, tenant_id="t-1", run_id="r-1",
                             attempt=2)
    (span,) = exporter.get_finished_spans()
    assert span.name == "claim run"
    assert format(span.parent.span_id, "016x") == TRACEPARENT.split("-")[2]
    assert stored == f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-01"
    assert stored.split("-")[1] == TRACEPARENT.split("-")[1]
    assert span.attributes["ostinato.run.attempt"] == 2
