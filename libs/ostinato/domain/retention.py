"""Retention per tenant and holds on runs, as pure rules (docs/RETENTION.md, issue 38).

A tenant's policy says how long a finished run stays in the hot tables after it ended
(`keep_seconds`, default 30 days, at least an hour, at most ten years) and whether it is
archived to object storage before it is removed (`archive`, default yes). `removable` decides
one run from plain facts and names every reason it is kept; the archiver's SQL (migration
0046, `ostinato.archive`) restates the same rules as a query, and docs/RETENTION.md holds the
table both follow. Nothing here reads a clock or a database: the caller passes `now` (the
database's) and the facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from ostinato.domain.durations import format_duration, parse_duration
from ostinato.domain.errors import InvalidInput
from ostinato.domain.states import FINAL

# The floor by default: an hour, short enough for tests. An operator may lower it
# (OSTINATO_RETENTION_FLOOR_SECONDS, for a soak benchmark that expires runs within minutes):
# `parse_keep(..., floor=)` and the archiver's pick (`greatest(keep, floor)`) both follow it.
MIN_KEEP_SECONDS = 3600
# Ten years: beyond it a run's history is an archive's job, not the hot database's, and a
# mistyped unit ("30000d") is caught rather than keeping everything forever.
MAX_KEEP_SECONDS = 10 * 365 * 86400
DEFAULT_KEEP_SECONDS = 30 * 86400
# The reconciler's gap and ledger window (`ReconcileConfig.gap_window`, 24 h): the slots and
# completion deadlines inside it are still read by its checks.
DEFAULT_CHECKS_WINDOW = timedelta(hours=24)
MAX_REASON_CHARS = 1000


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """A tenant's policy; `is_default` when the tenant never set one (no tenant_retention row)."""

    keep_seconds: int = DEFAULT_KEEP_SECONDS
    archive: bool = True
    is_default: bool = False

    @property
    def keep(self) -> timedelta:
        return timedelta(seconds=self.keep_seconds)


DEFAULT_POLICY = RetentionPolicy(is_default=True)


def _bad(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", errors=[{"field": field, "message": message}])


def parse_keep(value: str | int, *, floor: int = MIN_KEEP_SECONDS) -> int:
    """Seconds from `keep` as the API and CLI take it: a whole number of seconds, or a duration
    ("30d", "12h", "2w", "1d12h", ISO 8601 "P30D"), within [`floor` (the operator's, 1 hour by
    default), 10 years]; InvalidInput (field `keep`) says what is wrong, naming the floor."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _bad("keep", "a number of seconds or a duration such as \"30d\"")
    if isinstance(value, str):
        text = value.strip()
        if "\x00" in text:
            raise _bad("keep", "holds U+0000 (NUL)")
        if text.isascii() and text.isdigit():
            seconds = int(text)
        else:
            try:
                seconds = int(parse_duration(text).total_seconds())
            except ValueError as exc:
                raise _bad("keep", f"{exc}; units: s, m, h, d, w (e.g. \"30d\")") from None
    else:
        seconds = value
    if seconds < floor:
        raise _bad("keep", f"at least {floor} seconds ({format_keep(floor)}, the retention "
                           f"floor); got {seconds}")
    if seconds > MAX_KEEP_SECONDS:
        raise _bad("keep", f"at most {MAX_KEEP_SECONDS} seconds (10 years, "
                           f"{MAX_KEEP_SECONDS // 86400}d); got {seconds}")
    return seconds


def format_keep(seconds: int) -> str:
    """The compact form shown back ("30d", "1d12h"): `parse_keep` reads it to the same value."""
    return format_duration(timedelta(seconds=seconds))


def check_reason(reason: str | None, *, required: bool, field: str = "reason") -> str | None:
    """A reason as recorded: stripped; None when absent and not `required`. Refused (422): an
    empty one where one is required, one holding a control character (NUL included), one
    longer than `MAX_REASON_CHARS`."""
    text = (reason or "").strip()
    if not text:
        if required:
            raise _bad(field, "required: say why (e.g. \"legal hold, ticket 4711\")")
        return None
    if any((ord(c) < 32 and c not in "\t\n") or c == "\x7f" for c in text):
        raise _bad(field, "holds a control character (U+0000 NUL included)")
    if len(text) > MAX_REASON_CHARS:
        raise _bad(field, f"at most {MAX_REASON_CHARS} characters")
    return text


class Kept(StrEnum):
    """Why a run stays in the hot tables, in the order `removable` reports them."""

    NOT_FINAL = "not_final"  # scheduled .. running, retrying, suspended: it still runs
    HELD = "held"  # an operator's hold (run_holds), until released
    DEAD_LETTER_UNTRIAGED = "dead_letter_untriaged"  # dead letter with triage_state new
    CHILD_NOT_FINAL = "child_not_final"  # a parent with a child not final
    PARENT_NOT_FINAL = "parent_not_final"  # a child whose parent is not final
    PARENT_NOT_TOLD = "parent_not_told"  # a final child whose parent was not told yet
    DAG_RUN_NOT_FINAL = "dag_run_not_final"  # a DAG node's run while its DAG run goes on
    INSIDE_RETENTION = "inside_retention"  # ended less than keep_seconds ago
    SLOT_IN_CHECKS_WINDOW = "slot_in_checks_window"  # the gap check and the ledger read it
    DEADLINE_IN_CHECKS_WINDOW = "deadline_in_checks_window"  # the deadline check reads it
    LATEST_SUCCESS_OF_JOB = "latest_success_of_job"  # staleness and finding alerts read it


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the rules need to know about one run (the archiver's query reads them)."""

    state: str  # runs.state
    ended_at: datetime | None  # runs.finished_at
    held: bool = False  # a run_holds row
    dead_letter_triage: str | None = None  # dead_letters.triage_state; None: no dead letter
    triaged_at: datetime | None = None  # dead_letters.triaged_at
    children_not_final: bool = False  # a run with parent_run_id = this one is not final
    parent_state: str | None = None  # the parent run's state; None: no parent (or not hot)
    parent_notified: bool = True  # runs.parent_notified (a child's; True without a parent)
    dag_run_state: str | None = None  # its DAG run's state; None: not a DAG node's run
    # The slot it takes of a recurring job the reconciler checks (trigger not manual; job kind
    # cron or every, status active or paused): runs.scheduled_for; None otherwise.
    checked_slot: datetime | None = None
    # Its occurrence's completion deadline (scheduled_for + the job's complete_within, for a
    # run with no parent and not a DAG node's): None when the job has none.
    deadline: datetime | None = None
    # The latest success of its job (by slot or by end; not a DAG node's run), for a recurring
    # job (kind cron or every) not deleted: the staleness rule and the finding alerts read only
    # that one. (A one-off job leaves with its last run: nothing reads its success after.)
    latest_success_of_job: bool = False


@dataclass(frozen=True, slots=True)
class RetentionDecision:
    """`removable` when no reason keeps the run; `kept` every reason that does (the first is
    the one to show); `archive` whether removal archives it first; `expires_at` the instant its
    retention ends (None while it has not ended)."""

    removable: bool
    kept: tuple[Kept, ...]
    archive: bool
    expires_at: datetime | None

    @property
    def reason(self) -> Kept | None:
        return self.kept[0] if self.kept else None


DAG_RUN_FINAL = frozenset({"succeeded", "failed", "cancelled"})


def expires_at(facts: RunFacts, policy: RetentionPolicy) -> datetime | None:
    """When its retention ends: `keep` after it ended, for a dead letter after the later of its
    end and its triage (a letter triaged late still gets its full retention)."""
    if facts.ended_at is None:
        return None
    start = facts.ended_at
    if facts.triaged_at is not None and facts.triaged_at > start:
        start = facts.triaged_at
    return start + policy.keep


def removable(facts: RunFacts, policy: RetentionPolicy, now: datetime, *,
              checks_window: timedelta = DEFAULT_CHECKS_WINDOW) -> RetentionDecision:
    """Whether the run may leave the hot tables at `now`, and every reason it may not. At the
    instant its retention ends it may (`now >= expires_at`); a slot or a deadline exactly
    `checks_window` old is still inside the window (the checks read `>=`)."""
    kept: list[Kept] = []
    final = facts.state in FINAL and facts.ended_at is not None
    if not final:
        kept.append(Kept.NOT_FINAL)
    if facts.held:
        kept.append(Kept.HELD)
    if facts.dead_letter_triage == "new" or (facts.state == "dead_lettered"
                                              and facts.dead_letter_triage is None):
        kept.append(Kept.DEAD_LETTER_UNTRIAGED)
    if facts.children_not_final:
        kept.append(Kept.CHILD_NOT_FINAL)
    if facts.parent_state is not None and facts.parent_state not in FINAL:
        kept.append(Kept.PARENT_NOT_FINAL)
    if not facts.parent_notified:
        kept.append(Kept.PARENT_NOT_TOLD)
    if facts.dag_run_state is not None and facts.dag_run_state not in DAG_RUN_FINAL:
        kept.append(Kept.DAG_RUN_NOT_FINAL)
    expiry = expires_at(facts, policy) if final else None
    if expiry is None or now < expiry:
        if final:
            kept.append(Kept.INSIDE_RETENTION)
    horizon = now - checks_window
    if facts.checked_slot is not None and facts.checked_slot >= horizon:
        kept.append(Kept.SLOT_IN_CHECKS_WINDOW)
    if facts.deadline is not None and facts.deadline >= horizon:
        kept.append(Kept.DEADLINE_IN_CHECKS_WINDOW)
    if facts.latest_success_of_job:
        kept.append(Kept.LATEST_SUCCESS_OF_JOB)
    return RetentionDecision(removable=not kept, kept=tuple(kept), archive=policy.archive,
                             expires_at=expiry)


# -- DAG runs ---------------------------------------------------------------------------------


class DagRunKept(StrEnum):
    """Why a DAG run stays in the hot tables (its `dag_runs` row, nodes and stream), in the
    order `dag_run_removable` reports them. The shared names mean what they mean for a run."""

    NOT_FINAL = "not_final"  # pending or running: it still decides its next nodes
    # a run it made for a node (any generation) is still hot, for any reason (held, inside its
    # own retention, ...): the DAG run is what names it, so it leaves after its node runs
    NODE_RUN_IN_HOT_TABLES = "node_run_in_hot_tables"
    INSIDE_RETENTION = "inside_retention"  # ended less than keep_seconds ago
    SLOT_IN_CHECKS_WINDOW = "slot_in_checks_window"  # a DAG job's occurrence the checks read
    DEADLINE_IN_CHECKS_WINDOW = "deadline_in_checks_window"  # its completion deadline, read
    LATEST_SUCCESS_OF_JOB = "latest_success_of_job"  # a DAG job's staleness reads it


@dataclass(frozen=True, slots=True)
class DagRunFacts:
    """What the rules need to know about one DAG run (migration 0052's
    ostinato_dag_run_kept reads them). A DAG job's occurrence is its DAG run, so the slot,
    deadline and latest-success facts are a run's, read from `dag_runs`."""

    state: str  # dag_runs.state: pending | running | succeeded | failed | cancelled
    ended_at: datetime | None  # dag_runs.finished_at
    node_runs_hot: bool = False  # a run named by its DagNodeReady events is in `runs`
    # its slot of a recurring DAG job the reconciler checks (trigger not manual; the job's
    # kind cron or every, status active or paused): dag_runs.scheduled_for; None otherwise
    checked_slot: datetime | None = None
    deadline: datetime | None = None  # scheduled_for + the job's complete_within
    # the latest succeeded DAG run of its recurring job (by slot or by end), job not deleted
    latest_success_of_job: bool = False


@dataclass(frozen=True, slots=True)
class DagRunDecision:
    """`removable` when no reason keeps the DAG run; `kept` every reason that does."""

    removable: bool
    kept: tuple[DagRunKept, ...]
    archive: bool
    expires_at: datetime | None

    @property
    def reason(self) -> DagRunKept | None:
        return self.kept[0] if self.kept else None


def dag_run_removable(facts: DagRunFacts, policy: RetentionPolicy, now: datetime, *,
                      checks_window: timedelta = DEFAULT_CHECKS_WINDOW) -> DagRunDecision:
    """Whether the DAG run may leave the hot tables at `now`: its tenant's retention counts
    from its end as a run's does (at the instant `expires_at` it may go), and it leaves only
    after every run it made for its nodes has (a held node run keeps it), so the archive holds
    each node's run before the DAG run naming it. The same window rules as a run's keep a
    recurring DAG job's occurrences while the gap, ledger, deadline and staleness checks read
    them."""
    kept: list[DagRunKept] = []
    final = facts.state in DAG_RUN_FINAL and facts.ended_at is not None
    if not final:
        kept.append(DagRunKept.NOT_FINAL)
    if facts.node_runs_hot:
        kept.append(DagRunKept.NODE_RUN_IN_HOT_TABLES)
    expiry = facts.ended_at + policy.keep if final and facts.ended_at is not None else None
    if final and (expiry is None or now < expiry):
        kept.append(DagRunKept.INSIDE_RETENTION)
    horizon = now - checks_window
    if facts.checked_slot is not None and facts.checked_slot >= horizon:
        kept.append(DagRunKept.SLOT_IN_CHECKS_WINDOW)
    if facts.deadline is not None and facts.deadline >= horizon:
        kept.append(DagRunKept.DEADLINE_IN_CHECKS_WINDOW)
    if facts.latest_success_of_job:
        kept.append(DagRunKept.LATEST_SUCCESS_OF_JOB)
    return DagRunDecision(removable=not kept, kept=tuple(kept), archive=policy.archive,
                          expires_at=expiry)
