"""Start and await from the shell: `ostinato run TASK --payload JSON [--wait]` and `ostinato runs
wait RUN_ID`, over the client's run handles (`ostinato.client.handles`).

Exit codes of an await (beyond the CLI's 0/1/2): 0 the run succeeded, 3 it failed for good
(dead-lettered; a DAG run: failed), 4 it was cancelled, 5 `--timeout` ran out first (the run
goes on). The answer (`RunResult`: state, output or final error) is printed either way, as a
table or with `-o json`, so a script can branch on the code and read the output.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ostinato.cli.context import AttributeOpt, OutputOpt, state
from ostinato.cli.output import emit
from ostinato.cli.parse import attributes, json_value
from ostinato.client import RunTimeoutError
from ostinato.client.handles import RunHandle
from ostinato.wire.api import RunResult

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_CANCELLED, EXIT_TIMED_OUT = 0, 3, 4, 5

TimeoutOpt = Annotated[float | None, typer.Option(
    "--timeout", min=0, metavar="SECONDS",
    help="give up after this long (exit 5; the run goes on); default: wait until it ends")]


def exit_code(result: RunResult) -> int:
    """The exit code an answer stands for (a final one: by its state)."""
    if not result.done:
        return EXIT_TIMED_OUT
    if result.state == "succeeded":
        return EXIT_SUCCEEDED
    return EXIT_CANCELLED if result.state == "cancelled" else EXIT_FAILED


def await_and_exit(ctx: typer.Context, handle: RunHandle, timeout: float | None,
                   output: Any) -> None:
    """Wait for the run, print its answer, exit with its code."""
    g = state(ctx)
    try:
        result = handle.wait(timeout)
    except RunTimeoutError as exc:
        result = exc.result if exc.result is not None else handle.status()
    emit(g.output_for(output), result)
    code = exit_code(result)
    if code:
        raise typer.Exit(code)


def wait(ctx: typer.Context, run_id: str, timeout: TimeoutOpt = None,
         output: OutputOpt = None) -> None:
    """Wait until a run (task, workflow or DAG run) ends and print its output or final error.
    Exit 0 succeeded, 3 failed (dead-lettered), 4 cancelled, 5 --timeout ran out."""
    await_and_exit(ctx, state(ctx).client().runs.get_handle(run_id), timeout, output)


def run(ctx: typer.Context,
        task: Annotated[str, typer.Argument(help="the task (a DAG: dag:<DAG id>)")],
        payload: Annotated[str | None, typer.Option(
            help="the run's payload, JSON (@path, - for stdin); default null")] = None,
        wait_: Annotated[bool, typer.Option(
            "--wait", help="wait for its end: print its output, exit by its state")] = False,
        timeout: TimeoutOpt = None,
        pool: Annotated[str | None, typer.Option(help="the pool (default: default)")] = None,
        priority: Annotated[str | None, typer.Option(help="the priority class")] = None,
        idempotency_key: Annotated[str | None, typer.Option(
            help="the same key again starts nothing new (the first run is answered)")] = None,
        attribute: AttributeOpt = None,
        output: OutputOpt = None) -> None:
    """Start a run of TASK now (a one-off job). Without --wait: print its run and job ids.
    With --wait: exit 0 succeeded, 3 failed (dead-lettered), 4 cancelled, 5 --timeout ran
    out (the run goes on)."""
    value: Any = None if payload is None else json_value(payload, "--payload")
    fields = {k: v for k, v in (("pool", pool), ("priority", priority),
                                ("idempotency_key", idempotency_key)) if v is not None}
    if attribute:
        fields["attributes"] = attributes(attribute)
    g = state(ctx)
    handle = g.client().runs.start(task, value, **fields)
    if not wait_:
        if timeout is not None:
            raise typer.BadParameter("--timeout needs --wait", param_hint="--timeout")
        emit(g.output_for(output), {"run_id": str(handle.run_id), "job_id": str(handle.job_id)})
        return
    await_and_exit(ctx, handle, timeout, output)
