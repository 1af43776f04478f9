"""An event of a type this release does not know (a newer release wrote it during a rolling
upgrade, docs/UPGRADES.md) is read as an opaque `UnknownEvent`, never refused: the decode, the
run's fold, the projector, the bus's envelope and the dispatcher's fence each meet one and go
on, the fold and the projector leaving everything but the stream's version as it was."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import timedelta

import msgspec
import pytest
from structlog.testing import capture_logs

from ostinato.bus.codec import Envelope, decode, encode
from ostinato.bus.consumer import Delivered
from ostinato.domain import events as ev
from ostinato.domain.lifecycle import advance, fold
from ostinato.domain.states import RunState
from ostinato.eventlog import records
from ostinato.eventlog.readmodels import PROJECTORS, Q, _unknown
from ostinato.eventlog.records import RecordedEvent, StreamHead
from services.dispatcher.fence import EpochFence
from tests.helpers.run_stories import T0, scheduled

NEWER = {"type": "RunRescheduledByOracle", "reason": "from the future", "nested": {"n": [1, 2]}}


def newer(**fields: object) -> ev.Event:
    return ev.decode_event(json.dumps({**NEWER, **fields}))


def test_an_unknown_type_decodes_to_an_opaque_event_that_keeps_its_document() -> None:
    e = newer()
    assert isinstance(e, ev.UnknownEvent) and ev.is_unknown(e)
    assert (e.type_name, e.data) == ("RunRescheduledByOracle", NEWER)
    assert ev.event_type(e) == "RunRescheduledByOracle"
    assert ev.event_data(e) == NEWER  # what a timeline shows: the document as written
    assert json.loads(ev.encode_event(e)) == NEWER  # written back unchanged (an archive)
    assert "RunRescheduledByOracle" not in {k.__struct_config__.tag for k in ev.CATALOGUE}


def test_a_known_type_with_a_bad_field_is_still_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        ev.decode_event('{"type": "RunQueued", "pool": 7}')
    with pytest.raises(msgspec.ValidationError):
        ev.decode_event('{"no_type": 1}')
    with pytest.raises(msgspec.ValidationError):
        ev.decode_event('["RunQueued"]')


def test_a_known_event_reads_and_shows_as_before() -> None:
    e = ev.RunQueued(pool="etl")
    assert ev.decode_event(ev.encode_event(e)) == e
    assert ev.event_data(e) == msgspec.to_builtins(e)
    assert ev.event_type(e) == "RunQueued" and not ev.is_unknown(e)


def test_the_run_fold_passes_over_an_unknown_event_counting_only_its_version() -> None:
    started = ev.RunStarted(attempt=1, fencing_token=1, worker_id="w",
                            lease_expires_at=T0 + timedelta(seconds=30))
    story: list[ev.Event] = [
        scheduled(),
        ev.RunQueued(pool="default"), started,
        ev.StepCompleted(seq=0, name="a", attempt=1, fencing_token=1)]
    for state in RunState:
        assert advance(state, newer()) is state
    assert advance(None, newer()) is None
    plain = fold(story)
    with_unknown = fold([*story[:2], newer(), *story[2:], newer(type="AnotherNewOne")])
    assert with_unknown == replace(plain, version=plain.version + 2)
    assert (with_unknown.state, with_unknown.steps_done) == (RunState.RUNNING, 1)


def test_a_stream_head_appends_after_an_unknown_event_with_the_state_unchanged() -> None:
    head = StreamHead(uuid.uuid4(), uuid.uuid4(), version=4, state=RunState.QUEUED)
    unknown = ev.UnknownEvent(type_name="X", data={"type": "X"}, stream_type="run")
    assert head.next(unknown, "newer").version == 5 and head.state is RunState.QUEUED
    assert head.next(ev.CancelRequested(by="ops"), "ops").version == 6


def _recorded(event: ev.Event, stream_type: str = "run") -> RecordedEvent:
    return RecordedEvent(seq=1, event_id=uuid.uuid4(), stream_id=uuid.uuid4(),
                         stream_type=stream_type, version=7, tenant_id=uuid.uuid4(),
                         type=ev.event_type(event), event=event, actor="newer", epoch=None,
                         traceparent=None, occurred_at=T0, recorded_at=T0)


def test_the_projector_moves_only_the_stream_version_and_warns_once_per_type() -> None:
    records._IGNORED.clear()
    assert type(newer()) not in PROJECTORS
    with capture_logs() as lines:
        for stream_type in ("run", "job", "dag_run"):
            r = _recorded(newer(), stream_type)
            assert _unknown(r, r.event) == ("project_unknown", (r.stream_id, 7, stream_type))
        r = _recorded(newer(type="AnotherNewOne"))
        _unknown(r, r.event)
    warned = [(line["event_type"], line["reader"]) for line in lines
              if line["event"] == "event of an unknown type ignored"]
    assert warned == [("RunRescheduledByOracle", "projections"),
                      ("AnotherNewOne", "projections")]
    assert all(line["log_level"] == "warning" for line in lines)
    assert "project_unknown" in Q and "UPDATE runs SET version" in Q["project_unknown"]


def test_an_envelope_carrying_an_unknown_event_still_decodes_and_wakes() -> None:
    known = Envelope(event_id=uuid.uuid4(), stream_id=uuid.uuid4(), version=3,
                     tenant_id=uuid.uuid4(), occurred_at=T0, actor="scheduler", epoch=2,
                     event=ev.RunQueued(pool="default"), coalesced=4)
    document = json.loads(encode(known))
    document["event"] = NEWER
    got = decode(json.dumps(document).encode())
    assert isinstance(got.event, ev.UnknownEvent) and got.event.data == NEWER
    assert msgspec.structs.replace(got, event=known.event) == known
    assert EpochFence().fresh([Delivered("t", 0, 0, (), got)]) != []  # a wake-up, never dropped
    with pytest.raises(msgspec.ValidationError):  # a known type, badly formed: as before
        decode(json.dumps({**document, "event": {"type": "RunQueued"}}).encode())



def test_an_opaque_event_is_written_back_as_it_was_read() -> None:
    """What lets the store append one the way a newer release did (the integration test)."""
    unknown = ev.UnknownEvent(type_name="X", data={"type": "X", "a": 1}, stream_type="run")
    assert (ev.encode_event(unknown), ev.event_type(unknown), unknown.stream_type) == (
        b'{"type":"X","a":1}', "X", "run")
