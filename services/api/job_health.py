"""`GET /v1/jobs/{id}/health?window=`: one job's schedule health over the last `window` (a
duration, default 24h, at most 31 days): runs by outcome, the schedule lag (first start − due)
p50/p99/max from the log, the last success, and what the reconciler recorded — missed slots,
the ledger's missing slots, completion deadlines breached, skips (docs/ALERTS.md). A DAG job's
occurrences are its DAG runs: they are counted, their lag is the DAG run's start (its first node
ready) minus its due time, and its last success is its last succeeded DAG run."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Annotated

from litestar import get
from litestar.exceptions import HTTPException
from litestar.params import FromPath, QueryParameter

from ostinato import schedules
from ostinato.dags import targets
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.stores import health
from ostinato.stores import jobs as job_store
from ostinato.wire.api import JobHealthView
from services.api.scope import Tenant

MAX_WINDOW = timedelta(days=31)
Window = Annotated[str, QueryParameter(
    description="How far back from now, a duration: \"1h\", \"24h\", \"7d\" (at most 31 days).")]


def parse_window(text: str) -> timedelta:
    try:
        span = schedules.parse_duration(text)
    except (InvalidInput, ValueError):
        raise HTTPException(status_code=400, detail=f"window: {text!r} is not a duration "
                            "(e.g. 1h, 24h, 7d)") from None
    if span <= timedelta(0) or span > MAX_WINDOW:
        raise HTTPException(status_code=400, detail="window: between 1s and 31 days")
    return span


@get("/v1/jobs/{job_id:uuid}/health", tags=["jobs"])
async def job_health(job_id: FromPath[uuid.UUID], tenant: Tenant,
                     window: Window = "24h") -> JobHealthView:
    """The job's runs, schedule lag, last success, missed and overdue counts over `window`."""
    span = parse_window(window)
    job = await job_store.by_id(tenant.conn, tenant.tenant_id, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    end = tenant.clock.now()
    start = end - span
    if job.task.startswith(targets.DAG_TASK_PREFIX):  # its occurrences are DAG runs
        runs = await health.dag_runs_between(tenant.conn, tenant.tenant_id, job_id, start, end)
        last = await health.last_dag_success(tenant.conn, tenant.tenant_id, job_id)
    else:
        runs = await health.runs_between(tenant.conn, tenant.tenant_id, job_id, start, end)
        last = await health.last_success(tenant.conn, tenant.tenant_id, job_id)
    found = await health.findings_between(tenant.conn, tenant.tenant_id, job_id, start, end)
    return JobHealthView(
        job_id=job_id, window_from=start, window_to=end, runs=runs.runs,
        succeeded=runs.succeeded, failed=runs.failed, in_progress=runs.in_progress,
        started=runs.started, lag_p50_seconds=runs.lag_p50_seconds,
        lag_p99_seconds=runs.lag_p99_seconds, lag_max_seconds=runs.lag_max_seconds,
        last_success_at=last,
        missed=found.missed, ledger_missing=found.ledger_missing, overdue=found.overdue,
        skips=found.skips, complete_within_seconds=job.complete_within_seconds,
        max_staleness_seconds=job.max_staleness_seconds)


ROUTES = [job_health]
