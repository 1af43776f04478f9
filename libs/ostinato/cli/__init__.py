"""`ostinato`: the command line, resource then verb, on the public API through
`ostinato.client` (docs/CLI.md), plus the administrative commands of `ostinato.cli.admin`.

    ostinato [--profile P] [--api-url URL] [--api-key KEY] [--tenant ID] [-o table|json|jsonl]
             RESOURCE VERB

Resources: jobs, schedules, runs, dead-letters, pools, workers, tasks, tenants, keys, audit, dags,
dag-runs, alert-sinks, alerts, usage, workflows (start by id, signal-with-start, the pre-deploy
check), attributes (searchable ones); and `run TASK [--wait]`, which starts a run now (`runs wait
ID` awaits any run). The connection is resolved as flag > OSTINATO_API_URL / OSTINATO_API_KEY /
OSTINATO_TENANT > the profile file (`ostinato.client.config`); `--tenant` lets the admin key act
for that tenant. Exit codes: 0 done, 1 the API refused or failed (or a bulk verb partly failed, or
was declined), 2 bad usage; an await (`run --wait`, `runs wait`): 3 the run failed, 4 cancelled, 5
timed out.
Shell completion: `ostinato --install-completion` (typer's).

Built with typer + rich. The user commands import only the client (an import-linter
contract), so everything they do an API user could do with `ostinato.client` too;
`workflows check` also runs the SDK's replay (`ostinato.sdk.check`) on the runs it reads.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ostinato.cli import (
    admin,
    alerts,
    attributes,
    awaiting,
    capacity,
    dags,
    dead_letters,
    jobs,
    runs,
    schedules,
    security,
    workflows,
)
from ostinato.cli.context import Globals, Output, RootGroup

app = typer.Typer(
    name="ostinato", cls=RootGroup, no_args_is_help=True, pretty_exceptions_enable=False,
    help="Ostinato: jobs, runs and dead letters on the public API; and the admin commands.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    ctx: typer.Context,
    profile: Annotated[str | None, typer.Option(
        help="a profile of ~/.config/ostinato/config.toml (default: $OSTINATO_PROFILE)",
        show_default=False)] = None,
    api_url: Annotated[str | None, typer.Option(
        metavar="URL", help="the API (overrides $OSTINATO_API_URL and the profile)",
        show_default=False)] = None,
    api_key: Annotated[str | None, typer.Option(
        help="an API key (overrides $OSTINATO_API_KEY and the profile)",
        show_default=False)] = None,
    tenant: Annotated[str | None, typer.Option(
        metavar="ID", help="with the admin key: act for this tenant (its id; overrides "
                           "$OSTINATO_TENANT and the profile)", show_default=False)] = None,
    output: Annotated[Output | None, typer.Option(
        "--output", "-o", help="table, json or jsonl, for every command (default: the "
                               "profile's, else table)", show_default=False)] = None,
) -> None:
    ctx.obj = Globals(profile=profile, api_url=api_url, api_key=api_key, tenant=tenant,
                      output=output)


app.add_typer(jobs.app, name="jobs")
app.add_typer(schedules.app, name="schedules")
app.add_typer(runs.app, name="runs")
app.add_typer(dead_letters.app, name="dead-letters")
app.add_typer(capacity.pools, name="pools")
app.add_typer(capacity.workers, name="workers")
app.add_typer(capacity.tasks, name="tasks")
app.add_typer(capacity.tenants, name="tenants")
app.add_typer(security.keys, name="keys")
app.add_typer(security.audit, name="audit")
app.add_typer(dags.app, name="dags")
app.add_typer(dags.runs_app, name="dag-runs")
app.add_typer(alerts.sinks, name="alert-sinks")
app.add_typer(alerts.alerts, name="alerts")
app.command("usage")(alerts.usage)
app.add_typer(workflows.app, name="workflows")
app.add_typer(attributes.app, name="attributes")
app.command("run")(awaiting.run)  # start a run now; --wait: exit by how it ended
admin.register(app)


def main(argv: list[str] | None = None) -> int:
    """The console script `ostinato` (and `python -m ostinato`): the exit code."""
    try:
        app(args=argv, prog_name="ostinato")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


__all__ = ["app", "main"]
