"""Workflow step memoisation without servers: the pure decision (`ostinato.domain.workflow`)
over generated step sequences, and the SDK's `WorkflowContext` over an in-memory journal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ostinato.domain.workflow import (
    Diverged,
    Execute,
    RecordedStep,
    Replay,
    StepCounter,
    StepId,
    decide,
    decide_patch,
)
from ostinato.sdk import (
    Cancelled,
    ChildFailedError,
    CompensationFailed,
    LeaseLost,
    NonDeterminismError,
    PermanentError,
    RetryableError,
    SignalTimeout,
    StepFailedError,
    Task,
    WorkflowContext,
    WorkflowTimedOut,
    workflow,
)
from ostinato.sdk.errors import Suspended
from ostinato.testing.handlers import HandlerEnvironment

names = st.lists(st.sampled_from(["charge", "email", "wait", "audit"]), max_size=12)


def _record(sequence: list[str]) -> list[RecordedStep]:
    return [RecordedStep(seq=i, name=n, succeeded=True, output=i) for i, n in enumerate(sequence)]


def _decisions(sequence: list[str], history: list[RecordedStep]) -> list[object]:
    counter = StepCounter()
    return [decide(counter, name, history[i] if i < len(history) else None)
            for i, name in enumerate(sequence)]


@given(names)
def test_a_workflow_replaying_its_own_history_runs_nothing(sequence: list[str]) -> None:
    decisions = _decisions(sequence, _record(sequence))
    assert all(isinstance(d, Replay) for d in decisions)
    assert [d.step.output for d in decisions] == list(range(len(sequence)))  # type: ignore[attr-defined]


@given(names, st.integers(min_value=0, max_value=12))
def test_only_the_steps_after_the_recorded_prefix_run(sequence: list[str], cut: int) -> None:
    cut = min(cut, len(sequence))
    decisions = _decisions(sequence, _record(sequence[:cut]))
    assert [type(d) for d in decisions] == [Replay] * cut + [Execute] * (len(sequence) - cut)
    assert [d.seq for d in decisions[cut:]] == list(range(cut, len(sequence)))  # type: ignore[attr-defined]


@given(names.filter(bool), st.data())
def test_a_changed_step_is_named_at_its_position(sequence: list[str], data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=len(sequence) - 1))
    changed = [*sequence[:k], sequence[k] + "-v2", *sequence[k + 1:]]
    decisions = _decisions(changed, _record(sequence))
    assert all(isinstance(d, Replay) for d in decisions[:k])
    diverged = decisions[k]
    assert isinstance(diverged, Diverged)
    assert diverged.seq == k
    assert diverged.recorded == StepId(sequence[k], sequence[:k + 1].count(sequence[k]))
    assert diverged.met == StepId(changed[k], 1)
    assert f"position {k}" in diverged.message()


def test_occurrences_count_per_name() -> None:
    counter = StepCounter()
    ids = [counter.next(n)[1] for n in ["charge", "email", "charge"]]
    assert [str(i) for i in ids] == ["charge#1", "email#1", "charge#2"]


# -- the SDK over an in-memory journal -------------------------------------------------------

class Effects:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail_email = 0

    async def charge(self, amount: int) -> dict[str, int]:
        self.calls.append("charge")
        return {"charged": amount}

    def email(self, charged: dict[str, int]) -> str:  # a plain function: runs in a thread
        self.calls.append("email")
        if self.fail_email:
            self.fail_email -= 1
            raise RetryableError("smtp down")
        return f"sent {charged['charged']}"


def invoice_of(effects: Effects) -> Task:
    @workflow("billing.invoice")
    async def invoice(ctx: WorkflowContext, payload: dict[str, int]) -> dict[str, object]:
        charged = await ctx.step("charge", effects.charge, payload["amount"])
        receipt = await ctx.step("email", effects.email, charged)
        return {"charged": charged, "receipt": receipt}

    return invoice


async def test_a_resumed_workflow_replays_finished_steps_and_runs_the_rest() -> None:
    effects = Effects()
    effects.fail_email = 1
    invoice = invoice_of(effects)
    env = HandlerEnvironment(task="billing.invoice")
    with pytest.raises(RetryableError):
        await env.run(invoice, {"amount": 12})
    assert [s.name for s in env.journal.steps] == ["charge"]  # the failed step is not recorded
    again = env.next_attempt()
    result = await again.run(invoice, {"amount": 12})
    assert result == {"charged": {"charged": 12}, "receipt": "sent 12"}
    assert effects.calls == ["charge", "email", "email"]  # charge ran once, email twice
    assert [s.name for s in again.journal.steps] == ["charge", "email"]
    third = again.next_attempt()
    assert await third.run(invoice, {"amount": 12}) == result
    assert effects.calls == ["charge", "email", "email"]  # everything replayed
    assert third.journal.pages_read == 2  # one page per resumed execution, not one per step


async def test_a_step_retries_in_the_same_attempt_without_rerunning_earlier_steps() -> None:
    effects = Effects()
    effects.fail_email = 2

    @workflow("billing.retrying")
    async def retrying(ctx: WorkflowContext, payload: int) -> str:
        charged = await ctx.step("charge", effects.charge, payload)
        return await ctx.step("email", effects.email, charged, retries=2, backoff=0.0)

    env = HandlerEnvironment()
    assert await env.run(retrying, 5) == "sent 5"
    assert effects.calls == ["charge", "email", "email", "email"]
    assert env.journal.steps[1].tries == 3


async def test_a_permanent_step_failure_is_recorded_and_raised_again_on_replay() -> None:
    calls: list[int] = []

    async def decline(amount: int) -> None:
        calls.append(amount)
        raise PermanentError("card declined", type="card_declined")

    @workflow("billing.declined")
    async def declined(ctx: WorkflowContext, payload: int) -> str:
        try:
            await ctx.step("charge", decline, payload)
        except StepFailedError as exc:
            return f"compensated {exc.type}"
        return "charged"

    env = HandlerEnvironment()
    assert await env.run(declined, 3) == "compensated card_declined"
    assert await env.next_attempt().run(declined, 3) == "compensated card_declined"
    assert calls == [3]
    assert env.journal.steps[0].error is not None
    assert env.journal.steps[0].error.type == "card_declined"


async def test_a_changed_step_sequence_stops_with_a_non_determinism_error() -> None:
    effects = Effects()
    env = HandlerEnvironment()
    await env.run(invoice_of(effects), {"amount": 1})

    @workflow("billing.invoice")
    async def reordered(ctx: WorkflowContext, payload: dict[str, int]) -> None:
        await ctx.step("email", effects.email, {"charged": 0})

    with pytest.raises(NonDeterminismError) as raised:
        await env.next_attempt().run(reordered, {"amount": 1})
    assert raised.value.type == "non_determinism"
    assert "position 0" in str(raised.value) and "charge#1" in str(raised.value)
    assert "email#1" in str(raised.value)
    assert effects.calls == ["charge", "email"]  # nothing ran the second time


async def test_a_stale_attempt_cannot_record_a_step() -> None:
    effects = Effects()
    old = HandlerEnvironment()
    newer = old.next_attempt()  # another worker took the run
    del newer
    with pytest.raises(LeaseLost):
        await old.run(invoice_of(effects), {"amount": 1})
    assert old.journal.steps == []
    assert old.context.is_lease_lost()


async def test_a_cancel_stops_the_workflow_at_the_next_step_boundary() -> None:
    env = HandlerEnvironment()
    ran: list[str] = []

    async def first() -> None:
        ran.append("first")
        env.cancel()

    async def second() -> None:
        ran.append("second")

    @workflow("cancellable")
    async def cancellable(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("first", first)
        await ctx.step("second", second)

    with pytest.raises(Cancelled):
        await env.run(cancellable)
    assert ran == ["first"]
    assert [s.name for s in env.journal.steps] == ["first"]


async def test_an_output_that_is_not_json_fails_the_step_for_good() -> None:
    async def opaque() -> object:
        return object()

    @workflow("opaque")
    async def flow(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("opaque", opaque)

    env = HandlerEnvironment()
    with pytest.raises(StepFailedError) as raised:
        await env.run(flow)
    assert raised.value.type == "invalid_output"
    assert env.journal.steps[0].error is not None


def test_a_workflow_must_be_async() -> None:
    with pytest.raises(TypeError, match="async"):
        workflow("sync")(lambda ctx, payload: None)  # type: ignore[arg-type,return-value]


# -- timers and signals over the in-memory journal -------------------------------------------

def payment_of(calls: list[str]) -> Task:
    async def charge(amount: int) -> int:
        calls.append("charge")
        return amount

    @workflow("billing.payment")
    async def payment(ctx: WorkflowContext, payload: int) -> dict[str, object]:
        charged = await ctx.step("charge", charge, payload)
        await ctx.sleep(timedelta(hours=1))
        try:
            approval = await ctx.wait_for_signal("approve", timeout=timedelta(days=1))
        except SignalTimeout:
            approval = "timed out"
        return {"charged": charged, "approval": approval}

    return payment


async def test_a_sleeping_workflow_leaves_its_worker_and_resumes_after_the_timer() -> None:
    calls: list[str] = []
    payment = payment_of(calls)
    env = HandlerEnvironment()
    with pytest.raises(Suspended):
        await env.run(payment, 5)
    journal = env.journal
    assert [s.name for s in journal.steps] == ["charge"]
    assert journal.suspended is not None and journal.suspended[1] == journal.now + timedelta(
        hours=1)
    journal.advance_to(journal.now + timedelta(minutes=59))
    assert journal.suspended is not None  # not due yet
    journal.advance_to(journal.now + timedelta(minutes=1))
    with pytest.raises(Suspended):  # the timer fired; now it waits for the signal
        await env.next_attempt().run(payment, 5)
    assert [s.name for s in journal.steps] == ["charge", "sleep"]
    journal.send_signal("approve", {"by": "ops"})
    result = await env.next_attempt().next_attempt().run(payment, 5)
    assert result == {"charged": 5, "approval": {"by": "ops"}}
    assert calls == ["charge"]  # three executions, one charge


async def test_a_signal_sent_before_the_wait_is_kept_for_it() -> None:
    env = HandlerEnvironment()
    env.journal.send_signal("approve", "early")
    with pytest.raises(Suspended):
        await env.run(payment_of([]), 1)  # suspended by the sleep only
    env.journal.advance_to(env.journal.now + timedelta(hours=2))
    assert await env.next_attempt().run(payment_of([]), 1) == {"charged": 1, "approval": "early"}


async def test_a_signal_wait_times_out_with_a_clear_result() -> None:
    env = HandlerEnvironment()
    payment = payment_of([])
    with pytest.raises(Suspended):
        await env.run(payment, 1)
    env.journal.advance_to(env.journal.now + timedelta(hours=1))
    with pytest.raises(Suspended):
        await env.next_attempt().run(payment, 1)
    env.journal.advance_to(env.journal.now + timedelta(days=1))
    again = env.next_attempt().next_attempt()
    assert await again.run(payment, 1) == {"charged": 1, "approval": "timed out"}
    assert env.journal.steps[-1].error is not None
    assert env.journal.steps[-1].error.type == "signal_timeout"


async def test_a_past_or_zero_timer_does_not_suspend() -> None:
    @workflow("quick")
    async def quick(ctx: WorkflowContext, payload: None) -> str:
        await ctx.sleep(0)
        await ctx.sleep_until(datetime(2020, 1, 1, tzinfo=UTC))
        return "done"

    env = HandlerEnvironment()
    assert await env.run(quick) == "done"
    assert [s.name for s in env.journal.steps] == ["sleep", "sleep"]
    @workflow("naive")
    async def naive(ctx: WorkflowContext, payload: None) -> None:
        await ctx.sleep_until(datetime(2030, 1, 1))  # noqa: DTZ001 - the point of the test

    with pytest.raises(ValueError, match="timezone"):
        await HandlerEnvironment().run(naive)


async def test_a_workflow_past_its_overall_deadline_fails_and_records_nothing_more() -> None:
    calls: list[str] = []

    async def work() -> None:
        calls.append("work")

    @workflow("bounded", timeout=timedelta(hours=2))
    async def bounded(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("first", work)
        await ctx.sleep(timedelta(hours=3))  # longer than the workflow may take
        await ctx.step("second", work)

    env = HandlerEnvironment()  # scheduled 09:00; the deadline is 11:00
    with pytest.raises(Suspended):
        await env.run(bounded)
    assert env.journal.suspended is not None
    item = env.journal.suspended[0]
    assert item.deadline == env.context.scheduled_for + timedelta(hours=2)
    env.journal.advance_to(env.context.scheduled_for + timedelta(hours=2))  # woken, not fired
    assert env.journal.suspended is None
    with pytest.raises(WorkflowTimedOut) as raised:
        await env.next_attempt().run(bounded)
    assert raised.value.type == "workflow_timed_out"
    assert calls == ["work"] and [s.name for s in env.journal.steps] == ["first"]
    with pytest.raises(ValueError, match="positive"):
        workflow("never", timeout=0)


# -- children over the in-memory journal -------------------------------------------------------

def parent_of(calls: list[str]) -> Task:
    @workflow("orders.parent")
    async def parent(ctx: WorkflowContext, payload: int) -> object:
        calls.append("parent")
        mail = await ctx.start_child("mail.send", {"to": payload})
        try:
            charged = await ctx.child("billing.charge", {"amount": payload}, pool="default")
        except ChildFailedError as exc:
            return {"mail": mail, "failed": exc.type, "message": str(exc)}
        return {"mail": mail, "charged": charged}

    return parent


async def test_a_child_suspends_its_parent_and_its_output_is_the_steps() -> None:
    calls: list[str] = []
    env = HandlerEnvironment()
    with pytest.raises(Suspended):
        await env.run(parent_of(calls), 3)
    journal = env.journal
    assert {seq: (c.task, c.wait) for seq, c in journal.children.items()} == {
        0: ("mail.send", False), 1: ("billing.charge", True)}
    assert journal.children[1].pool == "default"
    assert msgspec.json.decode(journal.children[1].payload) == {"amount": 3}
    journal.finish_child({"id": "ch_1"})
    result = await env.next_attempt().run(parent_of(calls), 3)
    assert result == {"mail": "child-0", "charged": {"id": "ch_1"}}
    assert calls == ["parent", "parent"] and len(journal.children) == 2  # started once each


async def test_a_failed_child_raises_child_failed_error_with_its_error() -> None:
    env = HandlerEnvironment()
    with pytest.raises(Suspended):
        await env.run(parent_of([]), 3)
    env.journal.finish_child(error_type="declined", message="card declined")
    result = await env.next_attempt().run(parent_of([]), 3)
    assert result == {"mail": "child-0", "failed": "declined", "message": "card declined"}
    with pytest.raises(AssertionError, match="does not wait"):
        env.journal.finish_child()


async def test_a_child_payload_must_be_json_and_its_timeout_positive() -> None:
    @workflow("bad.child")
    async def bad(ctx: WorkflowContext, payload: str) -> None:
        if payload == "payload":
            await ctx.child("t", object())
        await ctx.child("t", None, timeout=0)

    with pytest.raises(TypeError, match="JSON"):
        await HandlerEnvironment().run(bad, "payload")
    with pytest.raises(ValueError, match="positive"):
        await HandlerEnvironment().run(bad, "timeout")


# -- compensation (sagas) over the in-memory journal ---------------------------------------------

def trip_of(calls: list[str], *, charge_error: BaseException | None = None,
            release_errors: dict[str, list[BaseException]] | None = None) -> Task:
    def reserve(what: str) -> str:
        calls.append(f"reserve {what}")
        return f"{what}-1"

    def release(booking: str) -> None:
        pending = (release_errors or {}).get(booking, [])
        calls.append(f"release {booking}")
        if pending:
            raise pending.pop(0)

    def charge() -> None:
        calls.append("charge")
        if charge_error is not None:
            raise charge_error

    @workflow("travel.trip")
    async def trip(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("hotel", reserve, "hotel", compensate=release, compensate_retries=1)
        await ctx.step("flight", reserve, "flight", compensate=release, compensate_retries=1)
        await ctx.step("note", calls.append, "note")  # nothing to undo
        await ctx.step("charge", charge)
        return "booked"

    return trip


async def test_compensations_run_in_reverse_after_a_permanent_failure_once_each() -> None:
    calls: list[str] = []
    trip = trip_of(calls, charge_error=PermanentError("declined", type="card_declined"))
    env = HandlerEnvironment()
    with pytest.raises(StepFailedError) as failed:
        await env.run(trip)
    assert failed.value.type == "card_declined"  # the run still ends with the original error
    assert calls == ["reserve hotel", "reserve flight", "note", "charge", "release flight-1",
                     "release hotel-1"]
    assert [s.name for s in env.journal.steps] == [
        "hotel", "flight", "note", "charge", "compensate:flight", "compensate:hotel"]
    assert [s.compensable for s in env.journal.steps][:3] == [True, True, False]
    with pytest.raises(StepFailedError):  # executed again: everything replays, nothing runs
        await env.next_attempt().run(trip)
    assert len(calls) == 6


async def test_a_compensation_interrupted_by_a_crash_resumes_and_runs_once() -> None:
    calls: list[str] = []
    trip = trip_of(calls, charge_error=PermanentError("declined"),
                   release_errors={"flight-1": [RetryableError("broker down")]})
    env = HandlerEnvironment()
    with pytest.raises(RetryableError):  # the compensation's one try failed: the run retries
        await env.run(trip)
    assert [s.name for s in env.journal.steps][-1] == "charge"
    with pytest.raises(StepFailedError):
        await env.next_attempt().run(trip)
    assert calls == ["reserve hotel", "reserve flight", "note", "charge", "release flight-1",
                     "release flight-1", "release hotel-1"]  # each compensation done once


async def test_a_compensation_that_fails_for_good_names_itself_and_stops() -> None:
    calls: list[str] = []
    trip = trip_of(calls, charge_error=PermanentError("declined"),
                   release_errors={"flight-1": [PermanentError("already flown")]})
    with pytest.raises(CompensationFailed) as failed:
        await HandlerEnvironment().run(trip)
    assert failed.value.type == "compensation_failed"
    assert (failed.value.step, failed.value.compensation) == ("flight", "compensate:flight")
    assert "already flown" in str(failed.value)
    assert "release hotel-1" not in calls  # the earlier step's compensation did not run


async def test_a_retryable_failure_compensates_only_on_the_last_attempt() -> None:
    calls: list[str] = []
    trip = trip_of(calls, charge_error=RetryableError("gateway timeout"))
    env = HandlerEnvironment()
    with pytest.raises(RetryableError):
        await env.run(trip)
    assert not any(c.startswith("release") for c in calls)  # it will be retried
    with pytest.raises(RetryableError):
        await env.next_attempt(final_attempt=True).run(trip)
    assert calls[-2:] == ["release flight-1", "release hotel-1"]


async def test_a_cancelled_workflow_compensates_then_ends_cancelled() -> None:
    calls: list[str] = []
    env = HandlerEnvironment()

    async def slow_charge() -> None:
        calls.append("charge")
        env.cancel()  # the request arrives while the step runs; the step itself finishes

    @workflow("travel.cancel")
    async def trip(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("hotel", calls.append, "hotel", compensate=lambda _: calls.append("undo"))
        await ctx.step("charge", slow_charge)
        await ctx.step("never", calls.append, "never")

    with pytest.raises(Cancelled):
        await env.run(trip)
    assert calls == ["hotel", "charge", "undo"]
    assert [s.name for s in env.journal.steps] == ["hotel", "charge", "compensate:hotel"]


async def test_a_run_claimed_with_its_cancel_requested_replays_then_compensates() -> None:
    calls: list[str] = []
    env = HandlerEnvironment()

    @workflow("travel.wait")
    async def waiting(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("hotel", calls.append, "hotel", compensate=lambda _: calls.append("undo"))
        await ctx.sleep(timedelta(days=1))
        await ctx.step("pay", calls.append, "pay")

    with pytest.raises(Suspended):
        await env.run(waiting)
    # cancelled while asleep: woken with its cancel requested, not ended at once
    env.journal.wake()
    with pytest.raises(Cancelled):
        await env.next_attempt(cancel_requested=True).run(waiting)
    assert calls == ["hotel", "undo"]


# -- patch markers (versioning a workflow's code in flight) -------------------------------------

def fee_flow(calls: list[str], *, patched: bool) -> Task:
    def fee(kind: str) -> str:
        calls.append(kind)
        return kind

    @workflow("billing.fee")
    async def flow(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("order", calls.append, "order")
        await ctx.sleep(timedelta(hours=1))
        if patched and await ctx.patched("fee-v2"):
            charged = await ctx.step("fee", fee, "new fee")
        else:
            charged = await ctx.step("fee", fee, "old fee")
        await ctx.sleep(timedelta(hours=1))
        return charged

    return flow


async def test_a_patch_marker_keeps_old_runs_on_the_old_path_and_new_ones_on_the_new() -> None:
    # a run that went past the patch point under the old code keeps its recorded step
    calls: list[str] = []
    old = HandlerEnvironment()
    with pytest.raises(Suspended):
        await old.run(fee_flow(calls, patched=False))
    old.journal.advance_to(old.journal.now + timedelta(hours=1))
    with pytest.raises(Suspended):  # the fee step recorded (old), then the second sleep
        await old.next_attempt().run(fee_flow(calls, patched=False))
    old.journal.advance_to(old.journal.now + timedelta(hours=1))
    deployed = fee_flow(calls, patched=True)  # the new code is deployed
    assert await old.next_attempt().next_attempt().run(deployed) == "old fee"
    assert calls == ["order", "old fee"]  # no new fee, nothing run twice
    assert [s.name for s in old.journal.steps] == ["order", "sleep", "fee", "sleep"]

    # a run that reaches the patch point under the new code records the marker and goes new
    calls.clear()
    new = HandlerEnvironment()
    with pytest.raises(Suspended):
        await new.run(fee_flow(calls, patched=False))  # started before the deploy
    new.journal.advance_to(new.journal.now + timedelta(hours=1))
    with pytest.raises(Suspended):
        await new.next_attempt().run(deployed)
    assert [s.name for s in new.journal.steps] == ["order", "sleep", "patch:fee-v2", "fee"]
    new.journal.advance_to(new.journal.now + timedelta(hours=1))
    assert await new.next_attempt().next_attempt().run(deployed) == "new fee"  # replayed True
    assert calls == ["order", "new fee"]


def test_a_patch_decision_advances_the_position_only_over_its_marker() -> None:
    counter = StepCounter()
    assert decide_patch(counter, "v2", None) and counter.seq == 1  # to be recorded here
    marker = RecordedStep(seq=1, name="patch:v2", succeeded=True, output=True)
    assert decide_patch(counter, "v2", marker) and counter.seq == 2  # replayed
    other = RecordedStep(seq=2, name="fee", succeeded=True)
    assert not decide_patch(counter, "v2", other) and counter.seq == 2  # the old path
    assert isinstance(decide(counter, "fee", other), Replay)
