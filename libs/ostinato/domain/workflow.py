"""Workflow step memoisation: what a workflow's next step does, given what its run recorded.

A workflow is an ordinary run whose handler calls steps in order. Step `seq` (0-based, its
position in the workflow) is identified by its name and its occurrence among the steps of that
name (`charge#2`: the second step named charge). Before the workflow goes past a step, the
step's outcome is appended to the run's stream (`StepCompleted` / `StepFailed`). When the run
executes again (a crash, a lease expiry, a retry), each step asks `decide`:

- recorded at its position with its name: `Replay`, the recorded outcome, without running;
- nothing recorded there yet: `Execute`, the first unrecorded step runs;
- recorded under another name: `Diverged`, the code no longer makes the recorded sequence (a
  non-determinism error, never a silent reinterpretation of the history).

Pure values only: the SDK wires it to the gateway, tests drive it exhaustively.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

# A step's output, a child's output or a signal's payload larger than this (encoded JSON) is
# kept in the blob store and referenced from its event, so the history stays small.
INLINE_OUTPUT_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class StepId:
    name: str
    occurrence: int  # 1-based among the workflow's steps of this name

    def __str__(self) -> str:
        return f"{self.name}#{self.occurrence}"


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """A step outcome as the run's stream holds it."""

    seq: int
    name: str
    succeeded: bool
    output: Any = None
    output_ref: uuid.UUID | None = None  # output kept in the blob store (too large to inline)
    error_type: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Replay:
    step: RecordedStep


@dataclass(frozen=True, slots=True)
class Execute:
    seq: int
    id: StepId


@dataclass(frozen=True, slots=True)
class Diverged:
    seq: int
    recorded: StepId
    met: StepId

    def message(self) -> str:
        return (f"non-deterministic workflow: at step position {self.seq} the history recorded "
                f"step {self.recorded} but the code now runs step {self.met}")


class StepCounter:
    """Gives each step met in one execution its position and occurrence number."""

    __slots__ = ("_names", "seq")

    def __init__(self) -> None:
        self.seq = 0
        self._names: Counter[str] = Counter()

    def next(self, name: str) -> tuple[int, StepId]:
        seq = self.seq
        self.seq += 1
        self._names[name] += 1
        return seq, StepId(name, self._names[name])

    def would_be(self, name: str) -> StepId:
        """The id a step named `name` would have taken at the position just given out to a step
        of another name: how a recorded step is named in a divergence message."""
        return StepId(name, self._names[name] + 1)


def decide(counter: StepCounter, name: str,
           recorded: RecordedStep | None) -> Replay | Execute | Diverged:
    """What the next step, named `name`, does given the step recorded at its position (None:
    none yet); advances `counter`."""
    seq, met = counter.next(name)
    if recorded is None:
        return Execute(seq, met)
    if recorded.seq != seq:
        raise ValueError(f"step {met} at position {seq} was given the record of position "
                         f"{recorded.seq}")
    if recorded.name != name:
        return Diverged(seq, counter.would_be(recorded.name), met)
    return Replay(recorded)


PATCH_PREFIX = "patch:"


def patch_step(patch_id: str) -> str:
    """The step name a patch marker is recorded under."""
    return f"{PATCH_PREFIX}{patch_id}"


def decide_patch(counter: StepCounter, patch_id: str, recorded: RecordedStep | None) -> bool:
    """Whether the code after patch marker `patch_id` takes its new path (`ctx.patched`), given
    the step recorded at the marker's position; advances `counter` only over a marker:

    - the marker recorded there: True (decided at the first execution, replayed since);
    - nothing recorded there yet: True, and the marker is to be recorded at this position (the
      run reached this point under the new code);
    - another step recorded there: False, and the position stays the recorded step's (the run
      went past this point under the old code, which had no marker).
    """
    if recorded is not None and recorded.name != patch_step(patch_id):
        return False
    counter.next(patch_step(patch_id))
    return True
