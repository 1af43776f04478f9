"""The typed Python client of Ostinato's public HTTP API, sync and async (httpx).

    from ostinato.client import Client

    with Client() as client:                 # OSTINATO_API_URL, OSTINATO_API_KEY
        job = client.jobs.create(name="nightly-report",
                                 schedule={"cron": "30 2 * * *", "timezone": "Europe/Berlin"})
        for run in client.runs.list(job_id=job.id):
            print(run.state)

Requests and answers are the API's own msgspec models (`ostinato.wire.api`, the one home the
API service imports them from too), so a field means the same on both sides. Resources: `jobs`,
`schedules`, `calendars`, `runs`, `dead_letters`, `pools`, `workers`, `tasks`, `limits`,
`tenants`, `dags`, `dag_runs`. Lists are lazy iterators over the API's cursor pages. Every
error is an `ApiError` carrying the RFC 9457 problem (`status`, `type`, `title`, `detail`,
field `errors`); a run awaited with `client.runs.start(...).result(timeout=)` raises
`RunFailedError`, `RunCancelledError` or `RunTimeoutError` (`ostinato.client.handles`); an
update awaited with `client.runs.update(...)` raises `UpdateRejectedError` or
`UpdateTimeoutError` (`ostinato.client.updates`); nothing
is retried behind the caller's back, since most calls are not
idempotent without a key.

The client imports no server code (database, bus, event log, stores, services): an
import-linter contract in pyproject.toml.
"""

from ostinato.client.aio import AsyncClient
from ostinato.client.config import ConfigError, Connection, resolve
from ostinato.client.errors import (
    ApiError,
    ApiUnreachable,
    Problem,
    RunCancelledError,
    RunError,
    RunFailedError,
    RunTimeoutError,
    UpdateRejectedError,
    UpdateTimeoutError,
)
from ostinato.client.handles import AsyncRunHandle, RunHandle
from ostinato.client.sync import Client

__all__ = ["ApiError", "ApiUnreachable", "AsyncClient", "AsyncRunHandle", "Client", "ConfigError",
           "Connection", "Problem", "RunCancelledError", "RunError", "RunFailedError", "RunHandle",
           "RunTimeoutError", "UpdateRejectedError", "UpdateTimeoutError", "resolve"]
