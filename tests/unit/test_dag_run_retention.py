"""A DAG run's retention (issue 38, docs/RETENTION.md "DAG runs"): the pure keep rule
`ostinato.domain.retention.dag_run_removable` (every reason a DAG run is kept, the instant its
retention ends, the checks' window), its archive key and its archive document (pure,
`ostinato.archive`): round trip, and every way an object can fail to be its key's DAG run."""

from __future__ import annotations

import gzip
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from ostinato.archive import (
    ArchiveCorrupt,
    ArchivedDagRun,
    ArchivedEvent,
    dag_run_key,
    decode_dag_run,
    decode_run,
    encode_dag_run,
    parse_dag_run_key,
    parse_run_key,
    run_key,
)
from ostinato.domain.retention import (
    DAG_RUN_FINAL,
    DagRunFacts,
    DagRunKept,
    RetentionPolicy,
    dag_run_removable,
)

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
HOUR = RetentionPolicy(keep_seconds=3600)
GONE = DagRunFacts(state="succeeded", ended_at=NOW - timedelta(days=40))


def kept(facts: DagRunFacts, policy: RetentionPolicy = HOUR,
         now: datetime = NOW) -> tuple[DagRunKept, ...]:
    return dag_run_removable(facts, policy, now).kept


# -- the keep rule ---------------------------------------------------------------------------


@pytest.mark.parametrize("state", sorted(DAG_RUN_FINAL))
def test_a_finished_dag_run_past_its_retention_whose_node_runs_left_is_removable(
        state: str) -> None:
    decision = dag_run_removable(replace(GONE, state=state), HOUR, NOW)
    assert decision.removable and decision.kept == () and decision.reason is None
    assert decision.expires_at == GONE.ended_at + timedelta(hours=1)  # type: ignore[operator]
    assert decision.archive is True
    assert not dag_run_removable(GONE, RetentionPolicy(archive=False, keep_seconds=3600),
                                 NOW).archive


@pytest.mark.parametrize("state", ["pending", "running"])
def test_a_dag_run_going_on_is_kept_whatever_its_age(state: str) -> None:
    assert kept(DagRunFacts(state=state, ended_at=None)) == (DagRunKept.NOT_FINAL,)
    # a finished_at left from an earlier end (a retry from a node reopened it) changes nothing
    assert kept(DagRunFacts(state=state, ended_at=NOW - timedelta(days=90))) == (
        DagRunKept.NOT_FINAL,)


def test_a_final_state_without_an_end_is_not_final() -> None:
    assert kept(DagRunFacts(state="succeeded", ended_at=None)) == (DagRunKept.NOT_FINAL,)


def test_a_node_run_still_hot_keeps_its_dag_run() -> None:
    """A held node run, or one inside its own retention, stays hot: its DAG run, which names
    it, waits for it."""
    assert kept(replace(GONE, node_runs_hot=True)) == (DagRunKept.NODE_RUN_IN_HOT_TABLES,)


def test_its_retention_ends_at_the_instant_keep_after_its_end() -> None:
    ended = NOW - timedelta(hours=1)
    facts = replace(GONE, ended_at=ended)
    assert dag_run_removable(facts, HOUR, NOW).removable  # exactly keep after: it may go
    assert kept(facts, now=NOW - timedelta(microseconds=1)) == (DagRunKept.INSIDE_RETENTION,)
    thirty_days = RetentionPolicy()
    assert kept(replace(GONE, ended_at=NOW - timedelta(days=29)), thirty_days) == (
        DagRunKept.INSIDE_RETENTION,)


def test_a_recurring_dag_jobs_occurrence_stays_while_the_checks_read_it() -> None:
    window = timedelta(hours=24)
    edge = NOW - window
    assert kept(replace(GONE, checked_slot=edge)) == (DagRunKept.SLOT_IN_CHECKS_WINDOW,)
    assert dag_run_removable(replace(GONE, checked_slot=edge - timedelta(microseconds=1)),
                             HOUR, NOW).removable
    assert kept(replace(GONE, deadline=edge)) == (DagRunKept.DEADLINE_IN_CHECKS_WINDOW,)
    assert dag_run_removable(replace(GONE, deadline=edge - timedelta(seconds=1)), HOUR,
                             NOW).removable
    assert kept(replace(GONE, latest_success_of_job=True)) == (
        DagRunKept.LATEST_SUCCESS_OF_JOB,)
    assert dag_run_removable(replace(GONE, checked_slot=NOW), HOUR, NOW,
                             checks_window=timedelta(0)).kept == (
        DagRunKept.SLOT_IN_CHECKS_WINDOW,)


def test_every_reason_is_reported_in_order() -> None:
    facts = DagRunFacts(state="failed", ended_at=NOW - timedelta(minutes=1), node_runs_hot=True,
                        checked_slot=NOW, deadline=NOW, latest_success_of_job=True)
    assert kept(facts) == tuple(k for k in DagRunKept if k is not DagRunKept.NOT_FINAL)
    assert kept(replace(facts, state="running", ended_at=None)) == tuple(
        k for k in DagRunKept if k is not DagRunKept.INSIDE_RETENTION)
    assert dag_run_removable(facts, HOUR, NOW).reason is DagRunKept.NODE_RUN_IN_HOT_TABLES


def test_shared_reasons_mean_what_they_mean_for_a_run() -> None:
    from ostinato.domain.retention import Kept
    shared = {k.value for k in DagRunKept} & {k.value for k in Kept}
    assert shared == {k.value for k in DagRunKept} - {"node_run_in_hot_tables"}


# -- the key -----------------------------------------------------------------------------------

TENANT = uuid.UUID("6f1c0000-0000-4000-8000-000000000001")
DAG_RUN = uuid.UUID("0193a0c4-0000-4000-8000-000000000002")


def test_the_key_is_under_the_tenants_prefix_and_parses_back() -> None:
    key = dag_run_key(TENANT, DAG_RUN)
    assert key == f"tenants/{TENANT}/dag-runs/{DAG_RUN}.json.gz"
    assert parse_dag_run_key(key) == (TENANT, DAG_RUN)
    assert dag_run_key(str(TENANT).upper(), str(DAG_RUN)) == key  # canonical ids


@pytest.mark.parametrize("key", [
    run_key(TENANT, DAG_RUN), f"tenants/{TENANT}/dag-runs/{DAG_RUN}.json",
    f"tenants/{TENANT}/dag-runs/../{DAG_RUN}.json.gz", "", f"/tenants/{TENANT}/dag-runs/x",
])
def test_what_is_not_a_dag_run_key_is_refused(key: str) -> None:
    with pytest.raises(ValueError):
        parse_dag_run_key(key)


def test_a_dag_run_key_is_no_run_key() -> None:
    with pytest.raises(ValueError):
        parse_run_key(dag_run_key(TENANT, DAG_RUN))
    with pytest.raises(ValueError):
        dag_run_key(TENANT, "../x")


# -- the document ------------------------------------------------------------------------------


def _event(version: int, seq: int, type_: str = "DagNodeReady") -> ArchivedEvent:
    return ArchivedEvent(seq=seq, version=version, type=type_, data={"type": type_},
                         actor="scheduler", epoch=None, traceparent=None,
                         occurred_at=NOW, recorded_at=NOW, event_id=uuid.uuid4())


def _doc(**change: object) -> ArchivedDagRun:
    base = ArchivedDagRun(
        tenant_id=TENANT, dag_run_id=DAG_RUN, archived_at=NOW,
        dag_run={"id": str(DAG_RUN), "tenant_id": str(TENANT), "state": "succeeded"},
        nodes=[{"dag_run_id": str(DAG_RUN), "key": "extract", "state": "succeeded"}],
        events=[_event(1, 10, "DagRunStarted"), _event(2, 11), _event(3, 19, "DagRunFinished")],
        job={"id": str(uuid.uuid4()), "kind": "at"}, job_events=[_event(1, 9, "JobCreated")])
    return msgspec.structs.replace(base, **change)


def test_a_dag_run_round_trips() -> None:
    doc = _doc()
    key = dag_run_key(TENANT, DAG_RUN)
    assert decode_dag_run(encode_dag_run(doc), key=key) == doc


@pytest.mark.parametrize(("change", "message"), [
    ({"events": []}, "no events"),
    ({"events": [_event(2, 1)]}, "out of order or missing"),
    ({"dag_run": {"id": str(uuid.uuid4()), "tenant_id": str(TENANT)}}, "not " + str(DAG_RUN)),
    ({"dag_run": {"id": str(DAG_RUN), "tenant_id": str(uuid.uuid4())}}, "tenant"),
    ({"nodes": [{"dag_run_id": str(uuid.uuid4()), "key": "x"}]}, "node 'x'"),
])
def test_encode_refuses_what_is_not_its_dag_runs_whole_history(change: dict,
                                                               message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_dag_run(_doc(**change))


def test_another_tenants_or_dag_runs_document_under_this_key_is_corrupt() -> None:
    data = encode_dag_run(_doc())
    with pytest.raises(ArchiveCorrupt, match="tenant"):
        decode_dag_run(data, key=dag_run_key(uuid.uuid4(), DAG_RUN))
    with pytest.raises(ArchiveCorrupt, match="DAG run"):
        decode_dag_run(data, key=dag_run_key(TENANT, uuid.uuid4()))
    with pytest.raises(ArchiveCorrupt, match="not an archived DAG run's key"):
        decode_dag_run(data, key=run_key(TENANT, DAG_RUN))


def test_a_damaged_object_is_corrupt_never_half_read() -> None:
    data = encode_dag_run(_doc())
    with pytest.raises(ArchiveCorrupt, match="gzip"):
        decode_dag_run(data[: len(data) // 2])
    body = gzip.decompress(data).replace(b'"succeeded"', b'"failed"   ', 1)
    with pytest.raises(ArchiveCorrupt, match="checksum"):
        decode_dag_run(gzip.compress(body))


def test_a_dag_run_object_is_no_run_object() -> None:
    with pytest.raises(ArchiveCorrupt):
        decode_run(encode_dag_run(_doc()))
