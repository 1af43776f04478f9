"""A run page's timeline in words and its waterfall (issue 41 item 2), pure: every event of the
catalogue told in a sentence (`ostinato.domain.narrative`), an honest generic one for a type
this release does not know or a sentence that cannot be made, attempts numbered as the retry
policy counts them; the waterfall's lanes and their offsets and widths as fractions of the
run's span (`services.api.ui.waterfall`); both rendered by the templates with every value
escaped and no inline style."""

from __future__ import annotations

import types
import typing
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import msgspec
import pytest

from ostinato.domain import events as ev
from ostinato.domain import narrative
from ostinato.domain.narrative import Narrator, Part, Sentence, duration_words, tell_all
from services.api.ui import render, waterfall

T0 = datetime(2026, 12, 6, 13, 0, tzinfo=UTC)
XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _sample(kind: type[ev.Event]) -> ev.Event:
    """An instance of `kind` with every field given a plausible value (so a new event of the
    catalogue is told here without a line of this test changing)."""
    hints = typing.get_type_hints(kind)
    values = {}
    for f in msgspec.structs.fields(kind):
        values[f.name] = _value(hints[f.name], f.name)
    return kind(**values)


def _value(hint: Any, name: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in typing.get_args(hint) if a is not type(None)), name)
    if hint is str:
        return {"reason": "timer", "kind": "complete_within", "state": "succeeded",
                "outcome": "succeeded", "scope": "task", "cause": "timer"}.get(name, f"{name}-x")
    if hint is bool:
        return True
    if hint is int:
        return 3
    if hint is float:
        return 1.5
    if hint is datetime:
        return T0 + timedelta(minutes=5)
    if hint is uuid.UUID:
        return uuid.UUID(int=7)
    if hint is date:
        return T0.date()
    if origin is list or hint is list:
        args = typing.get_args(hint)
        return [_value(args[0], name)] if args else []
    if origin is dict or hint is dict:
        return {"nodes": [{"key": "a"}]} if name == "definition" else {"a": 1}
    return None  # Any


@pytest.mark.parametrize("kind", ev.CATALOGUE, ids=lambda k: k.__name__)
def test_every_event_of_the_catalogue_has_its_own_sentence(kind: type[ev.Event]) -> None:
    assert kind in narrative.SENTENCES, f"{kind.__name__} has no sentence"
    told = Narrator().tell(_sample(kind), T0, "tenant:acme")
    text = str(told)
    assert told.known and text and told.tone in narrative.TONES
    # no value left unformatted, no placeholder, no Python repr
    for leak in ("None", "{", "}", "UUID(", "datetime.", "-x-x"):
        assert leak not in text, (kind.__name__, text)


def test_the_catalogue_has_no_sentence_for_a_type_it_lacks() -> None:
    assert set(narrative.SENTENCES) == set(ev.CATALOGUE)


def test_an_unknown_type_or_a_sentence_that_fails_is_told_generically_never_raised(
        monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = ev.decode_event('{"type": "RunTeleported", "to": "mars"}')
    told = Narrator().tell(unknown, T0, "tenant:acme")
    assert not told.known and "RunTeleported" in str(told) and "does not know" in str(told)

    def broken(*_: Any) -> str:
        raise KeyError("a bug in one sentence")
    monkeypatch.setitem(narrative.SENTENCES, ev.RunQueued, broken)
    told = Narrator().tell(ev.RunQueued(pool="etl"), T0)
    assert not told.known and str(told) == "`RunQueued` recorded (see its data)"


def test_the_issues_sentences() -> None:
    n = Narrator()
    assert str(n.tell(ev.RunStarted(attempt=1, fencing_token=4, worker_id="w-17",
                                    lease_expires_at=T0), T0)) == \
        "started on worker `w-17`, token 4"
    assert str(n.tell(ev.StepCompleted(seq=0, name="charge", attempt=1, fencing_token=4,
                                       duration_ms=412.0), T0)) == \
        "step `charge` succeeded in 412 ms (position 0)"
    assert str(n.tell(ev.TimerFired(seq=1, name="sleep", due_at=T0.replace(hour=14)), T0)) \
        .startswith("slept until 14:00:00 UTC")
    assert str(n.tell(ev.SignalReceived(signal_id=uuid.uuid4(), name="review", by="ops:ana"),
                      T0, "tenant:acme")) == "signal `review` received from ops:ana"
    assert str(n.tell(ev.RunCancelled(by="ops:ana", reason="requested"), T0)) == \
        "cancelled by ops:ana"
    retry = n.tell(ev.RetryScheduled(retry_at=T0 + timedelta(days=1, minutes=1),
                                     reason="retryable", counts=True, failures=1), T0)
    assert str(retry) == "retry scheduled for 2026-12-07 13:01:00 UTC after a retryable " \
                         "failure (1 failure counted)"
    [when] = [p for p in retry.parts if p.kind == "time"]
    assert when.at == T0 + timedelta(days=1, minutes=1)  # the page shows it as a <time>


def test_attempts_are_numbered_as_the_retry_policy_counts_them_not_by_claims() -> None:
    """A workflow that slept (a wake-up is an execution, not an attempt), then failed twice."""
    def started(token: int) -> ev.RunStarted:
        return ev.RunStarted(attempt=token, fencing_token=token, worker_id="w", lease_expires_at=T0)

    def failed(execution: int) -> ev.RunFailed:
        return ev.RunFailed(attempt=execution, fencing_token=execution, error_type="ValueError",
                            message="no card", retryable=True)
    stream = [
        started(1),
        ev.RunSuspended(attempt=1, fencing_token=1, seq=0, name="nap", reason="timer",
                        wake_at=T0 + timedelta(hours=1)),
        ev.RunWoken(cause="timer"),
        started(2), failed(2),
        ev.RetryScheduled(retry_at=T0, reason="retryable", counts=True, failures=1),
        started(3), failed(3),
        ev.RunDeadLettered(reason="exhausted", error_type="ValueError", message="no card",
                           attempts=2),
    ]
    told = [str(s) for s in tell_all((e, T0, "") for e in stream)]
    assert told == [
        "started on worker `w`, token 1",
        "sleeping until 14:00:00 UTC (`nap`); no worker held (position 0)",
        "woken: its timer is due; scheduled again",
        "resumed on worker `w`, token 2",
        "attempt 1 (execution 2) failed: `ValueError`: no card",
        "retry scheduled for 13:00:00 UTC after a retryable failure (1 failure counted)",
        "attempt 2 started on worker `w`, token 3",
        "attempt 2 (execution 3) failed: `ValueError`: no card",
        "dead-lettered after 2 attempts (exhausted): `ValueError`: no card",
    ]


def test_a_runs_success_is_told_with_the_time_its_claim_took() -> None:
    told = tell_all([(ev.RunStarted(attempt=1, fencing_token=1, worker_id="w",
                                    lease_expires_at=T0), T0, ""),
                     (ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=None),
                      T0 + timedelta(seconds=3, milliseconds=200), "")])
    assert str(told[1]) == "succeeded in 3.2 s" and told[1].tone == "ok"


@pytest.mark.parametrize(("seconds", "words"), [
    (0.4124, "412 ms"), (3.24, "3.2 s"), (42, "42 s"), (243, "4 min 3 s"), (7500, "2 h 5 min"),
    (3 * 86400 + 4 * 3600, "3 d 4 h"), (120, "2 min"), (-1, "0 ms"), (None, "an unknown time")])
def test_durations_in_words(seconds: float | None, words: str) -> None:
    assert duration_words(seconds) == words


# -- the template: values are text, never markup -----------------------------------------------


def _macros() -> Any:
    return render.ENV.get_template("run_macros.html").module


def test_a_sentence_renders_its_values_escaped_and_links_the_runs_it_names() -> None:
    child = uuid.UUID("01939b2c-0000-7000-8000-00004f2a9c1b")
    n = Narrator()
    step = n.tell(ev.StepFailed(seq=2, name=XSS, attempt=1, fencing_token=1, error_type=XSS,
                                message=XSS), T0)
    html = str(_macros().sentence(step))
    assert "<script>" not in html and html.count(ESCAPED) == 3
    assert html.startswith(f"step <code>{ESCAPED}</code> failed (position 2): <code>")
    started = str(_macros().sentence(n.tell(ev.ChildStarted(
        seq=3, name="child:greet", child_run_id=child, task="greet", awaited=True, attempt=1),
        T0)))
    assert f'<a href="/ui/runs/{child}">' in started and "<code>…4f2a9c1b</code>" in started
    sleeping = str(_macros().sentence(n.tell(ev.RunSuspended(
        attempt=1, fencing_token=1, seq=4, name="nap", reason="timer",
        wake_at=T0.replace(hour=14)), T0)))
    assert '<time datetime="2026-12-06T14:00:00+00:00"' in sleeping and ">14:00:00 UTC</time>" \
        in sleeping


def test_a_hand_made_sentence_cannot_smuggle_markup_in_its_words() -> None:
    s = Sentence((Part(XSS), Part(XSS, "code"), Part(XSS, "time", at=T0)), "info")
    html = str(_macros().sentence(s))
    assert "<script>" not in html and html.count(ESCAPED) == 3


# -- the waterfall ------------------------------------------------------------------------------


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _workflow() -> list[tuple[datetime, ev.Event]]:
    """A claim at 0 s running step `charge` (1..3 s) then sleeping 4..8 s, woken, claimed again
    at 9 s, failing at 10 s."""
    return [
        (_at(0), ev.RunScheduled(job_id=uuid.uuid4(), task="t", pool="p", priority="c",
                                 payload_ref=uuid.uuid4(), scheduled_for=T0)),
        (_at(0), ev.RunStarted(attempt=1, fencing_token=1, worker_id="w-17",
                               lease_expires_at=T0)),
        (_at(3), ev.StepCompleted(seq=0, name="charge", attempt=1, fencing_token=1,
                                  duration_ms=2000.0)),
        (_at(4), ev.RunSuspended(attempt=1, fencing_token=1, seq=1, name="nap", reason="timer",
                                 wake_at=_at(8))),
        (_at(8), ev.TimerFired(seq=1, name="nap", due_at=_at(8))),
        (_at(8), ev.RunWoken(cause="timer")),
        (_at(9), ev.RunStarted(attempt=2, fencing_token=2, worker_id="w-18",
                               lease_expires_at=T0)),
        (_at(10), ev.RunFailed(attempt=2, fencing_token=2, error_type="E", message="m",
                               retryable=False)),
    ]


def test_the_lanes_are_each_execution_step_and_wait_in_order_of_their_start() -> None:
    lanes = waterfall.spans(_workflow())
    assert [(s.kind, s.label, s.start, s.end, s.tone) for s in lanes] == [
        ("execution", "execution 1", _at(0), _at(4), "wait"),
        ("step", "step 0 charge", _at(1), _at(3), "ok"),
        ("wait", "sleep nap", _at(4), _at(8), "ok"),
        ("execution", "execution 2", _at(9), _at(10), "bad"),
    ]
    assert lanes[0].detail == "worker w-17, token 1"


def test_offsets_and_widths_are_fractions_of_the_runs_span() -> None:
    wf = waterfall.layout(waterfall.spans(_workflow()), _at(0), _at(10))
    assert [b.x for b in wf.bars] == pytest.approx([0.0, 0.1, 0.4, 0.9])
    assert [b.width for b in wf.bars] == pytest.approx([0.4, 0.2, 0.4, 0.1])
    assert [b.x_pct for b in wf.bars] == ["0.000%", "10.000%", "40.000%", "90.000%"]
    assert wf.bars[1].took == "2.0 s" and not any(b.open for b in wf.bars)
    assert wf.ticks(2) == [("0.000%", "+0 ms"), ("50.000%", "+5.0 s"), ("100.000%", "+10 s")]


def test_a_running_execution_and_step_run_open_to_now() -> None:
    stream = _workflow()[:3]  # claimed, step charge recorded; now executing `refund` since 5 s
    lanes = waterfall.spans(stream, (1, "refund", _at(5)))
    wf = waterfall.layout(lanes, _at(0), _at(20))  # now: 20 s
    [execution, _, refund] = wf.bars
    assert (execution.open, execution.x, execution.width) == (True, 0.0, 1.0)
    assert (refund.open, refund.x, refund.width, refund.took) == (True, 0.25, 0.75, "15 s so far")
    assert refund.span.tone == "busy" and refund.span.label == "step 1 refund"


def test_an_instant_still_shows_and_no_bar_leaves_the_span() -> None:
    at = [(_at(10), ev.StepCompleted(seq=0, name="n", attempt=1, fencing_token=1,
                                     duration_ms=0.0))]
    [bar] = waterfall.layout(waterfall.spans(at), _at(0), _at(10)).bars
    assert bar.width == waterfall.MIN_WIDTH and bar.x + bar.width <= 1.0
    # a span before the run's first event widens the span rather than leaving it
    early = waterfall.layout([waterfall.Span("step", "s", _at(-10), _at(0), "ok")], _at(0),
                             _at(10))
    assert early.start == _at(-10) and early.bars[0].x == 0.0 and early.bars[0].width == 0.5
    # nothing happened yet: no lanes; a run whose span is one instant: whole-width bars
    assert waterfall.layout([], _at(0), _at(0)).bars == []
    [whole] = waterfall.layout(waterfall.spans(at), _at(10), _at(10)).bars
    assert (whole.x, whole.width) == (0.0, 1.0)


def test_a_long_workflow_draws_its_first_lanes_and_counts_the_rest() -> None:
    steps = [(_at(i), ev.StepCompleted(seq=i, name=f"s{i}", attempt=1, fencing_token=1,
                                       duration_ms=10.0)) for i in range(waterfall.MAX_LANES + 5)]
    wf = waterfall.layout(waterfall.spans(steps), _at(0), _at(400))
    assert len(wf.bars) == waterfall.MAX_LANES and wf.more == 5


def test_the_waterfall_renders_bars_by_svg_attributes_escaped_without_inline_style() -> None:
    stream = [(_at(0), ev.RunStarted(attempt=1, fencing_token=1, worker_id=XSS,
                                     lease_expires_at=T0)),
              (_at(5), ev.StepCompleted(seq=0, name=XSS, attempt=1, fencing_token=1,
                                        duration_ms=2500.0)),
              (_at(10), ev.RunSucceeded(attempt=1, fencing_token=1, output_ref=None))]
    wf = waterfall.layout(waterfall.spans(stream), _at(0), _at(10))
    html = str(_macros().waterfall_table(wf, True))
    assert "<script>" not in html and ESCAPED in html
    assert "style=" not in html and "<style" not in html
    assert '<rect class="wf-bar ok" x="0.000%" y="2" width="100.000%"' in html
    assert '<rect class="wf-bar ok" x="25.000%" y="2" width="25.000%"' in html
    assert html.count("<tr class=\"wf-") == 2 and 'fill="#1b7f3b"' in html


# -- the whole page, rendered from what a read gave (run_page.page_context) ---------------------


def _run_row(**given: Any) -> Any:
    from ostinato.stores.runs import RunRow
    hints = typing.get_type_hints(RunRow)
    values = {f.name: None if typing.get_origin(hints[f.name]) in (typing.Union, types.UnionType)
              else _value(hints[f.name], f.name) for f in msgspec.structs.fields(RunRow)}
    values.update({"id": uuid.uuid4(), "job_id": uuid.uuid4(), "task": "billing",
                   "pool": "default", "priority": "normal", "state": "running", "attempt": 2,
                   "fencing_token": 2, "failures": 0, "retry_policy": None, "last_error": None,
                   "steps_done": 1, "paused": False, "scheduled_for": T0, "updated_at": T0,
                   **given})
    return RunRow(**values)


def _recorded(run_id: uuid.UUID, stream: list[tuple[datetime, ev.Event]]) -> list[Any]:
    from ostinato.eventlog.records import RecordedEvent
    return [RecordedEvent(seq=i, event_id=uuid.uuid4(), stream_id=run_id, stream_type="run",
                          version=i, tenant_id=uuid.UUID(int=1), type=ev.event_type(e), event=e,
                          actor="tenant:acme", epoch=None, traceparent=None, occurred_at=at,
                          recorded_at=at) for i, (at, e) in enumerate(stream, 1)]


def test_the_run_page_renders_its_words_and_waterfall_with_every_value_escaped() -> None:
    from ostinato.wire.api import RunningStepView
    from services.api.ui import run_page
    run = _run_row(worker_id=XSS)
    stream = [
        (_at(0), ev.RunScheduled(job_id=run.job_id, task="billing", pool="default",
                                 priority="normal", payload_ref=uuid.uuid4(), scheduled_for=T0)),
        (_at(1), ev.RunStarted(attempt=1, fencing_token=1, worker_id=XSS, lease_expires_at=T0)),
        (_at(3), ev.StepCompleted(seq=0, name=XSS, attempt=1, fencing_token=1,
                                  duration_ms=1500.0)),
    ]
    read = run_page.RunRead(run=run, blobs={}, stream=_recorded(run.id, stream), steps=[],
                            running=RunningStepView(seq=1, name="refund", since=_at(4)))
    context = run_page.page_context(read, now=_at(10), job_name=XSS)
    from services.api.ui.run_offers import Offer, Offers
    offered = Offers(run=[Offer("cancel", f"/ui/runs/{run.id}/cancel", "Cancel run",
                                f"Cancel run of job {XSS}: it is asked to stop.", cls="danger")])
    page = render.render_text("run.html", hold=html_safe(""), csrf="t0k", offers=offered,
                              **context)
    assert "<script>" not in page.replace('<script src="/ui/static/ui.js" defer></script>', "")
    assert ESCAPED in page and "style=" not in page and "<style" not in page
    assert f"Cancel run of job {ESCAPED}: it is asked to stop." in page  # the confirmation
    # the executing step and for how long, in words; the timeline told; the waterfall drawn
    assert "executing step <code>refund</code> for 6.0 s (position 1)" in page
    assert "(step 1, running since " in page
    assert f"step <code>{ESCAPED}</code> succeeded in 1.5 s (position 0)" in page
    assert page.count('<rect class="wf-bar') == 3  # execution 1, step 0, step 1 (running)
    assert 'data-live="/ui/runs/' in page  # not final: refreshed live
    body = render.render_text("run_body.html", **context)  # the live region's fragment
    assert "<h1>" not in body and "Timeline" in body and "data-live" not in body


def html_safe(text: str) -> Any:
    from services.api.ui.html import Safe
    return Safe(text)


def test_why_a_run_waits_in_words() -> None:
    from services.api.ui.run_page import waiting_words
    signal = waiting_words(_run_row(state="suspended", wait_reason="signal",
                                    wait_signal="review", wake_at=T0.replace(hour=14)))
    assert str(signal) == "waiting for signal `review` until 14:00:00 UTC at the latest"
    timer = waiting_words(_run_row(state="suspended", wait_reason="timer",
                                   wake_at=T0.replace(hour=14)))
    assert str(timer) == "sleeping until 14:00:00 UTC"
    child_id = uuid.uuid4()
    child = waiting_words(_run_row(state="suspended", wait_reason="child", wait_child=child_id))
    assert str(child) == f"waiting for child run {child_id}" and child.parts[-1].ref == child_id
    held = waiting_words(_run_row(state="scheduled"), "pool default saturated (4/4 slots busy)")
    assert str(held) == "waiting for the dispatcher: pool default saturated (4/4 slots busy)"
    paused = waiting_words(_run_row(state="suspended", wait_reason="timer", paused=True,
                                    frozen_wake_at=_at(70), paused_at=_at(10)))
    assert str(paused) == ("paused by an operator; it was sleeping until 13:01:10 UTC; 1 min of "
                           "its wait left when resumed")
    assert waiting_words(_run_row(state="succeeded")) is None
    assert waiting_words(_run_row(state="running")) is None


def test_the_cli_tells_a_runs_events_in_the_same_words() -> None:
    """`ostinato runs events` (and `jobs events`) as a table: a WHAT HAPPENED column, told in
    order from the API's documents; a document this release misreads is named, not raised."""
    from ostinato.cli.runs import told_event_columns
    from ostinato.wire.api import EventView

    def view(version: int, e: ev.Event | dict[str, Any], at: datetime) -> EventView:
        data = e if isinstance(e, dict) else msgspec.json.decode(msgspec.json.encode(e))
        return EventView(seq=version, version=version, event_id=uuid.uuid4(), type=data["type"],
                         occurred_at=at, recorded_at=at, actor="tenant:acme", epoch=None,
                         data=data)
    [*_, (header, what)] = told_event_columns()
    assert header == "WHAT HAPPENED"
    views = [view(1, ev.RunStarted(attempt=1, fencing_token=1, worker_id="w-17",
                                   lease_expires_at=T0), _at(0)),
             view(2, ev.RunFailed(attempt=1, fencing_token=1, error_type="ValueError",
                                  message="no card", retryable=True), _at(1)),
             view(3, ev.RetryScheduled(retry_at=_at(60), reason="retryable", counts=True,
                                       failures=1), _at(1)),
             view(4, ev.RunStarted(attempt=2, fencing_token=2, worker_id="w-18",
                                   lease_expires_at=T0), _at(60)),
             view(5, {"type": "RunQueued", "pool": 7}, _at(61)),
             view(6, {"type": "RunTeleported", "to": "mars"}, _at(62))]
    assert [what(v) for v in views] == [
        "started on worker `w-17`, token 1",
        "attempt 1 (execution 1) failed: `ValueError`: no card",
        "retry scheduled for 13:01:00 UTC after a retryable failure (1 failure counted)",
        "attempt 2 started on worker `w-18`, token 2",
        "RunQueued (its data: -o json)",
        "an event of a type this release does not know: `RunTeleported` (see its data)",
    ]
