"""The runs list (filters, cursor pages, live updates), as GET /v1/runs reads it, tenant-scoped;
and what the run pages share: a run's attempt in words, its executions folded from its events
(the dead letter's page shows them too), the live region. One run's page: run_page.py."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import FromQuery, QueryParameter

from ostinato.domain import attributes
from ostinato.domain import events as ev
from ostinato.domain.errors import InvalidInput
from ostinato.domain.states import RunState
from ostinato.policy import retry as retry_policy
from ostinato.stores import attributes as attribute_store
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from ostinato.stores.runs import RunRow
from services.api.routes import decode_cursor, encode_cursor
from services.api.ui import html, operations, render
from services.api.ui.html import Safe, fmt, when
from services.api.ui.operations import offers
from services.api.ui.params import time_filter as _time_filter
from services.api.ui.params import uuid_filter as _uuid_filter
from services.api.ui.scope import Ui, UiScope

PAGE_SIZE = 50
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


ROUTES = [runs_page]  # one run's page: services/api/ui/run_page.py
