"""The end-of-scenario checks of the fault suite and bench/chaos.py, read from the database
(the run-event log and its read models) and the fault workers' `effects` table:

- every accepted job ran: each has a run and all its runs `succeeded`;
- no effect applied twice: one `effects` row per idempotency key and one per run (the table has
  no unique key, so a duplicate would show);
- every run is in a final state;
- each run's story is consistent: versions 1..n in seq order, it starts with `RunScheduled`,
  every event is a move the run lifecycle allows from the state before it
  (`ostinato.domain.lifecycle.RUN_EVENTS`, the table appending enforces; so a run is never
  claimed while another attempt holds it), every `RunStarted` carries a higher fencing token
  (its epoch) than the one before, and nothing but audit events follows `RunSucceeded`;
- no occurrence scheduled twice: one `RunScheduled` event per (job, scheduled_for) — counted in
  the log, since the `runs` table's unique key would hide a duplicate;
- recurring jobs: every expected slot has a run or a recorded skip, and shard epochs never go
  backwards in the RunScheduled events written under them.

Time is the database's (recorded times) or monotonic (waiting); nothing here reads the wall
clock.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import msgspec

from ostinato.domain.lifecycle import RUN_EVENTS, Move
from ostinato.domain.states import FINAL as FINAL_STATES
from ostinato.schedules import expected_slots, from_document
from ostinato.stores import jobs as job_store
from ostinato.stores.rows import many

__all__ = [
    "FINAL",
    "StoryEvent",
    "Verdict",
    "coverage",
    "occurrences_scheduled_twice",
    "shard_epoch_order",
    "stream_problem",
    "verify",
    "wait_settled",
]

FINAL = tuple(sorted(FINAL_STATES))
# The lifecycle by event name, as the log stores it.
_MOVES: Mapping[str, Move] = {kind.__name__: move for kind, move in RUN_EVENTS.items()}
# What may follow a run's success: a record of a refused write, nothing that changes it.
_AUDIT = frozenset({"StaleWriteRejected"})


class Queries(Protocol):
    """What the checks need of a database handle: `testing.database.Db` or an asyncpg pool."""

    async def fetch(self, sql: str, *args: Any) -> list[Any]: ...

    async def fetchval(self, sql: str, *args: Any) -> Any: ...


class StoryEvent(msgspec.Struct, frozen=True):
    """One event of a run's stream as the story check reads it from the log."""

    stream_id: uuid.UUID
    version: int
    seq: int
    type: str
    epoch: int | None
    token: str | None  # the fencing token a RunStarted carries (text, from the event's data)


# The rows the checks read (ad hoc queries over the log, `runs`, `jobs` and `effects`).
class _Run(msgspec.Struct, frozen=True):
    id: uuid.UUID
    job_id: uuid.UUID
    state: str


class _Effect(msgspec.Struct, frozen=True):
    idempotency_key: str
    run_id: uuid.UUID


class _Unsettled(msgspec.Struct, frozen=True):
    missing: int
    open: int


class _Twice(msgspec.Struct, frozen=True):
    job_id: str
    scheduled_for: str
    n: int


class _Planned(msgspec.Struct, frozen=True):
    schedule: dict[str, Any]
    next_slot: datetime | None


class _Slot(msgspec.Struct, frozen=True):
    scheduled_for: datetime


class _Epoch(msgspec.Struct, frozen=True):
    shard: int
    seq: int
    epoch: int


def stream_problem(events: Sequence[StoryEvent]) -> str | None:
    """What is wrong with one run's events, ordered by version; None when the story is
    consistent and ends in success."""
    if not events:
        return "no events"
    versions = [e.version for e in events]
    if versions != list(range(1, len(events) + 1)):
        return f"versions {versions} are not 1..{len(events)}"
    seqs = [e.seq for e in events]  # unique in the log: only their order can be wrong
    if seqs != sorted(seqs):
        return "seq order differs from version order"
    if events[0].type != "RunScheduled":
        return f"starts with {events[0].type}"
    state: Any = None  # a RunState (a str) once RunScheduled is read
    last_epoch = 0
    last_change = ""
    for e in events:
        kind = e.type
        move = _MOVES.get(kind)
        if move is None:
            return f"unexpected event {kind} at version {e.version}"
        if state not in move.after:
            return f"{kind} at version {e.version} after state {state}"
        if kind == "RunStarted":
            epoch = e.epoch
            if epoch is None or epoch <= last_epoch:
                return f"RunStarted epoch {epoch} not above the previous {last_epoch}"
            if e.token is not None and int(e.token) != epoch:
                return f"RunStarted epoch {epoch} differs from its fencing token {e.token}"
            last_epoch = epoch
        if move.to is not None:
            state = move.to
        if kind not in _AUDIT:
            last_change = kind
    if state != "succeeded" or last_change != "RunSucceeded":
        return f"ends in state {state} (last change {last_change})"
    return None


@dataclass
class Verdict:
    """What the end check found; `problems()` is empty when everything holds."""

    jobs: int = 0
    runs: int = 0
    succeeded: int = 0
    effects: int = 0
    jobs_without_run: list[str] = field(default_factory=list)
    jobs_not_succeeded: list[str] = field(default_factory=list)  # accepted, some run not done
    not_succeeded: dict[str, str] = field(default_factory=dict)  # run id -> state
    not_final: int = 0
    duplicate_effect_keys: list[str] = field(default_factory=list)
    duplicate_effect_runs: list[str] = field(default_factory=list)
    runs_without_effect: list[str] = field(default_factory=list)
    stream_errors: dict[str, str] = field(default_factory=dict)
    duplicate_claims: int = 0
    duplicate_occurrences: int = 0
    events: Counter[str] = field(default_factory=Counter)  # event type -> count (run streams)

    def problems(self) -> list[str]:
        found = []
        if self.jobs_without_run:
            found.append(f"{len(self.jobs_without_run)} accepted jobs have no run, e.g. "
                         f"{self.jobs_without_run[:3]}")
        if self.not_succeeded:
            sample = dict(list(self.not_succeeded.items())[:5])
            found.append(f"{len(self.not_succeeded)} runs did not succeed ({self.not_final} "
                         f"not final): {sample}")
        if self.duplicate_effect_keys or self.duplicate_effect_runs:
            found.append(f"effects applied twice: keys {self.duplicate_effect_keys[:5]}, "
                         f"runs {self.duplicate_effect_runs[:5]}")
        if self.runs_without_effect:
            found.append(f"{len(self.runs_without_effect)} succeeded runs have no effect, e.g. "
                         f"{self.runs_without_effect[:3]}")
        if self.stream_errors:
            sample = dict(list(self.stream_errors.items())[:5])
            found.append(f"{len(self.stream_errors)} inconsistent run streams: {sample}")
        if self.duplicate_claims:
            found.append(f"{self.duplicate_claims} claims of a run already running")
        if self.duplicate_occurrences:
            found.append(f"{self.duplicate_occurrences} occurrences scheduled twice")
        return found


async def wait_settled(db: Queries, job_ids: Sequence[str], within: float) -> tuple[int, int]:
    """Wait until every job in `job_ids` has a run and every run is final; returns
    (jobs without a run, runs not final) at the end (0, 0 when settled in time)."""
    deadline = time.monotonic() + within
    ids = [uuid.UUID(j) for j in job_ids]
    while True:
        [row] = many(_Unsettled, await db.fetch(
            "SELECT (SELECT count(*) FROM unnest($1::uuid[]) AS j(id) WHERE NOT EXISTS "
            "        (SELECT 1 FROM runs r WHERE r.job_id = j.id)) AS missing, "
            "       (SELECT count(*) FROM runs WHERE state <> ALL($2::text[])) AS open",
            ids, list(FINAL)))
        if (row.missing == 0 and row.open == 0) or time.monotonic() > deadline:
            return row.missing, row.open
        await asyncio.sleep(0.25)


async def verify(db: Queries, job_ids: Iterable[str] = ()) -> Verdict:
    """The end check over every run of the database (see the module docstring)."""
    v = Verdict()
    accepted = {uuid.UUID(j) for j in job_ids}
    v.jobs = len(accepted)
    runs = many(_Run, await db.fetch("SELECT id, job_id, state FROM runs"))
    v.runs = len(runs)
    with_run = {r.job_id for r in runs}
    v.jobs_without_run = sorted(str(j) for j in accepted - with_run)
    unfinished_jobs = set()
    for r in runs:
        if r.state == "succeeded":
            v.succeeded += 1
        else:
            v.not_succeeded[str(r.id)] = r.state
            unfinished_jobs.add(r.job_id)
            if r.state not in FINAL:
                v.not_final += 1
    v.jobs_not_succeeded = sorted(str(j) for j in (accepted & unfinished_jobs)
                                  | (accepted - with_run))
    effects = many(_Effect, await db.fetch(
        "SELECT idempotency_key, run_id FROM effects")) if await db.fetchval(
        "SELECT to_regclass('effects') IS NOT NULL") else []
    v.effects = len(effects)
    keys = Counter(e.idempotency_key for e in effects)
    per_run = Counter(e.run_id for e in effects)
    v.duplicate_effect_keys = sorted(k for k, n in keys.items() if n > 1)
    v.duplicate_effect_runs = sorted(str(k) for k, n in per_run.items() if n > 1)
    v.runs_without_effect = sorted(str(r.id) for r in runs
                                   if r.state == "succeeded" and r.id not in per_run)
    streams: dict[uuid.UUID, list[StoryEvent]] = defaultdict(list)
    for e in many(StoryEvent, await db.fetch(
            "SELECT stream_id, version, seq, type, epoch, data->>'fencing_token' AS token "
            "FROM events WHERE stream_type = 'run' ORDER BY stream_id, version", within=60)):
        streams[e.stream_id].append(e)
        v.events[e.type] += 1
    for r in runs:
        problem = stream_problem(streams.get(r.id, []))
        if problem is not None:
            v.stream_errors[str(r.id)] = problem
        state: str | None = None
        for e in streams.get(r.id, []):
            if e.type == "RunStarted" and state == "running":
                v.duplicate_claims += 1
            move = _MOVES.get(e.type)
            if move is not None and move.to is not None:
                state = move.to
    v.duplicate_occurrences = len(await occurrences_scheduled_twice(db))
    return v


async def occurrences_scheduled_twice(db: Queries, job_ids: Iterable[Any] | None = None
                                     ) -> list[tuple[str, str, int]]:
    """(job id, scheduled_for, RunScheduled events) of every occurrence scheduled more than
    once, of the jobs `job_ids` (default: all). Counted in the log, not in `runs`: the read
    model's unique (job_id, scheduled_for) would make a duplicate impossible to see there."""
    ids = None if job_ids is None else [str(j) for j in job_ids]
    rows = many(_Twice, await db.fetch(
        "SELECT data->>'job_id' AS job_id, data->>'scheduled_for' AS scheduled_for, "
        "       count(*) AS n FROM events "
        "WHERE type = 'RunScheduled' AND ($1::text[] IS NULL OR data->>'job_id' = ANY($1)) "
        "GROUP BY 1, 2 HAVING count(*) > 1 ORDER BY 1, 2", ids))
    return [(r.job_id, r.scheduled_for, r.n) for r in rows]


async def coverage(db: Queries, job_ids: Iterable[str], start: datetime
                   ) -> tuple[int, int, int, int]:
    """Recurring jobs: (slots expected from `start` to each job's next slot, slots with
    neither a run nor a recorded skip, slots scheduled more than once, slots skipped)."""
    expected_total = missing = duplicated = skipped = 0
    for job_id in job_ids:
        jid = uuid.UUID(job_id)
        [job] = many(_Planned, await db.fetch(
            "SELECT schedule, next_slot FROM jobs WHERE id = $1", jid))
        runs = {r.scheduled_for for r in many(_Slot, await db.fetch(
            "SELECT scheduled_for FROM runs WHERE job_id = $1", jid))}
        # The store's query, through `db` (a `Db` retries it while the server restarts).
        skips = [(r.first_slot, r.last_slot) for r in
                 await job_store.skips_between(db, jid, start, job.next_slot)]
        expected = expected_slots(from_document(job.schedule), start, job.next_slot)
        expected_total += len(expected)
        for slot in expected:
            if any(a <= slot <= b for a, b in skips):
                skipped += 1
            elif slot not in runs:
                missing += 1
        duplicated += len(await occurrences_scheduled_twice(db, [jid]))
    return expected_total, missing, duplicated, skipped


async def shard_epoch_order(db: Queries) -> tuple[int, dict[int, list[tuple[int, int]]]]:
    """Per shard, the RunScheduled events written under a shard epoch, in seq order; returns
    (events checked, shard -> [(seq, epoch) where the epoch went *down*])."""
    rows = many(_Epoch, await db.fetch(
        "SELECT j.shard, e.seq, e.epoch FROM events e "
        "JOIN jobs j ON j.id = (e.data->>'job_id')::uuid "
        "WHERE e.type = 'RunScheduled' AND e.epoch IS NOT NULL ORDER BY e.seq"))
    highest: dict[int, int] = {}
    backwards: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in rows:
        if r.epoch < highest.get(r.shard, 0):
            backwards[r.shard].append((r.seq, r.epoch))
        highest[r.shard] = max(highest.get(r.shard, 0), r.epoch)
    return len(rows), dict(backwards)
