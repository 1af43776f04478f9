"""The jobs and schedules pages: the list (status, schedule, next run in UTC and the schedule's
zone, pause/resume and trigger-now forms), and one job (its upcoming occurrences with local and
UTC times, its skipped occurrences with their reasons, its latest runs, its timeline, and a
backfill previewed slot by slot before it is confirmed). Reads and commands are the ones behind
/v1/jobs, /upcoming, /skips, /events, /pause, /resume, /trigger, /backfill, and the edit form
(PATCH /v1/jobs/{id}): previewed first (its upcoming occurrences before and after), then saved
against the version it was read at."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery, QueryParameter

from ostinato import jobs, schedules
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.domain.events import event_data
from ostinato.eventlog.store import get_blobs, read_stream_page
from ostinato.jobs import edit
from ostinato.schedules.describe import describe
from ostinato.schedules.spec import edited_spec
from ostinato.schedules.zones import load_zone
from ostinato.stores import job_edits
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from ostinato.stores.jobs import JobRow
from ostinato.telemetry import tracing
from ostinato.wire.api import JobUpdateRequest
from services.api.auditing import audited
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui import html, operations
from services.api.ui.html import Safe, badge, fmt, join, link, when
from services.api.ui.params import time_filter
from services.api.ui.runs import runs_table
from services.api.ui.scope import Ui, UiScope, checked_form, redirect

PAGE_SIZE = 50
PAUSE_REASON_MAX = 500  # as POST /v1/jobs/{id}/pause takes it (wire.api)
UPCOMING = 10
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EPSILON = timedelta(microseconds=1)  # as GET /v1/jobs/{id}/upcoming: the next slot included
MISFIRE = [("", "the schedule's own policy"), ("run_once", "run once for what was missed"),
           ("catch_up", "catch up every missed slot"), ("skip", "skip what was missed")]
STATUSES = [("", "any status"), ("active", "active"), ("paused", "paused"),
            ("completed", "completed"), ("deleted", "deleted")]


def schedule_text(doc: dict[str, Any]) -> Safe:
    zone = doc.get("timezone") or "UTC"
    if doc.get("cron"):
        return fmt("<code>{cron}</code> ({zone})", cron=doc.get("cron"), zone=zone)
    if doc.get("every"):
        return fmt("every {every}", every=doc.get("every"))
    if doc.get("at"):
        try:
            return fmt("once, {at}", at=when(datetime.fromisoformat(doc["at"])))
        except ValueError:
            return fmt("once, {at}", at=doc["at"])
    return fmt("{kind}", kind=doc.get("kind") or "once")


def zone_of(job: JobRow) -> str:
    return str(job.schedule.get("timezone") or "UTC")


def controls(ui: UiScope, job: JobRow, *, misfire_choice: bool = False,
             back: str | None = None) -> Safe:
    """Pause or resume, and trigger now: POST forms with the session's CSRF token (none for a
    role that may not operate: a viewer's session)."""
    if not operations.may_operate(ui):
        return Safe("")
    fields = {"back": back} if back else None
    buttons = []
    if job.status == "active":  # the reason is shown with the job while it is paused
        buttons.append(html.post_button(
            f"/ui/jobs/{job.id}/pause", "Pause", ui.csrf, fields=fields, extra=fmt(
                '<input name="reason" maxlength="{n}" size="14" placeholder="reason" '
                'aria-label="why pause {name}"> ', n=PAUSE_REASON_MAX, name=job.name)))
    elif job.status == "paused":
        extra = html.select("misfire", MISFIRE, None) if misfire_choice else Safe("")
        buttons.append(html.post_button(f"/ui/jobs/{job.id}/resume", "Resume", ui.csrf,
                                        fields=fields, extra=extra))
    if job.status != "deleted":
        buttons.append(html.post_button(f"/ui/jobs/{job.id}/trigger", "Trigger now", ui.csrf))
    return join(buttons, " ")


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
    controls: Safe


def schedule_raw(doc: dict[str, Any]) -> str:
    """The schedule as written: the expression and zone, the interval, or the instant."""
    zone = doc.get("timezone") or "UTC"
    if doc.get("cron"):
        return f"cron {doc['cron']} ({zone})"
    if doc.get("every"):
        return f"every {doc['every']}"
    return f"at {doc.get('at')}" if doc.get("at") else str(doc.get("kind") or "once")


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
                     outcome=outcomes.get(j.id), controls=controls(ui, j, back="list"))
             for j in rows]
    pager = [(html.url("/ui/jobs", status=status), "first page")] if cursor else []
    if more:
        pager.append((html.url("/ui/jobs", status=status, cursor=encode_cursor(
            rows[-1].created_at, rows[-1].id)), "next page →"))
    bulk = operations.offers([await operations.offer(ui, "pause", {})]) \
        if status in (None, "", "active") else Safe("")
    return ui.render("jobs.html", section="jobs", lines=lines, statuses=STATUSES,
                     chosen=status or "", bulk=bulk, pager=pager)


async def _job(ui: UiScope, job_id: uuid.UUID) -> JobRow:
    job = await job_store.by_id(ui.conn, ui.tenant_id, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    return job


@get("/jobs/{job_id:uuid}", include_in_schema=False)
async def job_page(job_id: FromPath[uuid.UUID], ui: Ui) -> Response[str]:
    job = await _job(ui, job_id)
    zone = zone_of(job)
    payloads = await get_blobs(ui.conn, [job.payload_ref], ui.tenant_id)
    paused = job.status == "paused"
    pause = (await job_store.pause_reasons(ui.conn, ui.tenant_id, [job.id])).get(job.id) \
        if paused else None
    info = html.kv([
        ("status", badge(job.status)), ("task", job.task),
        ("schedule", fmt("{words}<br><span class=\"muted\">{raw}</span>",
                         words=describe(job.schedule), raw=schedule_text(job.schedule))),
        ("time zone", zone),
        ("DST policy", f"gap: {job.schedule.get('dst_gap')}, repeated hour: "
                       f"{job.schedule.get('dst_fold')}"),
        ("misfire", job.schedule.get("misfire")), ("overlap", job.overlap),
        ("calendar", job.calendar), ("pool / class", f"{job.pool} / {job.priority}"),
        ("next run", Safe('<span class="muted">none while paused</span>') if paused
         else when(job.next_run_at, zone)), ("last run", when(job.last_run_at, zone)),
        ("runs created", job.runs_created), ("consecutive failures", job.consecutive_failures),
        ("paused at", when(job.paused_at, zone) if job.paused_at and paused else None),
        ("paused because", fmt("{auto}{reason} <span class=\"muted\">(by {actor})</span>",
                               auto="automatically: " if pause.auto else "",
                               reason=pause.reason or "no reason given", actor=pause.actor)
         if pause else None),
        ("payload", html.pre_json(payloads.get(job.payload_ref))),
    ])
    upcoming: list[list[Any]] = []
    if job.status in ("active", "paused") and job.next_slot is not None:
        s = schedules.from_document(job.schedule)
        for slot, due in schedules.preview(s, job.id, job.next_slot - EPSILON, UPCOMING):
            upcoming.append([slot.astimezone(s.tz).isoformat(), when(slot), when(due)])
    skips = await job_store.skips_page(ui.conn, ui.tenant_id, job.id,
                                       _EPOCH, 100)
    recent = await run_store.page(ui.conn, ui.tenant_id, job_id=job.id, state=None,
                                  after=(None, None), limit=10)
    events = await read_stream_page(ui.conn, job.id, ui.tenant_id, 0, 200)
    body = join([
        fmt('<div class="actions">{c}</div>', c=controls(ui, job, misfire_choice=True)),
        fmt("<section><h2>Job</h2>{i}</section>", i=info),
        fmt("<section><h2>Upcoming occurrences</h2><p class=\"muted\">Local times in {zone}; "
            "the due instant adds the schedule's jitter.</p>{t}</section>", zone=zone,
            t=html.table([f"local ({zone})", "slot (UTC)", "due (UTC)"], upcoming,
                         "No upcoming occurrences.", "upcoming")),
        fmt("<section><h2>Skipped occurrences</h2>{t}</section>", t=html.table(
            ["first slot", "last slot", "slots", "reason"],
            [[when(k.first_slot, zone), when(k.last_slot, zone), k.slots, k.reason]
             for k in skips], "Nothing was skipped.", "skips")),
        edit_form(ui, job, await job_edits.definition_version(ui.conn, job.id),
                  payloads.get(job.payload_ref)),
        backfill_form(ui, job),
        fmt("<section><h2>Latest runs</h2>{t}<p>{more}</p></section>",
            t=await runs_table(ui, recent, "No runs yet."),
            more=link(html.url("/ui/runs", job_id=job.id), "all runs of this job →")),
        fmt("<section><h2>Timeline (event log)</h2>{t}</section>", t=html.table(
            ["version", "event", "occurred", "actor", "data"],
            [[r.version, r.type, when(r.occurred_at), r.actor,
              html.pre_json(event_data(r.event))] for r in events], "No events.",
            "events")),
    ])
    return ui.page(f"Job {job.name}", body, "jobs")


def backfill_form(ui: UiScope, job: JobRow, start: str = "", end: str = "") -> Safe:
    """From/to (UTC) and 'Preview': the slots are listed before anything is created."""
    if job.status == "deleted" or not roles.may(ui.session.role, roles.OPERATE):
        return Safe("")
    return fmt('<section><h2>Backfill</h2><form method="get" action="/ui/jobs/{id}/backfill" '
               'class="filters" id="backfill"><label>from (UTC) <input type="datetime-local" '
               'step="1" name="from" value="{start}" required></label> <label>to (UTC, '
               'exclusive) <input type="datetime-local" step="1" name="to" value="{end}" '
               'required></label> <button type="submit">Preview</button></form></section>',
               id=job.id, start=start, end=end)


def _range(start: str | None, end: str | None) -> tuple[datetime, datetime]:
    since, until = time_filter("from", start), time_filter("to", end)
    if since is None or until is None:
        raise InvalidInput("a backfill needs from and to", errors=[
            {"field": "from" if since is None else "to", "message": "missing"}])
    return since, until


def _local_input(at: datetime) -> str:
    return at.astimezone(UTC).replace(tzinfo=None).isoformat()


@get("/jobs/{job_id:uuid}/backfill", include_in_schema=False)
async def backfill_preview(job_id: FromPath[uuid.UUID], ui: Ui,
                           start: Annotated[str | None, QueryParameter(name="from")] = None,
                           end: Annotated[str | None, QueryParameter(name="to")] = None,
                           ) -> Response[str]:
    """The dry run of POST /v1/jobs/{id}/backfill: every slot and what a backfill would do
    with it; changes nothing. The confirm button carries the same range."""
    job = await _job(ui, job_id)
    since, until = _range(start, end)
    plan = await jobs.backfill(ui.conn, ui.store, tenant_id=ui.tenant_id, job_id=job_id,
                               start=since, end=until, actor=ui.actor, dry_run=True)
    tz = load_zone(plan.timezone)
    rows = [[s.slot.astimezone(tz).isoformat(), when(s.slot), s.action, s.recorded_skip or ""]
            for s in plan.slots]
    n = plan.runs_created
    confirm = html.post_button(
        f"/ui/jobs/{job_id}/backfill", f"Backfill {n} slot{'' if n == 1 else 's'}", ui.csrf,
        fields={"from": since.isoformat(), "to": until.isoformat()}
    ) if n and roles.may(ui.session.role, roles.OPERATE) else Safe(
        '<p class="muted">Nothing to backfill: every slot has a run.</p>' if not n else "")
    body = join([
        fmt('<p>{link}</p>', link=link(f"/ui/jobs/{job_id}", f"← job {job.name}")),
        backfill_form(ui, job, _local_input(since), _local_input(until)),
        fmt('<section><h2>Slots in [{a}, {b})</h2><p class="muted">Dry run: nothing was '
            'changed. {n} of {total} slots would get a run; local times in {zone}.</p>{t}'
            '<div class="actions">{confirm}</div></section>', a=when(since), b=when(until), n=n,
            total=len(plan.slots), zone=plan.timezone, confirm=confirm, t=html.table(
                [f"local ({plan.timezone})", "slot (UTC)", "action", "recorded skip"], rows,
                "No slots in this range.", "backfill-slots")),
    ])
    return ui.page(f"Backfill {job.name}", body, "jobs")


@post("/jobs/{job_id:uuid}/backfill", include_in_schema=False, status_code=303,
      opt=audited("job.backfill", "job", "job_id"))
async def backfill(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    form = await checked_form(request, ui)
    since, until = _range(form.get("from"), form.get("to"))
    done = await jobs.backfill(ui.conn, ui.store, tenant_id=ui.tenant_id, job_id=job_id,
                               start=since, end=until, actor=ui.actor)
    ui.audit.after = {"start": done.start, "end": done.end, "runs_created": done.runs_created}
    ui.session.flash = (f"Backfill: {done.runs_created} runs created, {done.slots_with_runs} "
                        f"slots already had runs, {done.slots_skipped} skipped.")
    return redirect(f"/ui/jobs/{job_id}")


def _back(form: dict[str, Any], job_id: uuid.UUID) -> str:
    return "/ui/jobs" if form.get("back") == "list" else f"/ui/jobs/{job_id}"


@post("/jobs/{job_id:uuid}/pause", include_in_schema=False, status_code=303,
      opt=audited("job.pause", "job", "job_id"))
async def pause(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    form = await checked_form(request, ui)
    reason = str(form.get("reason") or "").strip() or "paused in the web UI"
    if len(reason) > PAUSE_REASON_MAX:
        raise InvalidInput(f"a pause reason is at most {PAUSE_REASON_MAX} characters",
                           errors=[{"field": "reason", "message": "too long"}])
    await jobs.pause_job(ui.conn, ui.store, tenant_id=ui.tenant_id, job_id=job_id,
                         actor=ui.actor, reason=reason)
    ui.session.flash = "Job paused."
    return redirect(_back(form, job_id))


@post("/jobs/{job_id:uuid}/resume", include_in_schema=False, status_code=303,
      opt=audited("job.resume", "job", "job_id"))
async def resume(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    form = await checked_form(request, ui)
    misfire = form.get("misfire") or None
    if misfire not in (None, "run_once", "catch_up", "skip"):
        raise InvalidInput(f"unknown misfire choice {misfire!r}",
                           errors=[{"field": "misfire", "message": "unknown"}])
    await jobs.resume_job(ui.conn, ui.store, tenant_id=ui.tenant_id, job_id=job_id,
                          actor=ui.actor, misfire=misfire)
    ui.session.flash = "Job resumed."
    return redirect(_back(form, job_id))


@post("/jobs/{job_id:uuid}/trigger", include_in_schema=False, status_code=303,
      opt=audited("job.trigger", "job", "job_id"))
async def trigger(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    await checked_form(request, ui)
    done = await jobs.trigger_now(ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id,
                                  job_id=job_id, actor=ui.actor,
                                  traceparent=tracing.current_traceparent())
    if done.dag_run_id is not None:  # a DAG job: its DAG run
        ui.audit.after = {"dag_run_id": str(done.dag_run_id)}
        ui.session.flash = "Triggered: a manual DAG run was created."
        return redirect(f"/ui/dag-runs/{done.dag_run_id}")
    ui.audit.after = {"run_id": str(done.run_id)}
    ui.session.flash = "Triggered: a manual run was created."
    return redirect(f"/ui/runs/{done.run_id}")


# The edit form's fields: (name, label, the job's current value as text)
def _edit_values(job: JobRow, payload: Any) -> list[tuple[str, str, str]]:
    d = job.schedule
    text = msgspec.json.encode(payload).decode() if payload is not None else ""
    retry_text = msgspec.json.encode(job.retry_policy).decode() if job.retry_policy else ""
    return [("cron", "cron", d.get("cron") or ""), ("every", "every", d.get("every") or ""),
            ("at", "at (RFC 3339)", d.get("at") or ""),
            ("timezone", "time zone", d.get("timezone") or "UTC"),
            ("misfire", "misfire", d.get("misfire") or ""), ("pool", "pool", job.pool),
            ("priority", "class", job.priority),
            ("timeout", "timeout", _duration(job.timeout_seconds)),
            ("queue_wait_timeout", "queue wait", _duration(job.queue_wait_seconds)),
            ("on_queue_wait", "after the wait", job.on_queue_wait or ""),
            ("concurrency_key", "concurrency key", job.concurrency_key or ""),
            ("resource", "resource", job.resource or ""),
            ("complete_within", "complete within", _duration(job.complete_within_seconds)),
            ("max_staleness", "max staleness", _duration(job.max_staleness_seconds)),
            ("owner", "owner", job.owner or ""),
            ("retry", "retry (JSON; blank: the pool's)", retry_text),
            ("payload", "payload (JSON)", text)]


def _duration(seconds: float | None) -> str:
    return schedules.format_duration(timedelta(seconds=seconds)) if seconds else ""


def edit_form(ui: UiScope, job: JobRow, version: int, payload: Any,
              given: dict[str, Any] | None = None) -> Safe:
    """The job's editable settings, filled with its current values (or those just sent), and
    'Preview': the change is answered before it is made (PATCH with dry_run)."""
    if job.status == "deleted" or not roles.may(ui.session.role, roles.OPERATE):
        return Safe("")
    given = given or {}
    fields = [fmt('<label>{label} <input name="{name}" value="{value}" size="{size}"></label>',
                  label=label, name=name, value=given.get(name, value),
                  size=60 if name in ("payload", "retry") else 16)
              for name, label, value in _edit_values(job, payload)]
    checked = Safe(" checked") if given.get("apply_to_scheduled") else Safe("")
    return fmt('<section><h2>Edit</h2><form method="post" action="/ui/jobs/{id}/edit" '
               'class="filters" id="edit">{csrf}{version}{fields} <label>reason <input '
               'name="reason" value="{reason}"></label> <label><input type="checkbox" '
               'name="apply_to_scheduled" value="1"{checked}> runs not yet dispatched too'
               '</label> <button type="submit" name="do" value="preview">Preview</button>'
               '</form></section>', id=job.id, csrf=html.hidden("_csrf", ui.csrf),
               version=html.hidden("version", given.get("version", version)),
               fields=join(fields, " "), reason=given.get("reason", ""), checked=checked)


_CLEARABLE = ("timeout", "queue_wait_timeout", "concurrency_key", "resource",
              "complete_within", "max_staleness", "owner")


def _patch_from(form: dict[str, Any], job: JobRow, payload: Any) -> JobUpdateRequest:
    """The form's changes as a PATCH body: a field still holding the job's value is left out;
    the schedule fields are merged into the job's schedule as read."""
    current = {name: value for name, _, value in _edit_values(job, payload)}
    changed = {k: (form.get(k) or "").strip() for k in current
               if k in form and (form.get(k) or "").strip() != current[k]}
    body: dict[str, Any] = {}
    schedule = {k: changed.get(k) or None for k in ("cron", "every", "at", "timezone",
                                                     "misfire") if k in changed}
    if schedule:
        body["schedule"] = edited_spec(job.schedule, schedule)
    for k in ("pool", "priority", "on_queue_wait"):  # blank keeps these
        if changed.get(k):
            body[k] = changed[k]
    for k in _CLEARABLE:  # blank clears
        if k in changed:
            body[k] = changed[k] or None
    for k in ("payload", "retry"):  # JSON; a blank retry is the pool's default policy
        if k in changed:
            try:
                body[k] = msgspec.json.decode(changed[k] or "null")
            except msgspec.DecodeError as exc:
                raise InvalidInput(f"{k} is not JSON", errors=[
                    {"field": k, "message": str(exc)}]) from None
    if form.get("reason"):
        body["reason"] = form["reason"]
    body["apply_to_scheduled"] = bool(form.get("apply_to_scheduled"))
    try:
        return msgspec.convert(body, JobUpdateRequest)
    except msgspec.ValidationError as exc:
        raise InvalidInput(str(exc), errors=[{"field": "", "message": str(exc)}]) from None


@post("/jobs/{job_id:uuid}/edit", include_in_schema=False, status_code=200,
      opt=audited("job.update", "job", "job_id"))
async def edit_job(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    """'Preview' answers the dry run (upcoming occurrences before and after) with a 'Save'
    button carrying the same form; 'Save' edits the version the form was read at (a 412 when
    someone edited the job since)."""
    form = await checked_form(request, ui)
    job = await _job(ui, job_id)
    payload = (await get_blobs(ui.conn, [job.payload_ref], ui.tenant_id)).get(job.payload_ref)
    patch = _patch_from(form, job, payload)
    settings = ui.settings
    save = form.get("do") == "save"
    done = await edit.update_job(
        ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id, job_id=job_id, patch=patch,
        actor=ui.actor, pools=settings.pool_names, classes=[c.name for c in settings.classes],
        max_payload_bytes=settings.max_payload_bytes, pool_retry=settings.pool_retry,
        if_match=edit.parse_if_match(form.get("version")), dry_run=not save)
    if save:
        ui.audit.after = {"changed": done.changed, "version": done.version,
                          "reason": patch.reason, "runs_amended": done.runs_amended}
        ui.session.flash = (f"Job edited: {', '.join(done.changed) or 'nothing changed'} "
                            f"(version {done.version}).")
        return redirect(f"/ui/jobs/{job_id}")
    ui.audit.detail = f"dry run: would change {', '.join(done.changed) or 'nothing'}"
    zone = zone_of(job)

    def rows(j: JobRow) -> list[list[Any]]:
        if j.status not in ("active", "paused") or j.next_slot is None:
            return []
        s = schedules.from_document(j.schedule)
        return [[slot.astimezone(s.tz).isoformat(), when(slot)]
                for slot, _ in schedules.preview(s, j.id, j.next_slot - EPSILON, UPCOMING)]

    fields = {k: v for k, v in form.items() if k not in ("_csrf", "do")}
    save_button = html.post_button(f"/ui/jobs/{job_id}/edit", "Save", ui.csrf,
                                   fields={**fields, "do": "save"}) if done.changed else Safe(
        '<p class="muted">Nothing to change: these are the job\'s settings.</p>')
    after_zone = str(done.after.schedule.get("timezone") or "UTC")
    body = join([
        fmt('<p>{link}</p>', link=link(f"/ui/jobs/{job_id}", f"← job {job.name}")),
        fmt('<section><h2>Preview</h2><p class="muted">Dry run: nothing was changed. Would '
            'change: {changed}{switch}. Runs already created keep their settings{apply}.</p>'
            '<div class="actions">{save}</div></section>',
            changed=", ".join(done.changed) or "nothing",
            switch=fmt("; the new schedule counts from {at}", at=when(done.switch_at, zone))
            if done.switch_at else Safe(""),
            apply=Safe(", except those not yet dispatched") if patch.apply_to_scheduled
            else Safe(""), save=save_button),
        fmt("<section><h2>Upcoming before</h2>{t}</section>", t=html.table(
            [f"local ({zone})", "slot (UTC)"], rows(done.before), "None.", "upcoming-before")),
        fmt("<section><h2>Upcoming after</h2>{t}</section>", t=html.table(
            [f"local ({after_zone})", "slot (UTC)"], rows(done.after), "None.",
            "upcoming-after")),
        edit_form(ui, job, done.version_before, payload, given=fields),
    ])
    return ui.page(f"Edit {job.name}", body, "jobs")


ROUTES = [jobs_page, job_page, pause, resume, trigger, backfill_preview, backfill, edit_job]
