"""`ostinato dags ...` and `ostinato dag-runs ...` (docs/DAGS.md): define, list, show and run
DAGs; show, follow, cancel and retry-from-node their runs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from ostinato.cli.common import first
from ostinato.cli.context import LimitOpt, OutputOpt, state, usage
from ostinato.cli.output import Column, emit, emit_many, stdout, text
from ostinato.cli.parse import json_value

app = typer.Typer(help="DAGs: tasks as nodes with edges and trigger rules.",
                  no_args_is_help=True)
runs_app = typer.Typer(help="DAG runs: one execution of a DAG, a run per node.",
                       no_args_is_help=True)

DAG_COLUMNS: list[Column] = [
    ("ID", lambda d: d.id), ("NAME", lambda d: d.name), ("VERSION", lambda d: d.version),
    ("NODES", lambda d: d.node_count), ("UPDATED", lambda d: d.updated_at),
]
RUN_COLUMNS: list[Column] = [
    ("ID", lambda r: r.id), ("STATE", lambda r: r.state), ("VERSION", lambda r: r.dag_version),
    ("PROGRESS", lambda r: ", ".join(f"{k} {v}" for k, v in sorted(r.progress.items()))),
    ("CREATED", lambda r: r.created_at),
]
NODE_COLUMNS: list[Column] = [
    ("NODE", lambda n: n.key), ("STATE", lambda n: n.state), ("TASK", lambda n: n.task),
    ("RUN", lambda n: n.run_id), ("ATTEMPTS", lambda n: n.attempts),
    ("GEN", lambda n: n.generation), ("STARTED", lambda n: n.started_at),
    ("FINISHED", lambda n: n.finished_at),
]
EVENT_COLUMNS: list[Column] = [
    ("VERSION", lambda e: e.version), ("TYPE", lambda e: e.type),
    ("NODE", lambda e: e.data.get("key")), ("OCCURRED", lambda e: e.occurred_at),
    ("ACTOR", lambda e: e.actor),
]
ReasonOpt = Annotated[str | None, typer.Option(help="why (kept in the audit trail)")]


@app.command()
def define(ctx: typer.Context, file: Annotated[str, typer.Argument(
        metavar="FILE", help="the definition as JSON: @path, - for stdin, or inline")],
           name: Annotated[str | None, typer.Option(help="overrides the file's name")] = None,
           output: OutputOpt = None) -> None:
    """Define a DAG or its next version; a cycle is refused, named (exit 1)."""
    body = json_value(file, "FILE")
    if not isinstance(body, dict):
        raise usage("FILE must hold a JSON object (a DAG definition)")
    if name is not None:
        body["name"] = name
    g = state(ctx)
    emit(g.output_for(output), g.client().dags.define(body))


@app.command("list")
def list_dags(ctx: typer.Context, limit: LimitOpt = None, output: OutputOpt = None) -> None:
    """The tenant's DAGs by name."""
    g = state(ctx)
    emit_many(g.output_for(output), first(g.client().dags.list(), limit), DAG_COLUMNS)


@app.command()
def get(ctx: typer.Context, dag_id: str, output: OutputOpt = None) -> None:
    """A DAG with its current definition."""
    g = state(ctx)
    emit(g.output_for(output), g.client().dags.get(dag_id))


@app.command()
def run(ctx: typer.Context, dag_id: str,
        at: Annotated[datetime | None, typer.Option(
            help="start then (RFC 3339), not now", formats=["%Y-%m-%dT%H:%M:%S%z"])] = None,
        output: OutputOpt = None) -> None:
    """Start a DAG run of the current version."""
    g = state(ctx)
    emit(g.output_for(output), g.client().dags.run(dag_id, at=at))


@app.command()
def runs(ctx: typer.Context, dag_id: str, limit: LimitOpt = None,
         output: OutputOpt = None) -> None:
    """A DAG's runs, newest first."""
    g = state(ctx)
    emit_many(g.output_for(output), g.client().dags.runs(dag_id, limit=limit or 20),
              RUN_COLUMNS)


@runs_app.command("get")
def get_run(ctx: typer.Context, dag_run_id: str, output: OutputOpt = None) -> None:
    """A DAG run's nodes: state, run, attempts and times (json: the whole run). One read back
    from the archive says "archived <when>" first (`-o json`: `archived`, `archived_at`)."""
    g = state(ctx)
    view = g.client().dag_runs.get(dag_run_id)
    out = g.output_for(output)
    if out.value == "table":
        if view.archived:
            stdout().print(f"archived {text(view.archived_at)}", markup=False)
        emit(out, view, RUN_COLUMNS)
        emit_many(out, view.nodes, NODE_COLUMNS)
    else:
        emit(out, view)


@runs_app.command()
def events(ctx: typer.Context, dag_run_id: str, limit: LimitOpt = None,
           output: OutputOpt = None) -> None:
    """The DAG run's timeline from the log, read a page at a time."""
    g = state(ctx)
    emit_many(g.output_for(output), first(g.client().dag_runs.events(dag_run_id), limit),
              EVENT_COLUMNS)


@runs_app.command()
def cancel(ctx: typer.Context, dag_run_id: str, reason: ReasonOpt = None,
           output: OutputOpt = None) -> None:
    """Cancel a DAG run: waiting nodes will not run, running ones are cancelled."""
    g = state(ctx)
    emit(g.output_for(output), g.client().dag_runs.cancel(dag_run_id, reason=reason))


@runs_app.command()
def retry(ctx: typer.Context, dag_run_id: str, node: str, reason: ReasonOpt = None,
          output: OutputOpt = None) -> None:
    """Re-run NODE and everything downstream of it in the same DAG run."""
    g = state(ctx)
    emit(g.output_for(output), g.client().dag_runs.retry(dag_run_id, node, reason=reason))
