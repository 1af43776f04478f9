"""The expected-occurrence ledger: every slot a schedule should have had, enumerated by a second,
independent cron implementation (cronsim, beside the scheduler's croniter), and what happened to
it (completed, in progress, failed, skipped with its reason, or missing).

Pure functions over values (no I/O, no clock). The import-linter contract "the ledger is
independent of the scheduler's occurrence code" (pyproject.toml) keeps `ostinato.schedules` and
croniter out of it, so a bug in one implementation shows up as a disagreement with the other
instead of being shared. docs/SCHEDULES.md, "The expected-occurrence ledger".
"""

from ostinato.ledger.cron import LedgerCronError, compile_cron
from ostinato.ledger.findings import finding_id, unreadable_id
from ostinato.ledger.outcomes import (
    OUTCOMES,
    CarriedRange,
    Context,
    Entry,
    RunFact,
    SkipFact,
    carried_runs,
    classify,
    decided,
)
from ostinato.ledger.slots import ExpectedSlot, LedgerSchedule, expected_slots, read_document, slots

__all__ = [
    "OUTCOMES",
    "CarriedRange",
    "Context",
    "Entry",
    "ExpectedSlot",
    "LedgerCronError",
    "LedgerSchedule",
    "RunFact",
    "SkipFact",
    "carried_runs",
    "classify",
    "compile_cron",
    "decided",
    "expected_slots",
    "finding_id",
    "read_document",
    "slots",
    "unreadable_id",
]
