"""api: the public HTTP API (Litestar + msgspec). `routes` holds tenants, jobs and runs;
`job_control` pause, resume, trigger, backfill, previews and calendars; `failures` cancel,
retry, logs and the dead-letter queue; `capacity` pools, limits and workers; `models` the
request and response bodies; `app` puts them together."""
