"""`ostinato alert-sinks list|put|delete`, `ostinato alerts list` and `ostinato usage`: where
alerts go, what fires, and what a tenant used (docs/ALERTS.md). A group given no verb lists."""

from __future__ import annotations

from typing import Annotated

import typer

from ostinato.cli.context import OutputOpt, state
from ostinato.cli.output import Column, emit, emit_many
from ostinato.cli.parse import instant

sinks = typer.Typer(help="Webhook sinks for alerts (Alertmanager's format), routed by owner.")
alerts = typer.Typer(help="The tenant's alerts, firing and resolved.")

SINK_COLUMNS: list[Column] = [
    ("NAME", lambda s: s.name), ("URL", lambda s: s.url),
    ("OWNERS", lambda s: ",".join(s.owners)), ("DEFAULT", lambda s: s.default),
    ("SECRET HEADER", lambda s: s.secret_header or ""),
]
ALERT_COLUMNS: list[Column] = [
    ("STATUS", lambda a: a.status), ("RULE", lambda a: a.rule),
    ("JOB", lambda a: a.labels.get("job", "")), ("OWNER", lambda a: a.owner or ""),
    ("SINCE", lambda a: a.starts_at), ("ENDED", lambda a: a.ends_at or ""),
]
USAGE_COLUMNS: list[Column] = [
    ("START", lambda u: u.start), ("RUNS", lambda u: u.runs), ("ATTEMPTS", lambda u: u.attempts),
    ("WORKER SECONDS", lambda u: round(u.worker_seconds, 3)),
    ("PAYLOAD BYTES", lambda u: u.payload_bytes), ("OUTPUT BYTES", lambda u: u.output_bytes),
    ("STEPS", lambda u: u.workflow_steps),
]


@sinks.callback(invoke_without_command=True)
def _sinks(ctx: typer.Context, output: OutputOpt = None) -> None:
    if ctx.invoked_subcommand is None:
        list_sinks(ctx, output=output)


@sinks.command("list")
def list_sinks(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Your alert sinks (secrets are never shown)."""
    g = state(ctx)
    emit_many(g.output_for(output), g.client().alert_sinks.list(), SINK_COLUMNS)


@sinks.command("put")
def put_sink(
    ctx: typer.Context, name: str, url: str,
    owner: Annotated[list[str] | None, typer.Option(
        "--owner", help="a team whose jobs' alerts it receives (repeat for several)")] = None,
    default: Annotated[bool, typer.Option(
        "--default", help="also the alerts no owner's sink takes")] = False,
    secret_header: Annotated[str | None, typer.Option(
        help="a header sent with every delivery, e.g. Authorization")] = None,
    secret: Annotated[str | None, typer.Option(help="that header's value")] = None,
    output: OutputOpt = None,
) -> None:
    """Create or replace the sink NAME posting to URL."""
    g = state(ctx)
    emit(g.output_for(output), g.client().alert_sinks.put(
        name, url, owners=owner or [], default=default, secret_header=secret_header,
        secret=secret))


@sinks.command("delete")
def delete_sink(ctx: typer.Context, name: str) -> None:
    """Remove the sink NAME and what still waits for it."""
    state(ctx).client().alert_sinks.delete(name)


@alerts.callback(invoke_without_command=True)
def _alerts(ctx: typer.Context, output: OutputOpt = None) -> None:
    if ctx.invoked_subcommand is None:
        list_alerts(ctx, output=output)


@alerts.command("list")
def list_alerts(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Firing alerts first, then resolved ones, newest first."""
    g = state(ctx)
    emit_many(g.output_for(output), g.client().alerts.list(), ALERT_COLUMNS)


def usage(
    ctx: typer.Context,
    start: Annotated[str | None, typer.Option(
        "--from", help="start (RFC 3339, inclusive), default: a day before --to")] = None,
    end: Annotated[str | None, typer.Option("--to", help="end (RFC 3339), default: now")] = None,
    granularity: Annotated[str, typer.Option(help="hour or day")] = "hour",
    output: OutputOpt = None,
) -> None:
    """Runs, attempts, worker-seconds, payload and output bytes and workflow steps per hour or
    day (UTC); the last line is the total."""
    g = state(ctx)
    view = g.client().usage.get(instant(start, "--from") if start else None,
                                instant(end, "--to") if end else None, granularity)
    emit_many(g.output_for(output), [*view.items, view.total], USAGE_COLUMNS)
