"""The pre-deploy check (`ostinato.sdk.check`) without servers: histories recorded by the real
SDK over the in-memory journal (`HandlerEnvironment`), replayed against new code with no step
run; where real execution can be driven too, the check's verdict is compared with what a worker
resuming the run would do. The command itself runs over a mock of the public API."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from ostinato.cli import main
from ostinato.cli import workflows as workflows_cli
from ostinato.client import AsyncClient, Client
from ostinato.sdk import (
    ChildFailedError,
    NonDeterminismError,
    PermanentError,
    RetryableError,
    SignalTimeout,
    StepFailedError,
    Task,
    WorkflowContext,
    task,
    workflow,
)
from ostinato.sdk.check import (
    COMPATIBLE,
    ENDS_EARLY,
    INCOMPATIBLE,
    RAISES,
    UNCHECKED,
    CheckError,
    ListHistory,
    Verdict,
    load_workflows,
    replay,
)
from ostinato.sdk.errors import Suspended
from ostinato.testing.handlers import HandlerEnvironment
from ostinato.wire.worker import StepRecord


def never(*args: Any) -> Any:
    """A new step function: the check must never call it."""
    raise AssertionError(f"the check ran a step function with {args!r}")


async def history_of(old: Task, payload: Any = None, *,
                     prepare: Callable[[HandlerEnvironment], None] | None = None,
                     ) -> tuple[HandlerEnvironment, list[StepRecord]]:
    """Run `old` once as a worker would (in memory); its recorded positions, as
    `GET /v1/runs/{id}/steps` would give them. A retryable failure or a suspension leaves
    the run in flight."""
    env = HandlerEnvironment(task=old.name)
    if prepare is not None:
        prepare(env)
    try:
        await env.run(old, payload)
    except (RetryableError, Suspended):
        pass
    return env, await env.journal.page(env.context, -1, 1000)


def crash(*args: Any) -> None:
    raise RetryableError("the worker died here")  # the run is retried: it stays in flight


async def real(env: HandlerEnvironment, new: Task, payload: Any = None) -> BaseException | Any:
    """What a worker resuming the run with the new code meets (the outcome or the error)."""
    try:
        return await env.next_attempt().run(new, payload)
    except BaseException as exc:  # the outcome under test
        return exc


# -- the old code, in flight --------------------------------------------------------------------

def invoice_v1(*, crash_at: str | None = "audit") -> Task:
    @workflow("billing.invoice")
    async def invoice(ctx: WorkflowContext, payload: dict[str, int]) -> str:
        charged = await ctx.step("charge", lambda a: {"id": "ch_1", "amount": a},
                                 payload["amount"])
        await ctx.step("receipt", lambda c: f"sent {c['id']}", charged)
        await ctx.step("audit", crash if crash_at == "audit" else (lambda: "audited"))
        return charged["id"]

    return invoice


async def test_code_changed_between_steps_and_a_step_appended_is_compatible() -> None:
    _, steps = await history_of(invoice_v1(), {"amount": 5})
    assert [s.name for s in steps] == ["charge", "receipt"]
    seen: list[Any] = []

    @workflow("billing.invoice")
    async def invoice(ctx: WorkflowContext, payload: dict[str, int]) -> str:
        amount = payload["amount"] * 100  # changed between steps
        charged = await ctx.step("charge", never, amount)  # its function changed too
        seen.append(charged)
        await ctx.step("receipt", never, charged)
        await ctx.step("audit", never)
        await ctx.step("notify", never)  # appended after the recorded end
        return str(charged["id"])

    verdict = await replay(invoice, {"amount": 5}, steps)
    assert verdict == Verdict(COMPATIBLE, seq=2, detail=verdict.detail)
    assert "continue live at position 2" in verdict.detail
    assert seen == [{"id": "ch_1", "amount": 5}]  # the recorded output, not a new call


@pytest.mark.parametrize(("change", "seq", "recorded", "met"), [
    ("renamed", 1, "receipt#1", "email#1"),
    ("reordered", 0, "charge#1", "receipt#1"),
    ("removed", 1, "receipt#1", "audit#1"),
    ("inserted", 1, "receipt#1", "fraud-check#1"),
])
async def test_a_changed_recorded_sequence_is_incompatible_at_its_position(
        change: str, seq: int, recorded: str, met: str) -> None:
    env, steps = await history_of(invoice_v1(), {"amount": 5})

    @workflow("billing.invoice")
    async def invoice(ctx: WorkflowContext, payload: dict[str, int]) -> None:
        if change == "renamed":
            await ctx.step("charge", never)
            await ctx.step("email", never)
        elif change == "reordered":
            await ctx.step("receipt", never)
            await ctx.step("charge", never)
        elif change == "removed":
            await ctx.step("charge", never)
            await ctx.step("audit", never)
        else:
            await ctx.step("charge", never)
            await ctx.step("fraud-check", never)
            await ctx.step("receipt", never)

    verdict = await replay(invoice, {"amount": 5}, steps)
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met) == (
        INCOMPATIBLE, seq, recorded, met)
    # the same rule, the same words as a worker resuming the run with the new code
    outcome = await real(env, invoice, {"amount": 5})
    assert isinstance(outcome, NonDeterminismError)
    assert verdict.detail == str(outcome)


async def test_a_step_of_the_same_name_counts_its_occurrences() -> None:
    @workflow("etl.batches")
    async def old(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("load", lambda: 1)
        await ctx.step("load", lambda: 2)
        await ctx.step("publish", crash)

    _, steps = await history_of(old)

    @workflow("etl.batches")
    async def new(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("load", never)
        await ctx.step("publish", never)

    verdict = await replay(new, None, steps)
    assert (verdict.seq, verdict.recorded, verdict.met) == (1, "load#2", "publish#1")


async def test_code_that_ends_before_the_recorded_end_is_reported_like_real_execution() -> None:
    env, steps = await history_of(invoice_v1(crash_at=None), {"amount": 5})
    assert len(steps) == 3  # everything recorded (say the completion was lost)

    @workflow("billing.invoice")
    async def shorter(ctx: WorkflowContext, payload: dict[str, int]) -> str:
        charged = await ctx.step("charge", never)
        return str(charged["id"])

    verdict = await replay(shorter, {"amount": 5}, steps)
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met) == (
        ENDS_EARLY, 1, "receipt#1", "(returns)")
    assert "2 recorded position(s) unused" in verdict.detail
    assert await real(env, shorter, {"amount": 5}) == "ch_1"  # no error: the run finishes
    assert not verdict.ok


async def test_code_that_replays_everything_and_returns_is_compatible() -> None:
    _, steps = await history_of(invoice_v1(crash_at=None), {"amount": 5})
    verdict = await replay(invoice_v1(crash_at=None), {"amount": 5}, steps)
    assert verdict.result == COMPATIBLE and "then returns" in verdict.detail


async def test_code_that_raises_before_the_recorded_end_is_a_warning() -> None:
    _, steps = await history_of(invoice_v1(), {"amount": 5})

    @workflow("billing.invoice")
    async def strict(ctx: WorkflowContext, payload: dict[str, int]) -> None:
        await ctx.step("charge", never)
        currency = payload["currency"]  # a field old runs' payloads do not have
        await ctx.step("receipt", never, currency)

    verdict = await replay(strict, {"amount": 5}, steps)
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met) == (
        RAISES, 1, "receipt#1", "(raises KeyError)")
    assert "KeyError" in verdict.detail


async def test_a_replay_that_does_not_end_is_unchecked() -> None:
    _, steps = await history_of(invoice_v1(), {"amount": 5})

    @workflow("billing.invoice")
    async def stuck(ctx: WorkflowContext, payload: dict[str, int]) -> None:
        await ctx.step("charge", never)
        await asyncio.Event().wait()  # waits on something outside the workflow

    verdict = await replay(stuck, {"amount": 5}, steps, timeout=0.05)
    assert verdict.result == UNCHECKED and verdict.seq == 1


# -- recorded failures, compensations ----------------------------------------------------------

async def test_a_recorded_step_failure_is_raised_again_as_on_replay() -> None:
    def decline() -> None:
        raise PermanentError("card declined", type="card_declined")

    @workflow("billing.declined")
    async def old(ctx: WorkflowContext, payload: None) -> str:
        try:
            await ctx.step("charge", decline)
        except StepFailedError:
            await ctx.step("notify", crash)
            return "declined"
        return "charged"

    _, steps = await history_of(old)
    assert [(s.name, s.succeeded) for s in steps] == [("charge", False)]
    verdict = await replay(old, None, steps)
    assert verdict.result == COMPATIBLE and verdict.seq == 1  # took the except branch

    @workflow("billing.declined")
    async def uncaught(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("charge", never)
        return "charged"

    verdict = await replay(uncaught, None, steps)  # the run would end with the failure
    assert verdict.result == COMPATIBLE and "StepFailedError (card_declined" in verdict.detail


def trip(*, undo_flight: bool = True, release_fails: bool = True) -> Task:
    def release(booking: str) -> None:
        if booking == "hotel-1" and release_fails:
            raise RetryableError("broker down")

    def pay() -> None:
        raise PermanentError("declined", type="card_declined")

    @workflow("travel.trip")
    async def flow(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("hotel", lambda: "hotel-1", compensate=release, compensate_retries=1)
        await ctx.step("flight", lambda: "flight-1",
                       compensate=release if undo_flight else None, compensate_retries=1)
        await ctx.step("pay", pay)
        return "booked"

    return flow


async def test_compensations_replay_at_their_positions() -> None:
    # crashed while compensating: flight undone, hotel's compensation not yet recorded
    env, steps = await history_of(trip())
    assert [s.name for s in steps] == ["hotel", "flight", "pay", "compensate:flight"]
    verdict = await replay(trip(release_fails=False), None, steps)
    assert (verdict.result, verdict.seq) == (COMPATIBLE, 4)  # compensate:hotel runs live

    verdict = await replay(trip(undo_flight=False), None, steps)
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met) == (
        INCOMPATIBLE, 3, "compensate:flight#1", "compensate:hotel#1")
    outcome = await real(env, trip(undo_flight=False), None)
    assert isinstance(outcome, NonDeterminismError) and str(outcome) == verdict.detail


# -- patch markers ------------------------------------------------------------------------------

def fee_flow(*, patched: str | None, crash_after: bool = True) -> Task:
    @workflow("billing.fee")
    async def flow(ctx: WorkflowContext, payload: None) -> str:
        await ctx.step("order", lambda: "o-1")
        if patched is not None and await ctx.patched(patched):
            fee = await ctx.step("fee-v2", lambda: "new")
        else:
            fee = await ctx.step("fee", lambda: "old")
        await ctx.step("ship", crash if crash_after else never)
        return str(fee)

    return flow


async def test_a_patch_marker_keeps_a_run_recorded_by_the_old_code_compatible() -> None:
    _, steps = await history_of(fee_flow(patched=None))
    assert [s.name for s in steps] == ["order", "fee"]
    verdict = await replay(fee_flow(patched="fee-v2", crash_after=False), None, steps)
    assert (verdict.result, verdict.seq) == (COMPATIBLE, 2)
    # without the marker the changed step is a divergence
    @workflow("billing.fee")
    async def unguarded(ctx: WorkflowContext, payload: None) -> None:
        await ctx.step("order", never)
        await ctx.step("fee-v2", never)

    verdict = await replay(unguarded, None, steps)
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met) == (
        INCOMPATIBLE, 1, "fee#1", "fee-v2#1")


async def test_a_patch_marker_recorded_by_a_run_must_stay_until_it_is_done() -> None:
    env, steps = await history_of(fee_flow(patched="fee-v2"))
    assert [s.name for s in steps] == ["order", "patch:fee-v2", "fee-v2"]
    assert (await replay(fee_flow(patched="fee-v2", crash_after=False), None, steps)).ok
    removed = fee_flow(patched=None, crash_after=False)  # the old branch and the marker gone
    verdict = await replay(removed, None, steps)
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met) == (
        INCOMPATIBLE, 1, "patch:fee-v2#1", "fee#1")
    outcome = await real(env, removed, None)
    assert isinstance(outcome, NonDeterminismError) and str(outcome) == verdict.detail
    renamed = fee_flow(patched="fee-v3", crash_after=False)  # another marker: the old branch
    verdict = await replay(renamed, None, steps)
    assert (verdict.result, verdict.recorded, verdict.met) == (
        INCOMPATIBLE, "patch:fee-v2#1", "fee#1")


# -- timers, signals, children ------------------------------------------------------------------

def payment(*, review: str = "review", sleep_first: bool = True, release: str = "release",
            capture: str = "capture", crash_at: str = "decision") -> Task:
    decided = crash if crash_at == "decision" else (lambda hold_id: hold_id)

    @workflow("billing.payment")
    async def flow(ctx: WorkflowContext, order: dict[str, Any]) -> dict[str, Any]:
        hold = await ctx.step("authorise", lambda: {"id": "h-1"})
        if sleep_first:
            await ctx.sleep(timedelta(hours=1))
        try:
            decision = await ctx.wait_for_signal(review, timeout=timedelta(days=2))
        except SignalTimeout:
            decision = {"approved": True}
        if not decision["approved"]:
            await ctx.step(release, decided, hold["id"])
        else:
            await ctx.step(capture, decided, hold["id"])
        await ctx.step("notify", crash)
        return {"state": "done"}

    return flow


async def payment_history(*, signal: Any = None, timed_out: bool = False,
                          crash_at: str = "decision",
                          ) -> tuple[HandlerEnvironment, list[StepRecord]]:
    """An old run past its timer and its review (`signal`, or the wait timed out), crashed at
    the step after (`crash_at="notify"`: the one after that)."""
    old = payment(crash_at=crash_at)
    env = HandlerEnvironment(task=old.name)
    with pytest.raises(Suspended):  # asleep
        await env.run(old, {})
    env.journal.advance_to(env.journal.now + timedelta(hours=2))  # the timer fired
    if timed_out:
        with pytest.raises(Suspended):  # waiting for the review
            await env.next_attempt().run(old, {})
        env.journal.advance_to(env.journal.now + timedelta(days=3))
    else:
        env.journal.send_signal("review", signal)  # sent before the wait: taken at once
    env = env.next_attempt()
    with pytest.raises(RetryableError):
        await env.run(old, {})
    return env, await env.journal.page(env.context, -1, 1000)


async def test_recorded_timers_and_signals_replay_with_their_outputs() -> None:
    _, steps = await payment_history(signal={"approved": False})
    assert [s.name for s in steps] == ["authorise", "sleep", "signal:review"]
    assert (await replay(payment(), {}, steps)).seq == 3  # release, live

    # the recorded payload decides the branch: renaming `capture` changes nothing for a run
    # whose review declined, renaming `release` does
    env, steps = await payment_history(signal={"approved": False}, crash_at="notify")
    assert [s.name for s in steps] == ["authorise", "sleep", "signal:review", "release"]
    verdict = await replay(payment(capture="capture-v2"), {}, steps)
    assert (verdict.result, verdict.seq) == (COMPATIBLE, 4)
    verdict = await replay(payment(release="refund"), {}, steps)
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met) == (
        INCOMPATIBLE, 3, "release#1", "refund#1")
    outcome = await real(env, payment(release="refund"), {})
    assert isinstance(outcome, NonDeterminismError) and str(outcome) == verdict.detail
    _, timed_out = await payment_history(timed_out=True)
    assert [(s.name, s.succeeded) for s in timed_out] == [
        ("authorise", True), ("sleep", True), ("signal:review", False)]
    verdict = await replay(payment(), {}, timed_out)  # SignalTimeout replayed, and caught
    assert (verdict.result, verdict.seq) == (COMPATIBLE, 3)


@pytest.mark.parametrize(("change", "seq", "recorded", "met"), [
    ("timer moved", 1, "sleep#1", "signal:review#1"),
    ("signal renamed", 2, "signal:review#1", "signal:approval#1"),
])
async def test_moving_a_recorded_timer_or_renaming_a_signal_is_incompatible(
        change: str, seq: int, recorded: str, met: str) -> None:
    env, steps = await payment_history(signal={"approved": True})
    new = payment(sleep_first=False) if change == "timer moved" else payment(review="approval")
    verdict = await replay(new, {}, steps)
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met) == (
        INCOMPATIBLE, seq, recorded, met)
    outcome = await real(env, new, {})
    assert isinstance(outcome, NonDeterminismError) and str(outcome) == verdict.detail


async def test_a_suspended_run_is_checked_against_the_wait_it_waits_on() -> None:
    old = payment()
    env = HandlerEnvironment(task=old.name)
    with pytest.raises(Suspended):
        await env.run(old, {})
    steps = await env.journal.page(env.context, -1, 1000)
    assert [s.name for s in steps] == ["authorise"]  # the timer is not recorded until it fires
    verdict = await replay(payment(), {}, steps, pending="sleep")
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.waiting) == (
        COMPATIBLE, 1, "sleep", True)

    verdict = await replay(payment(sleep_first=False), {}, steps, pending="sleep")
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met, verdict.waiting) == (
        INCOMPATIBLE, 1, "sleep#1", "signal:review#1", True)
    # the same as a worker meets once the timer has fired (recorded under the old name)
    env.journal.advance_to(env.journal.now + timedelta(hours=2))
    outcome = await real(env, payment(sleep_first=False), {})
    assert isinstance(outcome, NonDeterminismError)
    assert verdict.detail.startswith(str(outcome)) and "suspended on" in verdict.detail

    @workflow("billing.payment")
    async def done_sooner(ctx: WorkflowContext, order: dict[str, Any]) -> str:
        await ctx.step("authorise", never)
        return "no wait any more"

    verdict = await replay(done_sooner, {}, steps, pending="sleep")
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.waiting) == (
        ENDS_EARLY, 1, "sleep#1", True)


@task("cards.capture")
async def capture(payload: dict[str, int]) -> dict[str, int]:
    return {"captured": payload["amount"]}


def checkout(*, child_task: Task | str = capture) -> Task:
    @workflow("orders.checkout")
    async def flow(ctx: WorkflowContext, order: dict[str, Any]) -> dict[str, Any]:
        mail = await ctx.start_child("mail.confirmation", {"to": order["email"]})
        try:
            captured = await ctx.child(child_task, {"amount": order["amount"]})
        except ChildFailedError as exc:
            return {"status": "declined", "reason": exc.type, "mail": mail}
        await ctx.step("ship", crash, captured)
        return {"status": "done"}

    return flow


async def test_recorded_children_replay_their_outputs_and_failures() -> None:
    order = {"email": "a@example.com", "amount": 3}
    env = HandlerEnvironment(task="orders.checkout")
    with pytest.raises(Suspended):
        await env.run(checkout(), order)
    steps = await env.journal.page(env.context, -1, 1000)
    assert [s.name for s in steps] == ["start_child:mail.confirmation"]
    assert (await replay(checkout(), order, steps, pending="child:cards.capture")).ok
    verdict = await replay(checkout(child_task="cards.charge"), order, steps,
                           pending="child:cards.capture")
    assert (verdict.result, verdict.seq, verdict.recorded, verdict.met, verdict.waiting) == (
        INCOMPATIBLE, 1, "child:cards.capture#1", "child:cards.charge#1", True)

    env.journal.finish_child({"captured": 3})
    with pytest.raises(RetryableError):  # crashed at ship
        await env.next_attempt().run(checkout(), order)
    steps = await env.journal.page(env.context, -1, 1000)
    assert [s.output for s in steps] == ["child-0", {"captured": 3}]
    verdict = await replay(checkout(), order, steps)
    assert (verdict.result, verdict.seq) == (COMPATIBLE, 2)

    failed = HandlerEnvironment(task="orders.checkout")
    with pytest.raises(Suspended):
        await failed.run(checkout(), order)
    failed.journal.finish_child(error_type="declined", message="over the limit")
    steps = await failed.journal.page(failed.context, -1, 1000)
    verdict = await replay(checkout(), order, steps)  # ChildFailedError caught: returns
    assert verdict.result == COMPATIBLE and "then returns" in verdict.detail


# -- the decision is the domain's, over generated sequences ------------------------------------

def sequence_flow(names: list[str], tail: Callable[..., Any] = never) -> Task:
    @workflow("generated")
    async def flow(ctx: WorkflowContext, payload: None) -> None:
        for name in names:
            await ctx.step(name, tail)

    return flow


def records(names: list[str]) -> list[StepRecord]:
    return [StepRecord(seq=i, name=n, succeeded=True, output=i) for i, n in enumerate(names)]


names = st.lists(st.sampled_from(["charge", "email", "audit"]), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(names, st.data())
def test_generated_changes_are_found_where_the_domain_decides(
        sequence: list[str], data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(sequence)))
    history = records(sequence[:cut])
    extended = [*sequence, *data.draw(st.lists(st.sampled_from(["x", "charge"]), max_size=3))]
    same = asyncio.run(replay(sequence_flow(extended), None, history))
    assert same.ok  # an appended tail is fine
    assert same.seq == (cut if len(extended) > cut else None)  # None: it returned
    if cut:
        k = data.draw(st.integers(min_value=0, max_value=cut - 1))
        changed = [*sequence[:k], sequence[k] + "-v2", *sequence[k + 1:]]
        verdict = asyncio.run(replay(sequence_flow(changed), None, history))
        assert (verdict.result, verdict.seq) == (INCOMPATIBLE, k)
        assert verdict.recorded == f"{sequence[k]}#{sequence[:k + 1].count(sequence[k])}"
        assert verdict.met == f"{sequence[k]}-v2#1"


async def test_a_history_with_a_gap_is_refused() -> None:
    with pytest.raises(ValueError, match="position 1 has seq 2"):
        ListHistory([StepRecord(seq=0, name="a", succeeded=True),
                     StepRecord(seq=2, name="b", succeeded=True)])
    with pytest.raises(TypeError, match="not a workflow"):
        await replay(capture, None, [])


async def test_a_long_history_is_read_a_page_at_a_time() -> None:
    class Counting(ListHistory):
        pages = 0

        async def page(self, after: int, limit: int) -> list[StepRecord]:
            type(self).pages += 1
            return await super().page(after, limit)

    history = Counting(records(["load"] * 2500))
    verdict = await replay(sequence_flow(["load"] * 2501), None, history)
    assert (verdict.result, verdict.seq) == (COMPATIBLE, 2500)
    assert Counting.pages == 3  # pages of 1,000, never the whole history at once


# -- collecting workflows and the command -------------------------------------------------------

MODULE = """
from ostinato.sdk import WorkflowContext, task, workflow

@task("plain")
def plain(payload):
    return payload

@workflow("billing.invoice")
async def invoice(ctx: WorkflowContext, payload: dict) -> str:
    charged = await ctx.step("charge", print, payload["amount"])
    await ctx.step({receipt!r}, print, charged)
    return "done"

@workflow("orders.ship")
async def ship(ctx: WorkflowContext, payload: dict) -> None:
    await ctx.step("pack", print)
"""


def module_file(tmp_path: Path, receipt: str = "receipt", name: str = "newcode") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE.format(receipt=receipt))
    return path


def test_the_module_level_workflows_are_collected(tmp_path: Path) -> None:
    found = load_workflows(str(module_file(tmp_path)))
    assert sorted(found) == ["billing.invoice", "orders.ship"]  # not the plain task
    assert list(load_workflows(str(module_file(tmp_path, name="other")),
                               ["orders.ship"])) == ["orders.ship"]
    with pytest.raises(CheckError, match="no workflow 'nope'"):
        load_workflows(str(module_file(tmp_path, name="third")), ["nope"])
    with pytest.raises(CheckError, match="no such file"):
        load_workflows(str(tmp_path / "missing.py"))
    broken = tmp_path / "broken.py"
    broken.write_text("import does_not_exist\n")
    with pytest.raises(CheckError, match=r"cannot import .*ModuleNotFoundError"):
        load_workflows(str(broken))
    with pytest.raises(CheckError, match="defines no @workflow"):
        load_workflows("json")


# The other fields of the API's RunView and StepView (the typed client decodes whole answers)
RUN_VIEW = {"job_id": str(uuid.uuid4()), "pool": "default", "priority": "normal",
            "due_at": None, "trigger": "schedule", "fencing_token": 1, "worker_id": None,
            "timestamps": {}, "last_error": None, "updated_at": "2026-12-01T09:00:00Z"}
STEP_VIEW = {"duration_ms": 1.0, "recorded_at": "2026-12-01T09:00:01Z"}


class FakeApi:
    """`GET /v1/runs`, `/v1/runs/{id}` and `/v1/runs/{id}/steps` over a few runs."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.steps: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[str] = []
        self.key = "ost_test"

    def add(self, task_name: str, state: str, steps: list[str], payload: Any = None,
            **fields: Any) -> str:
        run_id = str(uuid.uuid4())
        self.runs[run_id] = {"id": run_id, "task": task_name, "state": state,
                             "steps_done": len(steps), "scheduled_for": "2026-12-01T09:00:00Z",
                             "attempt": 1, "cancel_requested": False, "payload": payload,
                             "current_step": None, "wait_reason": None, **RUN_VIEW, **fields}
        self.steps[run_id] = [{"seq": i, "name": n, "succeeded": True, "output": {"id": i},
                               "attempt": 1, "tries": 1, **STEP_VIEW}
                              for i, n in enumerate(steps)]
        return run_id

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(str(request.url))
        if request.headers.get("authorization") != f"Bearer {self.key}":
            return httpx.Response(401, json={"status": 401, "detail": "unknown API key"})
        parts = request.url.path.strip("/").split("/")
        q = request.url.params
        if parts == ["v1", "runs"]:
            items = [{k: v for k, v in r.items() if k != "payload"}
                     for r in self.runs.values() if r["state"] == q["state"]]
            return httpx.Response(200, json={"items": items, "next_cursor": None})
        if len(parts) == 3:
            return httpx.Response(200, json=self.runs[parts[2]])
        assert q["inline_outputs"] == "true"
        after, limit = int(q["after"]), int(q["limit"])
        page = self.steps[parts[2]][after + 1:after + 1 + limit]
        return httpx.Response(200, json={"run_id": parts[2], "items": page,
                                         "steps_done": len(self.steps[parts[2]])})


def command(api: FakeApi, module: Path, *extra: str, key: str | None = None,
            transport: httpx.AsyncBaseTransport | None = None) -> tuple[int, str, str]:
    """`ostinato workflows check MODULE --key KEY EXTRA...`: its flags read by the verb's own
    parser, run over the typed client talking to `api`."""
    verb = typer.main.get_command(workflows_cli.app)
    if isinstance(verb, typer.core.TyperGroup):
        verb = verb.commands["check"]
    params = verb.make_context("check", [str(module), "--key", key or api.key, *extra]).params
    out, err = io.StringIO(), io.StringIO()

    def client() -> AsyncClient:
        return AsyncClient("http://api.test", params["key"],
                           transport=transport or httpx.MockTransport(api.handler))

    code = workflows_cli.run_check(
        client, params["module"], task=params["task"] or [], as_json=params["as_json"],
        show_all=params["show_all"], all_versions=params["all_versions"],
        strict=params["strict"], timeout=params["timeout"], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_lists_incompatible_runs_and_exits_1(tmp_path: Path) -> None:
    api = FakeApi()
    bad = api.add("billing.invoice", "retry_scheduled", ["charge", "receipt"], {"amount": 1})
    good = api.add("billing.invoice", "running", ["charge"], {"amount": 2})
    fresh = api.add("orders.ship", "scheduled", [])
    api.add("other.task", "running", ["x"])  # not in the module
    waiting = api.add("orders.ship", "suspended", [], current_step="sleep", wait_reason="timer")

    code, out, _ = command(api, module_file(tmp_path, receipt="email"))
    assert code == 1
    header, row = out.splitlines()[:2]
    assert header.split() == ["RUN", "TASK", "VERSION", "RESULT", "POSITION", "RECORDED",
                              "MET"]
    assert row.split() == [bad, "billing.invoice", "-", "incompatible", "1", "receipt#1",
                           "email#1"]
    assert good not in out.split("\n\n")[0] and fresh not in out
    assert f"{waiting}  orders.ship" in out  # its first position is the timer it waits on
    assert "the history recorded step receipt#1 but the code now runs step email#1" in out
    assert out.rstrip().endswith("2 would meet a non-determinism error")
    assert not any(fresh in r for r in api.requests)  # nothing recorded: nothing read

    code, out, _ = command(api, module_file(tmp_path, name="same"), "--json", "--all")
    assert code == 1  # orders.ship's run still waits on a timer the code no longer has
    document = json.loads(out)
    by_run = {r["run_id"]: r for r in document["runs"]}
    assert by_run[bad]["result"] == by_run[good]["result"] == COMPATIBLE
    assert (by_run[waiting]["result"], by_run[waiting]["recorded"], by_run[waiting]["met"],
            by_run[waiting]["waiting"]) == (INCOMPATIBLE, "sleep#1", "pack#1", True)
    assert document["summary"]["runs"] == 4 and document["summary"]["incompatible"] == 1

    code, out, _ = command(api, module_file(tmp_path, name="only"), "--task", "billing.invoice")
    assert code == 0 and "none would meet a non-determinism error" in out


def test_warnings_fail_the_command_only_when_strict(tmp_path: Path) -> None:
    api = FakeApi()
    api.add("billing.invoice", "running", ["charge", "receipt", "audit"], {"amount": 1})
    code, out, _ = command(api, module_file(tmp_path), "--task", "billing.invoice")
    assert code == 0 and "ends_early" in out and "(returns)" in out
    code, _, _ = command(api, module_file(tmp_path, name="strict"), "--strict")
    assert code == 1


def test_expected_failures_exit_2_with_a_message(tmp_path: Path) -> None:
    api = FakeApi()
    module = module_file(tmp_path)
    code, out, err = command(api, module, key="ost_other")
    assert code == 2 and "refused the key (401): unknown API key" in err and out == ""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    code, _, err = command(api, module, transport=httpx.MockTransport(refuse))
    assert code == 2 and "cannot reach the API" in err and "Traceback" not in err

    api.add("billing.invoice", "running", ["charge"], {"amount": 1})
    del next(iter(api.runs.values()))["payload"]  # an API that does not show payloads
    code, _, err = command(api, module)
    assert code == 2 and "payload" in err

    code, _, err = command(api, tmp_path / "nowhere.py")
    assert code == 2 and "no such file" in err


def test_no_in_flight_runs_pass(tmp_path: Path) -> None:
    code, out, _ = command(FakeApi(), module_file(tmp_path))
    assert code == 0 and out.startswith("no in-flight runs of billing.invoice, orders.ship")


def test_progress_is_shown_on_stderr_for_long_lists(tmp_path: Path) -> None:
    api = FakeApi()
    for _ in range(120):
        api.add("orders.ship", "scheduled", [])
    code, out, err = command(api, module_file(tmp_path))
    assert code == 0 and "120 compatible" in out
    assert err.splitlines()[-1] == "checked 120/120 runs"


def test_runs_pinned_to_another_version_are_named_apart_and_not_counted(
        tmp_path: Path) -> None:
    """They once counted among those that "would meet a non-determinism error" while the
    check exited 0: their own version's workers resume them, and the output says so."""
    api = FakeApi()
    old = [api.add("billing.invoice", "retry_scheduled", ["charge", "receipt"], {"amount": n},
                   pinned=True, task_version="2025.9") for n in (1, 2)]
    api.add("billing.invoice", "running", ["charge"], {"amount": 3})  # not started pinned
    code, out, _ = command(api, module_file(tmp_path, receipt="email"), "--all")
    assert code == 0, out
    summary, pinned = out.rstrip().splitlines()[-2:]
    assert summary == ("checked 3 in-flight run(s) of billing.invoice, orders.ship; of the 1 "
                       "this code would resume: 1 compatible; none would meet a "
                       "non-determinism error")
    assert pinned == ("2 runs pinned to version 2025.9 are served by workers of that version "
                      "and are not affected (marked *); were this code to resume them, 2 would "
                      "meet a non-determinism error (--all-versions counts them)")
    assert all(f"{run}  billing.invoice  2025.9 *" in out for run in old)

    code, out, _ = command(api, module_file(tmp_path, receipt="email", name="json"), "--json")
    document = json.loads(out)
    assert code == 0 and document["summary"]["runs"] == 3
    assert document["summary"]["incompatible"] == 0
    assert document["summary"]["pinned_elsewhere"] == {"2025.9": 2}
    assert {r["run_id"]: r["result"] for r in document["runs"] if not r["resumed_here"]} == {
        run: INCOMPATIBLE for run in old}

    code, out, _ = command(api, module_file(tmp_path, receipt="email", name="every"),
                           "--all-versions")
    assert code == 1 and out.rstrip().endswith("2 would meet a non-determinism error")
    assert "not affected" not in out


def test_the_client_reads_one_page_of_steps_from_a_position() -> None:
    api = FakeApi()
    run = api.add("billing.invoice", "running", ["charge", "receipt", "audit"])
    with Client("http://api.test", api.key, transport=httpx.MockTransport(api.handler)) as client:
        page = client.runs.steps_page(run, after=0, limit=1, inline_outputs=True)
    assert [(s.seq, s.name) for s in page.items] == [(1, "receipt")] and page.steps_done == 3
    assert "after=0" in api.requests[-1] and "limit=1" in api.requests[-1]


def test_the_check_is_a_cli_verb_connected_like_the_other_user_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`ostinato workflows check` takes the root --api-url and --api-key and a profile, as every
    user command does (it once read only its own --api and --key and the environment)."""
    for name in ("OSTINATO_API_URL", "OSTINATO_API_KEY", "OSTINATO_PROFILE", "OSTINATO_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OSTINATO_CONFIG", str(tmp_path / "absent.toml"))
    module = str(module_file(tmp_path))
    nowhere = "http://127.0.0.1:1"  # nothing listens on port 1: refused

    code = main(["--api-url", nowhere, "--api-key", "ost_k", "workflows", "check", module])
    assert code == 2 and f"cannot reach the API at {nowhere}" in capsys.readouterr().err

    config = tmp_path / "config.toml"
    config.write_text(f'[profiles.ci]\napi_url = "{nowhere}"\napi_key = "ost_k"\n')
    monkeypatch.setenv("OSTINATO_CONFIG", str(config))
    code = main(["--profile", "ci", "workflows", "check", module])
    assert code == 2 and f"cannot reach the API at {nowhere}" in capsys.readouterr().err

    code = main(["workflows", "check", module])
    assert code == 2 and "no API key: pass --key" in capsys.readouterr().err
