"""Which actions a run's page offers an operator (issue 41 item 3; the routes that take them are
services/api/ui/run_actions.py): each the API's own command in a state where the API takes it,
with the confirmation that names what will change. An operator's session only, a run still hot;
a viewer is offered none."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ostinato.domain.lifecycle import STOPPED
from ostinato.domain.narrative import duration_words
from ostinato.domain.states import FINAL, RunState
from ostinato.stores.runs import RunRow
from ostinato.stores.steps import StepRow
from services.api.ui import operations
from services.api.ui.render import id_tail
from services.api.ui.scope import UiScope

RERUNNABLE = (RunState.FAILED, RunState.CANCELLED, RunState.DEAD_LETTERED)


@dataclass(frozen=True, slots=True)
class Offer:
    """One action the page offers: its form (the `action_form` macro) and its extra inputs
    (`inputs`: "signal", "output", "fail" or "" for none)."""

    key: str
    path: str
    label: str
    confirm: str
    reason: str | None = "optional"  # "required" as the API's command needs one
    cls: str = ""
    inputs: str = ""
    fields: dict[str, Any] = field(default_factory=dict)  # hidden ones


@dataclass(frozen=True, slots=True)
class StepLine:
    """A workflow position the page offers actions on: a recorded step, or the wait where a
    suspended run stopped."""

    seq: int
    name: str
    outcome: str  # succeeded | failed | waiting (<its reason>)
    offers: list[Offer]


@dataclass(slots=True)
class Offers:
    """What the run's page offers an operator: actions on the run, and on each step."""

    run: list[Offer] = field(default_factory=list)
    steps: list[StepLine] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # a refused form's key: why
    values: dict[str, dict[str, Any]] = field(default_factory=dict)  # its fields as typed

    def __bool__(self) -> bool:
        return bool(self.run or self.steps)


def run_words(run: RunRow, job_name: str | None) -> str:
    """The run as a confirmation names it: "run …4f2a9c1b of job nightly-report"."""
    return f"run {id_tail(run.id)}" + (f" of job {job_name}" if job_name else "")


def offers(ui: UiScope, run: RunRow, steps: list[StepRow], job_name: str | None, *,
           archived: bool) -> Offers:
    """The actions the API would take on `run` now, for an operator's session (none for
    another role, nor for an archived run: nothing can change it)."""
    found = Offers()
    if not operations.may_operate(ui) or archived:
        return found
    base, it, state = f"/ui/runs/{run.id}", run_words(run, job_name), RunState(run.state)
    say = found.run.append
    if run.paused:
        left = (f"; its timer gets the {_left(run)} it had left" if run.frozen_wake_at else "")
        say(Offer("resume", f"{base}/resume", "Resume run",
                  f"Resume {it}: it goes on where it stopped{left}."))
    elif state in (RunState.RUNNING, RunState.SUSPENDED):
        what = ("it starts no next step" if state is RunState.RUNNING else
                "its wait is frozen (the time left is kept) and nothing wakes it")
        say(Offer("pause", f"{base}/pause", "Pause run",
                  f"Pause {it}: {what} until resumed; a signal sent meanwhile is kept."))
    if state not in FINAL:
        waits = (f"; it waits for signal {run.wait_signal} now" if run.wait_signal
                 and run.wait_reason == "signal" else "")
        say(Offer("signal", f"{base}/signal", "Send a signal",
                  f"Send a signal to {it}: a workflow waiting for its name is woken now, "
                  f"else its next wait of that name takes it{waits}.", inputs="signal"))
        stop = (state is RunState.RUNNING or run.compensable)
        say(Offer("cancel", f"{base}/cancel", "Cancel run",
                  f"Cancel {it}: " + ("it is asked to stop (its worker learns it on its next "
                                      "heartbeat)" if stop else "it is cancelled now and will "
                                      "not run") + "; its child runs that are not final are "
                  "cancelled with it.", cls="danger"))
    if state in RERUNNABLE:
        say(Offer("rerun", f"{base}/retry", "Re-run",
                  f"Re-run {it}: a new run of the same job and payload is created now; this "
                  "one stays as it is."))
    if state in STOPPED:
        say(Offer("succeed", f"{base}/succeed", "Mark succeeded",
                  f"Mark {it} succeeded with the output below: nothing more of it runs (no "
                  "compensation); its child runs that are not final are cancelled.",
                  reason="required", inputs="output"))
        if state is not RunState.DEAD_LETTERED:
            say(Offer("fail", f"{base}/fail", "Mark failed",
                      f"Mark {it} failed for good: it is dead-lettered with the error below "
                      "and nothing more of it runs (no compensation); its child runs that are "
                      "not final are cancelled.", reason="required", cls="danger",
                      inputs="fail"))
        if state is RunState.DEAD_LETTERED and (not steps or steps[-1].succeeded):
            say(Offer("reopen", f"{base}/restart", "Reopen run",
                      f"Reopen {it}: it is scheduled again with a fresh retry budget and goes "
                      f"on from position {run.steps_done} (its recorded steps are kept); this "
                      "run, not a new one.", reason="required",
                      fields={"from_seq": run.steps_done, "form_key": "reopen"}))
        found.steps = [StepLine(s.seq, s.name, "succeeded" if s.succeeded else "failed",
                                _step_offers(base, it, run, s)) for s in steps]
        found.steps.extend(_wait_line(base, it, run, {s.seq for s in steps}))
    return found


def _wait_line(base: str, it: str, run: RunRow, recorded: set[int]) -> list[StepLine]:
    """The wait a suspended workflow stopped at, which a skip ends with an output (none for a
    pause's own suspension: nothing waits there)."""
    seq, name = run.wait_seq, run.wait_name
    if (run.state != RunState.SUSPENDED or seq is None or not name or seq in recorded
            or run.wait_reason in (None, "paused")):
        return []
    return [StepLine(seq, name, f"waiting ({run.wait_reason})", [Offer(
        f"skip-{seq}", f"{base}/steps/{seq}/skip", "Skip the wait",
        f"Skip the wait {name} (position {seq}) of {it}: it ends now as if it had succeeded, "
        "the output below being what the wait returns, and the workflow goes on from there.",
        reason="required", inputs="output")])]


def _step_offers(base: str, it: str, run: RunRow, step: StepRow) -> list[Offer]:
    later = run.steps_done - step.seq - 1
    name = f"step {step.seq} {step.name}"
    aside = f" and the {later} later ones are" if later > 0 else " is"
    shown: list[Offer] = []
    if not step.succeeded:
        shown.append(Offer(f"retry-{step.seq}", f"{base}/steps/{step.seq}/retry", "Retry step",
                           f"Retry {name} of {it}: its failed record{aside} set aside (kept "
                           "in the history) and its next attempt runs the step again.",
                           reason="required"))
        shown.append(Offer(f"skip-{step.seq}", f"{base}/steps/{step.seq}/skip", "Skip step",
                           f"Skip {name} of {it}: it is recorded as succeeded with the output "
                           f"below{f', the {later} later records set aside' if later else ''}"
                           ", and the workflow goes on from there.", reason="required",
                           inputs="output"))
    shown.append(Offer(f"restart-{step.seq}", f"{base}/restart", "Restart from here",
                       f"Restart {it} from {name}: its record{aside} set aside (kept in the "
                       "history) and the workflow runs from there again.", reason="required",
                       fields={"from_seq": step.seq}))
    return shown


def _left(run: RunRow) -> str:
    if run.frozen_wake_at is None or run.paused_at is None:
        return "time"
    return duration_words(max(0.0, (run.frozen_wake_at - run.paused_at).total_seconds()))
