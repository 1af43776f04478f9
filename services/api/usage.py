"""`GET /v1/usage?from=&to=&granularity=hour|day`: what a tenant used, for quotas and billing —
runs created, attempts started, worker-seconds, workflow steps and output bytes (from the
run-event log: an output's size is recorded on its completion event and outlives the blob's
retention), payload bytes (from the blob store), per UTC hour or day, with the totals. Default
window: the last day (hourly) ; at most 31 days hourly, 366 days daily."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from litestar import get
from litestar.exceptions import HTTPException
from litestar.params import QueryParameter

from ostinato.stores import usage
from ostinato.wire.api import UsageBucket, UsageView
from services.api.job_ledger import From, To, _instant
from services.api.scope import Tenant

MAX = {"hour": timedelta(days=31), "day": timedelta(days=366)}
Granularity = Annotated[Literal["hour", "day"], QueryParameter(
    description="Bucket size: hour or day (UTC).")]


@get("/v1/usage", tags=["usage"])
async def get_usage(tenant: Tenant, window_from: From = None, to: To = None,
                    granularity: Granularity = "hour") -> UsageView:
    """The tenant's usage in [from, to) by hour or day, oldest first, and the totals."""
    end = _instant("to", to) or tenant.clock.now()
    start = _instant("from", window_from) or end - timedelta(days=1)
    if start > end:
        raise HTTPException(status_code=400, detail="from is after to")
    if end - start > MAX[granularity]:
        raise HTTPException(status_code=400, detail=f"at most {MAX[granularity].days} days by "
                            f"{granularity}; ask for several windows or granularity=day")
    buckets: dict = {}
    for e in await usage.events_between(tenant.conn, tenant.tenant_id, start, end, granularity):
        buckets[e.bucket] = UsageBucket(start=e.bucket, runs=e.runs, attempts=e.attempts,
                                        worker_seconds=e.worker_seconds,
                                        workflow_steps=e.workflow_steps,
                                        output_bytes=e.output_bytes)
    for b in await usage.bytes_between(tenant.conn, tenant.tenant_id, start, end, granularity):
        item = buckets.setdefault(b.bucket, UsageBucket(start=b.bucket))
        item.payload_bytes = b.payload_bytes
    items = [buckets[k] for k in sorted(buckets)]
    total = UsageBucket(
        start=start, runs=sum(i.runs for i in items), attempts=sum(i.attempts for i in items),
        worker_seconds=sum(i.worker_seconds for i in items),
        payload_bytes=sum(i.payload_bytes for i in items),
        output_bytes=sum(i.output_bytes for i in items),
        workflow_steps=sum(i.workflow_steps for i in items))
    return UsageView(window_from=start, window_to=end, granularity=granularity, items=items,
                     total=total)


ROUTES = [get_usage]
