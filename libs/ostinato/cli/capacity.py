"""`ostinato pools|workers|tasks|tenants`: capacity and who serves it. A group given no verb
lists (`ostinato workers` is `ostinato workers list`)."""

from __future__ import annotations

from typing import Annotated

import typer

from ostinato.cli.common import first
from ostinato.cli.context import LimitOpt, OutputOpt, state
from ostinato.cli.output import Column, emit, emit_many

pools = typer.Typer(help="Worker pools: slots, pauses and load per priority class.")
workers = typer.Typer(help="Live and recently seen workers.")
tasks = typer.Typer(help="Tasks per handler version: runs left on each, workers serving it.")
tenants = typer.Typer(help="Tenants (admin key).", no_args_is_help=True)
retention = typer.Typer(help="How long a tenant's finished runs stay in the hot database, "
                        "and whether they are archived first (docs/RETENTION.md).",
                        no_args_is_help=True)
tenants.add_typer(retention, name="retention")
RETENTION_COLUMNS: list[Column] = [
    ("TENANT", lambda r: r.tenant_id), ("KEEP", lambda r: r.keep),
    ("ARCHIVE", lambda r: r.archive), ("DEFAULT", lambda r: r.default),
    ("UPDATED", lambda r: r.updated_at), ("BY", lambda r: r.updated_by)]

POOL_COLUMNS: list[Column] = [
    ("POOL", lambda p: p.name), ("PAUSED", lambda p: p.paused),
    ("QUEUE PAUSED", lambda p: p.queue_paused), ("SHARED SLOTS", lambda p: p.shared_slots),
    ("OWN SLOTS", lambda p: p.own_slots),
    ("WAITING", lambda p: sum(c.waiting for c in p.classes.values())),
    ("IN FLIGHT", lambda p: sum(c.in_flight for c in p.classes.values())),
]


@pools.callback(invoke_without_command=True)
def _pools(ctx: typer.Context, output: OutputOpt = None) -> None:
    if ctx.invoked_subcommand is None:
        list_pools(ctx, output=output)


@pools.command("list")
def list_pools(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Each pool's slots, pauses and load (yours; every tenant's with the admin key)."""
    g = state(ctx)
    emit_many(g.output_for(output), g.client().pools.list(), POOL_COLUMNS)


@pools.command("pause")
def pause_pool(ctx: typer.Context, pool: str,
               reason: Annotated[str | None, typer.Option(help="recorded with it")] = None,
               output: OutputOpt = None) -> None:
    """Stop dispatching into POOL: for every tenant (admin key) or your own queue."""
    g = state(ctx)
    emit(g.output_for(output), g.client().pools.pause(pool, reason=reason))


@pools.command("resume")
def resume_pool(ctx: typer.Context, pool: str, output: OutputOpt = None) -> None:
    g = state(ctx)
    emit(g.output_for(output), g.client().pools.resume(pool))


@workers.callback(invoke_without_command=True)
def _workers(ctx: typer.Context, output: OutputOpt = None) -> None:
    if ctx.invoked_subcommand is None:
        list_workers(ctx, output=output)


@workers.command("list")
def list_workers(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Your workers and the shared ones: pools, slots, last seen, versions served."""
    g = state(ctx)
    emit_many(g.output_for(output), g.client().workers.list(), [
        ("WORKER", lambda w: w.worker_id), ("SHARED", lambda w: w.shared),
        ("POOLS", lambda w: ",".join(w.pools)), ("SLOTS", lambda w: w.slots),
        ("SEEN", lambda w: w.seen_at), ("VERSIONS", lambda w: w.versions or None)])


@tasks.callback(invoke_without_command=True)
def _tasks(ctx: typer.Context, output: OutputOpt = None) -> None:
    if ctx.invoked_subcommand is None:
        list_tasks(ctx, output=output)


@tasks.command("list")
def list_tasks(ctx: typer.Context,
               task: Annotated[str | None, typer.Option(help="only this task")] = None,
               output: OutputOpt = None) -> None:
    """Per task and version: waiting, running, suspended, workers; drained or stranded."""
    g = state(ctx)
    emit_many(g.output_for(output), g.client().tasks.list(task=task), [
        ("TASK", lambda t: t.task), ("VERSION", lambda t: t.version),
        ("WAITING", lambda t: t.waiting), ("RUNNING", lambda t: t.running),
        ("SUSPENDED", lambda t: t.suspended), ("WORKERS", lambda t: t.workers),
        ("DRAINED", lambda t: t.drained), ("STRANDED", lambda t: t.stranded)])


@tenants.command("list")
def list_tenants(ctx: typer.Context, limit: LimitOpt = None, output: OutputOpt = None) -> None:
    """Every tenant, newest first (admin key); act for one with --tenant ID."""
    g = state(ctx)
    emit_many(g.output_for(output), first(g.client().tenants.list(), limit), [
        ("ID", lambda t: t.id), ("NAME", lambda t: t.name), ("WEIGHT", lambda t: t.weight),
        ("CREATED", lambda t: t.created_at)])


@tenants.command("create")
def create_tenant(ctx: typer.Context, name: str,
                  weight: Annotated[int, typer.Option(min=1, max=1000,
                                                      help="fair-share weight")] = 1,
                  output: OutputOpt = None) -> None:
    """Create a tenant with the admin key; its API key is shown this once."""
    g = state(ctx)
    emit(g.output_for(output), g.client().tenants.create(name, weight=weight))


@retention.command("get")
def get_retention(ctx: typer.Context, tenant_id: str, output: OutputOpt = None) -> None:
    """TENANT_ID's retention (DEFAULT true when never set: 30d, archive). The admin key, or
    the tenant's own key."""
    g = state(ctx)
    emit(g.output_for(output), g.client().tenants.get_retention(tenant_id), RETENTION_COLUMNS)


@retention.command("set")
def set_retention(ctx: typer.Context, tenant_id: str,
                  keep: Annotated[str, typer.Option(
                      help="how long after a run ended: seconds or 30d, 12h, 2w (1h to 10y)")],
                  archive: Annotated[bool, typer.Option(
                      help="write each run to object storage before removing it")] = True,
                  reason: Annotated[str | None, typer.Option(help="recorded with it")] = None,
                  output: OutputOpt = None) -> None:
    """Set TENANT_ID's retention (admin key)."""
    g = state(ctx)
    value: str | int = int(keep) if keep.isascii() and keep.isdigit() else keep
    emit(g.output_for(output), g.client().tenants.set_retention(
        tenant_id, keep=value, archive=archive, reason=reason), RETENTION_COLUMNS)
