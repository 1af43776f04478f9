"""Start and await: `GET /v1/runs/{id}/result?wait=30s`, a long poll woken when the run ends.

Waiting costs nothing per waiter while it waits: no connection is held and no statement runs.
Each api process keeps ONE PostgreSQL connection that LISTENs on the run-end channel
(`ostinato.eventlog.ended`: the append that ends a run notifies its id at commit) and fans each
notice out in memory to the waiters of those run ids (`RunEnds`); a woken waiter reads its
answer once. Every api instance has its own listener, so a run ended through any service wakes
the waiters of every instance.

No end is missed: a waiter registers BEFORE it reads the run's state, so an end committed after
the read is a notice it hears, and one committed before it is what the read sees. When the
listener's connection is (re)established (the first time, after a database restart or a
failover) every waiter is woken to read again, since notices sent while it was away are lost.
`RunEnds.wake_all()` answers every long poll at once with `done: false` (the api's drain calls
it, so a stopping instance does not hold its clients; they ask again, elsewhere).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from litestar import Request, get
from litestar.params import FromPath, FromQuery

from ostinato.archive import ArchivedRun
from ostinato.dags import targets
from ostinato.db.queries import load
from ostinato.domain.durations import parse_duration
from ostinato.domain.errors import InvalidInput
from ostinato.domain.ids import run_id_for
from ostinato.domain.states import FINAL
from ostinato.eventlog import ended
from ostinato.eventlog.store import get_blobs
from ostinato.runtime.auth import Caller
from ostinato.stores import dags as dag_store
from ostinato.stores import jobs as job_store
from ostinato.stores import runs as run_store
from ostinato.telemetry import metrics
from ostinato.telemetry.logging import get_logger
from ostinato.wire.api import RunResult
from services.api import archived, scope

log = get_logger("ostinato.results")
Q = load("services.api", "results.sql")

MAX_WAIT = timedelta(seconds=60)  # a longer wait is refused: proxies cut idle requests
DEFAULT_WAIT = timedelta(seconds=30)
PING_SECONDS = 30.0  # the listener's liveness check (one `SELECT 1`), however many wait
RECONNECT_SECONDS = (0.2, 5.0)  # first and longest pause between the listener's attempts
DAG_FINAL = frozenset({"succeeded", "failed", "cancelled"})
_FINAL_RUN = frozenset(s.value for s in FINAL)
_SECONDS = re.compile(r"^\d+(\.\d+)?$")

Connect = Callable[[], Awaitable[asyncpg.Connection]]
Waiter = asyncio.Future[RunResult | None]


Reader = Callable[[list[uuid.UUID]], Awaitable[dict[uuid.UUID, tuple[uuid.UUID, RunResult]]]]
DELIVERY_BATCH = 1000  # run ids read in one statement when notices wake their waiters


class RunEnds:
    """One listener per api process, and the waiters of each run id (in memory), each with its
    tenant. A notice naming awaited runs is answered by ONE read for all of them (`read`: the
    final answers of those ids, with their tenants), handed to each waiter of that tenant; a
    notice naming no awaited run costs nothing. Started by its first waiter; `close()` on stop."""

    def __init__(self, connect: Connect, read: Reader,
                 stopping: asyncio.Event | None = None) -> None:
        """`stopping`: set at SIGTERM (`Service.stopping`): every waiter answers then."""
        self._connect = connect
        self._read = read
        self._stopping = stopping
        self._waiters: dict[uuid.UUID, dict[Waiter, uuid.UUID]] = {}
        self._pending: set[uuid.UUID] = set()  # ended (or to read again), not yet delivered
        self._delivery: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._closed = False
        self.connects = 0  # how often the listener (re)connected (tests, logs)
        self.notices = 0
        self.reads = 0  # statements of deliveries (tests, the bench)

    def watch(self, run_id: uuid.UUID, tenant_id: uuid.UUID) -> Waiter:
        """Register a waiter for `run_id` (before reading its state): the future is done with
        the run's final answer when a notice names it, with None when the waiter must read for
        itself (a delivery failed) or the api stops (`closed`)."""
        if self._task is None and not self.closed:
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._listen(), name="run-ends-listener")
            if self._stopping is not None:
                self._stop_task = loop.create_task(self._stop_on(self._stopping))
        fut: Waiter = asyncio.get_running_loop().create_future()
        if self.closed:
            fut.set_result(None)
        else:
            self._waiters.setdefault(run_id, {})[fut] = tenant_id
            metrics.RESULT_WAITERS.inc()
        return fut

    def forget(self, run_id: uuid.UUID, fut: Waiter) -> None:
        waiting = self._waiters.get(run_id)
        if waiting is not None and waiting.pop(fut, None) is not None:
            metrics.RESULT_WAITERS.dec()
            if not waiting:
                del self._waiters[run_id]

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    def _settle(self, run_id: uuid.UUID, answer: tuple[uuid.UUID, RunResult] | None) -> int:
        """Hand `answer` to the run's waiters of its tenant (None: to every waiter, to read
        for itself); how many were answered."""
        waiting = self._waiters.get(run_id)
        if not waiting:
            return 0
        done = [f for f, t in waiting.items() if answer is None or t == answer[0]]
        for fut in done:
            del waiting[fut]
            if not fut.done():
                fut.set_result(None if answer is None else answer[1])
        if not waiting:
            del self._waiters[run_id]
        metrics.RESULT_WAITERS.dec(len(done))
        return len(done)

    def ended(self, run_ids: list[uuid.UUID]) -> None:
        """These runs ended (a notice), or may have (a reconnect): read the answers of the
        awaited ones, in one statement per DELIVERY_BATCH ids, and hand them out."""
        self._pending.update(r for r in run_ids if r in self._waiters)
        if self._pending and (self._delivery is None or self._delivery.done()):
            self._delivery = asyncio.get_running_loop().create_task(self._deliver())

    async def _deliver(self) -> None:
        while self._pending:
            batch = [self._pending.pop() for _ in range(min(DELIVERY_BATCH, len(self._pending)))]
            try:
                self.reads += 1
                answers = await self._read(batch)
            except Exception as exc:  # the database away: each waiter reads for itself
                log.warning("run-end delivery failed", error=f"{type(exc).__name__}: {exc}",
                            runs=len(batch))
                answers = None
            for run_id in batch:
                if answers is None:
                    self._settle(run_id, None)
                elif run_id in answers:
                    self._settle(run_id, answers[run_id])

    def wake_all(self) -> int:
        """Answer every waiter at once, each with what it read last (`done: false`): the
        api's drain (with `close`)."""
        return sum(self._settle(run_id, None) for run_id in list(self._waiters))

    async def close(self) -> None:
        """Stop listening and answer every waiter now; later waiters answer at once."""
        self._closed = True
        self.wake_all()
        for task in (self._task, self._stop_task, self._delivery):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _stop_on(self, stopping: asyncio.Event) -> None:
        await stopping.wait()
        self._closed = True
        self.wake_all()

    @property
    def closed(self) -> bool:
        return self._closed or (self._stopping is not None and self._stopping.is_set())

    def _on_notice(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self.notices += 1
        metrics.RUN_END_NOTICES.labels(kind="notice").inc()
        self.ended(ended.parse(payload))

    async def _listen(self) -> None:
        pause = RECONNECT_SECONDS[0]
        while not self.closed:
            conn: asyncpg.Connection | None = None
            try:
                conn = await self._connect()
                lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                conn.add_termination_listener(functools.partial(_resolve, lost))
                await conn.add_listener(ended.CHANNEL, self._on_notice)
                self.connects += 1
                metrics.RUN_END_NOTICES.labels(kind="reconnects").inc()
                log.info("run-end listener connected", connects=self.connects,
                         waiting=self.waiting)
                self.ended(list(self._waiters))  # what ended while not listening
                pause = RECONNECT_SECONDS[0]
                while not lost.done():
                    await asyncio.wait([lost], timeout=PING_SECONDS)
                    if not lost.done():
                        await conn.execute("SELECT 1")
                log.warning("run-end listener lost its connection", waiting=self.waiting)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database away: try again
                log.warning("run-end listener failed", error=f"{type(exc).__name__}: {exc}",
                            retry_in=pause)
            finally:
                if conn is not None and not conn.is_closed():
                    with contextlib.suppress(Exception):
                        await asyncio.shield(conn.close(timeout=2))
            if self.closed:
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, RECONNECT_SECONDS[1])


def _resolve(fut: asyncio.Future[None], *_: object) -> None:
    if not fut.done():
        fut.set_result(None)


def parse_wait(text: str | None) -> float:
    """`wait` as seconds: a duration ("30s", "1m", "PT30S") or a number of seconds ("2.5"),
    at most MAX_WAIT; InvalidInput (a 422 problem naming `wait`) otherwise."""
    if text is None:
        return DEFAULT_WAIT.total_seconds()
    raw = text.strip()
    try:
        seconds = float(raw) if _SECONDS.match(raw) else parse_duration(raw).total_seconds()
    except ValueError as exc:
        raise InvalidInput(f"wait: {exc}", errors=[{"field": "wait", "message": str(exc)}]
                           ) from None
    if seconds > MAX_WAIT.total_seconds():
        message = f"at most {int(MAX_WAIT.total_seconds())}s; ask again to wait longer"
        raise InvalidInput(f"wait: {message}", errors=[{"field": "wait", "message": message}])
    return seconds


def next_run_id(job_id: uuid.UUID, task: str, next_slot: datetime | None) -> uuid.UUID | None:
    """The id the run (a DAG job's: the DAG run) of a job's next occurrence gets."""
    if next_slot is None:
        return None
    try:
        dag = targets.dag_of_task(task)
    except ValueError:
        return None
    return targets.dag_run_id_for(job_id, next_slot) if dag is not None \
        else run_id_for(job_id, next_slot)


def run_answer(run_id: uuid.UUID, state: str, *, output: Any = None, last_error: Any = None,
               finished_at: datetime | None = None) -> RunResult:
    """A run's answer from its row: final or not, the output of a success, the final error."""
    done = state in _FINAL_RUN
    error = None if not done or state == "succeeded" else \
        (dict(last_error) if isinstance(last_error, dict) else
         {"type": state, "message": f"the run was {state.replace('_', ' ')}"})
    return RunResult(run_id=run_id, kind="run", done=done, state=state,
                     output=output if state == "succeeded" else None, error=error,
                     finished_at=finished_at if done else None)


def dag_run_answer(run_id: uuid.UUID, state: str,
                   finished_at: datetime | None = None) -> RunResult:
    done = state in DAG_FINAL
    error = None if not done or state == "succeeded" else \
        {"type": f"dag_{state}",
         "message": f"the DAG run {state}; its nodes: GET /v1/dag-runs/{run_id}"}
    return RunResult(run_id=run_id, kind="dag_run", done=done, state=state, error=error,
                     finished_at=finished_at if done else None)


async def read_result(conn: asyncpg.Connection, tenant_id: uuid.UUID, run_id: uuid.UUID,
                      job_id: uuid.UUID | None,
                      archive: archived.Archive | None = None) -> RunResult:
    """The run's (or DAG run's) answer as it stands; NotFound unless the tenant has it, or
    `job_id` is its job's and the run is that job's next occurrence, not created yet, or the
    tenant's archive holds it (`archived` true: final, its output from the archive). The
    job is read first: its next slot moves in the transaction that creates the run."""
    job = await job_store.by_id(conn, tenant_id, job_id) if job_id is not None else None
    run = await run_store.by_id(conn, tenant_id, run_id)
    if run is not None:
        output = None
        if run.state == "succeeded" and run.output_ref is not None:
            output = (await get_blobs(conn, [run.output_ref], tenant_id)).get(run.output_ref)
        return run_answer(run_id, run.state, output=output, last_error=run.last_error,
                          finished_at=run.finished_at)
    dag_run = await dag_store.run_by_id(conn, tenant_id, run_id)
    if dag_run is not None:
        return dag_run_answer(run_id, dag_run.state, dag_run.finished_at)
    if job is not None and next_run_id(job.id, job.task, job.next_slot) == run_id:
        kind = "dag_run" if job.task.startswith(targets.DAG_TASK_PREFIX) else "run"
        return RunResult(run_id=run_id, kind=kind, done=False, state="scheduled")
    return archived_result(await archived.read(archive, tenant_id, run_id))


def archived_result(found: ArchivedRun) -> RunResult:
    """An archived run's answer: final, as its `runs` row and output were when archived."""
    row = archived.run_row(found)
    output = archived.blobs(found).get(row.output_ref) if row.output_ref is not None else None
    answer = run_answer(row.id, row.state, output=output, last_error=row.last_error,
                        finished_at=row.finished_at)
    answer.archived, answer.archived_at = True, found.archived_at
    return answer


def reader(pool_of: Callable[[], asyncpg.Pool]) -> Reader:
    """How `RunEnds` reads the answers of runs that ended: final ones only, with their
    tenants, one statement for the runs, one for DAG runs among the rest, one for the outputs
    per tenant."""
    async def read(run_ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[uuid.UUID, RunResult]]:
        out: dict[uuid.UUID, tuple[uuid.UUID, RunResult]] = {}
        async with pool_of().acquire() as conn:
            rows = await conn.fetch(Q["ended_runs"], run_ids)
            refs: dict[uuid.UUID, list[uuid.UUID]] = {}
            for r in rows:
                if r["state"] == "succeeded" and r["output_ref"] is not None:
                    refs.setdefault(r["tenant_id"], []).append(r["output_ref"])
            outputs: dict[uuid.UUID, Any] = {}
            for tenant_id, tenant_refs in refs.items():
                outputs.update(await get_blobs(conn, tenant_refs, tenant_id))
            for r in rows:
                out[r["id"]] = (r["tenant_id"], run_answer(
                    r["id"], r["state"], output=outputs.get(r["output_ref"]),
                    last_error=r["last_error"], finished_at=r["finished_at"]))
            rest = [i for i in run_ids if i not in out]
            if rest:
                for r in await conn.fetch(Q["ended_dag_runs"], rest):
                    out[r["id"]] = (r["tenant_id"],
                                    dag_run_answer(r["id"], r["state"], r["finished_at"]))
        return out
    return read


@get("/v1/runs/{run_id:uuid}/result", tags=["runs"], opt={"reads_archive": True})
async def run_result(request: Request, run_id: FromPath[uuid.UUID], caller: Caller,
                     wait: FromQuery[str | None] = None,
                     job_id: FromQuery[uuid.UUID | None] = None) -> RunResult:
    """Await a run's end (a task run, a workflow run, or a DAG run by its id): answers as soon
    as the run is final (`done: true`, its `output`, or its final `error`), else after `wait`
    (a duration, "30s" by default, at most "60s"; "0s": answer at once) with `done: false`:
    ask again. The wait holds no database connection: it is woken by the run's end. `job_id`:
    the run is that job's next occurrence (`JobView.next_run_id`), which may not exist yet
    (a job just submitted), and is awaited as `scheduled`. A run that has left the hot
    database answers at once from its archive (`archived` true; docs/RETENTION.md)."""
    seconds = parse_wait(wait)
    state = request.app.state
    ends: RunEnds = state.run_ends
    pool: asyncpg.Pool = state.pool
    tenant_id = await scope.tenant_of(request, caller)
    fut = ends.watch(run_id, tenant_id)  # before the read: an end after it is a notice we hear
    try:
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            async with pool.acquire() as conn:
                answer = await read_result(conn, tenant_id, run_id, job_id,
                                           archived.archive_of(state))
            left = deadline - asyncio.get_running_loop().time()
            if answer.done or left <= 0 or ends.closed:
                return answer
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(fut), left)
            if not fut.done() or ends.closed:  # the wait ran out, or the api stops
                return answer
            delivered = fut.result()
            if delivered is not None:  # the run's end, read once for all its waiters
                return delivered
            fut = ends.watch(run_id, tenant_id)  # to read for itself: watch again first
    finally:
        ends.forget(run_id, fut)


def connector(dsn: str) -> Connect:
    """How the listener connects: its own connection (a pooled one is reset on release, and
    LISTEN is per session), to the same database as the pool."""
    async def connect() -> asyncpg.Connection:
        return await asyncpg.connect(dsn, timeout=10)
    return connect


ROUTES: list[Any] = [run_result]
