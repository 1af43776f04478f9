"""One run's page (templates/run.html): what it is and where it stands in words (the step it
executes and for how long, why it waits), links to its job, parent, children and DAG run, a
waterfall of its executions, steps and waits, and its timeline told in sentences
(`ostinato.domain.narrative`), each row opening to the event's JSON; then its executions,
output, payload, captured logs, a workflow's steps, published state, timers, signals and child
runs. For operators, the actions the API would take now (services/api/ui/run_offers.py,
run_actions.py) and the hold. The same store reads as GET /v1/runs/{id},
/events, /logs, /steps and /children, tenant-scoped; a run no longer hot is read from its
archive (docs/RETENTION.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from litestar import Request, Response, get
from litestar.params import FromPath

from ostinato.domain import events as ev
from ostinato.domain.narrative import Narrator, Part, Sentence, duration_words, time_words
from ostinato.domain.states import FINAL, RunState
from ostinato.eventlog.records import RecordedEvent
from ostinato.eventlog.store import get_blobs, read_stream_page
from ostinato.stores import attributes as attribute_store
from ostinato.stores import dags as dag_store
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from ostinato.stores import steps as step_store
from ostinato.stores.runs import ChildRun, RunRow
from ostinato.stores.steps import StateRow, StepRow
from ostinato.wire.api import RunningStepView
from services.api import archived
from services.api.running import running_step
from services.api.ui import html, render, run_offers, waterfall
from services.api.ui.holds import hold_section
from services.api.ui.html import Safe, fmt, short, when
from services.api.ui.runs import LIVE_SECONDS, attempt_rows, attempt_text
from services.api.ui.scope import Ui, UiScope

MAX_EVENTS = 2000  # a page shows a run's first events; the API pages through the rest
TONE_GLYPH = {"ok": "✓", "bad": "✕", "wait": "◷", "busy": "▸", "operator": "⚑", "info": "•"}


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """One event as the timeline shows it: told in words, its JSON behind a click."""

    version: int
    type: str
    at: datetime
    actor: str
    epoch: int | None
    sentence: Sentence
    data: Safe  # the event's JSON document, escaped (html.pre_json)

    @property
    def glyph(self) -> str:
        return TONE_GLYPH.get(self.sentence.tone, "•")


def timeline(stream: list[RecordedEvent]) -> list[TimelineRow]:
    """The run's events in version order, each told in a sentence."""
    narrator = Narrator()
    return [TimelineRow(r.version, r.type, r.occurred_at, r.actor, r.epoch,
                        narrator.tell(r.event, r.occurred_at, r.actor),
                        html.pre_json(ev.event_data(r.event))) for r in stream]


def waiting_words(run: RunRow, dispatch_reason: str | None = None) -> Sentence | None:
    """Why the run is not running, in words (None: it runs, or is final): its workflow's wait,
    a pause, its due time or retry time, or the dispatcher's reason for holding it (`ostinato.
    policy`: a pool's slots, a limit, a pause), as GET /v1/runs/{id}'s waiting_reason reads it."""
    parts: list[Part] = []
    say = parts.append
    day = run.updated_at

    def at(t: datetime) -> Part:
        return Part(time_words(t, day), "time", at=t)

    if run.state in FINAL:
        return None
    if run.state == RunState.SUSPENDED:
        if run.paused:
            say(Part("paused by an operator; it was "))
        if run.wait_reason == "timer":
            say(Part("sleeping until "))
            say(at(run.frozen_wake_at or run.wake_at) if (run.frozen_wake_at or run.wake_at)
                else Part("its timer"))
        elif run.wait_reason == "signal":
            say(Part("waiting for signal "))
            say(Part(run.wait_signal or run.wait_name or "?", "code"))
            if run.wake_at is not None:
                say(Part(" until "))
                say(at(run.wake_at))
                say(Part(" at the latest"))
        elif run.wait_reason == "child":
            say(Part("waiting for child run "))
            say(Part(str(run.wait_child), "run", ref=run.wait_child) if run.wait_child
                else Part(run.wait_name or "?", "code"))
        elif run.wait_reason == "fan_out":
            say(Part("waiting for the chunk runs of "))
            say(Part(run.wait_name or "?", "code"))
        elif run.wait_reason == "paused":
            say(Part("suspended at "))
            say(Part(run.wait_name or "?", "code"))
        else:
            say(Part(f"suspended ({run.wait_reason})"))
        if run.paused and run.frozen_wake_at is not None and run.paused_at is not None:
            left = (run.frozen_wake_at - run.paused_at).total_seconds()
            say(Part(f"; {duration_words(left)} of its wait left when resumed"))
        return Sentence(tuple(parts), "wait")
    if run.state == RunState.RUNNING:
        if run.paused:
            return Sentence((Part("paused by an operator: it starts no next step"),), "wait")
        return None
    if run.state == RunState.QUEUED:
        say(Part("queued in pool "))
        say(Part(run.pool, "code"))
        say(Part(": waiting for a worker to claim it"))
        return Sentence(tuple(parts), "busy")
    if run.state == RunState.RETRY_SCHEDULED and run.retry_at is not None:
        say(Part("retrying at "))
        say(at(run.retry_at))
        return Sentence(tuple(parts), "wait")
    if dispatch_reason:
        say(Part("waiting for the dispatcher: "))
        say(Part(dispatch_reason))
        return Sentence(tuple(parts), "wait")
    if run.state == RunState.SCHEDULED and run.due_at is not None:
        say(Part("scheduled: due "))
        say(at(run.due_at))
        return Sentence(tuple(parts), "wait")
    return Sentence((Part(f"{run.state.replace('_', ' ')}"),), "wait")


@dataclass(frozen=True, slots=True)
class Executing:
    """The step a running workflow executes now, and for how long so far."""

    seq: int
    name: str
    since: datetime
    seconds: float

    @property
    def took(self) -> str:
        return duration_words(self.seconds)


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


def paused_by(stream: list[RecordedEvent]) -> tuple[str, str | None, datetime] | None:
    """Who paused the run last, why, and when (None: no pause among the events read)."""
    for r in reversed(stream):
        if isinstance(r.event, ev.RunPaused):
            return r.event.by or r.actor, r.event.reason, r.occurred_at
    return None


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
    dispatch_reason: str | None = None  # the dispatcher's last word on a run it holds


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
    reason = await run_store.waiting_reason(ui.conn, run)
    return RunRead(
        run=run, blobs=await get_blobs(ui.conn, refs, ui.tenant_id),
        stream=await read_stream_page(ui.conn, run_id, ui.tenant_id, 0, MAX_EVENTS),
        steps=await step_store.page(ui.conn, ui.tenant_id, run_id, after=-1, limit=200),
        reason=reason,
        attrs=(await attribute_store.of_runs(ui.conn, ui.tenant_id, [run_id])).get(run_id),
        running=await running_step(ui.conn, ui.tenant_id, run),  # the step a workflow executes
        published=await step_store.state(ui.conn, ui.tenant_id, run_id),
        dispatch_reason=reason if run.waits_for_dispatch else None)


async def run_context(ui: UiScope, run_id: uuid.UUID) -> dict[str, Any]:
    """Everything run.html and its live part (run_body.html) show, read."""
    read = await read_run(ui, run_id)
    job = await job_store.by_id(ui.conn, ui.tenant_id, read.run.job_id)
    return page_context(
        read, now=ui.clock.now(), job_name=job.name if job is not None else None,
        dag_node=await dag_store.node_of_run(ui.conn, ui.tenant_id, run_id),
        children=await run_store.children_of(ui.conn, ui.tenant_id, run_id, None, 100))


def page_context(read: RunRead, *, now: datetime, job_name: str | None = None,
                 dag_node: tuple[uuid.UUID, str] | None = None,
                 children: list[ChildRun] | None = None) -> dict[str, Any]:
    """The page's context from what was read (pure): the run in words, its waterfall laid out
    on its span (to `now` while it is not final), its timeline told."""
    run, stream = read.run, read.stream
    executing = None
    if read.running is not None:
        executing = Executing(read.running.seq, read.running.name, read.running.since,
                              max(0.0, (now - read.running.since).total_seconds()))
    lanes = waterfall.spans([(r.occurred_at, r.event) for r in stream],
                            (executing.seq, executing.name, executing.since)
                            if executing is not None else None)
    first = stream[0].occurred_at if stream else run.scheduled_for
    final = run.state in FINAL
    end = max([r.occurred_at for r in stream] or [run.finished_at or first]) if final else now
    timers, signals, started = workflow_waits(stream)
    return {
        "run": run, "read": read, "title": f"Run {short(run.id)}", "job_name": job_name,
        "attempt": attempt_text(run), "final": final,
        "took": (run.finished_at - run.started_at).total_seconds()
        if run.finished_at and run.started_at else None,
        "executing": executing, "waiting": waiting_words(run, read.dispatch_reason),
        "dag_node": dag_node, "children": children or [], "started": started,
        "paused_by": paused_by(stream) if run.paused else None,
        "timeline": timeline(stream), "more_events": len(stream) == MAX_EVENTS,
        "max_events": MAX_EVENTS, "waterfall": waterfall.layout(lanes, first, end),
        "executions": html.table(
            ["execution", "fencing token", "worker", "started", "ended", "outcome", "error"],
            attempt_rows(stream), "Not started yet."),
        "output": html.pre_json(read.blobs.get(run.output_ref)) if run.output_ref else None,
        "payload": html.pre_json(read.blobs.get(run.payload_ref)),
        "logs": log_table(read.blobs.get(run.logs_ref) if run.logs_ref else None),
        "steps": [(s, html.pre_json(s.output) if s.succeeded else None) for s in read.steps],
        "published": [(v, html.pre_json(v.value)) for v in read.published],
        "timers": html.table(["#", "timer", "set", "due", "fired"], timers, cls="timers")
        if timers else None,
        "signals": html.table(["signal", "received", "sent by", "delivered to step",
                               "delivered", "payload"], signals, cls="signals")
        if signals else None,
        "attrs": html.pre_json(read.attrs) if read.attrs else None,
        "last_error": html.pre_json(run.last_error) if run.last_error else None,
        "every": LIVE_SECONDS,
    }


@get("/runs/{run_id:uuid}", include_in_schema=False)
async def run_page(request: Request, run_id: FromPath[uuid.UUID], ui: Ui) -> Response[str]:
    if "x-ui-fragment" in request.headers:  # the live region's refresh
        context = await run_context(ui, run_id)
        return render.html_response(render.render_text("run_body.html", **context))
    return await page(ui, run_id)


async def page(ui: UiScope, run_id: uuid.UUID, *, errors: dict[str, str] | None = None,
               values: dict[str, dict[str, Any]] | None = None,
               status: int = 200) -> Response[str]:
    """The whole page: its body, and for an operator the actions the API would take now
    (`run_offers`; `errors`/`values`: a refused form shown again open, what was typed kept)."""
    context = await run_context(ui, run_id)
    read = context["read"]
    offered = run_offers.offers(ui, read.run, read.steps, context["job_name"],
                                archived=read.archived_at is not None)
    offered.errors, offered.values = errors or {}, values or {}
    hold = await hold_section(ui, run_id, archived=read.archived_at is not None)
    return ui.render("run.html", section="runs", status=status, hold=hold, csrf=ui.csrf,
                     offers=offered, **context)


ROUTES = [run_page]
