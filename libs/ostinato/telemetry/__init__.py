"""Telemetry for all five services: logs, traces and metrics, each with one job.

- `logging`: JSON lines on stdout. Logs say what happened to *this* run: every line carries
  `service` and, once bound with `bind_run`/`bound`, `tenant_id`/`job_id`/`run_id`/`attempt`, plus
  `trace_id`/`span_id` when a span is active. Call `configure_logging(service)` first thing in main.
- `tracing`: where time went across services. Off (no-op, zero cost) unless an OTLP endpoint is set
  (`OSTINATO_OTLP_ENDPOINT` or the standard `OTEL_EXPORTER_OTLP_ENDPOINT`). The W3C context rides
  in Kafka headers and, because runs fire long after submission, in the run's creation event
  (`current_traceparent` / `context_from_traceparent`), so one run is one trace.
- `metrics`: how the fleet behaves in aggregate. Prometheus, default registry, scraped at /metrics;
  low-cardinality labels only (never run ids or raw paths).

Submodules are imported explicitly (`from ostinato.telemetry.logging import get_logger`) so a
process pays only for what it uses; the OTel SDK loads only when tracing is switched on.
"""
