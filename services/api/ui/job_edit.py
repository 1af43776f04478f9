"""Edit a job from its page (PATCH /v1/jobs/{id}): the form filled with its settings, 'Preview'
answers the dry run (what would change, where a new schedule takes over, the upcoming
occurrences before and after, with the zone's clock changes) and changes nothing; 'Save' edits
the version the form was read at (a 412 when someone edited the job since), audited
`job.update` with its reason."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.params import FromPath

from ostinato import schedules
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput, NotFound
from ostinato.eventlog.store import get_blobs
from ostinato.jobs import edit
from ostinato.schedules.spec import edited_spec
from ostinato.stores import jobs as job_store
from ostinato.stores.jobs import JobRow
from ostinato.wire.api import JobUpdateRequest
from services.api.auditing import audited
from services.api.ui import actions
from services.api.ui.job_schedule import upcoming, zone_of
from services.api.ui.scope import Ui, UiScope, redirect


@dataclass(frozen=True, slots=True)
class EditForm:
    """The edit form (job_macros.edit_form): (name, label, value) per field, the version it
    was read at, and what was typed beside them."""

    job_id: uuid.UUID
    version: int
    fields: list[tuple[str, str, str]]
    reason: str = ""
    apply_to_scheduled: bool = False


async def job_of(ui: UiScope, job_id: uuid.UUID) -> JobRow:
    job = await job_store.by_id(ui.conn, ui.tenant_id, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    return job


def _duration(seconds: float | None) -> str:
    return schedules.format_duration(timedelta(seconds=seconds)) if seconds else ""


def edit_values(job: JobRow, payload: Any) -> list[tuple[str, str, str]]:
    """The edit form's fields: (name, label, the job's current value as text)."""
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


def edit_form(ui: UiScope, job: JobRow, version: int, payload: Any,
              given: dict[str, Any] | None = None) -> EditForm | None:
    """The form filled with the job's values (or those just sent); None where the session may
    not operate or the job is deleted."""
    if job.status == "deleted" or not roles.may(ui.session.role, roles.OPERATE):
        return None
    given = given or {}
    return EditForm(job_id=job.id, version=int(given.get("version") or version),
                    fields=[(name, label, str(given.get(name, value)))
                            for name, label, value in edit_values(job, payload)],
                    reason=str(given.get("reason") or ""),
                    apply_to_scheduled=bool(given.get("apply_to_scheduled")))


_CLEARABLE = ("timeout", "queue_wait_timeout", "concurrency_key", "resource",
              "complete_within", "max_staleness", "owner")


def patch_from(form: dict[str, Any], job: JobRow, payload: Any,
               reason: str | None) -> JobUpdateRequest:
    """The form's changes as a PATCH body: a field still holding the job's value is left out;
    the schedule fields are merged into the job's schedule as read."""
    current = {name: value for name, _, value in edit_values(job, payload)}
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
    if reason:
        body["reason"] = reason
    body["apply_to_scheduled"] = bool(form.get("apply_to_scheduled"))
    try:
        return msgspec.convert(body, JobUpdateRequest)
    except msgspec.ValidationError as exc:
        raise InvalidInput(str(exc), errors=[{"field": "", "message": str(exc)}]) from None


@post("/jobs/{job_id:uuid}/edit", include_in_schema=False, status_code=200,
      opt=audited("job.update", "job", "job_id"))
async def edit_job(request: Request, job_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    """'Preview' answers the dry run with a 'Save' button carrying the same form; 'Save' edits
    the version the form was read at (a 412 when someone edited the job since)."""
    sent = await actions.posted(request, ui)
    form = sent.form
    job = await job_of(ui, job_id)
    payload = (await get_blobs(ui.conn, [job.payload_ref], ui.tenant_id)).get(job.payload_ref)
    patch = patch_from(form, job, payload, sent.reason)
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
        actions.done(ui, f"Job {job.name} edited: {', '.join(done.changed) or 'nothing changed'}"
                         f" (version {done.version}).")
        return redirect(f"/ui/jobs/{job_id}")
    ui.audit.detail = f"dry run: would change {', '.join(done.changed) or 'nothing'}"
    fields = {k: v for k, v in form.items() if k not in ("_csrf", "do")}
    return ui.render(
        "job_edit.html", section="jobs", job=job, changed=done.changed,
        switch_at=done.switch_at, apply=patch.apply_to_scheduled,
        save_fields={**fields, "do": "save"}, reason=sent.reason,
        zone=zone_of(job), after_zone=zone_of(done.after), before=upcoming(done.before),
        after=upcoming(done.after), edit=edit_form(ui, job, done.version_before, payload,
                                                   given=fields),
        csrf=ui.csrf)


ROUTES = [edit_job]
