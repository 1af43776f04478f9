"""The jobs and schedules list (status, the schedule in words, next and last run, the last
outcome, paused with its reason; Pause, Resume and Trigger now, each confirmed with a reason),
and the actions' routes, the same commands as POST /v1/jobs/{id}/pause, /resume and /trigger,
audited as they are. The job's own page is job_page, its edit job_edit, a new job job_new."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery

from ostinato import jobs
from ostinato.domain.errors import InvalidInput
from ostinato.schedules.describe import describe
from ostinato.stores import jobs as job_store
from ostinato.telemetry import tracing
from services.api.auditing import audited
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui import actions, html, job_edit, job_new, job_page, operations
from services.api.ui.html import Safe
from services.api.ui.job_page import MISFIRE, may_operate
from services.api.ui.job_schedule import schedule_raw
from services.api.ui.scope import Ui, redirect

PAGE_SIZE = 50
PAUSE_REASON_MAX = 500  # as POST /v1/jobs/{id}/pause takes it (wire.api)
STATUSES = [("", "any status"), ("active", "active"), ("paused", "paused"),
            ("completed", "completed"), ("deleted", "deleted")]


@dataclass(frozen=True, slots=True)
class JobLine:
    """One row of the jobs list (templates/jobs.html)."""

    id: uuid.UUID
    name: str
    task: str
    pool: str
    priority: str
    status: str
    schedule: str  # in words (ostinato.schedules.describe)
    schedule_raw: str  # as written, on hover
    next_run_at: datetime | None
    last_run_at: datetime | None
    runs: int
    pause: job_store.PauseReason | None  # why it is paused (paused jobs only)
    outcome: job_store.LastOutcome | None  # its latest ended run


@get("/jobs", include_in_schema=False)
async def jobs_page(ui: Ui, status: FromQuery[str | None] = None,
                    cursor: FromQuery[str | None] = None) -> Response[str]:
    rows = await job_store.page(ui.conn, ui.tenant_id, status=status or None,
                                after=decode_cursor(cursor), limit=PAGE_SIZE + 1)
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    ids = [j.id for j in rows]
    # two statements for the page, never one a job: outcomes, and why the paused ones are
    outcomes = await job_store.last_outcomes(ui.conn, ui.tenant_id, ids)
    pauses = await job_store.pause_reasons(ui.conn, ui.tenant_id,
                                           [j.id for j in rows if j.status == "paused"])
    lines = [JobLine(id=j.id, name=j.name, task=j.task, pool=j.pool, priority=j.priority,
                     status=j.status, schedule=describe(j.schedule),
                     schedule_raw=schedule_raw(j.schedule), next_run_at=j.next_run_at,
                     last_run_at=j.last_run_at, runs=j.runs_created,
                     pause=pauses.get(j.id) if j.status == "paused" else None,
                     outcome=outcomes.get(j.id))
             for j in rows]
    pager = [(html.url("/ui/jobs", status=status), "first page")] if cursor else []
    if more:
        pager.append((html.url("/ui/jobs", status=status, cursor=encode_cursor(
            rows[-1].created_at, rows[-1].id)), "next page →"))
    bulk = operations.offers([await operations.offer(ui, "pause", {})]) \
        if status in (None, "", "active") else Safe("")
    return ui.render("jobs.html", section="jobs", lines=lines, statuses=STATUSES,
                     chosen=status or "", bulk=bulk, pager=pager, operate=may_operate(ui),
                     create=job_new.may_create(ui), misfires=MISFIRE,
                     csrf=ui.csrf)


def _back(form: dict[str, Any], job_id: uuid.UUID) -> str:
    return "/ui/jobs" if form.get("back") == "list" else f"/ui/jobs/{job_id}"


async def _name(ui: Any, job_id: uuid.UUID) -> str:
    job = await job_store.by_id(ui.conn, ui.tenant_id, job_id)
    return job.name if job is not None else str(job_id)


@post("/jobs/{job_id:uuid}/pause", include_in_schema=False, status_code=303,
      opt=audited("job.pause", "job", "job_id"))
async def pause(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui)
    reason = sent.reason or "paused in the web UI"
    if len(reason) > PAUSE_REASON_MAX:
        raise InvalidInput(f"a pause reason is at most {PAUSE_REASON_MAX} characters",
                           errors=[{"field": "reason", "message": "too long"}])
    await jobs.pause_job(ui.conn, ui.store, tenant_id=ui.tenant_id, job_id=job_id,
                         actor=ui.actor, reason=reason)
    ui.audit.before, ui.audit.after = {"status": "active"}, {"status": "paused",
                                                             "reason": sent.reason}
    actions.done(ui, f"Job paused: {await _name(ui, job_id)} creates no runs until it is "
                     "resumed.")
    return redirect(_back(sent.form, job_id))


@post("/jobs/{job_id:uuid}/resume", include_in_schema=False, status_code=303,
      opt=audited("job.resume", "job", "job_id"))
async def resume(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    sent = await actions.posted(request, ui)
    misfire = sent.form.get("misfire") or None
    if misfire not in (None, "run_once", "catch_up", "skip"):
        raise InvalidInput(f"unknown misfire choice {misfire!r}",
                           errors=[{"field": "misfire", "message": "unknown"}])
    await jobs.resume_job(ui.conn, ui.store, tenant_id=ui.tenant_id, job_id=job_id,
                          actor=ui.actor, misfire=misfire)
    ui.audit.before, ui.audit.after = {"status": "paused"}, {"status": "active",
                                                             "misfire": misfire}
    actions.done(ui, f"Job resumed: {await _name(ui, job_id)} creates runs again from its "
                     "next slot.")
    return redirect(_back(sent.form, job_id))


@post("/jobs/{job_id:uuid}/trigger", include_in_schema=False, status_code=303,
      opt=audited("job.trigger", "job", "job_id"))
async def trigger(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    await actions.posted(request, ui)
    done = await jobs.trigger_now(ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id,
                                  job_id=job_id, actor=ui.actor,
                                  traceparent=tracing.current_traceparent())
    name = await _name(ui, job_id)
    if done.dag_run_id is not None:  # a DAG job: its DAG run
        ui.audit.after = {"dag_run_id": str(done.dag_run_id)}
        actions.done(ui, f"Triggered: a manual DAG run of job {name} was created.")
        return redirect(f"/ui/dag-runs/{done.dag_run_id}")
    ui.audit.after = {"run_id": str(done.run_id)}
    actions.done(ui, f"Triggered: a manual run of job {name} was created.")
    return redirect(f"/ui/runs/{done.run_id}")


# the job pages' routes, mounted with the list's (services.api.ui.routes); /jobs/new before
# /jobs/{id}
ROUTES = [jobs_page, *job_new.ROUTES, *job_page.ROUTES, *job_edit.ROUTES, pause, resume,
          trigger]
