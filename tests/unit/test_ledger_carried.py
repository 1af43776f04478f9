"""The ledger's history after retention (ostinato.ledger.carried_runs, issue 38 item 6): the
slots of runs the removal procedure carried forward as ranges read as they did while the runs
were hot; a slot a range spans that had no run (skipped, paused, excluded, recorded missing)
keeps its own outcome."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from ostinato.ledger import CarriedRange, Context, RunFact, SkipFact, carried_runs, classify
from ostinato.ledger.slots import ExpectedSlot

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=40)


def slot(k: int) -> datetime:
    return T0 + timedelta(minutes=k)


def context() -> Context:
    return Context(now=NOW, due_within=timedelta(seconds=30), waiting_from=None,
                   decided_through=NOW, jitter=timedelta(0))


def outcomes(expected: list[ExpectedSlot], runs: dict[datetime, RunFact],
             skips: list[SkipFact]) -> dict[datetime, tuple[str, str | None]]:
    return {e.slot: (e.outcome, e.state) for e in classify(expected, runs, skips, context())}


def test_removed_runs_read_as_they_did_while_hot() -> None:
    expected = [ExpectedSlot(slot(k)) for k in range(8)]
    hot = {slot(k): RunFact(uuid.uuid4(), state)
           for k, state in ((0, "succeeded"), (1, "succeeded"), (2, "dead_lettered"),
                            (3, "succeeded"), (5, "cancelled"), (7, "succeeded"))}
    skips = [SkipFact(slot(4), slot(4), "overlap")]
    before = outcomes(expected, hot, skips)
    # slots 0-5 removed: the procedure's ranges (one per run of a new state, extended while
    # the state stays the same); slot 6 had no run and was recorded missing
    carried = [CarriedRange(slot(0), slot(1), "succeeded"),
               CarriedRange(slot(2), slot(2), "dead_lettered"),
               CarriedRange(slot(3), slot(3), "succeeded"),
               CarriedRange(slot(5), slot(5), "cancelled")]
    remaining = {slot(7): hot[slot(7)]}
    back = remaining | carried_runs(expected, carried, remaining, skips, {slot(6)})
    assert outcomes(expected, back, skips) == before
    assert {s for s, run in back.items() if run.run_id is None} == {slot(k) for k in (0, 1, 2, 3,
                                                                                     5)}


def test_a_slot_a_range_spans_keeps_its_own_outcome_when_it_had_no_run() -> None:
    expected = [ExpectedSlot(slot(0)), ExpectedSlot(slot(1), paused=True),
                ExpectedSlot(slot(2), excluded=True), ExpectedSlot(slot(3)),
                ExpectedSlot(slot(4)), ExpectedSlot(slot(5))]
    carried = [CarriedRange(slot(0), slot(5), "succeeded")]
    skips = [SkipFact(slot(3), slot(3), "missed")]
    got = carried_runs(expected, carried, {}, skips, recorded_missing={slot(4)})
    assert set(got) == {slot(0), slot(5)}
    assert all(r == RunFact(None, "succeeded") for r in got.values())


def test_slots_outside_every_range_and_hot_runs_are_left_alone() -> None:
    hot = RunFact(uuid.uuid4(), "running")
    expected = [ExpectedSlot(slot(k)) for k in range(6)]
    carried = [CarriedRange(slot(1), slot(2), "succeeded"), CarriedRange(slot(4), slot(4),
                                                                          "dead_lettered")]
    got = carried_runs(expected, carried, {slot(2): hot}, [], set())
    assert got == {slot(1): RunFact(None, "succeeded"), slot(4): RunFact(None, "dead_lettered")}
    assert carried_runs(expected, [], {}, [], set()) == {}
