"""What every user command shares: the global options, the connection they resolve to, and the
one place API and configuration errors become exit codes.

Exit codes: 0 done; 1 the API refused or failed (the problem's title and detail on stderr), a
bulk verb where some items failed, or a declined confirmation; 2 bad usage, including an
unusable profile file. Errors go to stderr only, so `-o json` output stays parseable.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from ostinato.client import ApiError, Client, ConfigError, Connection, resolve


class Output(StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"


OutputOpt = Annotated[Output | None, typer.Option(
    "--output", "-o", help="table (default), json (one document) or jsonl (one object a line)",
    show_default=False)]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="show what would change; change "
                                                           "nothing")]
LimitOpt = Annotated[int | None, typer.Option("--limit", "-n", min=1, metavar="N",
                                              help="show at most N (default: all)")]
AttributeOpt = Annotated[list[str] | None, typer.Option(
    "--attribute", "-a", metavar="NAME=VALUE", help="a searchable attribute (declared with "
    "`ostinato attributes declare`), repeatable; VALUE is JSON or else text")]


@dataclass
class Globals:
    profile: str | None = None
    api_url: str | None = None
    api_key: str | None = None
    tenant: str | None = None
    output: Output | None = None
    _connection: Connection | None = None
    _client: Client | None = None

    def connection(self) -> Connection:
        if self._connection is None:
            self._connection = resolve(profile=self.profile, api_url=self.api_url,
                                       api_key=self.api_key, tenant=self.tenant)
        return self._connection

    def client(self) -> Client:
        if self._client is None:
            conn = self.connection()
            self._client = Client(conn.api_url, conn.api_key, tenant=conn.tenant)
        return self._client

    def output_for(self, flag: Output | None) -> Output:
        """The command's -o, else the global -o, else the profile's, else table."""
        if flag is not None:
            return flag
        if self.output is not None:
            return self.output
        profile = self.connection().output
        return Output(profile) if profile else Output.table

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def state(ctx: typer.Context) -> Globals:
    root = ctx.find_root()
    if not isinstance(root.obj, Globals):
        root.obj = Globals()
    return root.obj


def stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def report_problem(exc: ApiError) -> None:
    err = stderr()
    status = f" ({exc.status})" if exc.status else ""
    err.print(f"error: {exc.title}{status}: {exc.detail}" if exc.detail
              else f"error: {exc.title}{status}", markup=False)
    for item in exc.errors:
        err.print(f"  {item.get('field', '?')}: {item.get('message', '')}", markup=False)
    if exc.type and exc.type != "about:blank":
        err.print(f"  type: {exc.type}", markup=False, style="dim")


def usage(message: str) -> typer.Exit:
    """Print a usage error; the caller raises what this returns (exit code 2)."""
    stderr().print(f"usage error: {message} (see --help)", markup=False)
    return typer.Exit(2)


class RootGroup(TyperGroup):
    """Turns the client's exceptions into messages and exit codes for every command."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            report_problem(exc)
            raise typer.Exit(1) from None
        except ConfigError as exc:
            stderr().print(f"error: {exc}", markup=False)
            raise typer.Exit(2) from None
        finally:
            if isinstance(ctx.obj, Globals):
                ctx.obj.close()


def is_terminal() -> bool:
    return sys.stdout.isatty()
