"""Process runtime shared by the five services.

`settings` reads the environment; `service` is a service's life (pool, producer, probes, signals,
`run_until_stopped`); `duties` the one shape of every background loop; `auth` and `problems` the
HTTP key check and the RFC 9457 mapping that the api and the worker-gateway share; `ops` holds the
operational HTTP surface (probes, /metrics, HTTP metrics and spans) and an
in-loop uvicorn server the service starts and stops itself, keeping SIGTERM handling its own.
Nothing is imported here, so `import ostinato.runtime` does not load Litestar or uvicorn.
"""
