"""What the scheduler's five polls would find, asked in one read.

Each poll (due jobs, due retries, due wake-ups, parents to tell, DAG runs to advance) starts by
asking its store whether it has anything to do: one descent of a partial index, no transaction.
Asked one by one that was five statements every 50 ms on an idle cluster, 0.02 cores of the
scheduler alone (bench/README.md, eighth pass). `WorkGate.read` asks the five questions in one
statement, composed from the stores' own queries, so each question keeps its one home (and its
comment saying why it is written that way).

The due poll reads afresh at every tick (its pace is the start lag) and wakes the duties whose
work it found; their own ticks in between use that answer while it is younger than a poll
interval, so an idle tick of theirs sends nothing. Work that turns up between two reads waits
for the next due poll, at most a poll interval, as it waited for its own poll before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import asyncpg

from ostinato.clock import Clock
from ostinato.stores import dags, jobs, runs

# (answer's column, the store query it runs): each query is one `SELECT` of one boolean.
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("jobs", jobs.Q["any_due_jobs"]),
    ("retries", runs.Q["any_retry_due"]),
    ("wakeups", runs.Q["any_wakeup_due"]),
    ("children", runs.Q["any_finished_child"]),
    ("dags", dags.Q["any_dag_work"]),
)
KINDS = tuple(kind for kind, _ in QUESTIONS)
# The duty (`services.scheduler.tick.duties`, by name) that handles each kind but the due jobs:
# the due poll is the one that reads, so it is never woken.
DUTY_OF = {"retries": "release_retries", "wakeups": "wake_suspended",
           "children": "notify_parents", "dags": "advance_dags"}


def _bare(sql: str) -> str:
    """A store query without its comment lines or final semicolon, to nest as a subquery."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).rstrip().removesuffix(";")


# Each store query as a scalar subquery ($1 is the scheduler's `now` in every one that asks).
READ = "SELECT " + ",\n       ".join(f"({_bare(sql)}) AS {kind}" for kind, sql in QUESTIONS)


@dataclass
class WorkGate:
    """The last answer, when it was read (monotonic seconds), and the duties to wake for the
    work it found (`wake_with`: the scheduler's duty runners, by duty name)."""

    clock: Clock
    max_age: float  # seconds an answer stands for the duties that did not read it
    _answer: dict[str, bool] = field(default_factory=dict)
    _read_at: float = float("-inf")
    _wakes: dict[str, Callable[[], None]] = field(default_factory=dict)

    def wake_with(self, wakes: Mapping[str, Callable[[], None]]) -> None:
        """Wake these (duty name → wake) when a read finds their work."""
        self._wakes = {kind: wakes[duty] for kind, duty in DUTY_OF.items() if duty in wakes}

    async def read(self, pool: asyncpg.Pool) -> dict[str, bool]:
        """Ask all five now; wake the duties whose work was found."""
        async with pool.acquire() as conn:
            row = await conn.fetchrow(READ, self.clock.now())
        assert row is not None  # a SELECT without FROM: always one row
        self._answer = {kind: bool(row[kind]) for kind in KINDS}
        self._read_at = self.clock.monotonic()
        for kind, wake in self._wakes.items():
            if self._answer[kind]:
                wake()
        return dict(self._answer)

    async def has(self, pool: asyncpg.Pool, kind: str) -> bool:
        """Whether `kind` has work: by the last answer while it is younger than `max_age`,
        else by a new read."""
        if self.clock.monotonic() - self._read_at >= self.max_age:
            await self.read(pool)
        return self._answer[kind]

    def done(self, kind: str) -> None:
        """`kind`'s duty handled less than a batch: nothing of it is left until the next read
        says so (a tick right after sends nothing)."""
        self._answer[kind] = False
