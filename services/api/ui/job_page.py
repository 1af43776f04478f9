"""One job's page (templates/job.html): its settings, paused with its reason (and no next run),
its upcoming occurrences with local and UTC times and the zone's clock changes, its skipped
occurrences with their reasons, its latest runs and its timeline; for an operator the actions,
the edit form (job_edit) and a backfill previewed slot by slot before it is confirmed. Reads
and commands are those behind GET /v1/jobs/{id}, /upcoming, /skips, /events and POST
/v1/jobs/{id}/backfill."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.params import FromPath, QueryParameter

from ostinato import jobs
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput
from ostinato.domain.events import event_data
from ostinato.eventlog.store import get_blobs, read_stream_page
from ostinato.schedules.describe import describe
from ostinato.schedules.zones import load_zone
from ostinato.stores import job_edits
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from services.api.auditing import audited
from services.api.ui import actions
from services.api.ui.job_edit import edit_form, job_of
from services.api.ui.job_schedule import schedule_raw, upcoming, zone_of
from services.api.ui.params import time_filter
from services.api.ui.runs import runs_table
from services.api.ui.scope import Ui, UiScope, redirect

MISFIRE = [("", "the schedule's own policy"), ("run_once", "run once for what was missed"),
           ("catch_up", "catch up every missed slot"), ("skip", "skip what was missed")]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def may_operate(ui: UiScope) -> bool:
    return roles.may(ui.session.role, roles.OPERATE)


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class EventLine:
    version: int
    type: str
    occurred_at: datetime
    actor: str
    data: str  # JSON text


@get("/jobs/{job_id:uuid}", include_in_schema=False)
async def job_page(job_id: FromPath[uuid.UUID], ui: Ui) -> Response[str]:
    job = await job_of(ui, job_id)
    payloads = await get_blobs(ui.conn, [job.payload_ref], ui.tenant_id)
    payload = payloads.get(job.payload_ref)
    pause = (await job_store.pause_reasons(ui.conn, ui.tenant_id, [job.id])).get(job.id) \
        if job.status == "paused" else None
    skips = await job_store.skips_page(ui.conn, ui.tenant_id, job.id, _EPOCH, 100)
    recent = await run_store.page(ui.conn, ui.tenant_id, job_id=job.id, state=None,
                                  after=(None, None), limit=10)
    events = await read_stream_page(ui.conn, job.id, ui.tenant_id, 0, 200)
    return ui.render(
        "job.html", section="jobs", job=job, words=describe(job.schedule),
        raw=schedule_raw(job.schedule), zone=zone_of(job), pause=pause,
        payload=None if payload is None else as_json(payload), upcoming=upcoming(job),
        skips=skips, recent=await runs_table(ui, recent, "No runs yet."),
        events=[EventLine(r.version, r.type, r.occurred_at, r.actor,
                          as_json(event_data(r.event))) for r in events],
        operate=may_operate(ui), misfires=MISFIRE,
        edit=edit_form(ui, job, await job_edits.definition_version(ui.conn, job.id), payload),
        csrf=ui.csrf)


def _range(start: str | None, end: str | None) -> tuple[datetime, datetime]:
    since, until = time_filter("from", start), time_filter("to", end)
    if since is None or until is None:
        raise InvalidInput("a backfill needs from and to", errors=[
            {"field": "from" if since is None else "to", "message": "missing"}])
    return since, until


def _local_input(at: datetime) -> str:
    return at.astimezone(UTC).replace(tzinfo=None).isoformat()


@dataclass(frozen=True, slots=True)
class SlotLine:
    local: str
    slot: datetime
    action: str
    recorded_skip: str


@get("/jobs/{job_id:uuid}/backfill", include_in_schema=False)
async def backfill_preview(job_id: FromPath[uuid.UUID], ui: Ui,
                           start: Annotated[str | None, QueryParameter(name="from")] = None,
                           end: Annotated[str | None, QueryParameter(name="to")] = None,
                           ) -> Response[str]:
    """The dry run of POST /v1/jobs/{id}/backfill: every slot and what a backfill would do
    with it; changes nothing. The confirmation carries the same range."""
    job = await job_of(ui, job_id)
    since, until = _range(start, end)
    plan = await jobs.backfill(ui.conn, ui.store, tenant_id=ui.tenant_id, job_id=job_id,
                               start=since, end=until, actor=ui.actor, dry_run=True)
    tz = load_zone(plan.timezone)
    return ui.render(
        "job_backfill.html", section="jobs", job=job, since=since, until=until,
        start=_local_input(since), end=_local_input(until), zone=plan.timezone,
        slots=[SlotLine(s.slot.astimezone(tz).isoformat(), s.slot, s.action,
                        s.recorded_skip or "") for s in plan.slots],
        n=plan.runs_created, operate=may_operate(ui) and job.status != "deleted",
        fields={"from": since.isoformat(), "to": until.isoformat()}, csrf=ui.csrf)


@post("/jobs/{job_id:uuid}/backfill", include_in_schema=False, status_code=303,
      opt=audited("job.backfill", "job", "job_id"))
async def backfill(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui)
    since, until = _range(sent.form.get("from"), sent.form.get("to"))
    done = await jobs.backfill(ui.conn, ui.store, tenant_id=ui.tenant_id, job_id=job_id,
                               start=since, end=until, actor=ui.actor)
    ui.audit.after = {"start": done.start, "end": done.end, "runs_created": done.runs_created,
                      "reason": sent.reason}
    actions.done(ui, f"Backfill: {done.runs_created} runs created, {done.slots_with_runs} "
                     f"slots already had runs, {done.slots_skipped} skipped.")
    return redirect(f"/ui/jobs/{job_id}")


ROUTES = [job_page, backfill_preview, backfill]
