"""`ostinato schedules preview`: a schedule's next occurrences before any job is created, so
DST behaviour (skipped and repeated local times) can be checked first."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ostinato.cli.context import OutputOpt, state, usage
from ostinato.cli.output import Column, emit_many
from ostinato.cli.parse import json_value

app = typer.Typer(help="Schedules: preview occurrences before creating a job.",
                  no_args_is_help=True)

COLUMNS: list[Column] = [("SLOT (UTC)", lambda u: u.slot), ("LOCAL", lambda u: u.local),
                         ("DUE", lambda u: u.due_at)]


@app.command()
def preview(
    ctx: typer.Context,
    cron: Annotated[str | None, typer.Option(help="cron expression, read in --timezone")] = None,
    every: Annotated[str | None, typer.Option(help="fixed interval: 90s, 15m, 1h30m")] = None,
    at: Annotated[str | None, typer.Option(help="one-off instant, RFC 3339")] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", "--tz")] = None,
    start_at: Annotated[str | None, typer.Option(help="first possible occurrence")] = None,
    dst_gap: Annotated[str | None, typer.Option(help="shift_forward or skip")] = None,
    dst_fold: Annotated[str | None, typer.Option(help="auto, first, second or both")] = None,
    jitter: Annotated[str | None, typer.Option(help="spread starts over [0, jitter)")] = None,
    calendar: Annotated[str | None, typer.Option(help="exclusion calendar to skip")] = None,
    schedule: Annotated[str | None, typer.Option(
        help="the whole schedule as JSON (@path, - for stdin); flags override it")] = None,
    count: Annotated[int, typer.Option(min=1, max=100)] = 10,
    output: OutputOpt = None,
) -> None:
    """The next COUNT occurrences: UTC slot, local wall time, due instant with jitter."""
    spec: dict[str, Any] = {}
    if schedule is not None:
        loaded = json_value(schedule, "--schedule")
        if not isinstance(loaded, dict):
            raise usage("--schedule must hold a JSON object")
        spec.update(loaded)
    for key, value in (("cron", cron), ("every", every), ("at", at), ("timezone", timezone),
                       ("start_at", start_at), ("dst_gap", dst_gap), ("dst_fold", dst_fold),
                       ("jitter", jitter), ("calendar", calendar)):
        if value is not None:
            spec[key] = value
    if not spec:
        raise usage("give a schedule: --cron, --every, --at or --schedule")
    g = state(ctx)
    emit_many(g.output_for(output), g.client().schedules.preview(spec, count).items, COLUMNS)
