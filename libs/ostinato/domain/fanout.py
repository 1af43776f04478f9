"""Chunked fan-out (`ctx.fan_out`): the pure decisions, over values.

A fan-out at workflow position `seq` of a parent run splits work into `total` chunks, one child
run per chunk, with at most `max_concurrency` children not final at any time. The window is a
property of storage: the parent's fan-out record (read model `fan_outs`, a fold of the parent's
`FanOutStarted` / `FanOutProgressed` / `FanOutCompleted`) counts the chunks admitted and the
children finished, and a new chunk is admitted only in the transaction that records an earlier
child's end, so `admitted - finished <= max_concurrency` whatever crashes.

Ids derive from the parent, the position and the chunk index: a resent report, a retried or
replayed parent creates no second child, no second payload, no second completion run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from ostinato.domain.events import FanOutCompleted

FANOUT_NAMESPACE: Final = uuid.UUID("a1f4a3c2-6a0e-4f57-9a8e-2f6f0c1d9b34")
ON_FAILURE: Final = frozenset({"fail", "complete"})
MAX_CHUNKS: Final = 100_000
MAX_CONCURRENCY: Final = 10_000
FAILURES_LISTED: Final = 1_000  # the record lists this many failed chunks; `failed` counts all

OnFailure = Literal["fail", "complete"]


def chunk_run_id(parent_run_id: uuid.UUID, seq: int, index: int) -> uuid.UUID:
    """The one run id chunk `index` of the fan-out at position `seq` can have."""
    return uuid.uuid5(FANOUT_NAMESPACE, f"{parent_run_id}/fan_out/{seq}/chunk/{index}")


def chunk_payload_ref(parent_run_id: uuid.UUID, seq: int, index: int) -> uuid.UUID:
    """The blob holding chunk `index`'s payload, stored once when the fan-out starts."""
    return uuid.uuid5(FANOUT_NAMESPACE, f"{parent_run_id}/fan_out/{seq}/payload/{index}")


def completion_run_id(parent_run_id: uuid.UUID, seq: int) -> uuid.UUID:
    """The one completion run (`on_complete`) of the fan-out at position `seq`."""
    return uuid.uuid5(FANOUT_NAMESPACE, f"{parent_run_id}/fan_out/{seq}/complete")


def completion_payload_ref(parent_run_id: uuid.UUID, seq: int) -> uuid.UUID:
    return uuid.uuid5(FANOUT_NAMESPACE, f"{parent_run_id}/fan_out/{seq}/complete/payload")


@dataclass(frozen=True, slots=True)
class Window:
    """A fan-out's counts: chunks admitted (indices 0 .. admitted-1 have a child run), and
    children finished either way."""

    total: int
    max_concurrency: int
    admitted: int = 0
    succeeded: int = 0
    failed: int = 0

    @property
    def running(self) -> int:
        """Children admitted and not final yet (scheduled, queued, running or retrying)."""
        return self.admitted - self.succeeded - self.failed

    @property
    def done(self) -> bool:
        return self.succeeded + self.failed >= self.total


def problems(total: int, max_concurrency: int, on_failure: str) -> list[tuple[str, str]]:
    """What is wrong with a fan-out request, as (field, message) pairs; empty: nothing."""
    found: list[tuple[str, str]] = []
    if total < 1:
        found.append(("fan_out.chunks", "at least one chunk"))
    elif total > MAX_CHUNKS:
        found.append(("fan_out.chunks", f"at most {MAX_CHUNKS} chunks"))
    if not 1 <= max_concurrency <= MAX_CONCURRENCY:
        found.append(("fan_out.max_concurrency", f"between 1 and {MAX_CONCURRENCY}"))
    if on_failure not in ON_FAILURE:
        found.append(("fan_out.on_failure", "fail or complete"))
    return found


def admit(window: Window) -> range:
    """The chunk indices to admit now: as many as the window has room for, in index order."""
    room = window.max_concurrency - window.running
    return range(window.admitted, min(window.total, window.admitted + max(room, 0)))


@dataclass(frozen=True, slots=True)
class Advance:
    """What recording some children's ends does to a fan-out: the window after it, the chunks
    it admits, and whether the fan-out is over (then `outcome`)."""

    window: Window
    admitted: range
    outcome: Literal["succeeded", "failed"] | None = None
    start_completion: bool = False


def advance(window: Window, succeeded: int, failed: int, on_failure: str,
            has_completion: bool) -> Advance:
    """Record `succeeded` and `failed` more children's ends, then admit into the room freed.
    When the last child is final: all succeeded, the completion run starts (if any) and the
    step succeeds; with failures, `on_failure` decides: "fail" fails the step and starts no
    completion, "complete" starts the completion with the failures listed and succeeds."""
    if succeeded < 0 or failed < 0 or succeeded + failed > window.running:
        raise ValueError("more children finished than were running")
    after = Window(window.total, window.max_concurrency, window.admitted,
                   window.succeeded + succeeded, window.failed + failed)
    if not after.done:
        room = admit(after)
        return Advance(Window(after.total, after.max_concurrency, room.stop, after.succeeded,
                              after.failed), room)
    if after.failed == 0 or on_failure == "complete":
        return Advance(after, range(after.admitted, after.admitted), "succeeded",
                       has_completion)
    return Advance(after, range(after.admitted, after.admitted), "failed", False)


def summary(e: FanOutCompleted) -> dict[str, Any]:
    """What `await ctx.fan_out(...)` returns: the step's recorded output."""
    return {"total": e.total, "succeeded": e.succeeded, "failed": e.failed,
            "failures": e.failures,
            "completion_run_id": None if e.completion_run_id is None
            else str(e.completion_run_id)}
