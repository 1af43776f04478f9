"""DAG commands (docs/DAGS.md): define a DAG, start a DAG run, advance DAG runs whose nodes
ended, cancel a DAG run, retry from a node. Each decides with the pure `ostinato.dags` and
appends in the caller's transaction (or its own).

Every node is an ordinary run (`RunScheduled`, trigger `dag`, carrying its DAG run and node
key), so dispatch, fairness, the node's retry policy, timeouts and dead letters apply
unchanged. Its id derives from the DAG run, the node key and the node's generation
(`node_run_id`), and the DAG run row is locked while a node is made ready: a crash, a second
scheduler or a repeated request creates no second run of a node.

Advancing follows the shape of a child's end (`ostinato.runs.children`): the scheduler's duty
(`advance_due`) finds DAG runs with an active node whose run is final (partial index
`dag_run_nodes_active`) and appends, in one transaction per batch, `DagNodeFinished` for those
nodes, then what `ostinato.dags.decide.advance` says: `DagNodeReady` with the dependants' runs,
`DagNodeSkipped`, `DagRunFinished`. A DAG run asked for an instant (`at`) waits `pending`
(partial index `dag_runs_due`) and starts the same way.

A child node's payload is `{"input": <the node's payload>, "dag": {"dag_run_id", "node",
"parents": {key: {"run_id", "state", "output_ref"}}}}`: parents' outputs by reference, never
copied (read them with GET /v1/runs/{run_id}).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from ostinato.dags import decide, graph
from ostinato.dags.decide import NodeState
from ostinato.domain import events as ev
from ostinato.domain.errors import Conflict, InvalidInput, InvalidState, NotFound
from ostinato.domain.ids import new_id
from ostinato.eventlog.records import NewEvent, StreamHead
from ostinato.eventlog.store import EventStore, put_blobs
from ostinato.jobs import materialise
from ostinato.policy import retry
from ostinato.runs.commands import cancel_run
from ostinato.stores import dags as dag_store
from ostinato.stores.dags import DagNodeRow, DagRow, DagRunRow

DAG_NAMESPACE = uuid.UUID("0c2b8f1e-5d1a-4f43-b1d5-27a9a3c6e4d2")
DEFAULT_POOL = "default"
DEFAULT_PRIORITY = "default"
_json = msgspec.json.Encoder()


def node_run_id(dag_run_id: uuid.UUID, key: str, generation: int) -> uuid.UUID:
    """The one run id the node's `generation`-th run in this DAG run can have."""
    return uuid.uuid5(DAG_NAMESPACE, f"{dag_run_id}/{key}/{generation}")


@dataclass(frozen=True, slots=True)
class Rules:
    """What nodes may ask for: configured pools and priority classes, pools' default retry
    policies and the payload size limit."""

    pools: frozenset[str] = frozenset({DEFAULT_POOL})
    classes: frozenset[str] = frozenset({DEFAULT_PRIORITY})
    pool_retry: Mapping[str, retry.RetryPolicy] | None = None
    max_payload_bytes: int = 262_144


def check_nodes(dag: graph.Dag, rules: Rules) -> None:
    errors: list[dict[str, str]] = []
    for i, node in enumerate(dag.definition.nodes):
        if (node.pool or DEFAULT_POOL) not in rules.pools:
            errors.append({"field": f"nodes[{i}].pool", "message": "unknown pool; configured: "
                           + ", ".join(sorted(rules.pools))})
        if (node.priority or DEFAULT_PRIORITY) not in rules.classes:
            errors.append({"field": f"nodes[{i}].priority",
                           "message": "unknown priority class; configured: "
                           + ", ".join(sorted(rules.classes))})
        if len(_json.encode(node.payload)) > rules.max_payload_bytes:
            errors.append({"field": f"nodes[{i}].payload",
                           "message": f"larger than {rules.max_payload_bytes} bytes"})
    if errors:
        raise InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors)


async def define(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                 name: str, document: Any, rules: Rules, actor: str) -> tuple[DagRow, bool]:
    """The DAG `name` with this definition: a new DAG, a new version of it (a changed
    definition), or the current one unchanged (created False). Raises InvalidInput (a cycle:
    graph.CycleError, naming it)."""
    dag = graph.parse(document)
    check_nodes(dag, rules)
    async with conn.transaction():
        current = await dag_store.lock_by_name(conn, tenant_id, name)
        if current is not None and current.version_hash == dag.version_hash:
            return current, False
        dag_id = current.id if current is not None else new_id()
        head = StreamHead(dag_id, tenant_id, current.stream_version if current else 0)
        number = current.version + 1 if current else 1
        await store.append(conn, [head.next(ev.DagDefined(
            name=name, version=number, version_hash=dag.version_hash,
            definition=msgspec.to_builtins(dag.definition)), actor)])
        row = await dag_store.by_id(conn, tenant_id, dag_id)
    assert row is not None
    return row, True


async def load_dag(conn: asyncpg.Connection, dag_id: uuid.UUID, version: int) -> graph.Dag:
    row = await dag_store.version(conn, dag_id, version)
    if row is None:
        raise NotFound(f"no version {version} of DAG {dag_id}")
    return graph.from_stored(row.definition)


def states_of(dag: graph.Dag, nodes: Sequence[DagNodeRow]) -> dict[str, NodeState]:
    return {n.key: n.state for n in nodes if n.key in dag.nodes}  # type: ignore[misc]


def node_finished(node: DagNodeRow, state: str,
                  first_starts: Mapping[uuid.UUID, datetime]) -> ev.DagNodeFinished:
    """The node's end as recorded in the DAG run's timeline, with its run's real start and end
    (read with the node, from the run's projection), not the time the poll noticed it."""
    first = first_starts.get(node.run_id, node.run_started_at)  # type: ignore[arg-type]
    return ev.DagNodeFinished(key=node.key, run_id=node.run_id, state=state,  # type: ignore[arg-type]
                              started_at=node.run_started_at,
                              finished_at=node.run_finished_at, attempts=node.attempt,
                              first_started_at=first)


async def first_starts(conn: asyncpg.Connection, runs: Sequence[DagRunRow],
                       nodes: Mapping[uuid.UUID, Sequence[DagNodeRow]],
                       ) -> dict[uuid.UUID, datetime]:
    """The first attempt's start of the active nodes' runs that took more than one (the
    projection has the last attempt's), for their `DagNodeFinished`."""
    retried = [(n.run_id, run.tenant_id) for run in runs for n in nodes[run.id]
               if n.state == "active" and n.run_id is not None and n.attempt > 1]
    return await dag_store.first_starts(conn, [r for r, _ in retried], [t for _, t in retried])


class _Writer:
    """The events and payload blobs of one transaction over DAG runs."""

    def __init__(self, actor: str, now: datetime, rules: Rules,
                 first_starts: Mapping[uuid.UUID, datetime] | None = None) -> None:
        self.actor, self.now, self.rules = actor, now, rules
        self.first_starts = first_starts or {}
        self.events: list[NewEvent] = []
        self.blobs: list[tuple[uuid.UUID, uuid.UUID, bytes]] = []

    def node_ready(self, head: StreamHead, run: DagRunRow, dag: graph.Dag, key: str,
                   generation: int, nodes: Mapping[str, DagNodeRow]) -> None:
        spec = dag.nodes[key]
        run_id = node_run_id(run.id, key, generation)
        parents = {p: {"run_id": str(nodes[p].run_id) if nodes[p].run_id else None,
                       "state": nodes[p].state,
                       "output_ref": str(nodes[p].output_ref) if nodes[p].output_ref else None}
                   for p in dag.parents[key]}
        body = _json.encode({"input": spec.payload,
                             "dag": {"dag_run_id": str(run.id), "node": key,
                                     "parents": parents}})
        payload_ref = new_id()
        self.blobs.append((payload_ref, run.tenant_id, body))
        pool = spec.pool or DEFAULT_POOL
        policy = (retry.parse_retry(spec.retry) if spec.retry is not None
                  else (self.rules.pool_retry or {}).get(pool, retry.DEFAULT))
        self.events.append(StreamHead(run_id, run.tenant_id).next(materialise.scheduled(
            job_id=run.job_id or run.dag_id, task=spec.task, pool=pool,
            priority=spec.priority or DEFAULT_PRIORITY, payload_ref=payload_ref,
            scheduled_for=run.scheduled_for or run.due_at, trigger="dag", due_at=self.now,
            retry=retry.to_document(policy), timeout_seconds=spec.timeout_seconds,
            dag_run_id=run.id, dag_node=key), self.actor))
        self.events.append(head.next(ev.DagNodeReady(
            key=key, run_id=run_id, generation=generation,
            parents=[nodes[p].run_id for p in dag.parents[key] if nodes[p].run_id]),
            self.actor))

    def advance(self, head: StreamHead, run: DagRunRow, dag: graph.Dag,
                nodes: Sequence[DagNodeRow]) -> bool:
        """Record nodes whose runs ended, then start, skip or finish per the decision; whether
        anything was (a DAG run another writer advanced first needs nothing)."""
        before = len(self.events)
        by_key = {n.key: n for n in nodes}
        states = states_of(dag, nodes)
        for n in nodes:
            if n.state == "active" and n.run_state is not None:
                ended = decide.node_state_of_run(n.run_state)
                if ended != "active":
                    self.events.append(head.next(node_finished(n, ended, self.first_starts),
                                                 self.actor))
                    states[n.key] = ended
                    by_key[n.key] = msgspec.structs.replace(n, state=ended)
        if run.cancel_requested:
            gone = decide.cancel(dag, states).never_started
            for key in gone:
                self.events.append(head.next(ev.DagNodeSkipped(
                    key=key, state="cancelled", cause="dag run cancelled"), self.actor))
                states[key] = "cancelled"
        step = decide.advance(dag, states)
        for key, verdict in step.not_run.items():
            cause = ", ".join(f"{p} {states[p]}" for p in dag.parents[key]
                              if states[p] != "succeeded")
            self.events.append(head.next(ev.DagNodeSkipped(key=key, state=verdict,
                                                           cause=cause), self.actor))
            states[key] = verdict
            by_key[key] = msgspec.structs.replace(by_key[key], state=verdict)
        for key in step.ready:
            node = by_key[key]
            gen = node.generation + 1 if node.run_id is not None else 0
            self.node_ready(head, run, dag, key, gen, by_key)
        if step.outcome is not None and run.state not in ("succeeded", "failed", "cancelled"):
            outcome = "cancelled" if run.cancel_requested else step.outcome
            counts: dict[str, int] = {}
            for s in states.values():
                counts[s] = counts.get(s, 0) + 1
            self.events.append(head.next(ev.DagRunFinished(outcome=outcome,
                                                           counts=counts), self.actor))
        return len(self.events) > before

    async def flush(self, conn: asyncpg.Connection, store: EventStore) -> None:
        await put_blobs(conn, self.blobs)
        await store.append(conn, self.events)


async def start_run(conn: asyncpg.Connection, store: EventStore, *, dag: DagRow,
                    now: datetime, at: datetime | None, actor: str, rules: Rules,
                    trigger: str | None = None, job_id: uuid.UUID | None = None,
                    scheduled_for: datetime | None = None,
                    dag_run_id: uuid.UUID | None = None) -> tuple[uuid.UUID, bool]:
    """A DAG run of the DAG's current version, in the caller's transaction: its roots start now
    (in this transaction), or it waits `pending` until `at`. With `dag_run_id` (an occurrence's)
    a second start of the same run creates nothing: (id, created)."""
    definition = await load_dag(conn, dag.id, dag.version)
    run_id = dag_run_id or new_id()
    if dag_run_id is not None and await dag_store.run_by_id(conn, dag.tenant_id,
                                                            run_id) is not None:
        return run_id, False
    due = at if at is not None and at > now else now
    head = StreamHead(run_id, dag.tenant_id)
    started = ev.DagRunStarted(
        dag_id=dag.id, dag_version=dag.version, nodes=list(definition.order), due_at=due,
        trigger=trigger or ("at" if due > now else "api"), job_id=job_id,
        scheduled_for=scheduled_for)
    writer = _Writer(actor, now, rules)
    writer.events.append(head.next(started, actor))
    if due <= now:
        row = DagRunRow(id=run_id, tenant_id=dag.tenant_id, dag_id=dag.id,
                        dag_version=dag.version, state="pending", trigger=started.trigger,
                        due_at=due, job_id=job_id, scheduled_for=scheduled_for,
                        cancel_requested=False, created_at=now, started_at=None,
                        finished_at=None, updated_at=now, version=1)
        writer.advance(head, row, definition, [_waiting(run_id, k) for k in definition.order])
    await writer.flush(conn, store)
    return run_id, True


def _waiting(dag_run_id: uuid.UUID, key: str) -> DagNodeRow:
    return DagNodeRow(dag_run_id=dag_run_id, key=key, state="waiting", run_id=None,
                      generation=0, ready_at=None, finished_at=None, run_state=None, attempt=0,
                      run_started_at=None, run_finished_at=None, output_ref=None,
                      last_error=None)


async def advance_due(conn: asyncpg.Connection, store: EventStore, *, now: datetime,
                      batch_size: int, actor: str, rules: Rules, checked: bool = False) -> int:
    """One transaction: advance up to `batch_size` DAG runs with a node whose run ended, or
    whose start time has come by `now` (the scheduler's clock: the database's). Returns how
    many DAG runs were advanced. With none to advance, one read and no transaction (none at
    all when `checked`: the caller's read found some)."""
    if not checked and not await dag_store.any_work(conn, now):
        return 0
    async with conn.transaction():  # found unlocked, then locked and read again
        ids = await dag_store.with_ended_nodes(conn, batch_size)
        if len(ids) < batch_size:
            ids += await dag_store.due(conn, now, batch_size - len(ids))
        if not ids:
            return 0
        runs = await dag_store.lock_runs_skip(conn, sorted(set(ids)))
        if not runs:
            return 0
        graphs = {k: graph.from_stored(v.definition) for k, v in (await dag_store.versions(
            conn, list({(r.dag_id, r.dag_version) for r in runs}))).items()}
        nodes = await dag_store.nodes(conn, [r.id for r in runs])
        writer = _Writer(actor, now, rules, await first_starts(conn, runs, nodes))
        advanced = sum(writer.advance(StreamHead(run.id, run.tenant_id, run.version), run,
                                      graphs[(run.dag_id, run.dag_version)], nodes[run.id])
                       for run in runs)
        await writer.flush(conn, store)
    return advanced


async def _locked(conn: asyncpg.Connection, tenant_id: uuid.UUID,
                  dag_run_id: uuid.UUID) -> DagRunRow:
    run = await dag_store.lock_run(conn, tenant_id, dag_run_id)
    if run is None:
        raise NotFound(f"no DAG run {dag_run_id}")
    return run


async def cancel(conn: asyncpg.Connection, store: EventStore, *, tenant_id: uuid.UUID,
                 dag_run_id: uuid.UUID, actor: str, now: datetime, rules: Rules,
                 reason: str = "") -> int:
    """Cancel the DAG run: `DagRunCancelled`, its waiting nodes `cancelled`, its active nodes'
    runs cancelled (`ostinato.runs.commands.cancel_run`: a running one is asked to stop). It
    finishes `cancelled` once the last of them has ended. Returns how many runs were asked."""
    async with conn.transaction():
        run = await _locked(conn, tenant_id, dag_run_id)
        if run.state in ("succeeded", "failed", "cancelled"):
            raise InvalidState(f"DAG run {dag_run_id} is already {run.state}")
        if run.cancel_requested:
            return 0
        dag = await load_dag(conn, run.dag_id, run.dag_version)
        nodes = (await dag_store.nodes(conn, [run.id]))[run.id]
        head = StreamHead(run.id, run.tenant_id, run.version)
        writer = _Writer(actor, now, rules, await first_starts(conn, [run], {run.id: nodes}))
        writer.events.append(head.next(ev.DagRunCancelled(by=actor, reason=reason), actor))
        active = [n for n in nodes if n.state == "active" and n.run_id is not None
                  and n.run_state not in ("succeeded", "dead_lettered", "cancelled")]
        writer.advance(head, msgspec.structs.replace(run, cancel_requested=True), dag, nodes)
        await writer.flush(conn, store)
        for node in active:
            try:
                await cancel_run(conn, store, tenant_id=tenant_id, run_id=node.run_id,
                                 actor=actor)  # type: ignore[arg-type]
            except InvalidState:
                pass  # it ended meanwhile: the advance duty records it
    return len(active)


async def retry_from_node(conn: asyncpg.Connection, store: EventStore, *,
                          tenant_id: uuid.UUID, dag_run_id: uuid.UUID, key: str, actor: str,
                          now: datetime, rules: Rules, reason: str = "") -> uuid.UUID:
    """Re-run `key` and everything downstream of it in the same DAG run: those nodes wait
    again (`DagRunRetriedFromNode`, with the actor) and `key` starts at once as its next
    generation; the rest follow their trigger rules. Returns the node's new run id."""
    async with conn.transaction():
        run = await _locked(conn, tenant_id, dag_run_id)
        if run.state == "pending":
            raise InvalidState(f"DAG run {dag_run_id} has not started yet")
        dag = await load_dag(conn, run.dag_id, run.dag_version)
        if key not in dag.nodes:
            raise NotFound(f"DAG run {dag_run_id} has no node {key!r}")
        nodes = (await dag_store.nodes(conn, [run.id]))[run.id]
        by_key = {n.key: n for n in nodes}
        states = states_of(dag, nodes)
        for n in nodes:  # a run that ended but was not recorded yet counts as ended
            if n.state == "active" and n.run_state is not None:
                states[n.key] = decide.node_state_of_run(n.run_state)
        try:
            reset = decide.retry_from(dag, states, key)
        except decide.RetryRefused as exc:
            raise Conflict(f"cannot retry from {key!r}: {exc}") from None
        head = StreamHead(run.id, run.tenant_id, run.version)
        writer = _Writer(actor, now, rules, await first_starts(conn, [run], {run.id: nodes}))
        for n in nodes:  # record ends not yet recorded, so the log says what was reset
            if n.state == "active" and states[n.key] != "active":
                writer.events.append(head.next(node_finished(n, states[n.key],
                                                             writer.first_starts), actor))
        writer.events.append(head.next(ev.DagRunRetriedFromNode(
            key=key, reset=list(reset), by=actor, reason=reason), actor))
        node = by_key[key]
        generation = node.generation + 1 if node.run_id is not None else 0
        reset_rows = {k: msgspec.structs.replace(by_key[k], state="waiting") for k in reset}
        writer.node_ready(head, run, dag, key, generation, {**by_key, **reset_rows})
        await writer.flush(conn, store)
    return node_run_id(run.id, key, generation)
