"""`ostinato runs ...`: list and inspect runs, their timelines, logs, steps and published state;
cancel, retry, signal and update them (one by id, or many by filter)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Annotated, Any

import msgspec
import typer

from ostinato.cli import awaiting, bulk
from ostinato.cli.common import first, need_selection
from ostinato.cli.context import (
    DryRunOpt,
    LimitOpt,
    Output,
    OutputOpt,
    YesOpt,
    state,
    stderr,
)
from ostinato.cli.output import Column, emit, emit_many, stdout, text
from ostinato.cli.parse import instant, json_value
from ostinato.client import Client, UpdateTimeoutError
from ostinato.client.updates import final_view as update_view
from ostinato.clock import SystemClock
from ostinato.domain.events import decode_event
from ostinato.domain.narrative import Narrator
from ostinato.wire.api import FINAL_STATES, RUN_STATES, EventView, RunView

app = typer.Typer(help="Runs: one occurrence of a job, with its attempts and timeline.",
                  no_args_is_help=True)


def attempt_text(run: RunView) -> str:
    """`2/3`: the retry policy's attempt of its max_attempts, not the executions (every claim,
    a workflow's wake-ups too), which have their own column."""
    return f"{run.retry_attempt}/{run.max_attempts}"


COLUMNS: list[Column] = [
    ("ID", lambda r: r.id), ("JOB", lambda r: r.job_id), ("TASK", lambda r: r.task),
    ("STATE", lambda r: r.state), ("SCHEDULED FOR", lambda r: r.scheduled_for),
    ("ATTEMPT", attempt_text), ("EXECUTIONS", lambda r: r.executions),
    ("UPDATED", lambda r: r.updated_at),
]
EVENT_COLUMNS: list[Column] = [
    ("VERSION", lambda e: e.version), ("TYPE", lambda e: e.type),
    ("OCCURRED", lambda e: e.occurred_at), ("ACTOR", lambda e: e.actor),
]


def told_event_columns() -> list[Column]:
    """EVENT_COLUMNS and WHAT HAPPENED: each event in words, as the UI's run page tells it
    (`ostinato.domain.narrative`), told in the stream's order by one narrator (attempts are
    numbered as the retry policy counts them); `-o json` keeps the events as they are."""
    narrator = Narrator()

    def what(e: EventView) -> str:
        try:
            event = decode_event(msgspec.json.encode(e.data))
        except (msgspec.ValidationError, msgspec.DecodeError):  # a field this release misreads
            return f"{e.type} (its data: -o json)"
        return str(narrator.tell(event, e.occurred_at, e.actor))
    return [*EVENT_COLUMNS, ("WHAT HAPPENED", what)]
# Names for groups of states, as operators speak of them.
ALIASES: dict[str, tuple[str, ...]] = {
    "waiting": ("scheduled", "queued", "retry_scheduled"),  # not started yet
    "unfinished": tuple(s for s in RUN_STATES if s not in FINAL_STATES),
}
STATE_HELP = (f"a run state ({', '.join(RUN_STATES)}) or waiting (scheduled, queued, "
              "retry_scheduled) or unfinished (not final); repeatable")
StatesOpt = Annotated[list[str] | None, typer.Option("--state", help=STATE_HELP)]
JobOpt = Annotated[str | None, typer.Option("--job", help="only runs of this job id")]
TaskOpt = Annotated[str | None, typer.Option("--task", help="only runs of this task")]
PriorityOpt = Annotated[str | None, typer.Option(
    "--priority", help="only runs of this priority class (e.g. critical, default, bulk)")]
ErrorTypeOpt = Annotated[str | None, typer.Option(
    "--error-type", help="only runs whose last attempt failed with this error type")]
Ids = Annotated[list[str] | None, typer.Argument(help="run ids", show_default=False)]
AllOpt = Annotated[bool, typer.Option("--all", help="every run the filters let through")]
WhereOpt = Annotated[list[str] | None, typer.Option(
    "--where", help="a searchable attribute filter, e.g. customer=acme or amount>100 (also "
    "!=, >=, <, <=, ~ contains); repeatable, ANDed (docs/SEARCH_ATTRIBUTES.md)")]


def states(given: Sequence[str] | None) -> list[str | None]:
    """The API's states for --state values (aliases expanded); [None]: any state."""
    if not given:
        return [None]
    out: list[str | None] = []
    for value in given:
        for s in ALIASES.get(value, (value,)):
            if s not in RUN_STATES:
                raise typer.BadParameter(f"unknown state {value!r}", param_hint="--state")
            if s not in out:
                out.append(s)
    return out


def matching(client: Client, job: str | None, wanted: Sequence[str | None],
             task: str | None, priority: str | None = None,
             error_type: str | None = None,
             where: Sequence[str] | None = None,
             archived: tuple[datetime, datetime] | None = None) -> Iterator[RunView]:
    """`archived`: the archived runs that ended in [start, end) too (after the hot ones)."""
    for s in wanted:
        for run in client.runs.list(job_id=job, state=s, priority=priority,
                                    error_type=error_type, where=where,
                                    include_archived=archived is not None,
                                    ended_after=archived[0] if archived else None,
                                    ended_before=archived[1] if archived else None):
            if task is None or run.task == task:
                yield run


def archived_text(run: RunView) -> str:
    """`archived <when>` for a run read back from the archive, else `-`."""
    return f"archived {text(run.archived_at)}" if run.archived else "-"


ARCHIVED_COLUMNS: list[Column] = [*COLUMNS, ("ARCHIVED", archived_text)]


@app.command("list")
def list_runs(ctx: typer.Context, job: JobOpt = None, state_: StatesOpt = None,
              task: TaskOpt = None, priority: PriorityOpt = None,
              error_type: ErrorTypeOpt = None, where: WhereOpt = None,
              include_archived: Annotated[bool, typer.Option(
                  "--include-archived", help="archived runs too (after the hot ones) that "
                  "ended in [--ended-after, --ended-before), at most 31 days "
                  "(docs/RETENTION.md)")] = False,
              ended_after: Annotated[str | None, typer.Option(
                  "--ended-after", metavar="INSTANT",
                  help="with --include-archived: ended at or after (RFC 3339)")] = None,
              ended_before: Annotated[str | None, typer.Option(
                  "--ended-before", metavar="INSTANT",
                  help="with --include-archived: ended before (RFC 3339; default now)")] = None,
              limit: LimitOpt = None, output: OutputOpt = None) -> None:
    """Runs, latest occurrence first (per state, when several are asked for); with
    --include-archived, then the archived ones that ended in the range, latest day first."""
    span = None
    if include_archived:
        if ended_after is None:
            raise typer.BadParameter("--include-archived takes a range: --ended-after "
                                     "(and --ended-before, default now)",
                                     param_hint="--ended-after")
        span = (instant(ended_after, "--ended-after"),
                instant(ended_before, "--ended-before") if ended_before else SystemClock().now())
    elif ended_after or ended_before:
        raise typer.BadParameter("--ended-after and --ended-before select archived runs: add "
                                 "--include-archived", param_hint="--include-archived")
    g = state(ctx)
    emit_many(g.output_for(output), first(matching(g.client(), job, states(state_), task,
                                                   priority, error_type, where, span), limit),
              ARCHIVED_COLUMNS if include_archived else COLUMNS)


@app.command()
def get(ctx: typer.Context, run_id: str, output: OutputOpt = None) -> None:
    """One run: state, timestamps per transition, attempt (retry_attempt of max_attempts,
    failures) and executions, output, last error, why it waits, the step a workflow is in
    (running_step: position, name, since when). A run read back from the archive says
    "archived <when>" first (`-o json`: `archived`, `archived_at`)."""
    g = state(ctx)
    run = g.client().runs.get(run_id)
    out = g.output_for(output)
    if out is Output.table and run.archived:
        stdout().print(archived_text(run), markup=False)
    emit(out, run)


@app.command()
def events(ctx: typer.Context, run_id: str, limit: LimitOpt = None,
           output: OutputOpt = None) -> None:
    """The run's timeline straight from the append-only log, each event in words (read a page
    at a time; `-o jsonl` prints each page as it comes)."""
    g = state(ctx)
    emit_many(g.output_for(output), first(g.client().runs.events(run_id), limit),
              told_event_columns())


@app.command()
def logs(ctx: typer.Context, run_id: str, output: OutputOpt = None) -> None:
    """The log lines the handler emitted in the run's latest reported attempt."""
    g = state(ctx)
    emit_many(g.output_for(output), g.client().runs.logs(run_id).items,
              [("T", lambda x: f"{x.t:.3f}"), ("LEVEL", lambda x: x.level),
               ("MESSAGE", lambda x: x.message), ("FIELDS", lambda x: x.fields or None)])


@app.command()
def steps(ctx: typer.Context, run_id: str, limit: LimitOpt = None,
          output: OutputOpt = None) -> None:
    """A workflow run's recorded steps, timers and signal waits, in order; a running
    workflow's last is the step it is executing (STATE running, since STARTED)."""
    g = state(ctx)
    emit_many(g.output_for(output), first(g.client().runs.steps(run_id), limit), [
        ("SEQ", lambda s: s.seq), ("NAME", lambda s: s.name), ("STATE", lambda s: s.state),
        ("STARTED", lambda s: s.started_at), ("OK", lambda s: s.succeeded),
        ("ATTEMPT", lambda s: s.attempt), ("TRIES", lambda s: s.tries),
        ("MS", lambda s: f"{s.duration_ms:.1f}"), ("ERROR", lambda s: s.error_type)])


def _select(ctx: typer.Context, ids: list[str] | None, job: str | None,
            given: list[str] | None, task: str | None, select_all: bool,
            default: Sequence[str],
            where: list[str] | None = None) -> tuple[Client, list[RunView]]:
    ids = ids or []
    need_selection(ids, any(v for v in (job, given, task, where)), select_all,
                   "--state, --job or --task (or --where)")
    client = state(ctx).client()
    if ids:
        return client, [client.runs.get(i) for i in ids]
    wanted = states(given) if given else list(default)
    return client, list(matching(client, job, wanted, task, where=where))


def _as_operation(ctx: typer.Context, kind: str, ids: list[str] | None, job: str | None,
                  given: list[str] | None, task: str | None, select_all: bool,
                  default: Sequence[str], **how: Any) -> bool:
    """A filter matching more than a page: done as a tracked operation (bulk.operation)."""
    if ids:
        return False
    where = how.get("where")
    need_selection([], any(v for v in (job, given, task, where)), select_all,
                   "--state, --job or --task (or --where)")
    g = state(ctx)
    wanted = states(given) if given else list(default)
    filters = {"states": wanted, "job_id": job, "task": task, "where": where or None}
    return bulk.operation(g.client(), kind, filters, noun="run", yes=how["yes"],
                          dry_run=how["dry_run"], verb=how["verb"], done=how["done"],
                          output=g.output_for(how["output"]))


@app.command()
def cancel(ctx: typer.Context, run_ids: Ids = None, state_: StatesOpt = None,
           job: JobOpt = None, task: TaskOpt = None, where: WhereOpt = None,
           select_all: AllOpt = False, yes: YesOpt = False, dry_run: DryRunOpt = False,
           output: OutputOpt = None) -> None:
    """Cancel runs: waiting ones at once, running ones at their next safe point. Filters
    select among unfinished runs unless --state says otherwise."""
    if _as_operation(ctx, "cancel", run_ids, job, state_, task, select_all,
                     ALIASES["unfinished"], verb="cancel", done="cancelled", yes=yes,
                     dry_run=dry_run, output=output, where=where):
        return
    client, runs = _select(ctx, run_ids, job, state_, task, select_all,
                           ALIASES["unfinished"], where)
    bulk.apply(runs, noun="run", verb="cancel", done="cancelled",
               act=lambda r: client.runs.cancel(r.id), key=lambda r: str(r.id),
               output=state(ctx).output_for(output), columns=COLUMNS, yes=yes,
               dry_run=dry_run, named=bool(run_ids))


@app.command()
def retry(ctx: typer.Context, run_ids: Ids = None, state_: StatesOpt = None,
          job: JobOpt = None, task: TaskOpt = None, where: WhereOpt = None,
          select_all: AllOpt = False, yes: YesOpt = False, dry_run: DryRunOpt = False,
          output: OutputOpt = None) -> None:
    """Re-run failed, cancelled or dead-lettered runs as new linked runs. Filters select
    dead-lettered runs unless --state says otherwise."""
    if _as_operation(ctx, "retry", run_ids, job, state_, task, select_all, ("dead_lettered",),
                     verb="retry", done="retried", yes=yes, dry_run=dry_run, output=output,
                     where=where):
        return
    client, runs = _select(ctx, run_ids, job, state_, task, select_all, ("dead_lettered",),
                           where)
    bulk.apply(runs, noun="run", verb="retry", done="retried",
               act=lambda r: client.runs.retry(r.id), key=lambda r: str(r.id),
               output=state(ctx).output_for(output), columns=COLUMNS, yes=yes,
               dry_run=dry_run, named=bool(run_ids))


HOLD_COLUMNS: list[Column] = [
    ("RUN", lambda r: r.run_id), ("HELD", lambda r: r.held is not None),
    ("REASON", lambda r: r.held.reason if r.held else None),
    ("BY", lambda r: r.held.by if r.held else None),
    ("AT", lambda r: r.held.at if r.held else None), ("CHANGED", lambda r: r.changed)]


@app.command()
def hold(ctx: typer.Context, run_id: str,
         reason: Annotated[str, typer.Option(help="why (recorded and shown with the hold)")],
         output: OutputOpt = None) -> None:
    """Hold RUN_ID: it is never archived or removed until released (docs/RETENTION.md). A
    held run keeps its first hold (CHANGED false)."""
    g = state(ctx)
    emit(g.output_for(output), g.client().runs.hold(run_id, reason=reason), HOLD_COLUMNS)


@app.command()
def release(ctx: typer.Context, run_id: str,
            reason: Annotated[str | None, typer.Option(help="recorded with the release")] = None,
            output: OutputOpt = None) -> None:
    """Release RUN_ID's hold: its tenant's retention applies again."""
    g = state(ctx)
    emit(g.output_for(output), g.client().runs.release(run_id, reason=reason), HOLD_COLUMNS)


@app.command()
def signal(ctx: typer.Context, run_id: str, name: str,
           payload: Annotated[str | None, typer.Option(
               help="the signal's payload, JSON (@path, - for stdin); default null")] = None,
           idempotency_key: Annotated[str | None, typer.Option(
               help="the same key again returns the first answer")] = None,
           reason: Annotated[str | None, typer.Option(
               help="an operator delivering it on the run's behalf: recorded")] = None,
           output: OutputOpt = None) -> None:
    """Send signal NAME to a workflow run: a waiting workflow is woken at once."""
    value: Any = None if payload is None else json_value(payload, "--payload")
    g = state(ctx)
    emit(g.output_for(output), g.client().runs.signal(
        run_id, name, value, idempotency_key=idempotency_key, reason=reason))


@app.command("state")
def run_state(ctx: typer.Context, run_id: str,
              name: Annotated[str | None, typer.Option(
                  help="only this published name")] = None,
              wait: Annotated[float, typer.Option(
                  help="with --name: seconds to wait for it to be published (at most 60)",
                  min=0, max=60)] = 0.0,
              output: OutputOpt = None) -> None:
    """The latest value of each name a workflow run published (ctx.set), while it runs and
    after."""
    g = state(ctx)
    view = g.client().runs.state(run_id, name, wait=wait)
    out = g.output_for(output)
    if out is not Output.table:
        emit(out, view)
        return
    emit_many(out, sorted(view.values.items()), [
        ("NAME", lambda kv: kv[0]), ("VALUE", lambda kv: msgspec.json.encode(kv[1].value).decode()),
        ("SEQ", lambda kv: kv[1].seq), ("SET AT", lambda kv: kv[1].set_at)])


@app.command("update")
def run_update(ctx: typer.Context, run_id: str, name: str,
               payload: Annotated[str | None, typer.Option(
                   help="the update's payload, JSON (@path, - for stdin); default null")] = None,
               timeout: Annotated[float, typer.Option(
                   help="seconds to wait for the workflow's answer", min=0)] = 30.0,
               idempotency_key: Annotated[str | None, typer.Option(
                   help="the same key again names the same update (and answer)")] = None,
               output: OutputOpt = None) -> None:
    """Send update NAME to a running workflow and print its answer. Exit 0 answered, 3
    refused by the workflow or left unanswered by a run that ended, 5 --timeout ran out."""
    value: Any = None if payload is None else json_value(payload, "--payload")
    g = state(ctx)
    client = g.client()
    try:
        view = update_view(client.send, run_id, name, value, timeout, idempotency_key)
    except UpdateTimeoutError as exc:
        stderr().print(f"error: {exc}", markup=False)
        raise typer.Exit(5) from None
    emit(g.output_for(output), view)
    if view.state != "completed":
        raise typer.Exit(3)


app.command("wait")(awaiting.wait)  # start and await: ostinato.cli.awaiting
