"""`ostinato attributes declare|list|remove`: the tenant's searchable attributes
(docs/SEARCH_ATTRIBUTES.md). Values are set at submission (`jobs create -f` with
`"attributes": {...}`) and by workflows (`ctx.upsert_attributes`); `runs list --where` and the
bulk verbs (`runs cancel --where customer=acme`) filter by them."""

from __future__ import annotations

from typing import Annotated

import typer

from ostinato.cli.context import OutputOpt, state, stderr
from ostinato.cli.output import Column, emit, emit_many

app = typer.Typer(help="Searchable attributes of runs and jobs: declare, list, remove.",
                  no_args_is_help=True)

TYPES = ("keyword", "text", "int", "float", "bool", "datetime")
COLUMNS: list[Column] = [("NAME", lambda d: d.name), ("TYPE", lambda d: d.type),
                         ("DECLARED", lambda d: d.created_at), ("BY", lambda d: d.actor)]


@app.command()
def declare(ctx: typer.Context, name: str,
            type_: Annotated[str, typer.Argument(metavar="TYPE", help=", ".join(TYPES))],
            output: OutputOpt = None) -> None:
    """Declare NAME as TYPE for the tenant's runs and jobs (a repeat changes nothing)."""
    if type_ not in TYPES:
        raise typer.BadParameter(f"one of {', '.join(TYPES)}", param_hint="TYPE")
    g = state(ctx)
    emit(g.output_for(output), g.client().search_attributes.declare(name, type_))


@app.command("list")
def list_attributes(ctx: typer.Context, output: OutputOpt = None) -> None:
    """The declared attributes, by name, and how many the tenant may declare."""
    g = state(ctx)
    listing = g.client().search_attributes.list()
    emit_many(g.output_for(output), listing.items, COLUMNS)
    stderr().print(f"{len(listing.items)} of at most {listing.cap} declared", markup=False)


@app.command()
def remove(ctx: typer.Context, name: str) -> None:
    """Forget a declaration: new values and filters of NAME are refused from now on."""
    state(ctx).client().search_attributes.remove(name)
    stderr().print(f"removed {name}", markup=False)
