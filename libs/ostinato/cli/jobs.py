"""`ostinato jobs ...`: register, list, steer and inspect jobs (through `ostinato.client`)."""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase
from itertools import zip_longest
from typing import Annotated, Any

import typer

from ostinato.cli import bulk
from ostinato.cli.common import first, need_selection
from ostinato.cli.context import (
    AttributeOpt,
    DryRunOpt,
    LimitOpt,
    Output,
    OutputOpt,
    YesOpt,
    state,
    stderr,
    usage,
)
from ostinato.cli.output import Column, emit, emit_many, schedule_text
from ostinato.cli.parse import attributes, instant, json_value
from ostinato.client import Client
from ostinato.schedules.spec import edited_spec
from ostinato.wire.api import JobView

app = typer.Typer(help="Jobs: what runs, and when (one-off, cron, interval).",
                  no_args_is_help=True)

COLUMNS: list[Column] = [
    ("ID", lambda j: j.id), ("NAME", lambda j: j.name), ("TASK", lambda j: j.task),
    ("STATUS", lambda j: j.status), ("SCHEDULE", lambda j: schedule_text(j.schedule)),
    ("NEXT RUN", lambda j: j.next_run_at), ("RUNS", lambda j: j.runs_created),
]
Ids = Annotated[list[str] | None, typer.Argument(help="job ids", show_default=False)]
StatusOpt = Annotated[str | None, typer.Option(help="active, paused, completed or deleted")]
TaskOpt = Annotated[str | None, typer.Option(help="only jobs of this task")]
NameOpt = Annotated[str | None, typer.Option(help="only jobs whose name matches this glob")]
AllOpt = Annotated[bool, typer.Option("--all", help="every job the filters let through")]


def _matching(client: Client, status: str | None, task: str | None,
              name: str | None) -> Iterator[JobView]:
    for job in client.jobs.list(status=status):
        if (task is None or job.task == task) and (name is None or fnmatchcase(job.name, name)):
            yield job


@app.command("list")
def list_jobs(ctx: typer.Context, status: StatusOpt = None, task: TaskOpt = None,
              name: NameOpt = None, limit: LimitOpt = None, output: OutputOpt = None) -> None:
    """This tenant's jobs, newest first."""
    g = state(ctx)
    emit_many(g.output_for(output), first(_matching(g.client(), status, task, name), limit),
              COLUMNS)


@app.command()
def get(ctx: typer.Context, job_id: str, output: OutputOpt = None) -> None:
    """One job, with its schedule, next run and payload."""
    g = state(ctx)
    emit(g.output_for(output), g.client().jobs.get(job_id))


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Option(help="the job's name (its task too, unless "
                                                  "--task)")] = None,
    file: Annotated[str | None, typer.Option("--file", "-f", metavar="FILE", help=(
        "the whole request as JSON (@path, - for stdin, or inline); flags override it"))] = None,
    task: Annotated[str | None, typer.Option(help="the handler's task name")] = None,
    cron: Annotated[str | None, typer.Option(help="cron expression, read in --timezone")] = None,
    every: Annotated[str | None, typer.Option(help="fixed interval: 90s, 15m, 1h30m")] = None,
    at: Annotated[str | None, typer.Option(help="one-off instant, RFC 3339")] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", "--tz",
                                                 help="IANA zone of --cron")] = None,
    start_at: Annotated[str | None, typer.Option(help="no occurrence before (RFC 3339)")] = None,
    end_at: Annotated[str | None, typer.Option(help="no occurrence after (RFC 3339)")] = None,
    misfire: Annotated[str | None, typer.Option(help="run_once, catch_up or skip")] = None,
    jitter: Annotated[str | None, typer.Option(help="spread starts over [0, jitter)")] = None,
    calendar: Annotated[str | None, typer.Option(help="exclusion calendar to skip")] = None,
    overlap: Annotated[str | None, typer.Option(help="allow, skip or queue")] = None,
    payload: Annotated[str | None, typer.Option(help="JSON (@path, - for stdin)")] = None,
    pool: Annotated[str | None, typer.Option(help="worker pool")] = None,
    priority: Annotated[str | None, typer.Option(help="priority class")] = None,
    idempotency_key: Annotated[str | None, typer.Option(
        help="the same key again returns the first job")] = None,
    concurrency_key: Annotated[str | None, typer.Option(help="one run at a time per key")] = None,
    resource: Annotated[str | None, typer.Option(help="rate-limited resource name")] = None,
    timeout: Annotated[str | None, typer.Option(help="an attempt's time limit: 30m")] = None,
    max_attempts: Annotated[int | None, typer.Option(min=1, help="retry policy's attempts")]
        = None,
    attribute: AttributeOpt = None,
    output: OutputOpt = None,
) -> None:
    """Register a job. Without a schedule it is due now. Bad input is refused by the API
    with the field named (exit 1)."""
    body: dict[str, Any] = {}
    if file is not None:
        loaded = json_value(file, "--file")
        if not isinstance(loaded, dict):
            raise usage("--file must hold a JSON object (a job request)")
        body.update(loaded)
    schedule: dict[str, Any] = dict(body.get("schedule") or {})
    for key, value in (("cron", cron), ("every", every), ("at", at), ("timezone", timezone),
                       ("start_at", start_at), ("end_at", end_at), ("misfire", misfire),
                       ("jitter", jitter), ("calendar", calendar), ("overlap", overlap)):
        if value is not None:
            schedule[key] = value
    if schedule:
        body["schedule"] = schedule
    for key, value in (("name", name), ("task", task), ("pool", pool), ("priority", priority),
                       ("idempotency_key", idempotency_key),
                       ("concurrency_key", concurrency_key), ("resource", resource),
                       ("timeout", timeout)):
        if value is not None:
            body[key] = value
    if payload is not None:
        body["payload"] = json_value(payload, "--payload")
    if max_attempts is not None:
        body["retry"] = {**(body.get("retry") or {}), "max_attempts": max_attempts}
    if attribute:
        body["attributes"] = {**(body.get("attributes") or {}), **attributes(attribute)}
    if "name" not in body:
        raise usage("a job needs a name: --name, or \"name\" in --file")
    g = state(ctx)
    emit(g.output_for(output), g.client().jobs.create(body))


UPDATE_COLUMNS: list[Column] = [
    ("#", lambda r: r[0]), ("BEFORE (UTC)", lambda r: r[1]), ("BEFORE (LOCAL)", lambda r: r[2]),
    ("AFTER (UTC)", lambda r: r[3]), ("AFTER (LOCAL)", lambda r: r[4]),
]


@app.command()
def update(
    ctx: typer.Context,
    job_id: str,
    file: Annotated[str | None, typer.Option("--file", "-f", metavar="FILE", help=(
        "the PATCH body as JSON (@path, - for stdin, or inline); flags override it"))] = None,
    cron: Annotated[str | None, typer.Option(help="new cron expression")] = None,
    every: Annotated[str | None, typer.Option(help="new fixed interval: 90s, 15m")] = None,
    at: Annotated[str | None, typer.Option(help="new one-off instant, RFC 3339")] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", "--tz",
                                                 help="IANA zone of the cron")] = None,
    start_at: Annotated[str | None, typer.Option(help="no occurrence before (RFC 3339)")] = None,
    end_at: Annotated[str | None, typer.Option(help="no occurrence after (RFC 3339)")] = None,
    misfire: Annotated[str | None, typer.Option(help="run_once, catch_up or skip")] = None,
    dst_gap: Annotated[str | None, typer.Option(help="shift_forward or skip")] = None,
    dst_fold: Annotated[str | None, typer.Option(help="auto, first, second or both")] = None,
    jitter: Annotated[str | None, typer.Option(help="spread starts over [0, jitter)")] = None,
    calendar: Annotated[str | None, typer.Option(help="exclusion calendar to skip")] = None,
    overlap: Annotated[str | None, typer.Option(help="allow, skip or queue")] = None,
    payload: Annotated[str | None, typer.Option(help="JSON (@path, - for stdin)")] = None,
    pool: Annotated[str | None, typer.Option(help="worker pool")] = None,
    priority: Annotated[str | None, typer.Option(help="priority class")] = None,
    timeout: Annotated[str | None, typer.Option(help="an attempt's time limit: 30m")] = None,
    max_attempts: Annotated[int | None, typer.Option(min=1, help="retry policy's attempts")]
        = None,
    owner: Annotated[str | None, typer.Option(help="the team its alerts go to")] = None,
    reason: Annotated[str | None, typer.Option(help="recorded with the edit")] = None,
    apply_to_scheduled: Annotated[bool, typer.Option(
        "--apply-to-scheduled", help="runs not yet dispatched take the new settings too")]
        = False,
    if_match: Annotated[str | None, typer.Option(
        help="edit only this version (default: the version read for schedule flags)")] = None,
    dry_run: DryRunOpt = False,
    output: OutputOpt = None,
) -> None:
    """Edit a job in place: same id and history, its version one more. Schedule flags change
    the job's schedule as read (and the edit applies only to the version read: a concurrent
    edit makes it fail with 412). The upcoming occurrences before and after are shown;
    --dry-run changes nothing."""
    body: dict[str, Any] = {}
    if file is not None:
        loaded = json_value(file, "--file")
        if not isinstance(loaded, dict):
            raise usage("--file must hold a JSON object (a job update request)")
        body.update(loaded)
    g = state(ctx)
    client = g.client()
    flags = {"cron": cron, "every": every, "at": at, "timezone": timezone,
             "start_at": start_at, "end_at": end_at, "misfire": misfire, "dst_gap": dst_gap,
             "dst_fold": dst_fold, "jitter": jitter, "calendar": calendar, "overlap": overlap}
    if any(v is not None for v in flags.values()):
        job = client.jobs.get(job_id)
        body["schedule"] = edited_spec(job.schedule, {**(body.get("schedule") or {}),
                                                      **flags})
        if if_match is None and job.version is not None:
            if_match = str(job.version)
    for key, value in (("pool", pool), ("priority", priority), ("timeout", timeout),
                       ("owner", owner), ("reason", reason)):
        if value is not None:
            body[key] = value
    if payload is not None:
        body["payload"] = json_value(payload, "--payload")
    if max_attempts is not None:
        body["retry"] = {**(body.get("retry") or {}), "max_attempts": max_attempts}
    if apply_to_scheduled:
        body["apply_to_scheduled"] = True
    done = client.jobs.update(job_id, body, if_match=if_match, dry_run=dry_run)
    out = g.output_for(output)
    if out is not Output.table:
        emit(out, done)
        return
    before, after = done.upcoming_before.items, done.upcoming_after.items
    rows = [(i + 1, *((b.slot, b.local) if b else ("", "")), *((a.slot, a.local) if a else
                                                                ("", "")))
            for i, (b, a) in enumerate(zip_longest(before, after))]
    emit_many(out, rows, UPDATE_COLUMNS)
    changed = ", ".join(done.changed) or "nothing"
    verb = "would change" if done.dry_run else "changed"
    stderr().print(f"job {done.job.id} version {done.version}: {verb} {changed}"
                   + (f"; {done.runs_amended} scheduled runs amended" if done.runs_amended
                      else "") + ("; nothing changed (dry run)" if done.dry_run else ""),
                   markup=False)


def _bulk(ctx: typer.Context, ids: list[str] | None, status: str | None, task: str | None,
          name: str | None, select_all: bool, *, verb: str, done: str, act: Any, yes: bool,
          dry_run: bool, output: Any) -> None:
    ids = ids or []
    need_selection(ids, any(v is not None for v in (status, task, name)), select_all,
                   "--status, --task or --name")
    g = state(ctx)
    client = g.client()
    jobs: list[Any] = ([client.jobs.get(i) for i in ids] if ids
                       else list(_matching(client, status, task, name)))
    bulk.apply(jobs, noun="job", verb=verb, done=done, act=lambda j: act(client, j),
               key=lambda j: str(j.id), output=g.output_for(output), columns=COLUMNS, yes=yes,
               dry_run=dry_run, named=bool(ids))


@app.command()
def delete(ctx: typer.Context, job_ids: Ids = None, status: StatusOpt = None,
           task: TaskOpt = None, name: NameOpt = None, select_all: AllOpt = False,
           yes: YesOpt = False, dry_run: DryRunOpt = False, output: OutputOpt = None) -> None:
    """Stop jobs creating runs (runs already created go on)."""
    _bulk(ctx, job_ids, status, task, name, select_all, verb="delete", done="deleted",
          act=lambda c, j: c.jobs.delete(j.id), yes=yes, dry_run=dry_run, output=output)


@app.command()
def pause(ctx: typer.Context, job_ids: Ids = None, status: StatusOpt = None,
          task: TaskOpt = None, name: NameOpt = None, select_all: AllOpt = False,
          reason: Annotated[str | None, typer.Option(help="recorded with the pause")] = None,
          yes: YesOpt = False, dry_run: DryRunOpt = False, output: OutputOpt = None) -> None:
    """Stop jobs creating runs until resumed; missed slots are decided on resume."""
    if not job_ids and name is None and reason is None and status in (None, "active"):
        need_selection([], any(v is not None for v in (status, task)), select_all,
                       "--status, --task or --name")
        g = state(ctx)
        if bulk.operation(g.client(), "pause", {"task": task}, noun="job", verb="pause",
                          done="paused", output=g.output_for(output), yes=yes,
                          dry_run=dry_run):
            return
    _bulk(ctx, job_ids, status, task, name, select_all, verb="pause", done="paused",
          act=lambda c, j: c.jobs.pause(j.id, reason=reason), yes=yes, dry_run=dry_run,
          output=output)


@app.command()
def resume(ctx: typer.Context, job_ids: Ids = None, status: StatusOpt = None,
           task: TaskOpt = None, name: NameOpt = None, select_all: AllOpt = False,
           misfire: Annotated[str | None, typer.Option(
               help="slots missed while paused: run_once, catch_up or skip (default: the "
                    "schedule's policy)")] = None,
           yes: YesOpt = False, dry_run: DryRunOpt = False, output: OutputOpt = None) -> None:
    """Resume paused jobs."""
    _bulk(ctx, job_ids, status, task, name, select_all, verb="resume", done="resumed",
          act=lambda c, j: c.jobs.resume(j.id, misfire=misfire), yes=yes, dry_run=dry_run,
          output=output)


@app.command()
def trigger(ctx: typer.Context, job_id: str, output: OutputOpt = None,
            request_key: Annotated[str | None, typer.Option(
                help="triggers once however often repeated (default: once per invocation)")]
            = None) -> None:
    """One run now, outside the schedule (trigger `manual`); a DAG job's is a DAG run."""
    g = state(ctx)
    emit(g.output_for(output), g.client().jobs.trigger(job_id, request_key=request_key))


SLOT_COLUMNS: list[Column] = [
    ("SLOT (UTC)", lambda s: s.slot), ("LOCAL", lambda s: s.local),
    ("ACTION", lambda s: s.action), ("RECORDED SKIP", lambda s: s.recorded_skip or ""),
]


@app.command()
def backfill(ctx: typer.Context, job_id: str,
             start: Annotated[str, typer.Option(help="first slot (RFC 3339), inclusive")],
             end: Annotated[str, typer.Option(help="last slot (RFC 3339), exclusive")],
             yes: YesOpt = False, dry_run: DryRunOpt = False, output: OutputOpt = None) -> None:
    """Runs for the slots in [start, end) that have none; repeating it creates none. The slots
    are listed first (UTC and local time; create, has_run, removed, upcoming or skip) and
    confirmed."""
    g = state(ctx)
    client, out = g.client(), g.output_for(output)
    since, until = instant(start, "--start"), instant(end, "--end")
    err = stderr()
    plan = client.jobs.backfill(job_id, since, until, dry_run=True)
    n = plan.runs_created
    what = f"{n} slot{'' if n == 1 else 's'} to backfill of {len(plan.slots)} in range"
    if dry_run or n == 0:
        emit_many(out, plan.slots, SLOT_COLUMNS)
        err.print(f"{what} ({plan.timezone}); nothing changed", markup=False)
        return
    if not yes:
        emit_many(out, plan.slots, SLOT_COLUMNS)
        if not typer.confirm(f"Backfill {n} slot{'' if n == 1 else 's'}?", err=True):
            err.print("aborted: nothing changed", markup=False)
            raise typer.Exit(1)
    done = client.jobs.backfill(job_id, since, until)
    if yes:
        emit_many(out, done.slots, SLOT_COLUMNS)
    err.print(f"{done.runs_created} runs created, {done.slots_with_runs} slots had runs, "
              f"{done.slots_skipped} skipped", markup=False)


@app.command()
def upcoming(ctx: typer.Context, job_id: str,
             count: Annotated[int, typer.Option(min=1, max=100)] = 10,
             output: OutputOpt = None) -> None:
    """The job's next occurrences: UTC slot, local time, due instant (jitter)."""
    from ostinato.cli.schedules import COLUMNS as SLOTS

    g = state(ctx)
    emit_many(g.output_for(output), g.client().jobs.upcoming(job_id, count).items, SLOTS)


@app.command()
def events(ctx: typer.Context, job_id: str, limit: LimitOpt = None,
           output: OutputOpt = None) -> None:
    """The job's timeline from the log, each event in words: created, occurrences fired and
    skipped, pauses."""
    from ostinato.cli.runs import told_event_columns

    g = state(ctx)
    emit_many(g.output_for(output), first(g.client().jobs.events(job_id), limit),
              told_event_columns())
