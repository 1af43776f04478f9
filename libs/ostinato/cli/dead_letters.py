"""`ostinato dead-letters ...`: the runs that failed for good, with counts; triage and replay
them one by one or by filter."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import typer

from ostinato.cli import bulk
from ostinato.cli.common import first, need_selection
from ostinato.cli.context import DryRunOpt, LimitOpt, Output, OutputOpt, YesOpt, state, stderr
from ostinato.cli.output import Column, emit, emit_many
from ostinato.cli.parse import json_value
from ostinato.client import Client
from ostinato.wire.api import DeadLetterView

app = typer.Typer(help="Dead letters: runs that failed for good, to triage and replay.",
                  no_args_is_help=True)

COLUMNS: list[Column] = [
    ("RUN", lambda d: d.run_id), ("JOB", lambda d: d.job_id), ("TASK", lambda d: d.task),
    ("ERROR", lambda d: d.error_type), ("ATTEMPTS", lambda d: d.attempts),
    ("DEAD-LETTERED", lambda d: d.dead_lettered_at), ("TRIAGE", lambda d: d.triage_state),
    ("REPLAYS", lambda d: d.replays),
]
TRIAGE_STATES = "new, acknowledged, fixed or wont_fix"
Ids = Annotated[list[str] | None, typer.Argument(help="dead letters' run ids",
                                                 show_default=False)]
JobOpt = Annotated[str | None, typer.Option("--job", help="only this job's")]
ErrorOpt = Annotated[str | None, typer.Option("--error-type", help="only this error type")]
TriageOpt = Annotated[str | None, typer.Option("--triage-state", help=TRIAGE_STATES)]
OlderOpt = Annotated[str | None, typer.Option("--older-than", metavar="AGE",
                                              help="dead-lettered longer ago than AGE: 1h, 2d")]
AllOpt = Annotated[bool, typer.Option("--all", help="every dead letter")]


def _filters(job: str | None, error_type: str | None, triage_state: str | None,
             older_than: str | None) -> dict[str, Any]:
    return {k: v for k, v in (("job_id", job), ("error_type", error_type),
                              ("triage_state", triage_state), ("older_than", older_than))
            if v is not None}


@app.command("list")
def list_letters(ctx: typer.Context, job: JobOpt = None, error_type: ErrorOpt = None,
                 triage_state: TriageOpt = None, older_than: OlderOpt = None,
                 limit: LimitOpt = None, output: OutputOpt = None) -> None:
    """Dead letters, newest first; in a table, with their counts by error and triage state."""
    g = state(ctx)
    out = g.output_for(output)
    client = g.client()
    where = _filters(job, error_type, triage_state, older_than)
    emit_many(out, first(client.dead_letters.list(**where), limit), COLUMNS)
    if out is Output.table:
        counts = client.dead_letters.counts(**where)
        by_type = ", ".join(f"{k} {v}" for k, v in sorted(counts.by_error_type.items()))
        by_state = ", ".join(f"{k} {v}" for k, v in sorted(counts.by_triage_state.items()))
        stderr().print(f"{counts.total} in all; by error: {by_type or '-'}; by triage: "
                       f"{by_state or '-'}", markup=False)


@app.command()
def get(ctx: typer.Context, run_id: str, output: OutputOpt = None) -> None:
    """One dead letter with its payload and full attempt history."""
    g = state(ctx)
    emit(g.output_for(output), g.client().dead_letters.get(run_id))


def _select(ctx: typer.Context, ids: list[str] | None, where: dict[str, Any],
            select_all: bool) -> tuple[Client, list[DeadLetterView]]:
    ids = ids or []
    need_selection(ids, bool(where), select_all,
                   "--job, --error-type, --triage-state or --older-than")
    client = state(ctx).client()
    if ids:
        return client, [client.dead_letters.get(i) for i in ids]
    return client, list(client.dead_letters.list(**where))


@app.command()
def triage(ctx: typer.Context,
           to: Annotated[str, typer.Option("--to", help=f"the new triage state: "
                                                         f"{TRIAGE_STATES}")],
           run_ids: Ids = None,
           comment: Annotated[str | None, typer.Option(help="recorded with it")] = None,
           job: JobOpt = None, error_type: ErrorOpt = None, triage_state: TriageOpt = None,
           older_than: OlderOpt = None, select_all: AllOpt = False, yes: YesOpt = False,
           dry_run: DryRunOpt = False, output: OutputOpt = None) -> None:
    """Mark dead letters acknowledged, fixed, wont_fix (or new again)."""
    client, letters = _select(ctx, run_ids, _filters(job, error_type, triage_state,
                                                     older_than), select_all)
    bulk.apply(letters, noun="dead letter", verb="triage", done="triaged",
               act=lambda d: client.dead_letters.triage(d.run_id, to, comment=comment),
               key=lambda d: str(d.run_id), output=state(ctx).output_for(output),
               columns=COLUMNS, yes=yes, dry_run=dry_run, named=bool(run_ids))


@app.command()
def replay(ctx: typer.Context, run_ids: Ids = None,
           payload: Annotated[str | None, typer.Option(
               help="a corrected payload for the new runs, JSON (@path, - for stdin)")] = None,
           request_key: Annotated[str | None, typer.Option(
               help="replays once per dead letter however often repeated (default: new "
                    "for each invocation)")] = None,
           job: JobOpt = None, error_type: ErrorOpt = None, triage_state: TriageOpt = None,
           older_than: OlderOpt = None, select_all: AllOpt = False, yes: YesOpt = False,
           dry_run: DryRunOpt = False, output: OutputOpt = None) -> None:
    """Re-run dead letters as new linked runs (audited), optionally with a fixed payload."""
    where = _filters(job, error_type, triage_state, older_than)
    if not run_ids and payload is None and request_key is None and older_than is None:
        need_selection([], bool(where), select_all,
                       "--job, --error-type, --triage-state or --older-than")
        g = state(ctx)
        if bulk.operation(g.client(), "replay", where, noun="dead letter", verb="replay",
                          done="replayed", output=g.output_for(output), yes=yes,
                          dry_run=dry_run):
            return
    client, letters = _select(ctx, run_ids, where, select_all)
    key = request_key or f"cli-{uuid.uuid4().hex}"
    fixed: Any = json_value(payload, "--payload") if payload is not None else None
    kwargs: dict[str, Any] = {"request_key": key}
    if payload is not None:
        kwargs["payload"] = fixed
    bulk.apply(letters, noun="dead letter", verb="replay", done="replayed",
               act=lambda d: client.dead_letters.replay(d.run_id, **kwargs),
               key=lambda d: str(d.run_id), output=state(ctx).output_for(output),
               columns=COLUMNS, yes=yes, dry_run=dry_run, named=bool(run_ids))
