"""Bulk verbs (`runs cancel --state waiting --job X`, `dead-letters replay --error-type Y`):
select first, show the count, ask, then act on exactly what was counted.

The selection is listed once, up front, and frozen: runs that start matching while the verb
works are not touched, so "cancel 12 runs?" cancels those 12 and no thirteenth. `--dry-run`
prints the selection (in the chosen output format) and changes nothing; `--yes` skips the
question (which goes to stderr and needs a terminal or piped input; no answer is a no), and
items named by id are not asked about: the question is for what a filter selected. Items
are acted on one call each, with a progress bar on stderr when it is a terminal; an item the
API refuses (a run that finished meanwhile) is reported and the rest go on, and then the exit
code is 1. With -o json or jsonl the API's answers (the new runs of a retry or replay, the
states after a cancel) are printed; in a table, only for one item named by id.

A filter that matches more than a page (`PAGE`) is not listed and acted on item by item from
here: `operation` counts it with a dry run of POST /v1/operations, asks, and starts a tracked
operation the api works through (the selection frozen on the server, no page cap, resumed if
the api restarts), following its progress. Interrupting the CLI does not stop it: `ostinato`
prints the operation's id, and POST /v1/operations/{id}/cancel does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ostinato.cli.context import Output, stderr
from ostinato.cli.output import Column, emit, emit_many
from ostinato.client import ApiError, Client

T = TypeVar("T")
PAGE = 100  # the client's page: more matches than this go to the operations API
POLL_SECONDS = 0.5


def apply(items: Sequence[T], *, noun: str, verb: str, done: str, act: Callable[[T], Any],
          key: Callable[[T], str], output: Output, columns: Sequence[Column], yes: bool,
          dry_run: bool, named: bool = False) -> None:
    """Count, confirm, act with progress, report (`verb` "cancel", `done` "cancelled").
    `named`: the items were named by id on the command line, so there is nothing to confirm."""
    err = stderr()
    n = len(items)
    nouns = f"{n} {noun}{'' if n == 1 else 's'}"
    err.print(f"{nouns} selected", markup=False)
    if dry_run:
        if n:
            emit_many(output, items, columns)
        err.print(f"dry run: nothing {done}", markup=False)
        return
    if n == 0:
        return
    if not (yes or named) and not typer.confirm(f"{verb.capitalize()} {nouns}?", err=True):
        err.print("aborted: nothing changed", markup=False)
        raise typer.Exit(1)
    failed: list[tuple[str, ApiError]] = []
    answers: list[Any] = []
    progress = Progress(TextColumn(f"{noun}s"), BarColumn(), MofNCompleteColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    with progress:
        task = progress.add_task(done, total=n)
        for item in items:
            try:
                answer = act(item)
                if answer is not None:
                    answers.append(answer)
            except ApiError as exc:
                failed.append((key(item), exc))
            progress.advance(task)
    err.print(f"{done} {n - len(failed)} of {nouns}", markup=False)
    for item_key, exc in failed:
        err.print(f"  {item_key}: {exc.title} ({exc.status}): {exc.detail}", markup=False)
    if output is not Output.table:
        emit_many(output, answers, [])
    elif named and len(answers) == 1:
        emit(output, answers[0])
    if failed:
        raise typer.Exit(1)


def operation(client: Client, kind: str, filters: Mapping[str, object], *, noun: str,
              verb: str, done: str, output: Output, yes: bool, dry_run: bool) -> bool:
    """The bulk verb as a tracked operation when the filter matches more than a page; False
    (nothing done, nothing printed) when it matches a page or less."""
    n = client.operations.count(kind, **filters)
    if n <= PAGE:
        return False
    err = stderr()
    nouns = f"{n:,} {noun}s"
    err.print(f"{nouns} selected (more than a page: one tracked operation on the server)",
              markup=False)
    if dry_run:
        err.print(f"dry run: nothing {done}", markup=False)
        if output is not Output.table:
            emit(output, {"kind": kind, "filter": dict(filters), "count": n, "dry_run": True})
        return True
    if not yes and not typer.confirm(f"{verb.capitalize()} {nouns}?", err=True):
        err.print("aborted: nothing changed", markup=False)
        raise typer.Exit(1)
    op = client.operations.start(kind, **filters)
    err.print(f"operation {op.id}: {op.total:,} {noun}s", markup=False)
    progress = Progress(TextColumn(f"{noun}s"), BarColumn(), MofNCompleteColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    with progress:
        task = progress.add_task(done, total=op.total)
        while op.state == "running":
            time.sleep(POLL_SECONDS)
            op = client.operations.get(op.id)
            progress.update(task, completed=op.processed)
    err.print(f"{done} {op.done:,} of {op.total:,} {noun}s ({op.skipped:,} skipped, "
              f"{op.failed:,} failed){'; stopped: ' + op.state if op.state != 'completed' else ''}",
              markup=False)
    for f in op.failures or []:
        if f.outcome == "failed":
            err.print(f"  {f.item_id}: {f.detail}", markup=False)
    if output is not Output.table:
        emit(output, op)
    if op.failed or op.state != "completed":
        raise typer.Exit(1)
    return True
