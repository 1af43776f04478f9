"""Create a job from the web UI (issue 41 item 3): name, task, pool, class, payload (JSON) and
a schedule (none: once now; cron in a zone; every; once at an instant) as POST /v1/jobs takes
them; 'Preview' shows the next occurrences (local and UTC, with the zone's clock changes) or
every problem, and changes nothing; 'Create' saves only what was previewed, through the command
POST /v1/jobs uses, audited `job.create` as it is."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import msgspec
from litestar import Request, Response, get, post

from ostinato import jobs, schedules
from ostinato.domain import roles
from ostinato.domain.errors import InvalidInput
from ostinato.telemetry import tracing
from ostinato.wire.api import JobRequest
from services.api.auditing import audited
from services.api.job_control import PREVIEW_JOB_ID, checked_schedule
from services.api.routes import definition
from services.api.ui import actions
from services.api.ui.job_schedule import Occurrence, occurrences
from services.api.ui.scope import Ui, UiScope, checked_form, redirect

KINDS = [("now", "none: run once, now"), ("cron", "cron, in a time zone"),
         ("every", "every (a fixed interval)"), ("at", "once, at an instant")]
DST_GAP = [("shift_forward", "run at the first instant after the gap"), ("skip", "skip it")]
DST_FOLD = [("auto", "auto (both passes when it fires in several hours a day, else the first)"),
            ("first", "the first pass"), ("second", "the second pass"), ("both", "both passes")]
MISFIRE = [("run_once", "run the latest once"), ("catch_up", "catch up every missed one"),
           ("skip", "skip what was missed")]
FIELDS = ("name", "task", "pool", "priority", "payload", "kind", "cron", "every", "at",
          "timezone", "dst_gap", "dst_fold", "misfire", "reason")
DEFAULTS = {"kind": "cron", "cron": "30 2 * * *", "timezone": "UTC", "payload": "{}",
            "dst_gap": "shift_forward", "dst_fold": "auto", "misfire": "run_once"}
REASON_MAX = actions.MAX_REASON_CHARS


def may_create(ui: UiScope) -> bool:
    return roles.may(ui.session.role, roles.SUBMIT)


def _schedule(form: dict[str, str]) -> dict[str, Any] | None:
    kind = form.get("kind") or "now"
    if kind == "now":
        return None
    spec: dict[str, Any] = {kind: form.get(kind) or ""}
    if kind == "cron":
        spec.update(timezone=form.get("timezone") or "UTC", dst_gap=form.get("dst_gap"),
                    dst_fold=form.get("dst_fold"))
    spec["misfire"] = form.get("misfire")
    return {k: v for k, v in spec.items() if v is not None}


def _request(form: dict[str, str]) -> tuple[JobRequest | None, list[dict[str, str]]]:
    """The form as the body of POST /v1/jobs, or its problems (field, message)."""
    errors: list[dict[str, str]] = []
    if (form.get("kind") or "now") not in {k for k, _ in KINDS}:
        errors.append({"field": "kind", "message": "one of now, cron, every, at"})
    try:
        payload = msgspec.json.decode(form.get("payload") or "null")
    except msgspec.DecodeError as exc:
        errors.append({"field": "payload", "message": f"not JSON: {exc}"})
        payload = None
    if len(form.get("reason") or "") > REASON_MAX:
        errors.append({"field": "reason", "message": f"at most {REASON_MAX} characters"})
    body = {"name": form.get("name") or "", "task": form.get("task") or None,
            "pool": form.get("pool") or "default", "priority": form.get("priority") or "default",
            "payload": payload, "schedule": _schedule(form)}
    try:
        request = msgspec.convert(body, JobRequest)
    except msgspec.ValidationError as exc:
        where = str(exc).rpartition("$.")[2].rstrip("`") or "form"
        return None, [*errors, {"field": where, "message": str(exc)}]
    return (request if not errors else None), errors


def fingerprint(request: JobRequest) -> str:
    """What a preview showed: Create saves a form only with the same fingerprint."""
    return hashlib.sha256(msgspec.json.encode(request)).hexdigest()


async def _checked(ui: UiScope, form: dict[str, str]
                   ) -> tuple[JobRequest | None, list[Occurrence], list[dict[str, str]]]:
    """The request and its next occurrences, with the checks POST /v1/jobs and POST
    /v1/schedules/preview make, or the problems."""
    request, errors = _request(form)
    if request is None:
        return None, [], errors
    if request.pool not in ui.settings.pool_names:
        errors.append({"field": "pool", "message": f"unknown pool {request.pool!r}"})
    if request.priority not in [c.name for c in ui.settings.classes]:
        errors.append({"field": "priority", "message": f"unknown class {request.priority!r}"})
    try:
        s = await checked_schedule(ui.conn, ui.tenant_id, request.schedule, ui.clock.now()) \
            if request.schedule is not None else None
    except InvalidInput as exc:
        return None, [], [*errors, *exc.errors]
    if errors:
        return None, [], errors
    if s is None:
        return request, [], []
    return request, occurrences(s, PREVIEW_JOB_ID, schedules.next_occurrence(s, None)), []


def _form_values(form: dict[str, str] | None) -> dict[str, str]:
    given = {k: str(v) for k, v in (form or {}).items() if k in FIELDS}
    return {k: given.get(k, DEFAULTS.get(k, "")) for k in FIELDS}


async def _page(ui: UiScope, form: dict[str, str] | None, *, check: bool, status: int = 200,
                stale: bool = False, refused: list[dict[str, str]] | None = None
                ) -> Response[str]:
    """The form; with `check`, the preview of its values (or their problems); `refused`: the
    problems the command itself answered."""
    values = _form_values(form)
    request, upcoming, errors = await _checked(ui, values) if check else (None, [], [])
    errors = refused or errors
    if refused:
        request, upcoming = None, []
    return ui.render(
        "job_new.html", section="jobs", status=422 if errors else status, values=values,
        errors=errors, stale=stale, previewed=request is not None, upcoming=upcoming,
        fingerprint=fingerprint(request) if request is not None else "",
        nonce=(form or {}).get("nonce") or secrets.token_hex(8), kinds=KINDS,
        dst_gaps=DST_GAP, dst_folds=DST_FOLD, misfires=MISFIRE,
        pools=[(p, p) for p in ui.settings.pool_names],
        classes=[(c.name, c.name) for c in ui.settings.classes],
        zone=values["timezone"] if values["kind"] == "cron" else "UTC",
        allowed=may_create(ui), refusal=roles.refusal(ui.session.role, roles.SUBMIT),
        reason_max=REASON_MAX, csrf=ui.csrf)


@get("/jobs/new", include_in_schema=False)
async def new_form(ui: Ui) -> Response[str]:
    return await _page(ui, None, check=False)


@post("/jobs/preview", include_in_schema=False, status_code=200)
async def preview(request: Request, ui: Ui) -> Response[str]:
    """The next occurrences of what was filled in, or its problems: nothing saved."""
    form = await checked_form(request, ui, roles.SUBMIT)
    return await _page(ui, form, check=True)


@post("/jobs/new", include_in_schema=False, status_code=303,
      opt=audited("job.create", "job", action=roles.SUBMIT))
async def create(request: Request, ui: Ui) -> Response[Any]:
    """Save what was previewed: a form changed since its preview is shown again instead. The
    same preview sent twice (a double click) creates one job (its idempotency key)."""
    sent = await actions.posted(request, ui, action=roles.SUBMIT)
    form = sent.form
    job_request, _, errors = await _checked(ui, _form_values(form))
    if job_request is None or fingerprint(job_request) != form.get("previewed"):
        ui.audit.status = 422 if errors else 409
        ui.audit.detail = "not created: " + ("; ".join(e["message"] for e in errors)
                                             or "changed since its preview")
        return await _page(ui, form, check=True, status=409, stale=not errors)
    nonce = str(form.get("nonce") or "")[:32]
    job_request.idempotency_key = f"ui:{fingerprint(job_request)[:32]}:{nonce}"
    settings = ui.settings
    try:
        async with ui.conn.transaction():  # a refusal leaves nothing behind
            job, created = await jobs.submit_job(
                ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id, request=job_request,
                pools=settings.pool_names, pool_retry=settings.pool_retry,
                classes=[c.name for c in settings.classes],
                max_payload_bytes=settings.max_payload_bytes, actor=ui.actor,
                traceparent=tracing.current_traceparent())
    except InvalidInput as exc:
        ui.audit.status, ui.audit.detail = 422, f"not created: {exc.detail}"
        return await _page(ui, form, check=False, refused=exc.errors or [
            {"field": "", "message": exc.detail}])
    ui.audit.target_id, ui.audit.status = str(job.id), 303
    ui.audit.after = {**definition(job), "reason": sent.reason} if created else None
    actions.done(ui, f"Job {job.name} created." if created else
                 f"Job {job.name} was already created from this preview.")
    return redirect(f"/ui/jobs/{job.id}")


ROUTES = [new_form, preview, create]
