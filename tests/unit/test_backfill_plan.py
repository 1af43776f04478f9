"""The pure decision of a backfill (`jobs.control.plan_backfill`): what happens to each slot of
the range, the same for its dry run and for the real one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ostinato.jobs.control import BackfillSlot, plan_backfill
from ostinato.stores.jobs import Skip

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SLOTS = [T0 + timedelta(hours=h) for h in range(4)]


def test_allow_creates_every_slot_without_a_run_and_names_earlier_skips() -> None:
    skips = [Skip(first_slot=SLOTS[2], last_slot=SLOTS[3], slots=2, reason="misfire_skip")]
    assert plan_backfill(SLOTS, {SLOTS[1]}, overlap="allow", active=True, skips=skips) == [
        BackfillSlot(SLOTS[0], "create"),
        BackfillSlot(SLOTS[1], "has_run"),
        BackfillSlot(SLOTS[2], "create", "misfire_skip"),
        BackfillSlot(SLOTS[3], "create", "misfire_skip"),
    ]


def test_overlap_skip_creates_one_run_and_none_while_a_run_is_active() -> None:
    idle = plan_backfill(SLOTS, {SLOTS[0]}, overlap="skip", active=False, skips=[])
    assert [s.action for s in idle] == ["has_run", "create", "skip", "skip"]
    busy = plan_backfill(SLOTS, set(), overlap="skip", active=True, skips=[])
    assert [s.action for s in busy] == ["skip"] * 4


def test_slots_from_the_jobs_next_slot_on_are_left_to_the_scheduler() -> None:
    """A run made there would be made again when the scheduler fires the slot."""
    plan = plan_backfill(SLOTS, {SLOTS[0]}, overlap="allow", active=False, skips=[],
                         next_slot=SLOTS[2])
    assert [s.action for s in plan] == ["has_run", "create", "upcoming", "upcoming"]
    assert [s.action for s in plan_backfill(SLOTS, set(), overlap="skip", active=False,
                                            skips=[], next_slot=SLOTS[0])] == ["upcoming"] * 4


def test_slots_inside_a_range_of_removed_runs_are_left_alone() -> None:
    """Retention keeps removed runs' slots only as ranges, so every slot inside one counts as
    taken, the range's ends included; a slot just outside is created; overlap=skip spends its
    one run on a free slot, not on a removed one."""
    removed = [(SLOTS[1], SLOTS[2])]
    plan = plan_backfill(SLOTS, set(), overlap="allow", active=False, skips=[], removed=removed)
    assert [s.action for s in plan] == ["create", "removed", "removed", "create"]
    one = plan_backfill(SLOTS, set(), overlap="skip", active=False, skips=[],
                        removed=[(SLOTS[0], SLOTS[1])])
    assert [s.action for s in one] == ["removed", "removed", "create", "skip"]
    assert [s.action for s in plan_backfill(SLOTS, {SLOTS[3]}, overlap="allow", active=False,
                                            skips=[], removed=[(SLOTS[3], SLOTS[3])])] == [
        "create", "create", "create", "has_run"]
