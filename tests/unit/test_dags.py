"""The DAG core (ostinato.dags): validation, versions, trigger rules, cancel and retry-from."""

from __future__ import annotations

import itertools
import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ostinato.dags import decide, graph, targets
from ostinato.dags.decide import TERMINAL
from ostinato.domain.errors import InvalidInput


def dag_of(edges: list[tuple[str, str]], keys: list[str] | None = None,
           rules: dict[str, str] | None = None) -> graph.Dag:
    names = keys or sorted({k for e in edges for k in e})
    rules = rules or {}
    return graph.parse({
        "nodes": [{"key": k, "task": "t", **({"trigger_rule": rules[k]} if k in rules else {})}
                  for k in names],
        "edges": [{"from": a, "to": b} for a, b in edges]})


def states(dag: graph.Dag, **given: str) -> dict[str, decide.NodeState]:
    return {k: given.get(k, "waiting") for k in dag.nodes}  # type: ignore[misc]


# -- validation ---------------------------------------------------------------------------------


def test_a_valid_dag_has_a_topological_order_and_roots():
    dag = dag_of([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    assert dag.order == ("a", "b", "c", "d")
    assert dag.roots == ("a",)
    assert dag.parents["d"] == ("b", "c")
    assert dag.downstream("b") == ("b", "d")


def test_layers_put_each_node_one_past_its_deepest_parent():
    # e hangs off a (depth 1) and d (depth 2): it goes after d, not beside b
    dag = dag_of([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e"), ("a", "e")],
                 keys=["a", "b", "c", "d", "e", "x"])
    assert dag.layers() == (("a", "x"), ("b", "c"), ("d",), ("e",))
    for depth, layer in enumerate(dag.layers()):
        for k in layer:
            assert all(p in {q for ly in dag.layers()[:depth] for q in ly}
                       for p in dag.parents[k])


def test_unknown_node_in_an_edge_is_refused_naming_the_field():
    with pytest.raises(InvalidInput) as exc:
        dag_of([("a", "zz")], keys=["a"])
    assert exc.value.errors == [{"field": "edges[0].to", "message": "unknown node 'zz'"}]


def test_duplicate_keys_are_refused():
    with pytest.raises(InvalidInput) as exc:
        graph.parse({"nodes": [{"key": "a", "task": "t"}, {"key": "a", "task": "u"}]})
    assert exc.value.errors[0]["field"] == "nodes[1].key"


def test_self_edges_are_refused():
    with pytest.raises(InvalidInput) as exc:
        dag_of([("a", "a")])
    assert "self edge" in exc.value.errors[0]["message"]


@pytest.mark.parametrize("edges, cycle", [
    ([("a", "b"), ("b", "a")], ["a", "b", "a"]),
    ([("x", "a"), ("a", "b"), ("b", "c"), ("c", "a")], ["a", "b", "c", "a"]),
    ([("a", "b"), ("b", "c"), ("c", "d"), ("d", "b"), ("a", "e")], ["b", "c", "d", "b"]),
])
def test_a_cycle_is_refused_naming_its_nodes_in_order(edges, cycle):
    with pytest.raises(graph.CycleError) as exc:
        dag_of(edges)
    assert exc.value.cycle == cycle
    assert exc.value.status == 422
    assert " -> ".join(cycle) in exc.value.detail


def test_bad_shapes_and_bad_retry_policies_are_invalid_input():
    with pytest.raises(InvalidInput):
        graph.parse({"nodes": []})
    with pytest.raises(InvalidInput):
        graph.parse({"nodes": [{"key": "a", "task": "t", "surprise": 1}]})
    with pytest.raises(InvalidInput):
        graph.parse({"nodes": [{"key": "a b", "task": "t"}]})
    with pytest.raises(InvalidInput) as exc:
        graph.parse({"nodes": [{"key": "a", "task": "t", "retry": {"initial_delay": "soon"}}]})
    assert exc.value.errors[0]["field"] == "nodes[0].retry.initial_delay"


def test_a_deep_chain_validates_without_recursion():
    keys = [f"n{i:05d}" for i in range(1_500)]
    dag = dag_of(list(itertools.pairwise(keys)), keys=keys)
    assert dag.order == tuple(keys)


# -- versions -----------------------------------------------------------------------------------


def test_the_version_ignores_order_and_duplicate_edges_but_not_content():
    one = dag_of([("a", "b"), ("b", "c")])
    two = graph.parse({"nodes": [{"key": "c", "task": "t"}, {"key": "b", "task": "t"},
                                 {"key": "a", "task": "t"}],
                       "edges": [{"from": "b", "to": "c"}, {"from": "a", "to": "b"},
                                 {"from": "a", "to": "b"}]})
    assert one.version_hash == two.version_hash
    assert dag_of([("a", "b"), ("a", "c")]).version_hash != one.version_hash
    changed = graph.parse({"nodes": [{"key": "a", "task": "t", "payload": {"x": 1}}]})
    same = graph.parse({"nodes": [{"key": "a", "task": "t", "payload": {"x": 1}}]})
    other = graph.parse({"nodes": [{"key": "a", "task": "t", "payload": {"x": 2}}]})
    assert changed.version_hash == same.version_hash != other.version_hash


def test_a_stored_definition_reads_back_as_the_same_version():
    import msgspec

    dag = dag_of([("a", "b")])
    again = graph.from_stored(msgspec.to_builtins(dag.definition))
    assert again.version_hash == dag.version_hash


# -- trigger rules ------------------------------------------------------------------------------


def test_roots_are_ready_first_and_children_wait_for_all_parents():
    dag = dag_of([("a", "c"), ("b", "c")])
    assert decide.advance(dag, states(dag)).ready == ("a", "b")
    assert decide.advance(dag, states(dag, a="succeeded", b="active")).ready == ()
    step = decide.advance(dag, states(dag, a="succeeded", b="succeeded"))
    assert step.ready == ("c",) and step.outcome is None


def test_a_failed_node_makes_its_dependants_upstream_failed_at_any_depth():
    dag = dag_of([("a", "b"), ("b", "c"), ("x", "c"), ("c", "d")])
    step = decide.advance(dag, states(dag, a="failed", x="active"))
    assert step.not_run == {"b": "upstream_failed", "c": "upstream_failed",
                            "d": "upstream_failed"}
    assert step.outcome is None  # x still runs
    final = decide.advance(dag, states(dag, a="failed", x="succeeded", b="upstream_failed",
                                       c="upstream_failed", d="upstream_failed"))
    assert final.outcome == "failed"


def test_a_cancelled_parent_skips_all_success_dependants():
    dag = dag_of([("a", "b")])
    step = decide.advance(dag, states(dag, a="cancelled"))
    assert step.not_run == {"b": "skipped"}
    assert step.outcome == "cancelled"


def test_all_done_runs_after_a_failure():
    dag = dag_of([("a", "cleanup"), ("b", "cleanup")], rules={"cleanup": "all_done"})
    assert decide.advance(dag, states(dag, a="failed", b="active")).ready == ()
    assert decide.advance(dag, states(dag, a="failed", b="succeeded")).ready == ("cleanup",)


def test_one_success_runs_on_the_first_success_and_fails_when_none_can():
    dag = dag_of([("a", "c"), ("b", "c")], rules={"c": "one_success"})
    assert decide.advance(dag, states(dag, a="succeeded", b="active")).ready == ("c",)
    assert decide.advance(dag, states(dag, a="failed", b="active")).ready == ()
    assert decide.advance(dag, states(dag, a="failed", b="cancelled")).not_run == {
        "c": "upstream_failed"}
    assert decide.advance(dag, states(dag, a="skipped", b="cancelled")).not_run == {
        "c": "skipped"}


def test_outcomes():
    dag = dag_of([("a", "b")])
    assert decide.advance(dag, states(dag, a="succeeded", b="succeeded")).outcome == "succeeded"
    assert decide.advance(dag, states(dag, a="succeeded", b="cancelled")).outcome == "cancelled"
    assert decide.advance(dag, states(dag, a="succeeded", b="failed")).outcome == "failed"
    assert decide.advance(dag, states(dag, a="succeeded", b="active")).outcome is None


def test_run_states_map_to_node_states():
    assert decide.node_state_of_run("succeeded") == "succeeded"
    assert decide.node_state_of_run("dead_lettered") == "failed"
    assert decide.node_state_of_run("cancelled") == "cancelled"
    for s in ("scheduled", "queued", "running", "failed", "retry_scheduled", "suspended"):
        assert decide.node_state_of_run(s) == "active"


# -- cancel and retry from node -----------------------------------------------------------------


def test_cancel_names_active_runs_and_never_started_nodes():
    dag = dag_of([("a", "b"), ("a", "c"), ("c", "d")])
    c = decide.cancel(dag, states(dag, a="succeeded", b="active", c="active"))
    assert c.runs_to_cancel == ("b", "c") and c.never_started == ("d",)


def test_retry_from_node_resets_it_and_its_downstream():
    dag = dag_of([("a", "b"), ("b", "c"), ("a", "x")])
    done = states(dag, a="succeeded", b="failed", c="upstream_failed", x="succeeded")
    assert decide.retry_from(dag, done, "b") == ("b", "c")
    assert decide.retry_from(dag, done, "a") == ("a", "b", "c", "x")


def test_retry_from_node_is_refused_while_it_or_a_parent_runs():
    dag = dag_of([("a", "b"), ("b", "c")])
    with pytest.raises(decide.RetryRefused, match="still running"):
        decide.retry_from(dag, states(dag, a="succeeded", b="failed", c="active"), "b")
    with pytest.raises(decide.RetryRefused, match="has not finished"):
        decide.retry_from(dag, states(dag, a="active"), "b")
    with pytest.raises(KeyError):
        decide.retry_from(dag, states(dag), "nope")


# -- property: random DAGs, random outcomes -----------------------------------------------------


@st.composite
def random_dags(draw):
    n = draw(st.integers(1, 14))
    keys = [f"k{i:02d}" for i in range(n)]
    edges = [(keys[i], keys[j]) for i in range(n) for j in range(i + 1, n)
             if draw(st.booleans()) and draw(st.booleans())]
    rules = {k: draw(st.sampled_from(["all_success", "all_done", "one_success"])) for k in keys}
    shuffled = draw(st.permutations(keys))  # the definition's order must not matter
    return dag_of(edges, keys=list(shuffled), rules=rules)


@settings(max_examples=300, deadline=None)
@given(dag=random_dags(), seed=st.integers(0, 2**32 - 1),
       retries=st.integers(0, 3))
def test_random_dags_run_to_one_terminal_state_per_node(dag, seed, retries):
    rnd = random.Random(seed)
    now: dict[str, decide.NodeState] = {k: "waiting" for k in dag.nodes}
    became_terminal: dict[str, int] = {k: 0 for k in dag.nodes}

    def apply(step: decide.Step) -> None:
        # the verdicts of one step hold together: a node decided not to run ends its parent
        for key, verdict in step.not_run.items():
            assert now[key] == "waiting" and verdict in ("upstream_failed", "skipped")
            now[key] = verdict
            became_terminal[key] += 1
        for key in step.ready:
            parents = [now[p] for p in dag.parents[key]]
            if dag.nodes[key].trigger_rule == "one_success" and parents:
                assert "succeeded" in parents, "one_success ready without a succeeded parent"
            else:
                assert all(s in TERMINAL for s in parents), "ready before its parents ended"
            assert now[key] == "waiting"
            now[key] = "active"

    for _ in range(10 * len(dag.nodes) + 10):
        step = decide.advance(dag, now)
        apply(step)
        if step.outcome is not None:
            break
        active = [k for k, s in now.items() if s == "active"]
        assert active, "not finished yet nothing runs: the DAG run would hang"
        key = rnd.choice(active)
        now[key] = rnd.choice(["succeeded", "succeeded", "failed", "cancelled"])
        became_terminal[key] += 1
        if retries and now[key] != "succeeded" and rnd.random() < 0.3:
            retries -= 1
            try:
                reset = decide.retry_from(dag, now, key)
            except decide.RetryRefused:
                continue
            for k in reset:
                became_terminal[k] -= 1 if now[k] in TERMINAL else 0
                now[k] = "waiting"
            now[key] = "active"
    else:
        pytest.fail("the DAG run never finished")
    assert all(s in TERMINAL for s in now.values())
    assert all(n == 1 for n in became_terminal.values()), became_terminal
    assert decide.advance(dag, now) == decide.Step(outcome=step.outcome)
    failed = any(s in ("failed", "upstream_failed") for s in now.values())
    assert (step.outcome == "failed") == failed


# -- DAG jobs -----------------------------------------------------------------------------------


def test_a_dag_job_names_its_dag_in_its_task_and_its_occurrences_name_their_dag_run():
    from datetime import UTC, datetime, timedelta, timezone

    dag_id = uuid.uuid4()
    assert targets.dag_of_task(targets.task_for(dag_id)) == dag_id
    assert targets.dag_of_task("billing.charge") is None
    assert targets.dag_of_task(None) is None
    with pytest.raises(ValueError):
        targets.dag_of_task("dag:nope")
    job = uuid.uuid4()
    at = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert targets.dag_run_id_for(job, at) == targets.dag_run_id_for(
        job, at.astimezone(timezone(timedelta(hours=2))))
    assert targets.dag_run_id_for(job, at) != targets.dag_run_id_for(
        job, at + timedelta(microseconds=1))
    with pytest.raises(ValueError):
        targets.dag_run_id_for(job, datetime(2026, 1, 1))  # noqa: DTZ001
