"""Tracing: opt-in OTLP export plus W3C context propagation through Kafka headers and run events.

Without an endpoint nothing is installed and the API's no-op tracer stays in place: spans cost a
contextvar read and no export or log happens.

A stop never waits on the collector for long: `shutdown_tracing` flushes what is buffered for
at most `OSTINATO_OTLP_SHUTDOWN_SECONDS` (2 s), then tells the exporter to stop (its retries
end) and returns, dropping what was not sent; the export runs on a daemon thread, so the
process exits at once. Measured before (bench/restart.py): with the collector absent, the
exporter's retries (up to its 10 s export timeout, and 30 s for the processor's join) held every
SIGTERM of a service that long. Propagation still works then, because the no-op
tracer hands the extracted remote context through, so a trace survives a hop through a service
that does not export. Runs fire long after submission, so a run's creation `traceparent` is stored
on its event and turned back into a context by `context_from_traceparent` when the run is due.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Link, Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "JOB_ID",
    "RUN_ATTEMPT",
    "RUN_ID",
    "TENANT_ID",
    "consumer_span",
    "context_from_traceparent",
    "current_traceparent",
    "duty_span",
    "extract_kafka_headers",
    "init_tracing",
    "inject_http_headers",
    "inject_kafka_headers",
    "producer_span",
    "run_attributes",
    "shutdown_tracing",
    "tracer",
    "tracing_enabled",
]

# Our own attributes, prefixed with the application name (OTel docs/general/naming.md).
TENANT_ID = "ostinato.tenant.id"
RUN_ID = "ostinato.run.id"
RUN_ATTEMPT = "ostinato.run.attempt"
JOB_ID = "ostinato.job.id"
DUTY = "ostinato.duty.name"

KafkaHeaders = Sequence[tuple[str, bytes | None]]

_W3C = TraceContextTextMapPropagator()
_provider: Any = None  # the SDK TracerProvider we installed, if any
_exporter: Any = None  # and its span exporter
SHUTDOWN_SECONDS = 2.0  # OSTINATO_OTLP_SHUTDOWN_SECONDS' default


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


@cache
def _service_version() -> str:
    try:
        return version("ostinato")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def tracing_enabled() -> bool:
    """True once `init_tracing` installed an exporting provider in this process."""
    return _provider is not None


def init_tracing(service: str) -> None:
    """Install an SDK provider exporting OTLP/HTTP, only when an endpoint is configured.

    Also defaults OTEL_SEMCONV_STABILITY_OPT_IN to `http`, so the ASGI instrumentation emits the
    stable HTTP attribute names (`http.request.method`, ...) rather than the legacy ones.
    """
    global _provider
    if _provider is not None or _truthy("OTEL_SDK_DISABLED"):
        return
    ours = os.environ.get("OSTINATO_OTLP_ENDPOINT", "").strip()
    standard = any(
        os.environ.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    if not ours and not standard:
        return

    # Imported here so a process without tracing never loads the SDK or the exporter.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "http")
    resource = Resource.create(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME") or f"ostinato-{service}",
            "service.namespace": "ostinato",
            "service.version": _service_version(),
        }
    )
    if ours:
        base = ours.rstrip("/")
        exporter = OTLPSpanExporter(
            endpoint=base if base.endswith("/v1/traces") else f"{base}/v1/traces"
        )
    else:  # the exporter reads the standard variables itself (and appends /v1/traces)
        exporter = OTLPSpanExporter()
    # Not the SDK's own exit hook, which waits on an absent collector: ours is bounded.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _provider, _exporter = provider, exporter
    atexit.register(shutdown_tracing)


def shutdown_seconds() -> float:
    """How long a stop waits for buffered spans to reach the collector
    (`OSTINATO_OTLP_SHUTDOWN_SECONDS`, 2 by default; a bad value is the default)."""
    try:
        value = float(os.environ.get("OSTINATO_OTLP_SHUTDOWN_SECONDS", SHUTDOWN_SECONDS))
    except ValueError:
        return SHUTDOWN_SECONDS
    return value if value >= 0 else SHUTDOWN_SECONDS


def shutdown_tracing(timeout_seconds: float | None = None) -> bool:
    """Flush buffered spans, waiting at most `timeout_seconds` (`shutdown_seconds()`); True
    when the flush ended in time (or tracing is off). Past the bound the exporter is told to
    stop retrying and the spans left are dropped: a stop never waits on a collector that does
    not answer (the module docstring)."""
    global _provider, _exporter
    provider, exporter = _provider, _exporter
    _provider = _exporter = None
    if provider is None:
        return True
    flush = threading.Thread(target=provider.shutdown, name="ostinato-trace-shutdown",
                             daemon=True)
    flush.start()
    flush.join(shutdown_seconds() if timeout_seconds is None else timeout_seconds)
    if not flush.is_alive():
        return True
    if exporter is not None:
        exporter.shutdown()  # ends its retries; a request in flight is abandoned with the thread
    return False


def tracer(name: str = "ostinato") -> trace.Tracer:
    """A tracer from the global provider (a proxy, so it is fine to take one at import)."""
    return trace.get_tracer(name, _service_version())


def run_attributes(
    *,
    tenant_id: object = None,
    job_id: object = None,
    run_id: object = None,
    attempt: int | None = None,
) -> dict[str, str | int]:
    """Span attributes for a run's ids (None skipped, UUIDs as strings)."""
    attrs: dict[str, str | int] = {}
    for key, value in ((TENANT_ID, tenant_id), (JOB_ID, job_id), (RUN_ID, run_id)):
        if value is not None:
            attrs[key] = str(value)
    if attempt is not None:
        attrs[RUN_ATTEMPT] = attempt
    return attrs


class _KafkaSetter(Setter[list[tuple[str, bytes]]]):
    def set(self, carrier: list[tuple[str, bytes]], key: str, value: str) -> None:
        carrier.append((key, value.encode()))


class _KafkaGetter(Getter[KafkaHeaders]):
    def get(self, carrier: KafkaHeaders, key: str) -> list[str] | None:
        key = key.lower()
        found = [
            v.decode("utf-8", "replace") for k, v in carrier if v is not None and k.lower() == key
        ]
        return found or None

    def keys(self, carrier: KafkaHeaders) -> list[str]:
        return [k for k, _ in carrier]


_SETTER = _KafkaSetter()
_GETTER = _KafkaGetter()


def inject_kafka_headers(
    headers: Sequence[tuple[str, bytes]] | None = None,
) -> list[tuple[str, bytes]]:
    """A new header list with the current context's traceparent/tracestate (stale ones replaced)."""
    fields = {f.lower() for f in propagate.get_global_textmap().fields}
    out = [(k, v) for k, v in headers or () if k.lower() not in fields]
    propagate.inject(out, setter=_SETTER)
    return out


def extract_kafka_headers(headers: KafkaHeaders | None) -> Context:
    """The producer's context from aiokafka's `(str, bytes)` headers; empty when none came."""
    return propagate.extract(headers or (), context=Context(), getter=_GETTER)


def inject_http_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add the current context to outgoing HTTP headers (mutates and returns the dict)."""
    propagate.inject(headers)
    return headers


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, to store on a run's event; None if none."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent")


def context_from_traceparent(tp: str | None) -> Context:
    """Turn a stored traceparent back into a parent context (empty for None or garbage)."""
    if not tp:
        return Context()
    return _W3C.extract({"traceparent": tp}, context=Context())


@contextmanager
def consumer_span(
    topic: str,
    headers: KafkaHeaders | None,
    *,
    batch_size: int,
    consumer_group: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span]:
    """A CONSUMER `process <topic>` span, child of (and linked to) the first message's producer.

    Semconv prefers a link only; we also parent on it so one run is one trace across services.
    """
    parent = extract_kafka_headers(headers)
    parent_ctx = trace.get_current_span(parent).get_span_context()
    attrs: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": topic,
        "messaging.batch.message_count": batch_size,
    }
    if consumer_group:
        attrs["messaging.consumer.group.name"] = consumer_group
    attrs.update(attributes or {})
    with _error_typed(
        tracer().start_as_current_span(
            f"process {topic}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attrs,
            links=[Link(parent_ctx)] if parent_ctx.is_valid else None,
        )
    ) as span:
        yield span


@contextmanager
def producer_span(topic: str, *, attributes: Mapping[str, Any] | None = None) -> Iterator[Span]:
    """A PRODUCER `send <topic>` span; inject headers inside it so consumers parent on it."""
    attrs: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": topic,
    }
    attrs.update(attributes or {})
    with _error_typed(
        tracer().start_as_current_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attrs)
    ) as span:
        yield span


@contextmanager
def _error_typed(cm: Any) -> Iterator[Span]:
    """Add semconv `error.type` to a failing span (the API already records the exception)."""
    with cm as span:
        try:
            yield span
        except Exception as exc:
            if span.is_recording():
                span.set_attribute("error.type", type(exc).__qualname__)
            raise


def run_hop(name: str, traceparent: str | None, **ids: Any) -> str | None:
    """Mark a run's hop through a service with a span continuing its stored trace (runs wait
    in the database between hops, so the context travels as the `traceparent` stored on each
    event), and return the traceparent to store on the hop's events: the span's when tracing
    is on, else the one given, so the chain holds either way and costs a call when tracing is
    off (every run passes three hops)."""
    if not tracing_enabled():
        return traceparent
    with tracer().start_as_current_span(name, context=context_from_traceparent(traceparent),
                                        attributes=run_attributes(**ids)):
        return current_traceparent() or traceparent


@contextmanager
def duty_span(duty: str) -> Iterator[None]:
    """An INTERNAL `duty <name>` span around one tick of a background duty
    (`ostinato.runtime.duties`). Nothing at all when tracing is off (like `run_hop`): the
    scheduler ticks every 50 ms, and a no-op span would be pure overhead."""
    if not tracing_enabled():
        yield
        return
    with _error_typed(tracer().start_as_current_span(f"duty {duty}", attributes={DUTY: duty})):
        yield
