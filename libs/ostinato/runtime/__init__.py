"""Process runtime shared by the five services.

`ops` holds the operational HTTP surface (probes, /metrics, HTTP metrics and spans) and an
in-loop uvicorn server the service starts and stops itself, keeping SIGTERM handling its own.
Nothing is imported here, so `import ostinato.runtime` does not load Litestar or uvicorn.
"""
