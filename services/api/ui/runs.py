"""The runs pages: the list (filters, cursor pages, live updates) and one run's detail (its
timeline straight from the event log, attempts with errors and fencing tokens, captured logs,
output, why it waits, a workflow's steps and children). The same store reads as GET /v1/runs,
/v1/runs/{id}, /events, /logs and /steps; every one tenant-scoped."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.params import FromPath, FromQuery, QueryParameter

from ostinato import runs
from ostinato.domain import attributes
from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput
from ostinato.domain.states import FINAL, RunState
from ostinato.eventlog.records import RecordedEvent
from ostinato.eventlog.store import get_blobs, read_stream_page
from ostinato.policy import retry as retry_policy
from ostinato.stores import attributes as attribute_store
from ostinato.stores import dags as dag_store
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from ostinato.stores import steps as step_store
from ostinato.stores.runs import RunRow
from ostinato.stores.steps import StateRow, StepRow
from ostinato.wire.api import RunningStepView
from services.api import archived
from services.api.auditing import audited
from services.api.routes import decode_cursor, encode_cursor
from services.api.running import running_step
from services.api.ui import html, operations, render
from services.api.ui.holds import hold_section
from services.api.ui.html import Safe, badge, fmt, join, link, short, when
from services.api.ui.operations import offers
from services.api.ui.params import time_filter as _time_filter
from services.api.ui.params import uuid_filter as _uuid_filter
from services.api.ui.scope import Ui, UiScope, checked_form, html_response, redirect

PAGE_SIZE = 50
MAX_EVENTS = 2000  # a page shows a run's first events; the API pages through the rest
LIVE_SECONDS = 3  # how often an open page asks for fresh rows


def attempt_text(run: RunRow) -> str:
    """`2 of 3`: the retry policy's attempt the run is on or ended on, of its max_attempts
    (not its executions: a workflow's wake-ups are executions too; retry.attempt_of)."""
    return (f"{retry_policy.attempt_of(run.state, run.failures)} of "
            f"{retry_policy.max_attempts_of(run.retry_policy)}")


ERROR_STATES = frozenset({RunState.FAILED, RunState.RETRY_SCHEDULED, RunState.DEAD_LETTERED})
UNDER_WAY = frozenset({RunState.RUNNING, RunState.SUSPENDED})  # started, not yet ended


@dataclass(frozen=True, slots=True)
class RunLine:
    """One row of the runs table (templates/runs_table.html)."""

    id: uuid.UUID
    job_id: uuid.UUID
    job_name: str | None  # None: the job is gone (or another tenant's)
    task: str
    pool: str
    priority: str
    state: str
    paused: bool
    attempt: str  # "2 of 3"
    scheduled_for: datetime
    started_at: datetime | None
    seconds: float | None  # started to ended, or to now while under way
    running: bool  # `seconds` is so far
    error_type: str | None  # the last attempt's, for a failed run
    error_message: str | None


def run_line(r: RunRow, names: dict[uuid.UUID, str], now: datetime) -> RunLine:
    """What a row shows of a run: its job by name, how long it took (or has taken so far), and
    for a failed run the error (pure)."""
    seconds, running = None, False
    if r.started_at is not None:
        if r.state in UNDER_WAY:
            seconds, running = (now - r.started_at).total_seconds(), True
        elif r.finished_at is not None and r.finished_at >= r.started_at:
            seconds = (r.finished_at - r.started_at).total_seconds()
    error = r.last_error if r.state in ERROR_STATES and isinstance(r.last_error, dict) else {}
    message = error.get("message")
    return RunLine(id=r.id, job_id=r.job_id, job_name=names.get(r.job_id), task=r.task,
                   pool=r.pool, priority=r.priority, state=r.state, paused=r.paused,
                   attempt=attempt_text(r), scheduled_for=r.scheduled_for,
                   started_at=r.started_at, seconds=seconds, running=running,
                   error_type=error.get("type"),
                   error_message=str(message) if message is not None else None)


async def run_lines(ui: UiScope, rows: list[RunRow]) -> list[RunLine]:
    """The rows of a page of runs, with their jobs' names read in one statement (no N+1)."""
    names = await job_store.names(ui.conn, ui.tenant_id, list({r.job_id for r in rows}))
    now = ui.clock.now()
    return [run_line(r, names, now) for r in rows]


async def runs_table(ui: UiScope, rows: list[RunRow], empty: str = "No runs match.") -> Safe:
    """The runs table of another page (a job's latest runs), as the runs list shows it."""
    return Safe(render.render_text("runs_table.html", lines=await run_lines(ui, rows),
                                   empty=empty, sort=None, pager=[]))


@dataclass(frozen=True, slots=True)
class Sort:
    """The scheduled-for header's link: the one sortable column, the one order the tenant's
    index (runs_tenant_created: tenant, scheduled_for, id) serves both ways. Started, duration
    and the rest have no index over a tenant's runs: sorting by them would read them all."""

    href: str
    oldest_first: bool

    @property
    def arrow(self) -> str:
        return "↑" if self.oldest_first else "↓"

    @property
    def aria(self) -> str:
        return "ascending" if self.oldest_first else "descending"

    @property
    def title(self) -> str:
        return "oldest first; click for newest first" if self.oldest_first else \
            "newest first; click for oldest first"


def live(source: str, content: Safe) -> Safe:
    """A region `ui.js` refreshes every few seconds from `source` (the same page, as a fragment)."""
    return fmt('<div class="live" data-live="{src}" data-every="{every}">{content}</div>'
               '<p class="live-note muted" aria-live="polite">live: refreshes every {every} s'
               '</p>', src=source, every=LIVE_SECONDS, content=content)


@get("/runs", include_in_schema=False)
async def runs_page(request: Request, ui: Ui,
                    run_state: Annotated[str | None, QueryParameter(name="state")] = None,
                    job_id: FromQuery[str | None] = None, task: FromQuery[str | None] = None,
                    pool: FromQuery[str | None] = None, since: FromQuery[str | None] = None,
                    until: FromQuery[str | None] = None, priority: FromQuery[str | None] = None,
                    error_type: FromQuery[str | None] = None,
                    where: FromQuery[str | None] = None, order: FromQuery[str | None] = None,
                    cursor: FromQuery[str | None] = None) -> Response[str]:
    state = run_state
    if state and state not in RunState.__members__.values():
        raise InvalidInput(f"unknown state {state!r}", errors=[{"field": "state",
                                                                "message": "unknown"}])
    classes = [c.name for c in ui.settings.classes]
    if priority and priority not in classes:
        raise InvalidInput(f"unknown priority class {priority!r}",
                           errors=[{"field": "priority", "message": "unknown"}])
    if order not in (None, "", "newest", "oldest"):
        raise InvalidInput(f"unknown order {order!r}: newest or oldest",
                           errors=[{"field": "order", "message": "newest or oldest"}])
    oldest = order == "oldest"
    if oldest and attributes.split_where(where):
        raise InvalidInput("oldest first is not offered with a where filter",
                           errors=[{"field": "order", "message": "not with where"}])
    rows = await run_store.page(
        ui.conn, ui.tenant_id, job_id=_uuid_filter("job", job_id), state=state or None,
        after=decode_cursor(cursor), limit=PAGE_SIZE + 1, task=task or None, pool=pool or None,
        since=_time_filter("from", since), until=_time_filter("until", until),
        priority=priority or None, error_type=error_type or None,
        where=await _where(ui, where, error_type), oldest_first=oldest)
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    query = {"state": state, "job_id": job_id, "task": task, "pool": pool, "since": since,
             "until": until, "priority": priority, "error_type": error_type, "where": where,
             "order": "oldest" if oldest else None}
    pager = [(html.url("/ui/runs", **query), "first page")] if cursor else []
    if more:
        pager.append((html.url("/ui/runs", **query, cursor=encode_cursor(
            rows[-1].scheduled_for, rows[-1].id)), "next page →"))
    table = {"lines": await run_lines(ui, rows), "empty": "No runs match.", "pager": pager,
             "sort": Sort(html.url("/ui/runs", **{**query, "order": None if oldest else
                                                  "oldest"}), oldest)}
    if "x-ui-fragment" in request.headers:
        return render.render("runs_table.html", **table)
    # the live region polls this very page: a later cursor page stays where it is
    source = html.url("/ui/runs", **query, cursor=cursor)
    values = {"states": state, "job_id": job_id, "task": task, "pool": pool, "since": since,
              "until": until, "where": where}
    # a bulk operation's filter has no class or error type: offered only when the list's
    # filters are all ones it can repeat (else its count would not be this list's)
    bulk = Safe("") if priority or error_type else offers(
        [await operations.offer(ui, "cancel", values),
         await operations.offer(ui, "retry", values) if state else Safe("")])
    return ui.render("runs.html", section="runs", source=source, every=LIVE_SECONDS, bulk=bulk,
                     states=[("", "any state"), *((s.value, s.value) for s in RunState)],
                     classes=[("", "any class"), *((c, c) for c in classes)],
                     f={**query, "order": "oldest" if oldest else None}, **table)


async def _where(ui: UiScope, text: str | None,
                 error_type: str | None) -> attributes.AttributeFilter | None:
    """The where box (`customer=acme and amount>100`) as a typed filter, or None."""
    exprs = attributes.split_where(text)
    if not exprs:
        return None
    if error_type:
        raise InvalidInput("where and error type cannot be combined",
                           errors=[{"field": "where", "message": "not with error type"}])
    return attributes.parse_where(exprs, await attribute_store.types_of(ui.conn,
                                                                        ui.tenant_id))


def attempt_rows(stream: list[Any]) -> list[list[Any]]:
    """Each execution (claim) from the log: its number and fencing token (as RunStarted gave
    them), worker, start, end, outcome and error; what GET /v1/dead-letters/{id} folds as its
    history, with the token. A workflow's wake-ups are executions too (outcome RunSuspended)."""
    out: list[dict[str, Any]] = []
    for r in stream:
        e = r.event
        if isinstance(e, ev.RunStarted):
            out.append({"attempt": e.attempt, "token": e.fencing_token, "worker": e.worker_id,
                        "start": r.occurred_at, "end": None, "outcome": "running", "error": None})
        elif out and out[-1]["end"] is None and isinstance(e, (
                ev.RunSucceeded, ev.RunFailed, ev.AttemptTimedOut, ev.LeaseExpired,
                ev.LeaseReleased, ev.RunCancelled, ev.RunSuspended)):
            out[-1].update(end=r.occurred_at, outcome=r.type)
            if isinstance(e, ev.RunFailed):
                out[-1]["error"] = fmt("{t}: {m}{perm}", t=e.error_type, m=e.message,
                                       perm="" if e.retryable else " (permanent)")
    return [[a["attempt"], a["token"], a["worker"], when(a["start"]), when(a["end"]),
             a["outcome"], a["error"]] for a in out]


def workflow_waits(stream: list[Any]) -> tuple[list[list[Any]], list[list[Any]],
                                               dict[uuid.UUID, tuple[str, str]]]:
    """A workflow's timers (set, due, fired), signals (received, delivered to which step, or a
    wait that timed out) and its children's positions, folded from its event stream."""
    timers: dict[int, dict[str, Any]] = {}
    signals: dict[uuid.UUID, dict[str, Any]] = {}
    timeouts: list[list[Any]] = []
    started: dict[uuid.UUID, tuple[str, str]] = {}
    for r in stream:
        e = r.event
        if isinstance(e, ev.RunSuspended) and e.reason == "timer":
            timers.setdefault(e.seq, {"name": e.name, "set": r.occurred_at, "fired": None})[
                "due"] = e.wake_at
        elif isinstance(e, ev.TimerFired):
            t = timers.setdefault(e.seq, {"name": e.name, "set": None, "due": e.due_at})
            t["fired"] = r.occurred_at
        elif isinstance(e, ev.SignalReceived):
            signals[e.signal_id] = {"name": e.name, "at": r.occurred_at, "by": e.by or r.actor,
                                    "seq": None, "delivered": None, "payload": e.payload}
        elif isinstance(e, ev.SignalDelivered) and e.signal_id in signals:
            signals[e.signal_id].update(seq=e.seq, delivered=r.occurred_at)
        elif isinstance(e, ev.SignalTimedOut):
            timeouts.append([fmt("{n} <span class=\"muted\">(none came)</span>", n=e.name),
                             Safe('<span class="muted">—</span>'), "", e.seq,
                             fmt("timed out {t}", t=when(r.occurred_at)), ""])
        elif isinstance(e, ev.ChildStarted):
            started[e.child_run_id] = (str(e.seq), "yes" if e.awaited else "no")
    timer_rows = [[seq, t["name"], _opt(t.get("set")), _opt(t.get("due")),
                   when(t["fired"]) if t["fired"] else Safe('<span class="muted">waiting</span>')]
                  for seq, t in sorted(timers.items())]
    signal_rows = [[s["name"], when(s["at"]), s["by"],
                    s["seq"] if s["seq"] is not None else Safe('<span class="muted">not yet '
                                                               'taken</span>'),
                    _opt(s["delivered"]), html.pre_json(s["payload"])]
                   for s in signals.values()]
    return timer_rows, signal_rows + timeouts, started


def log_table(lines: Any) -> Safe:
    """The lines the handler logged in the run's latest reported attempt (what GET
    /v1/runs/{id}/logs returns): seconds into the attempt, level, message, fields."""
    rows = [[f"{line.get('t', 0):.3f}", fmt('<span class="level {lv}">{lv}</span>',
                                            lv=line.get("level")),
             line.get("message"), html.pre_json(line.get("fields")) if line.get("fields")
             else Safe("")]
            for line in (lines if isinstance(lines, list) else []) if isinstance(line, dict)]
    return html.table(["t (s)", "level", "message", "fields"], rows,
                      "No captured log lines.", "logs")


def _opt(at: datetime | None) -> Safe | None:
    return when(at) if at is not None else None


@dataclass(slots=True)
class RunRead:
    """What one run's page shows, read from the hot tables or from the run's archive."""

    run: RunRow
    blobs: dict[uuid.UUID, Any]
    stream: list[RecordedEvent]  # its first MAX_EVENTS events
    steps: list[StepRow]  # its first 200
    reason: str | None = None
    attrs: dict[str, Any] | None = None
    running: RunningStepView | None = None
    published: list[StateRow] = field(default_factory=list)
    archived_at: datetime | None = None  # read back from the archive (docs/RETENTION.md)


async def read_run(ui: UiScope, run_id: uuid.UUID) -> RunRead:
    """The run as its page shows it; one no longer hot from its archive (the caller's tenant's
    only: another's is a 404)."""
    run = await run_store.by_id(ui.conn, ui.tenant_id, run_id)
    if run is None:
        gone = await archived.read(ui.archive, ui.tenant_id, run_id)
        return RunRead(run=archived.run_row(gone), blobs=archived.blobs(gone),
                       stream=archived.recorded_events(gone)[:MAX_EVENTS],
                       steps=archived.step_rows(gone)[:200], attrs=dict(gone.attributes) or None,
                       archived_at=gone.archived_at)
    refs = [r for r in (run.payload_ref, run.output_ref, run.logs_ref) if r is not None]
    return RunRead(
        run=run, blobs=await get_blobs(ui.conn, refs, ui.tenant_id),
        stream=await read_stream_page(ui.conn, run_id, ui.tenant_id, 0, MAX_EVENTS),
        steps=await step_store.page(ui.conn, ui.tenant_id, run_id, after=-1, limit=200),
        reason=await run_store.waiting_reason(ui.conn, run),
        attrs=(await attribute_store.of_runs(ui.conn, ui.tenant_id, [run_id])).get(run_id),
        running=await running_step(ui.conn, ui.tenant_id, run),  # the step a workflow executes
        published=await step_store.state(ui.conn, ui.tenant_id, run_id))


async def run_body(ui: UiScope, run_id: uuid.UUID) -> tuple[RunRead, Safe]:
    read = await read_run(ui, run_id)
    run, blobs, reason, stream, attrs, running = (read.run, read.blobs, read.reason, read.stream,
                                                  read.attrs, read.running)
    dag_node = await dag_store.node_of_run(ui.conn, ui.tenant_id, run_id)
    summary = html.kv([
        ("state", join([badge(run.state), " (paused)" if run.paused else ""])),
        ("job", link(f"/ui/jobs/{run.job_id}", run.job_id)),
        ("task", run.task), ("pool / class", f"{run.pool} / {run.priority}"),
        ("trigger", run.trigger),
        ("attempt", fmt("{a} <span class=\"muted\">({f} failed, counted against max_attempts)"
                        "</span>", a=attempt_text(run), f=run.failures)),
        ("executions", fmt("{n} <span class=\"muted\">(claims: retries, and a workflow's "
                           "wake-ups after timers, signals and children)</span>", n=run.attempt)),
        ("fencing token", run.fencing_token), ("worker", run.worker_id),
        ("scheduled for", when(run.scheduled_for)), ("due at", _opt(run.due_at)),
        ("queued", _opt(run.queued_at)), ("started", _opt(run.started_at)),
        ("finished", _opt(run.finished_at)), ("retry at", _opt(run.retry_at)),
        ("cancel requested", "yes" if run.cancel_requested else None),
        ("current step", run.wait_name if run.state == RunState.SUSPENDED else
         fmt("{n} <span class=\"muted\">(step {q}, running since {t})</span>", n=running.name,
             q=running.seq, t=when(running.since)) if running is not None else None),
        ("waiting reason", reason),
        ("attributes", html.pre_json(attrs) if attrs else None),
        ("last error", html.pre_json(run.last_error) if run.last_error else None),
        ("replay of", link(f"/ui/runs/{run.replay_of}", run.replay_of) if run.replay_of else None),
        ("parent run", link(f"/ui/runs/{run.parent_run_id}", run.parent_run_id)
         if run.parent_run_id else None),
        ("DAG run", fmt("{link} (node {key})", link=link(f"/ui/dag-runs/{dag_node[0]}",
                                                         dag_node[0]), key=dag_node[1])
         if dag_node else None),
    ])
    events = html.table(
        ["version", "event", "occurred", "actor", "epoch", "data"],
        [[r.version, r.type, when(r.occurred_at), r.actor, r.epoch,
          html.pre_json(ev.event_data(r.event))] for r in stream],
        "No events.", "events")
    parts = [
        fmt("<section><h2>Summary</h2>{s}</section>", s=summary),
        fmt("<section><h2>Executions</h2>{t}</section>", t=html.table(
            ["execution", "fencing token", "worker", "started", "ended", "outcome", "error"],
            attempt_rows(stream), "Not started yet.")),
        fmt("<section><h2>Output</h2>{o}</section><section><h2>Payload</h2>{p}</section>",
            o=html.pre_json(blobs.get(run.output_ref)) if run.output_ref else
            Safe('<p class="empty">No output.</p>'),
            p=html.pre_json(blobs.get(run.payload_ref))),
    ]
    parts.append(fmt("<section><h2>Logs (execution {n})</h2>{t}</section>", n=run.attempt,
                     t=log_table(blobs.get(run.logs_ref) if run.logs_ref else None)))
    steps = read.steps
    if steps or run.steps_done or running is not None:
        parts.append(fmt("<section><h2>Workflow steps ({n})</h2>{t}</section>",
                         n=run.steps_done, t=html.table(
                             ["#", "step", "outcome", "attempt", "tries", "ms", "recorded",
                              "output / error"],
                             [[s.seq, s.name, badge("succeeded" if s.succeeded else "failed"),
                               s.attempt, s.tries, f"{s.duration_ms:.1f}", when(s.recorded_at),
                               html.pre_json(s.output) if s.succeeded else
                               fmt("{t}: {m}", t=s.error_type, m=s.message)]
                              for s in steps] + ([[running.seq, running.name, badge("running"),
                                                   run.attempt, "", "",
                                                   fmt("running since {t}", t=when(running.since)),
                                                   ""]]
                                                 if running is not None and len(steps) < 200
                                                 else []))))
    published = read.published
    if published:  # ctx.set: the latest value of each name (GET /v1/runs/{id}/state)
        parts.append(fmt("<section><h2>Published state</h2>{t}</section>", t=html.table(
            ["name", "value", "step", "set"],
            [[v.name, html.pre_json(v.value), v.seq, when(v.set_at)] for v in published],
            cls="state")))
    timers, signals, started = workflow_waits(stream)
    if timers:
        parts.append(fmt("<section><h2>Timers</h2>{t}</section>", t=html.table(
            ["#", "timer", "set", "due", "fired"], timers, cls="timers")))
    if signals:
        parts.append(fmt("<section><h2>Signals</h2>{t}</section>", t=html.table(
            ["signal", "received", "sent by", "delivered to step", "delivered", "payload"],
            signals, cls="signals")))
    children = await run_store.children_of(ui.conn, ui.tenant_id, run_id, None, 100)
    if children:
        parts.append(fmt("<section><h2>Child runs</h2>{t}</section>", t=html.table(
            ["run", "task", "state", "step", "awaited"],
            [[link(f"/ui/runs/{c.id}", c.id), c.task, badge(c.state),
              started.get(c.id, ("", ""))[0], started.get(c.id, ("", ""))[1]]
             for c in children], cls="children")))
    more = fmt('<p class="muted">The first {n} events; GET /v1/runs/{id}/events?after={n} '
               'pages through the rest.</p>', n=MAX_EVENTS, id=run_id) \
        if len(stream) == MAX_EVENTS else Safe("")
    parts.append(fmt("<section><h2>Timeline (event log)</h2>{t}{more}</section>", t=events,
                     more=more))
    if read.archived_at is not None:  # read back from the archive: said first
        parts.insert(0, fmt('<p class="archived-banner" role="status">archived {t}: read '
                            'from the archive; it can no longer be changed</p>',
                            t=when(read.archived_at)))
    return read, join(parts)


def _actions(ui: UiScope, read: RunRead) -> Safe:
    run = read.run
    if not operations.may_operate(ui) or read.archived_at is not None:  # nothing to change
        return Safe("")
    buttons = []
    if run.state not in FINAL:
        buttons.append(html.post_button(f"/ui/runs/{run.id}/cancel", "Cancel run", ui.csrf,
                                        cls="danger"))
    if run.state in (RunState.FAILED, RunState.CANCELLED, RunState.DEAD_LETTERED):
        buttons.append(html.post_button(f"/ui/runs/{run.id}/retry", "Re-run", ui.csrf))
    return fmt('<div class="actions">{b}</div>', b=join(buttons, " ")) if buttons else Safe("")


@get("/runs/{run_id:uuid}", include_in_schema=False)
async def run_page(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[str]:
    read, body = await run_body(ui, run_id)
    if "x-ui-fragment" in request.headers:
        return html_response(body)
    content = body if read.run.state in FINAL else live(f"/ui/runs/{run_id}", body)
    hold = await hold_section(ui, run_id, archived=read.archived_at is not None)
    return ui.page(f"Run {short(run_id)}", join([_actions(ui, read), hold, content]), "runs")


@post("/runs/{run_id:uuid}/cancel", include_in_schema=False, status_code=303,
      opt=audited("run.cancel", "run", "run_id"))
async def cancel(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    await checked_form(request, ui)
    state = await runs.cancel_run(ui.conn, ui.store, tenant_id=ui.tenant_id, run_id=run_id,
                                  actor=ui.actor)
    ui.audit.after = {"state": state}
    ui.session.flash = "Cancelled." if state == "cancelled" else "Cancel requested."
    return redirect(f"/ui/runs/{run_id}")


@post("/runs/{run_id:uuid}/retry", include_in_schema=False, status_code=303,
      opt=audited("run.retry", "run", "run_id"))
async def retry(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[Any]:
    await checked_form(request, ui)
    new_id, _ = await runs.rerun(ui.conn, ui.store, ui.clock, tenant_id=ui.tenant_id,
                                 run_id=run_id, actor=ui.actor, request_key=None)
    ui.audit.after = {"run_id": str(new_id)}
    ui.session.flash = f"Re-run of {run_id} created."
    return redirect(f"/ui/runs/{new_id}")


ROUTES = [runs_page, run_page, cancel, retry]
