"""The pre-deploy check (``ostinato workflows check <module>``): replay the recorded histories of
in-flight workflow runs against new code, without running a step, and name every run the new
code would stop with a non-determinism error (docs/WORKFLOWS.md, "Pre-deploy check").

Why a replay rather than a comparison of step names: which steps a workflow reaches depends on
its control flow (the payload, recorded outputs, caught step failures, patch markers), so the
only faithful answer is to run the new workflow function itself under the real
``WorkflowContext``, with the real decision (``ostinato.domain.workflow.decide`` and
``decide_patch``), exactly as a worker resuming the run would. Only the journal differs: a
``StepJournal`` that serves the recorded positions (one at a time, so the check sees how far the
code got) and, at the first position past the recording, stops the workflow with a
``BaseException`` sentinel, as ``Suspended`` unwinds it live. A live execution would run a step
there (or record a wait): from that point on the run is the new code's, so the run is compatible.

A step function is never called: a recorded position returns its recorded output (or raises its
recorded failure) without running, a diverging one raises ``NonDeterminismError`` before
running, and an unrecorded one stops the replay before running. The code *between* steps does
run, as it would on a worker: it should not do I/O (the determinism rules say so too), and a
replay that does not end within ``timeout`` seconds is reported as unchecked.

The runs and their histories are read through ``Runs``: the command
(``ostinato.cli.workflows``) gives it the public API through the typed client
(``ostinato.client``), so this module holds the replay and the report, and no HTTP.

Outcomes (``Verdict.result``):

- ``compatible``: the code replays every recorded position (and, for a suspended run, meets the
  wait it is suspended on under the same name), then would go on live, or ends as its history
  leads it to;
- ``incompatible``: ``NonDeterminismError``: at ``seq`` the history recorded ``recorded`` but the
  code meets ``met`` (the same message a worker would dead-letter the run with). For a
  suspended run the wait it is suspended on counts as recorded (``waiting``): its wake-up
  records it under that name, and the next execution would diverge there;
- ``ends_early``: the code returns before the recorded end; real execution finishes the run
  without the rest (no error), but recorded steps go unused: a warning;
- ``raises``: the code raises an exception other than a step's recorded failure before the
  recorded end (e.g. a changed payload field): the run would fail with it, a warning;
- ``unchecked``: the replay could not decide (it did not end within the timeout).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import IO, Any, Final, Protocol

import msgspec

from ostinato.domain.states import FINAL, RunState
from ostinato.domain.workflow import WAIT_REASONS, StepCounter, StepId
from ostinato.sdk.context import RunContext, use_context
from ostinato.sdk.tasks import Task
from ostinato.sdk.workflow import NonDeterminismError, StepFailedError
from ostinato.wire.api import RunView
from ostinato.wire.worker import MAX_STEPS_PAGE, BatchItemResult, StepItem, StepRecord

__all__ = [
    "COMPATIBLE",
    "ENDS_EARLY",
    "INCOMPATIBLE",
    "RAISES",
    "UNCHECKED",
    "CheckError",
    "History",
    "ListHistory",
    "RunCheck",
    "Runs",
    "Unreadable",
    "Verdict",
    "check_runs",
    "exit_code",
    "in_flight",
    "load_workflows",
    "replay",
    "report",
]

COMPATIBLE: Final = "compatible"
INCOMPATIBLE: Final = "incompatible"
ENDS_EARLY: Final = "ends_early"
RAISES: Final = "raises"
UNCHECKED: Final = "unchecked"
WARNINGS: Final = frozenset({ENDS_EARLY, RAISES, UNCHECKED})

DEFAULT_TIMEOUT: Final = 10.0  # seconds one run's replay may take
IN_FLIGHT: Final = tuple(s.value for s in RunState if s not in FINAL)
# Every position is read through the journal, never judged unrecorded by `steps_done` alone:
# a position judged unrecorded would run its step function.
_READ_EVERY_POSITION: Final = 1 << 62
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


# -- the replay ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Verdict:
    """What the new code does with one run's history; ``seq``, ``recorded`` and ``met`` name the
    position at issue (recorded and met as step ids, ``charge#2``; ``met`` may describe what the
    code did instead: ``(returns)``, ``(raises KeyError)``)."""

    result: str
    seq: int | None = None
    recorded: str | None = None
    met: str | None = None
    waiting: bool = False  # `recorded` is the wait the suspended run waits on (not yet recorded)
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.result == COMPATIBLE


class History(Protocol):
    """A run's recorded positions ``0 .. steps_done - 1``, read a page at a time."""

    @property
    def steps_done(self) -> int: ...

    async def page(self, after: int, limit: int) -> list[StepRecord]: ...


class ListHistory:
    """A history held in memory (tests, small runs)."""

    def __init__(self, steps: Sequence[StepRecord]) -> None:
        for i, record in enumerate(steps):
            if record.seq != i:
                raise ValueError(f"recorded position {i} has seq {record.seq}: a history is "
                                 "every position from 0, in order")
        self._steps = list(steps)

    @property
    def steps_done(self) -> int:
        return len(self._steps)

    async def page(self, after: int, limit: int) -> list[StepRecord]:
        return self._steps[after + 1:after + 1 + limit]


class _Stop(BaseException):
    """Unwinds the workflow at the first position past the recording (or when its history
    cannot be read): not an ``Exception``, so neither the workflow's ``except Exception`` nor
    its compensation handling takes it, as with ``Suspended``."""


class _ReplayJournal:
    """The ``StepJournal`` of a replay: serves recorded positions one per page (so ``reached``
    follows the code position by position) and records nothing."""

    def __init__(self, history: History, pending: StepRecord | None) -> None:
        self._history = history
        self.end = history.steps_done  # a position at or past this one is not recorded
        self.pending = pending  # the wait a suspended run waits on, at position `end`
        self._page: dict[int, StepRecord] = {}  # one page of the history held at a time
        self.reached = -1  # the furthest position the code asked for and got
        self.ids = StepCounter()  # the step ids of positions 0..reached (the SDK's counter)
        self.frontier: int | None = None  # the first position the code met unrecorded
        self.error: BaseException | None = None  # the history could not be read

    def record(self, item: StepItem) -> asyncio.Future[BatchItemResult]:
        # Unreachable (every position is read first, and an unrecorded one stops there): a
        # safety net, so that nothing is ever recorded.
        self._met_unrecorded(item.seq)
        raise _Stop(item.seq)

    async def page(self, ctx: RunContext, after: int, limit: int) -> list[StepRecord]:
        seq = after + 1
        try:
            record = await self.at(seq)
        except Exception as exc:
            self.error = self.error or exc
            raise _Stop(seq) from exc
        if record is None:
            self._met_unrecorded(seq)
            raise _Stop(seq)
        if seq > self.reached:  # positions are asked for in order, each once
            self.reached = seq
            self.ids.next(record.name)
        return [record]

    def recorded_id(self, seq: int, record: StepRecord) -> StepId:
        """The id of the recorded step at ``seq``, the position after ``reached``."""
        return (self.ids.would_be(record.name) if seq > self.reached
                else self.ids.last(record.name))

    async def at(self, seq: int) -> StepRecord | None:
        """The record at ``seq`` (the pending wait at ``end``); None: not recorded."""
        if seq == self.end and self.pending is not None:
            return self.pending
        if not 0 <= seq < self.end:
            return None
        record = self._page.get(seq)
        if record is None:
            page = await self._history.page(seq - 1, MAX_STEPS_PAGE)
            self._page = {r.seq: r for r in page if r.seq < self.end}
            record = self._page.get(seq)
            if record is None:
                raise LookupError(f"the history has no recorded position {seq} "
                                  f"(it says {self.end} are recorded)")
        return record

    def _met_unrecorded(self, seq: int) -> None:
        if self.frontier is None:
            self.frontier = seq


async def replay(task: Task, payload: Any, history: History | Sequence[StepRecord], *,
                 pending: str | None = None, run_id: str | None = None,
                 scheduled_for: datetime | None = None, attempt: int = 1,
                 cancel_requested: bool = False, timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
                 ) -> Verdict:
    """Replay ``history`` (the run's recorded positions) with the workflow ``task``'s code and
    ``payload``, running no step; ``pending``: the name of the wait a suspended run waits on
    (its next position, recorded under that name when it is woken). Raises what reading the
    history raised (the caller decides whether that ends the whole check)."""
    if not task.workflow:
        raise TypeError(f"task {task.name!r} is not a workflow")
    source = ListHistory(history) if isinstance(history, Sequence) else history
    waiting = None if pending is None else StepRecord(seq=source.steps_done, name=pending,
                                                      succeeded=True)
    journal = _ReplayJournal(source, waiting)
    at = scheduled_for or _EPOCH
    rid = run_id or str(uuid.uuid4())
    ctx = RunContext(run_id=rid, job_id="", tenant_id="", task=task.name, attempt=attempt,
                     fencing_token=0, idempotency_key=f"run:{rid}", scheduled_for=at,
                     lease_expires_at=at, lease_ttl_seconds=3600.0,
                     steps_done=_READ_EVERY_POSITION, journal=journal,
                     cancel_requested=cancel_requested)
    ctx.bind_loop(asyncio.get_running_loop())
    limit = asyncio.timeout(timeout)
    raised: BaseException | None = None
    returned = False
    try:
        with use_context(ctx):
            async with limit:
                await task.fn(payload)
        returned = True
    except _Stop:
        pass
    except NonDeterminismError as exc:
        if journal.error is None:
            return _incompatible(exc, journal)
    except (KeyboardInterrupt, SystemExit):
        raise
    except TimeoutError as exc:
        if not limit.expired():
            raised = exc
    except asyncio.CancelledError:
        task_ = asyncio.current_task()
        if task_ is not None and task_.cancelling():
            raise  # the check itself is being cancelled
        raised = asyncio.CancelledError()
    except BaseException as exc:
        raised = exc
    if journal.error is not None:
        raise journal.error
    return await _verdict(journal, returned, raised, limit.expired(), timeout)


async def _verdict(journal: _ReplayJournal, returned: bool, raised: BaseException | None,
                   expired: bool, limit_seconds: float) -> Verdict:
    end = journal.end + (journal.pending is not None)  # positions the code must get past
    if journal.pending is not None and journal.reached >= journal.end:
        # (what the code does past the wait, with no output for it, is not judged)
        return Verdict(COMPATIBLE, seq=journal.end, recorded=journal.pending.name, waiting=True,
                       detail=f"replays the {journal.end} recorded positions and meets the "
                              f"wait the run is suspended on; would continue once woken")
    if journal.frontier is not None:
        return Verdict(COMPATIBLE, seq=journal.frontier,
                       detail=f"replays the {journal.end} recorded positions; would continue "
                              f"live at position {journal.frontier}")
    if expired:
        return Verdict(UNCHECKED, seq=journal.reached + 1,
                       detail=f"the replay did not end within {limit_seconds:g} s (does the code "
                              "between steps wait on something?)")
    if journal.reached + 1 >= end:
        how = "returns" if returned else f"raises {_describe(raised)}"
        return Verdict(COMPATIBLE, detail=f"replays all {journal.end} recorded positions, then "
                                          f"{how}")
    seq = journal.reached + 1
    record = await journal.at(seq)
    recorded = None if record is None else str(journal.recorded_id(seq, record))
    left = end - seq
    if returned:
        return Verdict(ENDS_EARLY, seq=seq, recorded=recorded, met="(returns)",
                       waiting=seq == journal.end,
                       detail=f"the code returns at position {seq}, leaving {left} recorded "
                              "position(s) unused: a live execution would finish the run "
                              "without them (not a non-determinism error)")
    return Verdict(RAISES, seq=seq, recorded=recorded,
                   met=f"(raises {type(raised).__name__})", waiting=seq == journal.end,
                   detail=f"the code raises {_describe(raised)} before position {seq}, with "
                          f"{left} recorded position(s) left: the run would fail with it")


def _incompatible(exc: NonDeterminismError, journal: _ReplayJournal) -> Verdict:
    diverged = exc.diverged
    waiting = journal.pending is not None and diverged.seq == journal.end
    note = (" (the wait the run is suspended on: its wake-up records it under that name)"
            if waiting else "")
    return Verdict(INCOMPATIBLE, seq=diverged.seq, recorded=str(diverged.recorded),
                   met=str(diverged.met), waiting=waiting, detail=diverged.message() + note)


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "nothing"
    if isinstance(exc, StepFailedError):
        return f"StepFailedError ({exc.type}, step {exc.step!r})"
    text = str(exc)
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


# -- collecting the workflows of a module -------------------------------------------------------

class CheckError(Exception):
    """An expected failure of the command (usage, import, connection, authentication): printed
    as its message, without a traceback, exit code 2."""


def load_module(target: str) -> ModuleType:
    """Import ``target``: a module path (``myapp.workflows``, from the current directory too)
    or a ``.py`` file (its directory goes on ``sys.path``, for its own imports)."""
    path = Path(target)
    try:
        if target.endswith(".py") or path.is_file():
            if not path.is_file():
                raise CheckError(f"no such file: {target}")
            resolved = path.resolve()
            sys.path.insert(0, str(resolved.parent))
            name = f"_ostinato_check_{resolved.stem}_{abs(hash(str(resolved))):x}"
            spec = importlib.util.spec_from_file_location(name, resolved)
            if spec is None or spec.loader is None:
                raise CheckError(f"cannot load {target} as a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(target)
    except CheckError:
        raise
    except Exception as exc:
        raise CheckError(f"cannot import {target}: {type(exc).__name__}: {exc}") from exc


def load_workflows(target: str, names: Iterable[str] = ()) -> dict[str, Task]:
    """The workflow tasks (``@workflow``) defined at module level in ``target``, by task name;
    ``names``: only these (each must be there)."""
    module = load_module(target)
    found: dict[str, Task] = {}
    for value in vars(module).values():
        if isinstance(value, Task) and value.workflow:
            other = found.get(value.name)
            if other is not None and other is not value:
                raise CheckError(f"{target} defines workflow {value.name!r} twice")
            found[value.name] = value
    wanted = list(dict.fromkeys(names))
    if wanted:
        missing = [n for n in wanted if n not in found]
        if missing:
            raise CheckError(f"{target} defines no workflow {', '.join(map(repr, missing))} "
                             f"(it defines: {', '.join(sorted(found)) or 'none'})")
        found = {n: found[n] for n in wanted}
    if not found:
        raise CheckError(f"{target} defines no @workflow task at module level")
    return found


# -- reading runs -------------------------------------------------------------------------------

class Unreadable(Exception):
    """One read failed in a way that concerns one run only (e.g. 404, 5xx): that run is
    reported unchecked and the check goes on. A failure that concerns every run (the API
    unreachable, the key refused) is a `CheckError` and ends the check."""


class Runs(Protocol):
    """Where the check reads runs: the public API through the typed client
    (``ostinato.cli.workflows``), tenant-scoped by its key. Each read raises ``Unreadable`` or
    ``CheckError`` as above."""

    def listed(self, state: str) -> AsyncIterator[RunView]:
        """The runs in ``state`` (``GET /v1/runs``, without their payloads)."""
        ...

    async def shown(self, run_id: str) -> RunView:
        """One run with its payload (``GET /v1/runs/{id}``); ``payload`` is ``msgspec.UNSET``
        when the API does not show payloads."""
        ...

    async def steps(self, run_id: str, after: int, limit: int) -> list[StepRecord]:
        """Its recorded steps from ``after + 1``, large outputs put back, as a resuming
        workflow reads them."""
        ...


async def in_flight(runs: Runs, tasks: Iterable[str]) -> list[RunView]:
    """The runs of ``tasks`` in a state that is not final (``GET /v1/runs`` has no task
    filter: every in-flight run is listed, one state at a time, and filtered here); a run that
    moves between states while it is listed is kept once."""
    wanted = set(tasks)
    seen: dict[str, RunView] = {}
    for state in IN_FLIGHT:
        try:
            async for run in runs.listed(state):
                if run.task in wanted:
                    seen.setdefault(str(run.id), run)
        except Unreadable as exc:
            raise CheckError(f"cannot list the runs: {exc}") from exc
    return list(seen.values())


class _RunHistory:
    """A run's recorded steps read from ``runs`` a page at a time."""

    def __init__(self, runs: Runs, run_id: str, steps_done: int) -> None:
        self._runs = runs
        self._run_id = run_id
        self._steps_done = steps_done

    @property
    def steps_done(self) -> int:
        return self._steps_done

    async def page(self, after: int, limit: int) -> list[StepRecord]:
        return await self._runs.steps(self._run_id, after, min(limit, MAX_STEPS_PAGE))


def _first(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


def _pending(run: RunView) -> str | None:
    """The wait a suspended run waits on: its name will be recorded at its next position."""
    if run.state == RunState.SUSPENDED and run.wait_reason in WAIT_REASONS:
        return run.current_step or None
    return None


@dataclass(frozen=True, slots=True)
class RunCheck:
    run_id: str
    task: str
    state: str
    verdict: Verdict
    # The handler version a started workflow run is pinned to (None: not started yet, any
    # version may take it); `resumed_here`: this code serves that version, so the run would
    # replay on it. A run pinned to another version stays with that version's workers.
    pinned_version: str | None = None
    resumed_here: bool = True


async def _check_run(runs: Runs, task: Task, listed: RunView,
                     timeout: float) -> RunCheck:  # noqa: ASYNC109
    run_id = str(listed.id)
    state = listed.state
    pinned = listed.task_version if listed.pinned else None
    here = pinned is None or pinned == task.served_version

    def done(verdict: Verdict) -> RunCheck:
        return RunCheck(run_id, task.name, state, verdict, pinned, here)

    if not listed.steps_done and _pending(listed) is None:
        return done(Verdict(COMPATIBLE, seq=0, detail="nothing recorded yet"))
    try:
        run = await runs.shown(run_id)
    except Unreadable as exc:
        return done(Verdict(UNCHECKED, detail=str(exc)))
    if run.payload is msgspec.UNSET:
        raise CheckError("the API does not show runs' payloads (GET /v1/runs/{id} has no "
                         "`payload`): upgrade the API to use the pre-deploy check")
    state = run.state
    history = _RunHistory(runs, run_id, run.steps_done)
    try:
        verdict = await replay(task, run.payload, history, pending=_pending(run),
                               run_id=run_id, scheduled_for=run.scheduled_for,
                               attempt=max(1, run.attempt),
                               cancel_requested=run.cancel_requested, timeout=timeout)
    except (Unreadable, LookupError) as exc:
        verdict = Verdict(UNCHECKED, detail=f"its history could not be read: {exc}")
    return done(verdict)


class _Progress:
    """``checked 120/560 runs`` on stderr, at most once a second, for lists that take a while."""

    def __init__(self, total: int, stream: IO[str]) -> None:
        self.total = total
        self.done = 0
        self._stream = stream
        self._last = time.monotonic()
        self._shown = False

    def step(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self._last >= 1.0 and self.done < self.total:
            self._last = now
            self._show()

    def finish(self) -> None:
        if self._shown or self.total >= 100:
            self._show()

    def _show(self) -> None:
        self._shown = True
        print(f"checked {self.done}/{self.total} runs", file=self._stream, flush=True)


async def check_runs(runs: Runs, workflows: Mapping[str, Task], *,
                     timeout: float = DEFAULT_TIMEOUT, concurrency: int = 8,  # noqa: ASYNC109
                     progress: IO[str] | None = None) -> list[RunCheck]:
    """Check every in-flight run of ``workflows``; a few runs at a time."""
    listed = await in_flight(runs, workflows)
    meter = _Progress(len(listed), progress or sys.stderr)
    queue: asyncio.Queue[RunView] = asyncio.Queue()
    for item in listed:
        queue.put_nowait(item)
    results: list[RunCheck] = []

    async def work() -> None:
        while not queue.empty():
            item = queue.get_nowait()
            results.append(await _check_run(runs, workflows[item.task], item, timeout))
            meter.step()

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(max(1, min(concurrency, len(listed)))):
                group.create_task(work())
    except BaseExceptionGroup as failed:  # one worker's CheckError ends the check
        expected, _ = failed.split(CheckError)
        if expected is not None:
            raise _first(expected) from None
        raise
    meter.finish()
    order = {COMPATIBLE: 4, UNCHECKED: 3, RAISES: 2, ENDS_EARLY: 1, INCOMPATIBLE: 0}
    return sorted(results, key=lambda c: (c.task, order[c.verdict.result], c.run_id))


# -- the report ---------------------------------------------------------------------------------

def report(checks: Sequence[RunCheck], workflows: Mapping[str, Task], out: IO[str], *,
           as_json: bool = False, show_all: bool = False, all_versions: bool = False) -> None:
    """Print the results: a table of the runs that are not compatible (``show_all``: every
    run) and a summary, or (``as_json``) one JSON document."""
    if as_json:
        _print_json(checks, workflows, out, all_versions=all_versions)
    else:
        _print_table(checks, workflows, out, show_all=show_all, all_versions=all_versions)


def exit_code(checks: Sequence[RunCheck], *, strict: bool = False,
              all_versions: bool = False) -> int:
    """0: no run this code would resume is incompatible (``strict``: nor has a warning; runs
    pinned to another version do not count unless ``all_versions``); 1: some is."""
    failing = {INCOMPATIBLE} | (WARNINGS if strict else set())
    return 1 if any(c.verdict.result in failing for c in _counted(checks, all_versions)) else 0


def _counted(checks: Sequence[RunCheck], all_versions: bool) -> list[RunCheck]:
    """The runs whose verdicts the summary counts and the exit code reads: those this code
    would resume (``--all-versions``: every run checked)."""
    return [c for c in checks if c.resumed_here or all_versions]


def _elsewhere(checks: Sequence[RunCheck], all_versions: bool) -> dict[str, list[RunCheck]]:
    """The runs pinned to another version than this code's, by version: that version's
    workers resume them, so this code cannot break them (unless ``--all-versions``)."""
    by_version: dict[str, list[RunCheck]] = {}
    for c in checks:
        if not (c.resumed_here or all_versions):
            by_version.setdefault(c.pinned_version or "-", []).append(c)
    return dict(sorted(by_version.items()))


def _summary(checks: Sequence[RunCheck], workflows: Mapping[str, Task]) -> dict[str, int]:
    counts = Counter(c.verdict.result for c in checks)
    return {"runs": len(checks), "workflows": len(workflows),
            **{r: counts.get(r, 0) for r in (COMPATIBLE, INCOMPATIBLE, ENDS_EARLY, RAISES,
                                             UNCHECKED)}}


def _print_json(checks: Sequence[RunCheck], workflows: Mapping[str, Task], out: IO[str], *,
                all_versions: bool = False) -> None:
    """The summary's result counts are over the runs this code resumes (as the exit code);
    `pinned_elsewhere` counts the others by version; every run is listed with its own."""
    runs = [{"run_id": c.run_id, "task": c.task, "state": c.state,
             "pinned_version": c.pinned_version, "resumed_here": c.resumed_here,
             **asdict(c.verdict)} for c in checks]
    summary = {**_summary(_counted(checks, all_versions), workflows), "runs": len(checks),
               "pinned_elsewhere": {v: len(group) for v, group
                                    in _elsewhere(checks, all_versions).items()}}
    json.dump({"summary": summary, "runs": runs}, out, indent=2)
    out.write("\n")


def _print_table(checks: Sequence[RunCheck], workflows: Mapping[str, Task], out: IO[str], *,
                 show_all: bool, all_versions: bool = False) -> None:
    names = ", ".join(sorted(workflows))
    if not checks:
        print(f"no in-flight runs of {names}", file=out)
        return
    shown = [c for c in checks if show_all or not c.verdict.ok]
    if shown:
        header = ("RUN", "TASK", "VERSION", "RESULT", "POSITION", "RECORDED", "MET")
        rows = [(c.run_id, c.task, _version_cell(c), c.verdict.result,
                 "" if c.verdict.seq is None else str(c.verdict.seq),
                 (c.verdict.recorded or "") + (" (waiting)" if c.verdict.waiting else ""),
                 c.verdict.met or "") for c in shown]
        widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
        for row in (header, *rows):
            print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip(),
                  file=out)
        print(file=out)
        for c in shown:
            if not c.verdict.ok:
                print(f"{c.run_id}: {c.verdict.detail}", file=out)
        print(file=out)
    counted = _counted(checks, all_versions)
    elsewhere = _elsewhere(checks, all_versions)
    s = _summary(counted, workflows)
    parts = [f"{s[r]} {r.replace('_', ' ')}" for r in (COMPATIBLE, INCOMPATIBLE, ENDS_EARLY,
                                                        RAISES, UNCHECKED) if s[r]]
    verdict = (f"{s[INCOMPATIBLE]} would meet a non-determinism error" if s[INCOMPATIBLE]
               else "none would meet a non-determinism error")
    scope = f"; of the {len(counted)} this code would resume" if elsewhere else ""
    print(f"checked {len(checks)} in-flight run(s) of {names}{scope}: "
          f"{', '.join(parts) or 'nothing to check'}; {verdict}", file=out)
    for version, group in elsewhere.items():
        n = len(group)
        line = (f"{n} run{'s' if n != 1 else ''} pinned to version {version} "
                f"{'are' if n != 1 else 'is'} served by workers of that version and "
                f"{'are' if n != 1 else 'is'} not affected (marked *)")
        bad = sum(c.verdict.result == INCOMPATIBLE for c in group)
        if bad:
            line += (f"; were this code to resume them, {bad} would meet a non-determinism "
                     "error (--all-versions counts them)")
        print(line, file=out)


def _version_cell(c: RunCheck) -> str:
    if c.pinned_version is None:
        return "-"
    return c.pinned_version + ("" if c.resumed_here else " *")

