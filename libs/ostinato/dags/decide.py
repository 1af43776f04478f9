"""What a DAG run does next, from its nodes' states.

A node is `waiting` (no run yet), `active` (its run exists and is not final: scheduled, queued,
running, retrying, suspended) or terminal: `succeeded`, `failed` (its run was dead-lettered),
`cancelled` (its run was cancelled), `upstream_failed` or `skipped` (it will not run: its
trigger rule can no longer hold).

Trigger rules (Airflow's names and meaning):
- `all_success` (default): runs when every parent succeeded; a parent failed or upstream_failed
  makes it `upstream_failed` at once, a parent cancelled or skipped makes it `skipped`.
- `all_done`: runs when every parent is terminal, whatever the outcome (clean-ups).
- `one_success`: runs as soon as one parent succeeded; when every parent is terminal and none
  succeeded, `upstream_failed` (or `skipped` when none failed).

The DAG run is finished when every node is terminal: `failed` if a node failed or was
upstream_failed, else `cancelled` if one was cancelled, else `succeeded`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ostinato.dags.graph import Dag

NodeState = Literal["waiting", "active", "succeeded", "failed", "cancelled", "upstream_failed",
                    "skipped"]
Outcome = Literal["succeeded", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "upstream_failed",
                                      "skipped"})
FAILED: frozenset[str] = frozenset({"failed", "upstream_failed"})


def node_state_of_run(run_state: str) -> NodeState:
    """A node's run state (`ostinato.domain.states`) as the node's state."""
    match run_state:
        case "succeeded":
            return "succeeded"
        case "dead_lettered":
            return "failed"
        case "cancelled":
            return "cancelled"
        case _:
            return "active"


@dataclass(frozen=True, slots=True)
class Step:
    """The decision: nodes to start now, nodes that will not run (key → `upstream_failed` or
    `skipped`), and the outcome once every node is terminal (None: not finished)."""

    ready: tuple[str, ...] = ()
    not_run: Mapping[str, NodeState] = field(default_factory=dict)
    outcome: Outcome | None = None


def _rule(dag: Dag, key: str, states: Mapping[str, NodeState]) -> NodeState | None:
    """`active` (start it), a terminal state (it will not run) or None (wait)."""
    parents = [states[p] for p in dag.parents[key]]
    rule = dag.nodes[key].trigger_rule
    done = all(s in TERMINAL for s in parents)
    if rule == "all_done":
        return "active" if done else None
    if rule == "one_success":
        if any(s == "succeeded" for s in parents) or not parents:
            return "active"
        if not done:
            return None
        return "upstream_failed" if any(s in FAILED for s in parents) else "skipped"
    if any(s in FAILED for s in parents):
        return "upstream_failed"
    if any(s in ("cancelled", "skipped") for s in parents):
        return "skipped"
    return "active" if all(s == "succeeded" for s in parents) else None


def outcome_of(states: Mapping[str, NodeState]) -> Outcome | None:
    if not all(s in TERMINAL for s in states.values()):
        return None
    if any(s in FAILED for s in states.values()):
        return "failed"
    if any(s == "cancelled" for s in states.values()):
        return "cancelled"
    return "succeeded"


def advance(dag: Dag, states: Mapping[str, NodeState]) -> Step:
    """One pass in topological order, so a failure propagates through any depth at once."""
    now = dict(states)
    ready: list[str] = []
    not_run: dict[str, NodeState] = {}
    for key in dag.order:
        if now[key] != "waiting":
            continue
        verdict = _rule(dag, key, now)
        if verdict is None:
            continue
        now[key] = verdict
        if verdict == "active":
            ready.append(key)
        else:
            not_run[key] = verdict
    return Step(tuple(ready), not_run, outcome_of(now))


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancelling a DAG run: the active nodes whose runs to cancel, the waiting ones that become
    `cancelled` without a run."""

    runs_to_cancel: tuple[str, ...]
    never_started: tuple[str, ...]


def cancel(dag: Dag, states: Mapping[str, NodeState]) -> Cancel:
    return Cancel(tuple(k for k in dag.order if states[k] == "active"),
                  tuple(k for k in dag.order if states[k] == "waiting"))


class RetryRefused(ValueError):
    pass


def retry_from(dag: Dag, states: Mapping[str, NodeState], key: str) -> tuple[str, ...]:
    """The nodes "retry from `key`" resets to waiting: `key` and everything downstream of it, in
    topological order. Refused while one of them is still active (it would run twice) or while a
    parent of `key` is not terminal (it would start before its parent ended). The caller starts
    `key` at once (an operator's explicit choice, whatever its rule) and lets `advance` decide
    the rest."""
    if key not in dag.nodes:
        raise KeyError(key)
    reset = dag.downstream(key)
    busy = [k for k in reset if states[k] == "active"]
    if busy:
        raise RetryRefused(f"node {busy[0]!r} is still running")
    waiting = [k for k in dag.parents[key] if states[k] not in TERMINAL]
    if waiting:
        raise RetryRefused(f"parent {waiting[0]!r} of {key!r} has not finished")
    return reset
