"""`GET /v1/jobs/{id}/ledger?from=&to=&after=&limit=`: a job's expected-occurrence ledger — each
slot the independent enumeration (`ostinato.ledger`) or the scheduler expects in [from, to),
with what happened to it (completed, in_progress, failed, cancelled, skipped with its reason,
paused, upcoming, pending, waiting, missing), its run and state, and which implementation
expects it (docs/SCHEDULES.md, "The expected-occurrence ledger"). Tenant-scoped; the window is
at most `MAX_WINDOW`; pages of `limit` slots, the next from `next_after`."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Annotated

import msgspec
from litestar import get
from litestar.exceptions import HTTPException
from litestar.params import FromPath, FromQuery, QueryParameter

from ostinato.domain.errors import NotFound
from ostinato.jobs import ledger as job_ledger
from ostinato.stores import jobs as job_store
from services.api.scope import Tenant

MAX_WINDOW = timedelta(days=31)
DEFAULT_WINDOW = timedelta(days=1)
_TICK = timedelta(microseconds=1)
Limit = Annotated[int, QueryParameter(ge=1, le=1000)]
_RFC3339 = "an RFC 3339 instant with an offset, e.g. 2026-12-01T09:00:00Z"
From = Annotated[str | None, QueryParameter(
    name="from", description=f"Start of the window (inclusive), {_RFC3339}; default: a day "
    "before `to`.")]
To = Annotated[str | None, QueryParameter(
    description=f"End of the window (exclusive), {_RFC3339}; default: now.")]
After = Annotated[str | None, QueryParameter(
    description="The `next_after` of the previous page: slots after it.")]


class LedgerEntryView(msgspec.Struct, kw_only=True):
    slot: datetime  # the occurrence's identity (`scheduled_for`), UTC
    outcome: str  # completed in_progress failed cancelled skipped paused upcoming pending
    #               waiting missing
    expected_by: str  # both | ledger | scheduler (the last two: the implementations disagree)
    run_id: uuid.UUID | None = None
    dag_run_id: uuid.UUID | None = None  # a DAG job's occurrence is a DAG run (run_id: none)
    state: str | None = None  # the run's state (the DAG run's, for a DAG job)
    skip_reason: str | None = None  # the recorded skip's reason
    paused: bool = False  # inside a pause of the job
    excluded: bool = False  # on a date of the job's calendar


class LedgerPage(msgspec.Struct, kw_only=True):
    job_id: uuid.UUID
    window_from: datetime = msgspec.field(name="from")
    window_to: datetime = msgspec.field(name="to")
    items: list[LedgerEntryView]
    next_after: datetime | None = None  # pass as `after` for the next page; None: the last


def _bad_request(detail: str) -> HTTPException:
    return HTTPException(status_code=400, detail=detail)


def _instant(name: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise _bad_request(f"{name}: {text!r} is not an RFC 3339 instant "
                           "(e.g. 2026-12-01T09:00:00Z)") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise _bad_request(f"{name}: {text!r} has no offset; add Z or +hh:mm")
    return value


def window(now: datetime, start: datetime | None, end: datetime | None) -> tuple[datetime,
                                                                                datetime]:
    """[from, to): defaults to the day before `to` (itself defaulting to now); 400 when from is
    after to or the window is longer than MAX_WINDOW."""
    end = end or (now if start is None else min(now, start + DEFAULT_WINDOW))
    start = start or end - DEFAULT_WINDOW
    if start > end:
        raise _bad_request(f"from ({start.isoformat()}) is after to ({end.isoformat()})")
    if end - start > MAX_WINDOW:
        raise _bad_request(f"the window from {start.isoformat()} to {end.isoformat()} is longer "
                           f"than {MAX_WINDOW.days} days; ask for several windows")
    return start, end


@get("/v1/jobs/{job_id:uuid}/ledger", tags=["jobs"])
async def job_ledger_page(job_id: FromPath[uuid.UUID], tenant: Tenant,
                          window_from: From = None, to: To = None, after: After = None,
                          limit: FromQuery[Limit] = 100) -> LedgerPage:
    """Each expected slot of the job in [from, to) (default: the last day; at most 31 days),
    oldest first, after the slot `after`, with its outcome, run, state and skip reason."""
    now = tenant.clock.now()
    start, end = window(now, _instant("from", window_from), _instant("to", to))
    cursor = _instant("after", after)
    job = await job_store.by_id(tenant.conn, tenant.tenant_id, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    stop = min(end, job.updated_at) if job.status == "deleted" else end
    first = start if cursor is None else max(start, cursor + _TICK)
    entries = []
    if first < stop:
        entries = await job_ledger.job_entries(
            tenant.conn, tenant.tenant_id, job_id, job.schedule, overlap=job.overlap,
            calendar=job.calendar, next_slot=job.next_slot, start=first, end=stop, now=now,
            grace=timedelta(seconds=tenant.settings.missed_grace_seconds), limit=limit + 1)
    page, more = entries[:limit], len(entries) > limit
    return LedgerPage(job_id=job_id, window_from=start, window_to=end, items=[
        LedgerEntryView(slot=e.slot, outcome=e.outcome, expected_by=e.expected_by,
                        run_id=e.run_id, dag_run_id=e.dag_run_id, state=e.state,
                        skip_reason=e.skip_reason, paused=e.paused, excluded=e.excluded)
        for e in page],
        next_after=page[-1].slot if more else None)


ROUTES = [job_ledger_page]
