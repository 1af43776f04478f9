"""A job's own history through the API: its timeline straight from the log (JobCreated,
OccurrenceFired, OccurrencesSkipped, pauses, ...) and its skip ledger (each recorded skip: the
slots and why), paged, tenant-scoped (docs/SCHEDULES.md: skips are recorded, and readable)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from litestar import get
from litestar.params import FromPath, FromQuery, QueryParameter

from ostinato.domain.errors import NotFound
from ostinato.stores import jobs as job_store
from ostinato.wire.api import JobEventsPage, SkipsPage, SkipView
from services.api.routes import AfterVersion, timeline_page
from services.api.scope import Tenant

Limit = Annotated[int, QueryParameter(ge=1, le=1000)]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def _own_job(tenant: Tenant, job_id: uuid.UUID) -> None:
    if await job_store.by_id(tenant.conn, tenant.tenant_id, job_id) is None:
        raise NotFound(f"no job {job_id}")


@get("/v1/jobs/{job_id:uuid}/events", tags=["jobs"])
async def job_events(job_id: FromPath[uuid.UUID], tenant: Tenant,
                     after: FromQuery[AfterVersion] = 0,
                     limit: FromQuery[Limit] = 100) -> JobEventsPage:
    """The job's timeline from the append-only log, in version order, after version `after`."""
    await _own_job(tenant, job_id)
    items, next_after = await timeline_page(tenant.conn, job_id, tenant.tenant_id, after,
                                            limit) or ([], None)
    return JobEventsPage(job_id=job_id, items=items, next_after=next_after)


@get("/v1/jobs/{job_id:uuid}/skips", tags=["jobs"])
async def job_skips(job_id: FromPath[uuid.UUID], tenant: Tenant,
                    after: FromQuery[datetime | None] = None,
                    limit: FromQuery[Limit] = 100) -> SkipsPage:
    """The job's skip ledger: every recorded skip (its first and last slot, how many, why),
    oldest first, with a first slot after `after`."""
    await _own_job(tenant, job_id)
    page = await job_store.skips_page(tenant.conn, tenant.tenant_id, job_id, after or _EPOCH,
                                      limit)
    return SkipsPage(job_id=job_id, items=[
        SkipView(first_slot=s.first_slot, last_slot=s.last_slot, slots=s.slots, reason=s.reason)
        for s in page], next_after=page[-1].first_slot if len(page) == limit else None)


ROUTES = [job_events, job_skips]
