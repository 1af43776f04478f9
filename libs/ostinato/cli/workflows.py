"""`ostinato workflows start` and `signal-with-start`: a workflow run under your own id
(docs/WORKFLOWS.md, "Workflow ids and signal-with-start"), through the typed client; a refusal
(409 while the id runs, 422) is the problem on stderr and exit 1, as every verb's.

`ostinato workflows check`: the pre-deploy check (docs/WORKFLOWS.md, "Pre-deploy check"). The
replay and the report are the SDK's (`ostinato.sdk.check`); this module reads the runs for it
through the typed client, connected like every user command (flag > environment > profile,
`ostinato.client.config`), and turns the outcome into an exit code: 0 no run this code would
resume is incompatible, 1 some is, 2 usage, connection or authentication errors (a message on
stderr, no traceback).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import IO, Annotated, Any

import httpx
import typer

from ostinato.cli.context import OutputOpt, state
from ostinato.cli.output import emit
from ostinato.cli.parse import json_value
from ostinato.client import ApiError, ApiUnreachable, AsyncClient, ConfigError, resolve
from ostinato.client import calls as c
from ostinato.sdk.check import (
    DEFAULT_TIMEOUT,
    CheckError,
    RunCheck,
    Unreadable,
    check_runs,
    exit_code,
    load_workflows,
    report,
)
from ostinato.sdk.tasks import Task
from ostinato.wire.api import RunView
from ostinato.wire.worker import StepRecord

LIST_PAGE = 500  # runs a page when listing the in-flight runs

app = typer.Typer(help=("Workflows: start one under your own id, signal-with-start, the "
                        "pre-deploy check."), no_args_is_help=True)

PayloadOpt = Annotated[str | None, typer.Option(
    help="the run's payload, JSON (@path, - for stdin); default null")]
ReusePolicyOpt = Annotated[str, typer.Option(
    "--reuse-policy", metavar="POLICY", help=(
        "when an earlier run with this id has ended: allow_duplicate (start a new one), "
        "allow_duplicate_failed_only (only if it did not succeed), "
        "reject_duplicate (never: 409)"))]
WorkflowKeyOpt = Annotated[str | None, typer.Option(
    help="the same key again answers the first call (a retry is one call)")]


@app.command()
def start(ctx: typer.Context, task: str, workflow_id: str, payload: PayloadOpt = None,
          reuse_policy: ReusePolicyOpt = "allow_duplicate",
          idempotency_key: WorkflowKeyOpt = None, output: OutputOpt = None) -> None:
    """Start a run of workflow TASK named WORKFLOW_ID. While a run with that id is running
    this is refused (409, exit 1, naming the run)."""
    value: Any = None if payload is None else json_value(payload, "--payload")
    g = state(ctx)
    emit(g.output_for(output), g.client().runs.start_workflow(
        task, workflow_id, value, id_reuse_policy=reuse_policy,
        idempotency_key=idempotency_key))


@app.command("signal-with-start")
def signal_with_start(
        ctx: typer.Context, task: str, workflow_id: str,
        signal: Annotated[str, typer.Option(metavar="NAME", help="the signal's name")],
        signal_payload: Annotated[str | None, typer.Option(
            help="the signal's payload, JSON (@path, - for stdin); default null")] = None,
        payload: Annotated[str | None, typer.Option(help=(
            "the payload of the run if this call starts it, JSON (@path, - for stdin)"))] = None,
        reuse_policy: ReusePolicyOpt = "allow_duplicate",
        idempotency_key: WorkflowKeyOpt = None, output: OutputOpt = None) -> None:
    """Send signal NAME to the running run of WORKFLOW_ID, starting it first (with
    --payload) if none runs; `started` says which. Two concurrent calls start one run."""
    given: Any = None if signal_payload is None else json_value(signal_payload,
                                                                "--signal-payload")
    value: Any = None if payload is None else json_value(payload, "--payload")
    g = state(ctx)
    emit(g.output_for(output), g.client().runs.signal_with_start(
        task, workflow_id, signal, given, payload=value, id_reuse_policy=reuse_policy,
        idempotency_key=idempotency_key))


class ClientRuns:
    """The check's reads (`ostinato.sdk.check.Runs`) through the typed client, its errors
    sorted into those that end the check (`CheckError`: unreachable, key refused, not the
    Ostinato API) and those that leave one run unchecked (`Unreadable`)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def listed(self, state: str) -> AsyncIterator[RunView]:
        try:
            async for run in self._client.runs.list(state=state, page_size=LIST_PAGE):
                yield run
        except ApiError as exc:
            raise self._sorted(exc, "GET /v1/runs") from exc

    async def shown(self, run_id: str) -> RunView:
        try:
            return await self._client.send(c.get_run_shown(run_id))
        except ApiError as exc:
            raise self._sorted(exc, f"GET /v1/runs/{run_id}") from exc

    async def steps(self, run_id: str, after: int, limit: int) -> list[StepRecord]:
        try:
            page = await self._client.runs.steps_page(run_id, after=after, limit=limit,
                                                      inline_outputs=True)
        except ApiError as exc:
            raise self._sorted(exc, f"GET /v1/runs/{run_id}/steps") from exc
        return [StepRecord(seq=s.seq, name=s.name, succeeded=s.succeeded, output=s.output,
                           error_type=s.error_type, message=s.message) for s in page.items
                if s.state != "running"]  # the executing step is not recorded yet

    def _sorted(self, exc: ApiError, request: str) -> Exception:
        if isinstance(exc, ApiUnreachable):
            return CheckError(f"cannot reach the API at {exc.detail}")
        if exc.status in (401, 403):
            return CheckError(f"the API refused the key ({exc.status}): "
                              f"{exc.detail or exc.title}")
        if exc.status < 400:  # an answer that does not decode
            return CheckError(f"{exc.detail} (is {self._client.base_url} the Ostinato API?)")
        return Unreadable(f"{request}: {exc}")


def run_check(connect: Callable[[], AsyncClient], module: str, *, task: Iterable[str] = (),
              as_json: bool = False, show_all: bool = False, all_versions: bool = False,
              strict: bool = False, timeout: float = DEFAULT_TIMEOUT,
              out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """The check over the client `connect` makes: prints the report on `out` (progress and
    errors on `err`) and answers the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        if timeout <= 0:
            raise CheckError("--timeout must be positive")
        workflows = load_workflows(module, task)
        checks = asyncio.run(_checked(connect, workflows, timeout, err))
    except CheckError as exc:
        print(f"ostinato workflows check: {exc}", file=err)
        return 2
    report(checks, workflows, out, as_json=as_json, show_all=show_all,
           all_versions=all_versions)
    return exit_code(checks, strict=strict, all_versions=all_versions)


async def _checked(connect: Callable[[], AsyncClient], workflows: Mapping[str, Task],
                   limit_seconds: float, err: IO[str]) -> list[RunCheck]:
    try:
        client = connect()
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as exc:
        raise CheckError(f"bad API URL: {exc}") from exc
    async with client:
        return await check_runs(ClientRuns(client), workflows, timeout=limit_seconds,
                                progress=err)


@app.command()
def check(
    ctx: typer.Context,
    module: Annotated[str, typer.Argument(help=(
        "the new code: an importable module (myapp.workflows) or a .py file; its "
        "module-level @workflow tasks are checked"))],
    api: Annotated[str | None, typer.Option(metavar="URL", help=(
        "the Ostinato API (default: --api-url, $OSTINATO_API_URL, the profile's, else "
        "http://127.0.0.1:8080)"))] = None,
    key: Annotated[str | None, typer.Option(help=(
        "a tenant API key (default: --api-key, $OSTINATO_API_KEY, the profile's)"))] = None,
    task: Annotated[list[str] | None, typer.Option(metavar="NAME", help=(
        "check only this workflow (repeatable)"))] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the results as JSON")] = False,
    show_all: Annotated[bool, typer.Option("--all", help=(
        "list compatible runs too (default: only the others)"))] = False,
    all_versions: Annotated[bool, typer.Option("--all-versions", help=(
        "also fail on runs pinned to another handler version than the new code's (by "
        "default they stay with their own version's workers and are only listed)"))] = False,
    strict: Annotated[bool, typer.Option(help=(
        "exit 1 on warnings too (ends_early, raises, unchecked)"))] = False,
    timeout: Annotated[float, typer.Option(metavar="SECONDS", help=(
        "longest replay of one run"))] = DEFAULT_TIMEOUT,
) -> None:
    """Replay the recorded steps of every in-flight run of the module's workflows against
    their new code (no step runs) and list each run that would meet a non-determinism error.
    Exit 0: all compatible; 1: some incompatible; 2: usage or connection error."""
    g = state(ctx)
    try:
        conn = resolve(profile=g.profile, api_url=api or g.api_url, api_key=key or g.api_key,
                       tenant=g.tenant)
    except ConfigError as exc:
        print(f"ostinato workflows check: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if not conn.api_key:
        print("ostinato workflows check: no API key: pass --key or set OSTINATO_API_KEY",
              file=sys.stderr)
        raise typer.Exit(2)
    code = run_check(lambda: AsyncClient(conn.api_url, conn.api_key, tenant=conn.tenant),
                     module, task=task or [], as_json=as_json, show_all=show_all,
                     all_versions=all_versions, strict=strict, timeout=timeout)
    if code:
        raise typer.Exit(code)
