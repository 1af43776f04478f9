"""A DAG definition: nodes (each an ordinary task with payload, pool, priority, retry policy and
timeout) and edges, validated as acyclic, with a content version.

The version is the SHA-256 of the normalised definition (nodes by key, edges sorted and
deduplicated, defaults filled in), so the same definition sent twice is the same version and any
change is a new one.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

from ostinato.domain.errors import InvalidInput
from ostinato.policy import retry

TriggerRule = Literal["all_success", "all_done", "one_success"]
KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
MAX_NODES = 2_000
MAX_EDGES = 20_000

Key = Annotated[str, msgspec.Meta(pattern=KEY_PATTERN)]

MAX_TIMEOUT_SECONDS = 10 * 366 * 86_400.0  # ten years, as every other duration a request carries


class NodeSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """One node: a task run like a job's, started when its trigger rule holds."""

    key: Key
    task: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    payload: Any = None
    pool: str | None = None  # None: the DAG run's default pool
    priority: str | None = None
    retry: retry.RetrySpec | None = None
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT_SECONDS)] | None = None
    trigger_rule: TriggerRule = "all_success"


class EdgeSpec(msgspec.Struct, forbid_unknown_fields=True, array_like=False, frozen=True):
    """`from` runs before `to`; `to` receives `from`'s run id and output reference."""

    from_: str = msgspec.field(name="from")
    to: str = msgspec.field(name="to")


class DagDefinition(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    nodes: Annotated[list[NodeSpec], msgspec.Meta(min_length=1, max_length=MAX_NODES)]
    edges: Annotated[list[EdgeSpec], msgspec.Meta(max_length=MAX_EDGES)] = []


@dataclass(frozen=True, slots=True)
class Dag:
    """A validated definition with its graph precomputed: `order` is a topological order (ties
    by key), `parents`/`children` by key."""

    definition: DagDefinition
    version_hash: str
    nodes: Mapping[str, NodeSpec]
    parents: Mapping[str, tuple[str, ...]]
    children: Mapping[str, tuple[str, ...]]
    order: tuple[str, ...]

    def downstream(self, key: str) -> tuple[str, ...]:
        """`key` and every node reachable from it, in topological order."""
        seen = {key}
        stack = [key]
        while stack:
            for child in self.children[stack.pop()]:
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        return tuple(k for k in self.order if k in seen)

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(k for k in self.order if not self.parents[k])

    def layers(self) -> tuple[tuple[str, ...], ...]:
        """The nodes by depth (a root is 0, any other node one more than its deepest parent),
        each layer in topological order: how the web UI draws the graph, left to right."""
        depth: dict[str, int] = {}
        for k in self.order:  # parents come first in a topological order
            depth[k] = 1 + max((depth[p] for p in self.parents[k]), default=-1)
        out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
        for k in self.order:
            out[depth[k]].append(k)
        return tuple(tuple(layer) for layer in out)


class CycleError(InvalidInput):
    """A cycle, named by its nodes in order (the first repeated at the end)."""

    def __init__(self, cycle: list[str]) -> None:
        text = " -> ".join(cycle)
        super().__init__(f"edges: the graph has a cycle: {text}",
                         [{"field": "edges", "message": f"cycle: {text}"}])
        self.extra["cycle"] = cycle
        self.cycle = cycle


def find_cycle(keys: Iterable[str], children: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle as `[a, b, ..., a]`, or None; iterative DFS (deep graphs do not recurse)."""
    colour: dict[str, int] = {}  # 1 on the path, 2 done
    for start in sorted(keys):
        if colour.get(start):
            continue
        path: list[str] = [start]
        iters = [iter(sorted(children.get(start, ())))]
        colour[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                colour[path.pop()] = 2
                iters.pop()
            elif colour.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(children.get(nxt, ()))))
    return None


def normalised(definition: DagDefinition) -> DagDefinition:
    nodes = sorted(definition.nodes, key=lambda n: n.key)
    edges = sorted({(e.from_, e.to) for e in definition.edges})
    return DagDefinition(nodes=nodes, edges=[EdgeSpec(a, b) for a, b in edges])


def version_of(definition: DagDefinition) -> str:
    doc = msgspec.to_builtins(normalised(definition))
    return hashlib.sha256(msgspec.json.encode(doc, order="sorted")).hexdigest()


def validate(definition: DagDefinition) -> Dag:
    """The definition as a `Dag`, or InvalidInput naming each bad field (a cycle: CycleError)."""
    errors: list[dict[str, str]] = []
    keys: dict[str, NodeSpec] = {}
    for i, node in enumerate(definition.nodes):
        if node.key in keys:
            errors.append({"field": f"nodes[{i}].key", "message": f"duplicate key {node.key!r}"})
        keys[node.key] = node
        if node.retry is not None:
            try:
                retry.parse_retry(node.retry, f"nodes[{i}].retry")
            except InvalidInput as exc:
                errors.extend(exc.errors)
    for i, edge in enumerate(definition.edges):
        for end, key in (("from", edge.from_), ("to", edge.to)):
            if key not in keys:
                errors.append({"field": f"edges[{i}].{end}", "message": f"unknown node {key!r}"})
        if edge.from_ == edge.to:
            errors.append({"field": f"edges[{i}]",
                           "message": f"self edge on {edge.from_!r}"})
    if errors:
        raise InvalidInput("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors)
    parents: dict[str, set[str]] = {k: set() for k in keys}
    children: dict[str, set[str]] = {k: set() for k in keys}
    for edge in definition.edges:
        parents[edge.to].add(edge.from_)
        children[edge.from_].add(edge.to)
    cycle = find_cycle(keys, children)
    if cycle is not None:
        raise CycleError(cycle)
    return Dag(definition=normalised(definition), version_hash=version_of(definition),
               nodes=keys, parents={k: tuple(sorted(v)) for k, v in parents.items()},
               children={k: tuple(sorted(v)) for k, v in children.items()},
               order=_topological(keys, parents))


def _topological(keys: Iterable[str], parents: Mapping[str, set[str]]) -> tuple[str, ...]:
    """Kahn's algorithm over a heap of ready keys: the order is the same for the same graph."""
    missing = {k: len(parents[k]) for k in keys}
    children: dict[str, list[str]] = {k: [] for k in missing}
    for k, ps in parents.items():
        for p in ps:
            children[p].append(k)
    heap = [k for k, n in missing.items() if n == 0]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        k = heapq.heappop(heap)
        order.append(k)
        for c in children[k]:
            missing[c] -= 1
            if missing[c] == 0:
                heapq.heappush(heap, c)
    return tuple(order)


def parse(document: Any) -> Dag:
    """A JSON document (already decoded) → a validated `Dag`."""
    try:
        definition = msgspec.convert(document, DagDefinition)
    except msgspec.ValidationError as exc:
        raise InvalidInput(str(exc), [{"field": "definition", "message": str(exc)}]) from exc
    return validate(definition)


def from_stored(document: Any) -> Dag:
    """A definition stored by `DagDefined` (already valid)."""
    return validate(msgspec.convert(document, DagDefinition))
