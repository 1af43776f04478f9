"""Every API call as data: method, path, query, JSON body and the type its answer decodes to.

Written once here and executed by both clients (`Client` with httpx.Client, `AsyncClient` with
httpx.AsyncClient), so the sync and async surfaces cannot drift apart: their methods are
one-line wrappers. A `Paged` is a call whose answer names the next page (a cursor, or the
position after the last item), which the clients follow lazily as an iterator.

A call that creates something and takes a key that makes sending it again harmless (a job's
`idempotency_key`, a trigger's or a replay's `request_key`, a signal's `Idempotency-Key`) gets
one made up here when the caller gave none, and is marked `idempotent`: the clients retry it
after a 503 or a lost connection (`transport.retry_safe`) without creating twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import msgspec

from ostinato.wire import api as m

T = TypeVar("T")
P = TypeVar("P")
Id = uuid.UUID | str
_UNSET: Any = msgspec.UNSET


class CursorPage(msgspec.Struct, Generic[T], kw_only=True):
    """GET /v1/jobs and /v1/runs: the API's `Page`, with its items typed."""

    items: list[T]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    path: str
    answer: Any  # the type the body decodes to; None: no body is expected (204)
    params: Mapping[str, Any] | None = None
    body: bytes | None = None
    headers: Mapping[str, str] | None = None
    idempotent: bool = False  # sending it again changes nothing more: safe to retry
    timeout: float | None = None  # seconds for this call's answer (a long poll's), not the client's


@dataclass(frozen=True, slots=True)
class Paged(Generic[T, P]):
    first: Call[P]
    items: Callable[[P], Sequence[T]]
    follow: Callable[[P], Mapping[str, Any] | None]  # the next page's query update; None: last

    def next_call(self, page: P) -> Call[P] | None:
        update = self.follow(page)
        if update is None:
            return None
        return replace(self.first, params={**(self.first.params or {}), **update})


def query(params: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Query parameters as the API reads them: None dropped, booleans lower case, lists
    repeated, ids and instants as text."""
    out: list[tuple[str, str]] = []
    for key, value in (params or {}).items():
        for v in value if isinstance(value, list | tuple) else [value]:
            if v is None:
                continue
            if isinstance(v, bool):
                out.append((key, "true" if v else "false"))
            elif isinstance(v, datetime | date):
                out.append((key, v.isoformat()))
            else:
                out.append((key, str(v)))
    return out


def _json(value: Any) -> bytes:
    return msgspec.json.encode(value)


def _seg(name: str) -> str:
    return quote(str(name), safe="")


def _body(request: Any, fields: Mapping[str, Any]) -> bytes:
    """A request Struct, or a mapping of its fields, plus keyword overrides, as JSON. Mappings
    are sent as given: the API validates them and answers a problem naming the field."""
    if request is None:
        return _json(dict(fields))
    if isinstance(request, msgspec.Struct):
        return _json(request) if not fields else _json({**msgspec.to_builtins(request),
                                                        **fields})
    return _json({**dict(request), **fields})


def _drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def new_key() -> str:
    """A key for a creating call the caller gave none to, so that its retry cannot create
    twice: unique, and recognisable as the client's own in the job or the audit trail."""
    return f"client:{uuid.uuid4()}"


def _keyed(body: bytes, field: str) -> bytes | None:
    """`body` with `field` set to a new key when it is a JSON object without one; None when it
    is not an object (the API refuses it; not retried)."""
    doc = msgspec.json.decode(body)
    if not isinstance(doc, dict):
        return None
    if doc.get(field) is None:
        doc[field] = new_key()
    return _json(doc)


# Jobs and schedules

def create_job(job: Any, fields: Mapping[str, Any]) -> Call[m.JobView]:
    body = _body(job, fields)
    keyed = _keyed(body, "idempotency_key")
    return Call("POST", "/v1/jobs", m.JobView, body=keyed or body, idempotent=keyed is not None)


def create_jobs(jobs: Sequence[Any]) -> Call[m.JobBatch]:
    """Each job without an `idempotency_key` gets one: sent again, the batch answers the jobs
    it created the first time (`created` false) and creates none."""
    items = [_keyed(_body(job, {}), "idempotency_key") for job in jobs]
    if any(item is None for item in items):  # refused by the API as it is: no retry
        return Call("POST", "/v1/jobs/batch", m.JobBatch, body=_json({"jobs": list(jobs)}))
    body = b'{"jobs":[' + b",".join(item for item in items if item is not None) + b"]}"
    return Call("POST", "/v1/jobs/batch", m.JobBatch, body=body, idempotent=True)


def list_jobs(status: str | None, page_size: int) -> Paged[m.JobView, CursorPage[m.JobView]]:
    first: Call[CursorPage[m.JobView]] = Call(
        "GET", "/v1/jobs", CursorPage[m.JobView], params={"status": status, "limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: {"cursor": p.next_cursor} if p.next_cursor else None)


def get_job(job_id: Id) -> Call[m.JobView]:
    return Call("GET", f"/v1/jobs/{job_id}", m.JobView)


def update_job(job_id: Id, changes: Any, fields: Mapping[str, Any], if_match: int | str | None,
               dry_run: bool) -> Call[m.JobUpdateView]:
    """PATCH the job: a `JobUpdateRequest` or a mapping of its fields, plus keyword fields.
    `if_match`: the version read (an int, or the ETag as given). Retried after a 503 or a lost
    connection only without `if_match` (the same settings again change nothing; with it, a
    retry of an edit that did land would meet its own new version: a 412)."""
    body = _body(changes, {**fields, **({"dry_run": True} if dry_run else {})})
    headers = None
    if if_match is not None:
        tag = str(if_match)
        headers = {"If-Match": tag if tag.startswith(('"', "W/", "*")) else f'"{tag}"'}
    return Call("PATCH", f"/v1/jobs/{job_id}", m.JobUpdateView, body=body, headers=headers,
                idempotent=if_match is None)


def delete_job(job_id: Id) -> Call[None]:
    return Call("DELETE", f"/v1/jobs/{job_id}", None)


def pause_job(job_id: Id, reason: str | None) -> Call[m.JobStatus]:
    body = _json(_drop_none(reason=reason)) if reason else None
    return Call("POST", f"/v1/jobs/{job_id}/pause", m.JobStatus, body=body)


def resume_job(job_id: Id, misfire: str | None) -> Call[m.JobStatus]:
    body = _json({"misfire": misfire}) if misfire else None
    return Call("POST", f"/v1/jobs/{job_id}/resume", m.JobStatus, body=body)


def trigger_job(job_id: Id, request_key: str | None = None) -> Call[m.TriggeredView]:
    body = _json({"request_key": request_key or new_key()})
    return Call("POST", f"/v1/jobs/{job_id}/trigger", m.TriggeredView, body=body,
                idempotent=True)


def backfill_job(job_id: Id, start: datetime, end: datetime,
                 dry_run: bool = False) -> Call[m.BackfillView]:
    return Call("POST", f"/v1/jobs/{job_id}/backfill", m.BackfillView,
                body=_json(m.BackfillRequest(start=start, end=end, dry_run=dry_run)))


def upcoming(job_id: Id, count: int) -> Call[m.UpcomingView]:
    return Call("GET", f"/v1/jobs/{job_id}/upcoming", m.UpcomingView, params={"count": count})


def job_events(job_id: Id, page_size: int) -> Paged[m.EventView, m.JobEventsPage]:
    first: Call[m.JobEventsPage] = Call("GET", f"/v1/jobs/{job_id}/events", m.JobEventsPage,
                                        params={"limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: None if p.next_after is None else {"after": p.next_after})


def job_skips(job_id: Id, page_size: int) -> Paged[m.SkipView, m.SkipsPage]:
    first: Call[m.SkipsPage] = Call("GET", f"/v1/jobs/{job_id}/skips", m.SkipsPage,
                                    params={"limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: None if p.next_after is None else {"after": p.next_after})


def preview(schedule: Any, count: int) -> Call[m.UpcomingView]:
    return Call("POST", "/v1/schedules/preview", m.UpcomingView,
                body=_json({"schedule": schedule, "count": count}))


def put_calendar(name: str, dates: Sequence[date]) -> Call[m.CalendarView]:
    return Call("PUT", f"/v1/calendars/{_seg(name)}", m.CalendarView,
                body=_json({"dates": list(dates)}))


def get_calendar(name: str) -> Call[m.CalendarView]:
    return Call("GET", f"/v1/calendars/{_seg(name)}", m.CalendarView)


def list_calendars() -> Call[m.Calendars]:
    return Call("GET", "/v1/calendars", m.Calendars)


def job_health(job_id: Id, window: str) -> Call[m.JobHealthView]:
    return Call("GET", f"/v1/jobs/{job_id}/health", m.JobHealthView, params={"window": window})


# Alerts, sinks and usage (docs/ALERTS.md)

def put_alert_sink(name: str, sink: m.AlertSinkRequest) -> Call[m.AlertSinkView]:
    return Call("PUT", f"/v1/alert-sinks/{_seg(name)}", m.AlertSinkView, body=_json(sink))


def list_alert_sinks() -> Call[m.AlertSinks]:
    return Call("GET", "/v1/alert-sinks", m.AlertSinks)


def delete_alert_sink(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/alert-sinks/{_seg(name)}", None)


def list_alerts(limit: int) -> Call[m.Alerts]:
    return Call("GET", "/v1/alerts", m.Alerts, params={"limit": limit})


def usage(start: datetime | None, end: datetime | None,
          granularity: str) -> Call[m.UsageView]:
    return Call("GET", "/v1/usage", m.UsageView, params={
        "from": start.isoformat() if start else None, "to": end.isoformat() if end else None,
        "granularity": granularity})


# Runs

def list_runs(job_id: Id | None, state: str | None, page_size: int, priority: str | None = None,
              error_type: str | None = None, where: Sequence[str] | None = None,
              archived: tuple[datetime | None, datetime | None] | None = None,
              task: str | None = None,
              ) -> Paged[m.RunView, CursorPage[m.RunView]]:
    """`archived`: the archived runs that ended in [start, end) as well, after the hot ones."""
    first: Call[CursorPage[m.RunView]] = Call(
        "GET", "/v1/runs", CursorPage[m.RunView],
        params={"job_id": job_id, "state": state, "priority": priority, "task": task,
                "error_type": error_type, "where": list(where or []), "limit": page_size,
                **({"include": "archived", "ended_after": archived[0],
                    "ended_before": archived[1]} if archived else {})})
    return Paged(first, lambda p: p.items,
                 lambda p: {"cursor": p.next_cursor} if p.next_cursor else None)


def get_run(run_id: Id) -> Call[m.RunView]:
    return Call("GET", f"/v1/runs/{run_id}", m.RunView)


# Start and await (GET /v1/runs/{id}/result, a long poll; ostinato.client.handles)

RESULT_SLACK = 15.0  # seconds the HTTP answer may take beyond the long poll's wait


def run_result(run_id: Id, wait: float, job_id: Id | None = None) -> Call[m.RunResult]:
    """The run's answer once it ends, else after `wait` seconds (`done` false)."""
    return Call("GET", f"/v1/runs/{run_id}/result", m.RunResult,
                params={"wait": f"{wait:.3f}".rstrip("0").rstrip("."), "job_id": job_id},
                timeout=wait + RESULT_SLACK)


def start_run(task: str, payload: Any, fields: Mapping[str, Any]) -> Call[m.JobView]:
    """A run of `task` now: a one-off job without a schedule (POST /v1/jobs), whose
    `next_run_id` is the run's id; keyed, so a retry starts one run."""
    return create_job(None, {"name": task, "task": task, "payload": payload, **fields})


def start_workflow(task: str, workflow_id: str, body: Mapping[str, Any]) -> Call[m.WorkflowStarted]:
    """A workflow run under the caller's id (POST /v1/workflows/{task}/{id}/start), or with
    `signal` in `body` signal-with-start; keyed (a new key unless given), so a retry is one
    call."""
    route = "signal-with-start" if "signal" in body else "start"
    keyed = {**body, "idempotency_key": body.get("idempotency_key") or new_key()}
    return Call("POST", f"/v1/workflows/{_seg(task)}/{_seg(workflow_id)}/{route}",
                m.WorkflowStarted, body=_json(keyed), idempotent=True)


class RunShown(m.RunView, kw_only=True):
    """`GET /v1/runs/{id}` read so that an API which does not show runs' payloads (older than
    the pre-deploy check) is told apart from a null payload: `payload` is UNSET then."""

    payload: Any = _UNSET


def get_run_shown(run_id: Id) -> Call[RunShown]:
    return Call("GET", f"/v1/runs/{run_id}", RunShown)


def _timeline(path: str, page_size: int) -> Paged[m.EventView, m.EventsPage]:
    """A run's or a DAG run's timeline, a page at a time after the last version read."""
    first: Call[m.EventsPage] = Call("GET", path, m.EventsPage, params={"limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: None if p.next_after is None else {"after": p.next_after})


def run_events(run_id: Id, page_size: int) -> Paged[m.EventView, m.EventsPage]:
    return _timeline(f"/v1/runs/{run_id}/events", page_size)


def run_logs(run_id: Id) -> Call[m.RunLogs]:
    return Call("GET", f"/v1/runs/{run_id}/logs", m.RunLogs)


def run_steps_page(run_id: Id, after: int | None, limit: int,
                   inline_outputs: bool) -> Call[m.StepsPage]:
    """One page of a run's recorded steps, from position `after + 1` (None: from the first)."""
    return Call("GET", f"/v1/runs/{run_id}/steps", m.StepsPage,
                params={"after": after, "limit": limit,
                        "inline_outputs": inline_outputs or None})


def run_steps(run_id: Id, inline_outputs: bool,
              page_size: int) -> Paged[m.StepView, m.StepsPage]:
    first = run_steps_page(run_id, None, page_size, inline_outputs)
    return Paged(first, lambda p: p.items,
                 lambda p: None if p.next_after is None else {"after": p.next_after})


def run_children(run_id: Id, page_size: int) -> Paged[m.ChildView, m.ChildrenPage]:
    first: Call[m.ChildrenPage] = Call("GET", f"/v1/runs/{run_id}/children", m.ChildrenPage,
                                       params={"limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: None if p.next_after is None else {"after": p.next_after})


def set_aside_steps(run_id: Id,
                    page_size: int) -> Paged[m.SetAsideStepView, m.SetAsideStepsPage]:
    first: Call[m.SetAsideStepsPage] = Call(
        "GET", f"/v1/runs/{run_id}/steps/set-aside", m.SetAsideStepsPage,
        params={"limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: None if p.next_after_version is None else {
                     "after_version": p.next_after_version, "after_seq": p.next_after_seq})


def cancel_run(run_id: Id) -> Call[m.Cancelled]:
    return Call("POST", f"/v1/runs/{run_id}/cancel", m.Cancelled)


def retry_run(run_id: Id, request_key: str | None) -> Call[m.Rerun]:
    body = _json({"request_key": request_key or new_key()})
    return Call("POST", f"/v1/runs/{run_id}/retry", m.Rerun, body=body, idempotent=True)


def signal_run(run_id: Id, name: str, payload: Any, idempotency_key: str | None,
               reason: str | None) -> Call[m.SignalAccepted]:
    headers = {"Idempotency-Key": idempotency_key or new_key()}
    return Call("POST", f"/v1/runs/{run_id}/signals/{_seg(name)}", m.SignalAccepted,
                params={"reason": reason}, body=_json(payload), headers=headers,
                idempotent=True)


def run_state(run_id: Id, name: str | None, wait: float) -> Call[m.RunStateView]:
    """The latest published values (`ctx.set`); with `name` and `wait`: once it is published
    or the run ended, else after `wait` seconds without it."""
    params: dict[str, Any] = {"name": name}
    if name is not None and wait > 0:
        params["wait"] = f"{wait:.3f}".rstrip("0").rstrip(".")
    return Call("GET", f"/v1/runs/{run_id}/state", m.RunStateView, params=params,
                timeout=wait + RESULT_SLACK if wait > 0 else None)


def send_update(run_id: Id, name: str, payload: Any,
                idempotency_key: str | None) -> Call[m.UpdateView]:
    """An update to a running workflow; keyed (one made up if none), so a retry sends one."""
    body = _json({"name": name, "payload": payload,
                  "idempotency_key": idempotency_key or new_key()})
    return Call("POST", f"/v1/runs/{run_id}/updates", m.UpdateView, body=body,
                idempotent=True)


def update_outcome(run_id: Id, update_id: Id, wait: float) -> Call[m.UpdateView]:
    """Where an update stands, once answered (or its run ended), else after `wait` seconds."""
    return Call("GET", f"/v1/runs/{run_id}/updates/{update_id}", m.UpdateView,
                params={"wait": f"{wait:.3f}".rstrip("0").rstrip(".") or "0"},
                timeout=wait + RESULT_SLACK)


def pause_run(run_id: Id, reason: str | None, resume: bool) -> Call[m.RunPaused]:
    verb = "resume" if resume else "pause"
    body = _json({"reason": reason}) if reason else None
    return Call("POST", f"/v1/runs/{run_id}/{verb}", m.RunPaused, body=body)


def hold_run(run_id: Id, reason: str) -> Call[m.RunHoldResult]:
    """Holding a held run changes nothing: safe to send again."""
    return Call("POST", f"/v1/runs/{run_id}/hold", m.RunHoldResult,
                body=_json(m.HoldRequest(reason=reason)), idempotent=True)


def release_run(run_id: Id, reason: str | None) -> Call[m.RunHoldResult]:
    """Releasing a run not held changes nothing: safe to send again."""
    return Call("POST", f"/v1/runs/{run_id}/release", m.RunHoldResult,
                body=_json(m.HoldRequest(reason=reason)), idempotent=True)


def pause_matching(task: str | None, job_id: Id | None, reason: str | None,
                   resume: bool) -> Call[m.PauseChanged]:
    verb = "resume" if resume else "pause"
    return Call("POST", f"/v1/runs/{verb}", m.PauseChanged,
                body=_json(_drop_none(task=task, job_id=job_id, reason=reason)))


def retry_step(run_id: Id, seq: int, reason: str) -> Call[m.InterventionDone]:
    return Call("POST", f"/v1/runs/{run_id}/steps/{seq}/retry", m.InterventionDone,
                body=_json({"reason": reason}))


def skip_step(run_id: Id, seq: int, output: Any, reason: str,
              name: str | None) -> Call[m.InterventionDone]:
    return Call("POST", f"/v1/runs/{run_id}/steps/{seq}/skip", m.InterventionDone,
                body=_json({"reason": reason, "output": output, **_drop_none(name=name)}))


def restart_run(run_id: Id, from_seq: int, reason: str) -> Call[m.InterventionDone]:
    return Call("POST", f"/v1/runs/{run_id}/restart", m.InterventionDone,
                body=_json({"reason": reason, "from_seq": from_seq}))


def succeed_run(run_id: Id, reason: str, output: Any) -> Call[m.InterventionDone]:
    return Call("POST", f"/v1/runs/{run_id}/succeed", m.InterventionDone,
                body=_json({"reason": reason, "output": output}))


def fail_run(run_id: Id, reason: str, error_type: str | None,
             message: str | None) -> Call[m.InterventionDone]:
    return Call("POST", f"/v1/runs/{run_id}/fail", m.InterventionDone, body=_json(
        {"reason": reason, **_drop_none(error_type=error_type, message=message)}))


# Dead letters

def list_dead_letters(filters: Mapping[str, Any],
                      page_size: int) -> Paged[m.DeadLetterView, m.DeadLetterPage]:
    first: Call[m.DeadLetterPage] = Call("GET", "/v1/dead-letters", m.DeadLetterPage,
                                         params={**filters, "limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: {"cursor": p.next_cursor} if p.next_cursor else None)


def get_dead_letter(run_id: Id) -> Call[m.DeadLetterView]:
    return Call("GET", f"/v1/dead-letters/{run_id}", m.DeadLetterView)


def triage(run_id: Id, state: str, comment: str | None) -> Call[m.Triaged]:
    return Call("POST", f"/v1/dead-letters/{run_id}/triage", m.Triaged,
                body=_json({"state": state, **_drop_none(comment=comment)}))


def replay(run_id: Id, payload: Any, request_key: str | None) -> Call[m.Rerun]:
    body: dict[str, Any] = {"request_key": request_key or new_key()}
    if payload is not _UNSET:
        body["payload"] = payload
    return Call("POST", f"/v1/dead-letters/{run_id}/replay", m.Rerun, body=_json(body),
                idempotent=True)


def replay_matching(request_key: str, filters: Mapping[str, Any],
                    limit: int) -> Call[m.BulkReplayed]:
    return Call("POST", "/v1/dead-letters/replay", m.BulkReplayed, body=_json(
        {"request_key": request_key, "limit": limit, **_drop_none(**filters)}), idempotent=True)


# Capacity: pools, workers, tasks, limits; tenants (admin key)

def list_pools() -> Call[m.Pools]:
    return Call("GET", "/v1/pools", m.Pools)


def pause_pool(pool: str, reason: str | None, resume: bool) -> Call[m.PoolPaused]:
    if resume:
        return Call("POST", f"/v1/pools/{_seg(pool)}/resume", m.PoolPaused)
    return Call("POST", f"/v1/pools/{_seg(pool)}/pause", m.PoolPaused,
                body=_json({"reason": reason}) if reason else None)


def list_workers() -> Call[m.Workers]:
    return Call("GET", "/v1/workers", m.Workers)


def list_tasks(task: str | None) -> Call[m.TasksPage]:
    return Call("GET", "/v1/tasks", m.TasksPage, params={"task": task})


def list_limits() -> Call[m.Limits]:
    return Call("GET", "/v1/limits", m.Limits)


def set_limit(scope: str, name: str, limit: m.LimitRequest) -> Call[m.LimitSet]:
    path = {"task": f"/v1/limits/tasks/{_seg(name)}",
            "resource": f"/v1/limits/resources/{_seg(name)}",
            "tenant": f"/v1/tenants/{_seg(name)}/limits"}[scope]
    return Call("PUT", path, m.LimitSet, body=_json(limit))


def get_retention(tenant_id: Id) -> Call[m.RetentionView]:
    return Call("GET", f"/v1/tenants/{tenant_id}/retention", m.RetentionView)


def set_retention(tenant_id: Id, keep: str | int, archive: bool,
                  reason: str | None) -> Call[m.RetentionView]:
    """Setting the same policy again records nothing: safe to send again."""
    return Call("PUT", f"/v1/tenants/{tenant_id}/retention", m.RetentionView,
                body=_json(m.RetentionRequest(keep=keep, archive=archive, reason=reason)),
                idempotent=True)


def list_tenants(page_size: int) -> Paged[m.TenantView, CursorPage[m.TenantView]]:
    first: Call[CursorPage[m.TenantView]] = Call(
        "GET", "/v1/tenants", CursorPage[m.TenantView], params={"limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: {"cursor": p.next_cursor} if p.next_cursor else None)


def create_tenant(name: str, weight: int) -> Call[m.TenantCreatedView]:
    return Call("POST", "/v1/tenants", m.TenantCreatedView,
                body=_json(m.TenantRequest(name=name, weight=weight)))


# API keys (a tenant's, with an operator's key) and the audit trail

def list_keys() -> Call[m.Keys]:
    return Call("GET", "/v1/keys", m.Keys)


def issue_key(name: str, role: str, pools: Sequence[str]) -> Call[m.IssuedKeyView]:
    return Call("POST", "/v1/keys", m.IssuedKeyView,
                body=_json(m.KeyRequest(name=name, role=role, pools=list(pools))))  # type: ignore[arg-type]


def revoke_key(key_id: Id) -> Call[None]:
    return Call("DELETE", f"/v1/keys/{key_id}", None)


def rotate_key(key_id: Id, grace_seconds: int) -> Call[m.RotatedKeyView]:
    return Call("POST", f"/v1/keys/{key_id}/rotate", m.RotatedKeyView,
                body=_json(m.RotateRequest(grace_seconds=grace_seconds)))


AUDIT_FILTERS = ("action", "key_id", "target_kind", "target_id", "request_id")


def list_audit(filters: Mapping[str, Any], since: datetime | None, until: datetime | None,
               page_size: int) -> Paged[m.AuditEntryView, m.AuditPage]:
    params = {**{k: filters.get(k) for k in AUDIT_FILTERS}, "limit": page_size,
              "from": since.isoformat() if since else None,
              "to": until.isoformat() if until else None}
    first: Call[m.AuditPage] = Call("GET", "/v1/audit", m.AuditPage, params=params)
    return Paged(first, lambda p: p.items,
                 lambda p: {"cursor": p.next_cursor} if p.next_cursor else None)


# Searchable attributes (docs/SEARCH_ATTRIBUTES.md)

def declare_attribute(name: str, type_: str) -> Call[m.SearchAttributeView]:
    return Call("PUT", f"/v1/search-attributes/{_seg(name)}", m.SearchAttributeView,
                body=_json({"type": type_}), idempotent=True)


def list_attributes() -> Call[m.SearchAttributeList]:
    return Call("GET", "/v1/search-attributes", m.SearchAttributeList)


def remove_attribute(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/search-attributes/{_seg(name)}", None)


# Bulk operations by query (POST /v1/operations)

def count_operation(kind: str, filters: Mapping[str, Any]) -> Call[m.OperationCountView]:
    return Call("POST", "/v1/operations", m.OperationCountView, body=_json(
        {"kind": kind, "filter": _drop_none(**filters), "dry_run": True}))


def start_operation(kind: str, filters: Mapping[str, Any]) -> Call[m.OperationView]:
    return Call("POST", "/v1/operations", m.OperationView, body=_json(
        {"kind": kind, "filter": _drop_none(**filters)}))


def get_operation(op_id: Id) -> Call[m.OperationView]:
    return Call("GET", f"/v1/operations/{op_id}", m.OperationView)


def list_operations(state: str | None,
                    page_size: int) -> Paged[m.OperationView, CursorPage[m.OperationView]]:
    first: Call[CursorPage[m.OperationView]] = Call(
        "GET", "/v1/operations", CursorPage[m.OperationView],
        params={"state": state, "limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: {"cursor": p.next_cursor} if p.next_cursor else None)


def cancel_operation(op_id: Id) -> Call[m.OperationView]:
    return Call("POST", f"/v1/operations/{op_id}/cancel", m.OperationView)


# DAGs (docs/DAGS.md)

def define_dag(dag: Any, fields: Mapping[str, Any]) -> Call[m.DagView]:
    return Call("POST", "/v1/dags", m.DagView, body=_body(dag, fields))


def list_dags(page_size: int) -> Paged[m.DagView, m.DagsPage]:
    first: Call[m.DagsPage] = Call("GET", "/v1/dags", m.DagsPage, params={"limit": page_size})
    return Paged(first, lambda p: p.items,
                 lambda p: {"after": p.next_after} if p.next_after else None)


def get_dag(dag_id: Id) -> Call[m.DagView]:
    return Call("GET", f"/v1/dags/{dag_id}", m.DagView)


def run_dag(dag_id: Id, at: datetime | None) -> Call[m.DagRunCreated]:
    body = _json(m.DagRunRequest(at=at)) if at else None
    return Call("POST", f"/v1/dags/{dag_id}/runs", m.DagRunCreated, body=body)


def list_dag_runs(dag_id: Id, limit: int) -> Call[m.DagRunsPage]:
    return Call("GET", f"/v1/dags/{dag_id}/runs", m.DagRunsPage, params={"limit": limit})


def get_dag_run(dag_run_id: Id) -> Call[m.DagRunView]:
    return Call("GET", f"/v1/dag-runs/{dag_run_id}", m.DagRunView)


def dag_run_events(dag_run_id: Id, page_size: int) -> Paged[m.EventView, m.EventsPage]:
    return _timeline(f"/v1/dag-runs/{dag_run_id}/events", page_size)


def cancel_dag_run(dag_run_id: Id, reason: str | None) -> Call[m.DagRunChanged]:
    body = _json({"reason": reason}) if reason else None
    return Call("POST", f"/v1/dag-runs/{dag_run_id}/cancel", m.DagRunChanged, body=body)


def retry_dag_node(dag_run_id: Id, key: str, reason: str | None) -> Call[m.DagRunChanged]:
    body = _json({"reason": reason}) if reason else None
    return Call("POST", f"/v1/dag-runs/{dag_run_id}/nodes/{_seg(key)}/retry", m.DagRunChanged,
                body=body)
