"""Run-end notices: PostgreSQL NOTIFY on one channel, sent by the append that ends a run.

`EventStore.append` passes `notices(events)` to the append statement (eventlog.sql's
`append_events`), which calls `pg_notify(CHANNEL, ...)` for each in the same statement: a
notice is delivered when (and only if) the transaction commits, so a listener never hears of an
end that did not happen. One notice per append (comma-joined run ids, split below PostgreSQL's
8,000-byte payload limit), not one per run: a batch of completions is one notice, so the global
lock PostgreSQL takes to commit a notifying transaction is taken once per batch.

The api listens (services/api/results.py) to wake the long polls of `GET
/v1/runs/{id}/result`; and (services/api/news.py) those of `GET /v1/runs/{id}/state` and
`/updates/{id}`: an append that records a published value or an update's answer notifies its
run too (`wakes`).
A notice only wakes: the answer is read from the read models after it,
so a duplicate, a late or a lost notice (the listener reconnects, then re-checks every waiter)
costs a read, never a wrong answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from ostinato.domain import events as ev
from ostinato.domain import workflow as wf
from ostinato.eventlog.records import NewEvent

CHANNEL = "ostinato_run_ended"
# The events after which a run (or a DAG run) is final: states.FINAL, and a DAG run's end.
# RunMarkedFailed is followed by RunDeadLettered in the same append.
ENDING: frozenset[type[ev.Event]] = frozenset({
    ev.RunSucceeded, ev.RunDeadLettered, ev.RunCancelled, ev.RunMarkedSucceeded,
    ev.DagRunFinished,
})
PER_NOTICE = 200  # 200 ids of 36 characters and commas: 7,399 bytes, under the 8,000 limit


def wakes(e: NewEvent) -> bool:
    """Whether an appended event is news to the api's waiters on its run: the run's end, or a
    value the workflow published or an update's answer (`ctx.set`, `ctx.reply`: steps named
    `set:`/`reply:`, awaited by `GET /v1/runs/{id}/state` and `/updates/{id}`)."""
    event = e.event
    if type(event) in ENDING:
        return True
    return isinstance(event, ev.StepCompleted) and event.name.startswith(NEWS_PREFIXES)


NEWS_PREFIXES = (wf.STATE_PREFIX, wf.REPLY_PREFIX)


def notices(events: Sequence[NewEvent]) -> list[str]:
    """The payloads to notify for an append: the ids of the streams it ends (or publishes
    news on: `wakes`), deduplicated, at most PER_NOTICE a payload; [] (no NOTIFY at all) when
    it has none."""
    ids = list(dict.fromkeys(str(e.stream_id) for e in events if wakes(e)))
    return [",".join(ids[i:i + PER_NOTICE]) for i in range(0, len(ids), PER_NOTICE)]


def parse(payload: str) -> list[uuid.UUID]:
    """The run ids a notice names (a malformed part is skipped: a notice only wakes)."""
    out: list[uuid.UUID] = []
    for part in payload.split(","):
        try:
            out.append(uuid.UUID(part))
        except ValueError:
            continue
    return out
