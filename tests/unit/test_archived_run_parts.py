"""An archived run's other reads (services/api/archived.py, docs/RETENTION.md "Reading an
archived run"): its result, logs, children, published state, updates and set-aside steps are
derived from its archive document as the hot side reads them from its tables, so the routes
answer an archived run instead of a 404 that reads as "no such run"."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from ostinato.archive import ArchivedBlob, ArchivedEvent, ArchivedRun, ArchivedStep
from ostinato.domain import events as ev
from ostinato.domain import fanout
from ostinato.domain import workflow as wf
from ostinato.domain.errors import NotFound
from ostinato.stores.runs import RunRow
from services.api import archived
from services.api.results import archived_result

T0 = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)


def runs_row(run_id: uuid.UUID, tenant_id: uuid.UUID, **over: Any) -> dict[str, Any]:
    """A whole `runs` row as the archiver's to_json writes it (every column of RunRow)."""
    row: dict[str, Any] = {f.name: None for f in msgspec.structs.fields(RunRow)}
    row.update(id=str(run_id), tenant_id=str(tenant_id), job_id=str(uuid.uuid4()),
               task="report", pool="default", priority="default",
               payload_ref=str(uuid.uuid4()), scheduled_for=T0.isoformat(), state="succeeded",
               attempt=2, fencing_token=2, updated_at=T0.isoformat(), version=9,
               trigger="at", failures=1, cancel_requested=False, steps_done=0,
               parent_notified=True, compensable=False, paused=False, pinned=False,
               completion_overdue=False, finished_at=(T0 + timedelta(minutes=1)).isoformat())
    row.update(over)
    return row


def document(*events: ev.Event, steps: list[ArchivedStep] | None = None,
             set_aside: list[ArchivedStep] | None = None, blobs: list[ArchivedBlob] | None = None,
             **row: Any) -> ArchivedRun:
    tenant_id, run_id = uuid.uuid4(), uuid.UUID(row.pop("id", str(uuid.uuid4())))
    return ArchivedRun(
        tenant_id=tenant_id, run_id=run_id, archived_at=T0 + timedelta(days=30),
        run=runs_row(run_id, tenant_id, **row),
        events=[ArchivedEvent(seq=100 + n, version=n + 1, type=type(e).__name__,
                              data=msgspec.to_builtins(e), actor="test", epoch=None,
                              traceparent=None, occurred_at=T0, recorded_at=T0,
                              event_id=uuid.uuid4()) for n, e in enumerate(events)],
        steps=steps or [], set_aside_steps=set_aside or [], blobs=blobs or [])


def step(seq: int, name: str, output: Any = None, **over: Any) -> ArchivedStep:
    return ArchivedStep(**{"seq": seq, "name": name, "succeeded": True, "attempt": 1,
                           "tries": 1, "duration_ms": 1.0,
                           "recorded_at": T0 + timedelta(seconds=seq), "output": output,
                           **over})


def test_an_archived_run_s_result_is_final_with_its_output_and_marked_archived() -> None:
    out = uuid.uuid4()
    gone = document(output_ref=str(out), blobs=[ArchivedBlob(id=out, kind="output",
                                                             data={"total": 42})])
    answer = archived_result(gone)
    assert (answer.done, answer.state, answer.output, answer.error) == (
        True, "succeeded", {"total": 42}, None)
    assert answer.archived is True and answer.archived_at == gone.archived_at
    assert answer.finished_at == T0 + timedelta(minutes=1)
    failed = archived_result(document(state="dead_lettered", output_ref=None,
                                      last_error={"type": "Boom", "message": "boom"}))
    assert (failed.done, failed.output, failed.error) == (
        True, None, {"type": "Boom", "message": "boom"})


def test_an_archived_run_s_logs_are_the_document_its_logs_ref_names() -> None:
    ref = uuid.uuid4()
    lines = [{"at": T0.isoformat(), "level": "info", "message": "hello"}]
    gone = document(logs_ref=str(ref), blobs=[ArchivedBlob(id=ref, kind="logs", data=lines)])
    assert archived.logs(gone) == lines
    assert archived.logs(document()) == []  # no captured logs, as a hot run without them
    # a logs_ref whose document was gone before archiving: nothing, as the hot side answers
    assert archived.logs(document(logs_ref=str(uuid.uuid4()))) == []


def test_the_children_of_an_archived_workflow_are_named_by_its_stream_in_id_order() -> None:
    parent = uuid.uuid4()
    awaited, started, completion = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    gone = document(
        ev.ChildStarted(seq=0, name="a", child_run_id=awaited, task="t", awaited=True,
                        attempt=1),
        ev.ChildStarted(seq=1, name="b", child_run_id=started, task="t", awaited=False,
                        attempt=1),
        ev.FanOutStarted(seq=2, name="f", task="chunk", total=5, max_concurrency=2,
                         admitted=2, on_failure="fail", pool="default", priority="default",
                         attempt=1),
        ev.FanOutProgressed(seq=2, succeeded=2, failed=0, admitted=4),
        ev.FanOutProgressed(seq=2, succeeded=2, failed=0, admitted=5),
        ev.FanOutCompleted(seq=2, name="f", outcome="succeeded", total=5, succeeded=5,
                           failed=0, completion_run_id=completion),
        id=str(parent))
    chunks = [fanout.chunk_run_id(parent, 2, i) for i in range(5)]
    assert archived.child_ids(gone) == sorted([awaited, started, completion, *chunks])
    assert archived.child_ids(document()) == []


def test_a_fan_out_s_chunks_never_admitted_are_no_children() -> None:
    parent = uuid.uuid4()
    gone = document(ev.FanOutStarted(seq=0, name="f", task="chunk", total=10,
                                     max_concurrency=3, admitted=3, on_failure="fail",
                                     pool="default", priority="default", attempt=1),
                    id=str(parent))
    assert archived.child_ids(gone) == sorted(fanout.chunk_run_id(parent, 0, i)
                                              for i in range(3))


def test_an_archived_run_s_published_state_is_the_latest_value_of_each_name() -> None:
    gone = document(steps=[step(0, "set:progress", 10), step(1, "work"),
                           step(2, "set:progress", 90), step(3, "set:phase", "load"),
                           step(4, "reply:x", {"ok": True})])
    values = archived.state_values(gone)
    assert [(v.name, v.value, v.seq) for v in values] == [("phase", "load", 3),
                                                          ("progress", 90, 2)]
    assert values[1].set_at == T0 + timedelta(seconds=2)
    assert [v.value for v in archived.state_values(gone, "phase")] == ["load"]
    assert archived.state_values(gone, "nothing") == []


def test_an_archived_run_s_update_stands_as_its_stream_and_reply_recorded_it() -> None:
    answered, abandoned, large = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    envelope_ref = uuid.uuid4()
    gone = document(
        ev.SignalReceived(signal_id=answered, name=wf.UPDATE_SIGNAL,
                          payload={"id": str(answered), "name": "bump", "payload": 1}),
        ev.SignalDelivered(seq=3, name=wf.UPDATE_SIGNAL, signal_id=answered),
        ev.SignalReceived(signal_id=abandoned, name=wf.UPDATE_SIGNAL,
                          payload={"id": str(abandoned), "name": "late", "payload": None}),
        ev.SignalReceived(signal_id=large, name=wf.UPDATE_SIGNAL, payload_ref=envelope_ref),
        steps=[step(4, wf.reply_step(answered), {"ok": True, "output": 2})],
        blobs=[ArchivedBlob(id=envelope_ref, kind="signal",
                            data={"id": str(large), "name": "big", "payload": "x"})])
    done = archived.update_outcome(gone, answered)
    assert (done.name, done.state, done.taken, done.answer) == (
        "bump", wf.UpdateState.COMPLETED, True, {"ok": True, "output": 2})
    late = archived.update_outcome(gone, abandoned)  # the run ended without answering it
    assert (late.name, late.state, late.taken) == ("late", wf.UpdateState.ABANDONED, False)
    assert archived.update_outcome(gone, large).name == "big"  # its envelope by reference
    with pytest.raises(NotFound):
        archived.update_outcome(gone, uuid.uuid4())
    plain = document(ev.SignalReceived(signal_id=answered, name="approve", payload={}))
    with pytest.raises(NotFound):  # a plain signal is no update
        archived.update_outcome(plain, answered)


def test_an_archived_run_s_set_aside_steps_page_as_the_hot_table_pages() -> None:
    at = T0 + timedelta(hours=1)
    gone = document(set_aside=[step(1, "b", set_aside_version=7, set_aside_at=at),
                               step(0, "a", set_aside_version=7, set_aside_at=at),
                               step(0, "a", set_aside_version=4, set_aside_at=at)])
    rows = archived.set_aside_rows(gone, after=(0, -1), limit=10)
    assert [(r.set_aside_version, r.seq) for r in rows] == [(4, 0), (7, 0), (7, 1)]
    assert [(r.set_aside_version, r.seq) for r in
            archived.set_aside_rows(gone, after=(4, 0), limit=1)] == [(7, 0)]
    assert archived.set_aside_rows(gone, after=(7, 1), limit=10) == []
