"""`ostinato keys ...` (the tenant's API keys, an operator's key) and `ostinato audit list` (the
audit trail of control actions; docs/SECURITY.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from ostinato.cli.common import first
from ostinato.cli.context import LimitOpt, OutputOpt, YesOpt, state, stderr
from ostinato.cli.output import Column, emit, emit_many
from ostinato.cli.parse import instant

keys = typer.Typer(help="API keys of your tenant (operator key): list, create, revoke, rotate.",
                   no_args_is_help=True)
audit = typer.Typer(help="The audit trail of control actions (operator or admin key).",
                    no_args_is_help=True)

KEY_COLUMNS: list[Column] = [
    ("ID", lambda k: k.id), ("NAME", lambda k: k.name), ("ROLE", lambda k: k.role),
    ("POOLS", lambda k: ",".join(k.pools) or "-"), ("ACTIVE", lambda k: k.active),
    ("CREATED", lambda k: k.created_at), ("REVOKED", lambda k: k.revoked_at),
    ("LAST USED", lambda k: k.last_used_at),
]
AUDIT_COLUMNS: list[Column] = [
    ("AT", lambda e: e.recorded_at), ("ACTION", lambda e: e.action),
    ("TARGET", lambda e: f"{e.target_kind} {e.target_id}".strip()),
    ("OUTCOME", lambda e: f"{e.outcome} {e.status}"), ("ACTOR", lambda e: e.actor),
    ("ROLE", lambda e: e.role), ("KEY", lambda e: e.key_id), ("REQUEST", lambda e: e.request_id),
]
RoleArg = Annotated[str, typer.Option("--role", help="operator, viewer, submitter or worker")]


@keys.command("list")
def list_keys(ctx: typer.Context, output: OutputOpt = None) -> None:
    """The tenant's keys, newest first, revoked ones too, with their last use (no secrets)."""
    g = state(ctx)
    emit_many(g.output_for(output), g.client().keys.list(), KEY_COLUMNS)


@keys.command("create")
def create_key(ctx: typer.Context, name: str, role: RoleArg,
               pool: Annotated[list[str] | None, typer.Option(
                   "--pool", help="a worker key's pool (repeat; none: every pool)")] = None,
               output: OutputOpt = None) -> None:
    """Issue a key named NAME. Its secret is printed this once: store it now."""
    g = state(ctx)
    emit(g.output_for(output), g.client().keys.create(name, role, pools=pool or []))


@keys.command("revoke")
def revoke_key(ctx: typer.Context, key_id: str, yes: YesOpt = False) -> None:
    """Revoke KEY_ID now (the tenant's last operator key cannot be revoked)."""
    if not yes and not typer.confirm(f"Revoke API key {key_id}?", err=True):
        raise typer.Exit(1)
    state(ctx).client().keys.revoke(key_id)
    stderr().print(f"revoked {key_id}", markup=False)


@keys.command("rotate")
def rotate_key(ctx: typer.Context, key_id: str,
               grace: Annotated[int, typer.Option(
                   "--grace", min=0, max=604_800, metavar="SECONDS",
                   help="how long the old key keeps working")] = 0,
               output: OutputOpt = None) -> None:
    """A new key with KEY_ID's name, role and pools; printed this once."""
    g = state(ctx)
    emit(g.output_for(output), g.client().keys.rotate(key_id, grace_seconds=grace))


@audit.command("list")
def list_audit(
    ctx: typer.Context,
    action: Annotated[str | None, typer.Option(help="e.g. job.pause, key.rotate")] = None,
    key: Annotated[str | None, typer.Option("--key", help="the acting key's id")] = None,
    target_kind: Annotated[str | None, typer.Option(help="job, run, key, limit...")] = None,
    target: Annotated[str | None, typer.Option("--target", help="the target's id")] = None,
    request_id: Annotated[str | None, typer.Option(help="an answer's X-Request-Id")] = None,
    since: Annotated[str | None, typer.Option("--from", metavar="INSTANT",
                                              help="recorded at or after (RFC 3339)")] = None,
    until: Annotated[str | None, typer.Option("--to", metavar="INSTANT",
                                              help="recorded before (RFC 3339)")] = None,
    limit: LimitOpt = None, output: OutputOpt = None,
) -> None:
    """Control actions, newest first: who, on what, how it ended (before/after with -o json)."""
    g = state(ctx)
    entries = g.client().audit.list(
        since=instant(since, "--from") if since else None,
        until=instant(until, "--to") if until else None,
        action=action, key_id=key, target_kind=target_kind, target_id=target,
        request_id=request_id)
    emit_many(g.output_for(output), first(entries, limit), AUDIT_COLUMNS)
