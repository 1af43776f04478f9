"""The event log in words: one sentence for every event of the catalogue ("started on worker
`w-17`, token 4", "step `charge` succeeded in 412 ms", "attempt 2 failed: ValueError: ...").

The UI's run page shows these instead of raw JSON (docs/UI.md), and any reader of the log (the
CLI reads events through the client) may tell them the same way: pure, in the domain, so every
floor can. A sentence is a tuple of `Part`s, never markup: values (names, messages, reasons)
stay apart from the words around them, and the page's template escapes each one; a `code` part
is a name (a step, a signal, a worker), a `time` part an instant, a `run`/`job`/`dag_run` part
an id the page links. `str(sentence)` is the plain text.

`Narrator.tell` folds the stream as it goes (the failures counted so far, whether the last claim
ended in a suspension), so an attempt is numbered as the retry policy counts it, not by claims
(docs/FAILURES.md "Attempts and executions"). Every catalogue type has its sentence in
`SENTENCES` (a unit test holds it so); an event of a type this release does not know, or one a
sentence cannot be made of, gets an honest generic one: telling never raises."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ostinato.domain import events as ev


@dataclass(frozen=True, slots=True)
class Part:
    """A piece of a sentence: words (`text`), or a value shown as one (`code`: a name; `time`:
    the instant `at`; `run`, `job`, `dag_run`: the id `ref`, linked by the page)."""

    text: str
    kind: str = "text"  # text | code | time | run | job | dag_run
    at: datetime | None = None
    ref: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Sentence:
    """What one event says. `tone`: the row's icon (ok, bad, wait, busy, operator, info)."""

    parts: tuple[Part, ...]
    tone: str = "info"
    known: bool = True  # False: the generic sentence (a type this release cannot tell)

    def __str__(self) -> str:
        return "".join(f"`{p.text}`" if p.kind == "code" else p.text for p in self.parts)


TONES = ("ok", "bad", "wait", "busy", "operator", "info")


def duration_words(seconds: float | None) -> str:
    """A duration as one reads it: "412 ms", "3.2 s", "4 min 3 s", "2 h 5 min", "3 d 4 h"."""
    if seconds is None or not math.isfinite(seconds):
        return "an unknown time"
    if seconds < 0:
        seconds = 0.0
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    whole = round(seconds)
    for unit, name, sub, sub_name in ((86400, "d", 3600, "h"), (3600, "h", 60, "min"),
                                      (60, "min", 1, "s")):
        if whole >= unit:
            big, rest = divmod(whole, unit)
            small = rest // sub
            return f"{big} {name} {small} {sub_name}" if small else f"{big} {name}"
    return f"{whole} s"  # pragma: no cover - every whole >= 60 matched above


def time_words(at: datetime, day_of: datetime | None = None) -> str:
    """An instant in UTC: its time of day alone when it falls on `day_of`'s UTC day (the event's
    own), else with its date."""
    utc = at.astimezone(UTC)
    if day_of is not None and day_of.astimezone(UTC).date() == utc.date():
        return utc.strftime("%H:%M:%S UTC")
    return utc.strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(slots=True)
class _Say:
    """The parts of one sentence as it is built (times relative to the event's day)."""

    day: datetime | None
    parts: list[Part] = field(default_factory=list)

    def __call__(self, *items: Any) -> _Say:
        for item in items:
            if isinstance(item, Part):
                self.parts.append(item)
            elif item is not None and item != "":
                self.parts.append(Part(str(item)))
        return self

    def code(self, value: Any) -> Part:
        return Part(str(value), "code")

    def when(self, at: datetime | None) -> Part:
        if at is None:
            return Part("an unknown time")
        return Part(time_words(at, self.day), "time", at=at)

    def run(self, run_id: uuid.UUID) -> Part:
        return Part(str(run_id), "run", ref=run_id)

    def job(self, job_id: uuid.UUID) -> Part:
        return Part(str(job_id), "job", ref=job_id)

    def dag_run(self, dag_run_id: uuid.UUID) -> Part:
        return Part(str(dag_run_id), "dag_run", ref=dag_run_id)


@dataclass(slots=True)
class Narrator:
    """Tells a stream's events in order (a new one per stream): the fold it keeps numbers the
    attempts as the retry policy counts them and tells a workflow's wake-up claim as a
    resumption."""

    failures: int = 0  # counted against max_attempts so far (RetryScheduled.failures)
    suspended: bool = False  # the last claim ended in a suspension: the next start resumes
    failed: bool = False  # the last claim failed: the next start is a new attempt
    started_at: datetime | None = None  # the open claim's start (a success's duration)

    def tell(self, event: ev.Event, occurred_at: datetime | None = None,
             actor: str = "") -> Sentence:
        """The event's sentence; never raises (a type without one, or a sentence that cannot
        be made of this event's values, is told generically)."""
        telling = SENTENCES.get(type(event))
        if telling is not None:
            try:
                say = _Say(occurred_at)
                tone = telling(say, event, _Context(self, occurred_at, actor))
                return Sentence(tuple(say.parts), tone)
            except Exception:  # a sentence is never worth a failed page: the data is shown
                pass
        return generic(event)


def generic(event: ev.Event) -> Sentence:
    """The honest fallback: the event's type, and that its data says the rest."""
    name = ev.event_type(event)
    if ev.is_unknown(event):
        return Sentence((Part("an event of a type this release does not know: "),
                         Part(name, "code"), Part(" (see its data)")), "info", known=False)
    return Sentence((Part(name, "code"), Part(" recorded (see its data)")), "info",
                    known=False)


def tell_all(items: Iterable[tuple[ev.Event, datetime | None, str]]) -> list[Sentence]:
    """Each (event, occurred_at, actor) of one stream, in order, told."""
    narrator = Narrator()
    return [narrator.tell(e, at, actor) for e, at, actor in items]


@dataclass(frozen=True, slots=True)
class _Context:
    narrator: Narrator
    at: datetime | None
    actor: str

    def who(self, by: str | None) -> str:
        return by or self.actor or "someone"


Telling = Callable[[_Say, Any, _Context], str]
SENTENCES: dict[type[ev.Event], Telling] = {}


def _tells(kind: type[ev.Event]) -> Callable[[Telling], Telling]:
    def register(fn: Telling) -> Telling:
        SENTENCES[kind] = fn
        return fn
    return register


def _n(count: int, word: str) -> str:
    """`1 date`, `3 dates`."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _reason(say: _Say, reason: str | None, sep: str = ": ") -> None:
    if reason:
        say(sep, reason)


def _error(say: _Say, error_type: str | None, message: str | None) -> None:
    if error_type:
        say(": ", say.code(error_type))
    if message:
        say(": ", message)


# -- tenant streams ----------------------------------------------------------------------------


@_tells(ev.TenantCreated)
def _tenant_created(say: _Say, e: ev.TenantCreated, c: _Context) -> str:
    say("tenant ", say.code(e.name), f" created, weight {e.weight}")
    return "ok"


@_tells(ev.ApiKeyIssued)
def _key_issued(say: _Say, e: ev.ApiKeyIssued, c: _Context) -> str:
    say("API key ", say.code(e.name) if e.name else None, " " if e.name else "",
        f"issued with role {e.role}")
    if e.pools:
        say(", for pools ", ", ".join(e.pools))
    if e.rotated_from:
        say(", replacing key ", say.code(e.rotated_from))
    return "operator"


@_tells(ev.ApiKeyRevoked)
def _key_revoked(say: _Say, e: ev.ApiKeyRevoked, c: _Context) -> str:
    say("API key ", say.code(e.key_id), " revoked, effective ", say.when(e.effective_at))
    _reason(say, e.reason)
    return "operator"


def _limit_words(e: ev.LimitSet) -> str:
    words = []
    if e.max_concurrency is not None:
        words.append(f"at most {e.max_concurrency} at a time")
    if e.rate_per_second is not None:
        words.append(f"{e.rate_per_second:g} starts a second"
                     + (f" (burst {e.burst:g})" if e.burst is not None else ""))
    if e.weight is not None:
        words.append(f"weight {e.weight:g}")
    return ", ".join(words) or "no limit"


@_tells(ev.LimitSet)
def _limit_set(say: _Say, e: ev.LimitSet, c: _Context) -> str:
    if e.scope == "tenant":
        say("the tenant's limits set: ", _limit_words(e))
    else:
        say(f"limit of {e.scope} ", say.code(e.name), " set: ", _limit_words(e))
    return "operator"


@_tells(ev.RetentionSet)
def _retention_set(say: _Say, e: ev.RetentionSet, c: _Context) -> str:
    say(f"retention set by {c.who(e.by)}: finished runs kept {duration_words(e.keep_seconds)}, ",
        "archived first" if e.archive else "then removed without an archive")
    _reason(say, e.reason)
    return "operator"


# -- job streams -------------------------------------------------------------------------------


def _next(say: _Say, next_run_at: datetime | None) -> None:
    if next_run_at is not None:
        say("; next run ", say.when(next_run_at))
    else:
        say("; no next run")


@_tells(ev.JobCreated)
def _job_created(say: _Say, e: ev.JobCreated, c: _Context) -> str:
    say("job ", say.code(e.name), " created by ", c.who(None), ": task ", say.code(e.task),
        f" in pool {e.pool}, class {e.priority}")
    _next(say, e.next_run_at)
    return "ok"


@_tells(ev.OccurrenceFired)
def _occurrence_fired(say: _Say, e: ev.OccurrenceFired, c: _Context) -> str:
    say("the slot of ", say.when(e.scheduled_for), " fired: run ", say.run(e.run_id))
    _next(say, e.next_run_at)
    return "busy"


@_tells(ev.OccurrencesSkipped)
def _skipped(say: _Say, e: ev.OccurrencesSkipped, c: _Context) -> str:
    if e.slots == 1 or e.first == e.last:
        say("the slot of ", say.when(e.first), " skipped")
    else:
        count = f"{e.slots} slots" if e.slots is not None else "the slots"
        say(f"{count} from ", say.when(e.first), " to ", say.when(e.last), " skipped")
    _reason(say, e.reason, " (")
    if e.reason:
        say(")")
    _next(say, e.next_run_at)
    return "wait"


@_tells(ev.OccurrenceMissed)
def _missed(say: _Say, e: ev.OccurrenceMissed, c: _Context) -> str:
    say("the slot of ", say.when(e.scheduled_for), f" was missed (found by {e.detected_by}); "
        f"repair: {e.repair}")
    return "bad"


@_tells(ev.LedgerSlotMissing)
def _ledger_missing(say: _Say, e: ev.LedgerSlotMissing, c: _Context) -> str:
    say("the ledger found the slot of ", say.when(e.scheduled_for),
        " past due with neither a run nor a recorded skip")
    return "bad"


@_tells(ev.LedgerSlotResolved)
def _ledger_resolved(say: _Say, e: ev.LedgerSlotResolved, c: _Context) -> str:
    say("the slot of ", say.when(e.scheduled_for), " the ledger found missing is now ",
        e.outcome)
    if e.run_id is not None:
        say(": run ", say.run(e.run_id))
    return "ok"


@_tells(ev.LedgerDisagreement)
def _ledger_disagrees(say: _Say, e: ev.LedgerDisagreement, c: _Context) -> str:
    say("the two cron implementations disagree on the slot of ", say.when(e.scheduled_for),
        f": only the {e.expected_by} expects it")
    return "bad"


@_tells(ev.LedgerScheduleUnreadable)
def _ledger_unreadable(say: _Say, e: ev.LedgerScheduleUnreadable, c: _Context) -> str:
    say("the ledger cannot read the schedule, so its slots go unaudited: ", e.error)
    return "bad"


@_tells(ev.CompletionOverdue)
def _overdue(say: _Say, e: ev.CompletionOverdue, c: _Context) -> str:
    if e.kind == "max_staleness":
        say("no success since ", say.when(e.last_success_at) if e.last_success_at
            else "its creation", ": staler than allowed at ", say.when(e.deadline))
        return "bad"
    say("the run of ", say.when(e.scheduled_for) if e.scheduled_for else "a slot",
        " had not succeeded by its deadline ", say.when(e.deadline))
    if e.state:
        say(f" (it was {e.state})")
    if e.run_id is not None:
        say(": run ", say.run(e.run_id))
    elif e.dag_run_id is not None:
        say(": DAG run ", say.dag_run(e.dag_run_id))
    return "bad"


@_tells(ev.JobPaused)
def _job_paused(say: _Say, e: ev.JobPaused, c: _Context) -> str:
    say("paused automatically" if e.auto else f"paused by {c.who(None)}")
    _reason(say, e.reason)
    return "operator"


@_tells(ev.JobResumed)
def _job_resumed(say: _Say, e: ev.JobResumed, c: _Context) -> str:
    say(f"resumed by {c.who(None)}")
    say(f"; the slots missed while paused: {e.misfire}" if e.misfire
        else "; the slots missed while paused follow the schedule's misfire policy")
    return "operator"


@_tells(ev.JobUpdated)
def _job_updated(say: _Say, e: ev.JobUpdated, c: _Context) -> str:
    say(f"edited by {c.who(None)} (version {e.definition_version}): ",
        ", ".join(e.changed) or "nothing", " changed")
    _reason(say, e.reason, "; why: ")
    if e.runs_amended:
        say(f"; {e.runs_amended} runs not yet dispatched take the new settings")
    return "operator"


@_tells(ev.BackfillRequested)
def _backfill(say: _Say, e: ev.BackfillRequested, c: _Context) -> str:
    say(f"backfill by {c.who(None)} from ", say.when(e.start), " to ", say.when(e.end),
        f": {e.runs_created} runs created, {e.slots_with_runs} slots already had one, "
        f"{e.slots_skipped} skipped")
    return "operator"


@_tells(ev.JobDeleted)
def _job_deleted(say: _Say, e: ev.JobDeleted, c: _Context) -> str:
    say(f"deleted by {c.who(None)}")
    _reason(say, e.reason)
    return "operator"


@_tells(ev.CalendarDefined)
def _calendar(say: _Say, e: ev.CalendarDefined, c: _Context) -> str:
    say("calendar ", say.code(e.name), f" defined: {_n(len(e.dates), 'date')} excluded")
    return "operator"


@_tells(ev.PoolPaused)
def _pool_paused(say: _Say, e: ev.PoolPaused, c: _Context) -> str:
    say("pool ", say.code(e.pool), " paused ",
        "for every tenant" if e.scope_tenant_id is None else "for this tenant's queue",
        f" by {c.who(None)}")
    _reason(say, e.reason)
    return "operator"


@_tells(ev.PoolResumed)
def _pool_resumed(say: _Say, e: ev.PoolResumed, c: _Context) -> str:
    say("pool ", say.code(e.pool), " resumed ",
        "for every tenant" if e.scope_tenant_id is None else "for this tenant's queue",
        f" by {c.who(None)}")
    return "operator"


# -- run streams -------------------------------------------------------------------------------


_TRIGGERS = {"schedule": "by its schedule", "manual": "by a trigger now",
             "backfill": "by a backfill", "repair": "by the reconciler's repair",
             "api": "through the API", "at": "at its time"}


@_tells(ev.RunScheduled)
def _run_scheduled(say: _Say, e: ev.RunScheduled, c: _Context) -> str:
    say("created for ", say.when(e.scheduled_for), " ")
    if e.trigger == "replay" and e.replay_of is not None:
        say("as a replay of run ", say.run(e.replay_of))
    elif e.trigger == "retry" and e.replay_of is not None:
        say("as a re-run of run ", say.run(e.replay_of))
    elif e.parent_run_id is not None and e.fan_out_index is not None:
        say(f"as chunk {e.fan_out_index} of run ", say.run(e.parent_run_id))
    elif e.parent_run_id is not None:
        say("as a child of run ", say.run(e.parent_run_id))
    elif e.dag_run_id is not None:
        say("as node ", say.code(e.dag_node or "?"), " of DAG run ", say.dag_run(e.dag_run_id))
    else:
        say(_TRIGGERS.get(e.trigger, f"(trigger {e.trigger})"))
    say(": task ", say.code(e.task), f" in pool {e.pool}, class {e.priority}")
    if e.due_at is not None and e.due_at != e.scheduled_for:
        say(", due ", say.when(e.due_at))
    return "info"


@_tells(ev.RunAmended)
def _run_amended(say: _Say, e: ev.RunAmended, c: _Context) -> str:
    say(f"takes the settings of its job's version {e.definition_version}: pool {e.pool}, "
        f"class {e.priority}")
    return "operator"


@_tells(ev.RunQueued)
def _queued(say: _Say, e: ev.RunQueued, c: _Context) -> str:
    say("queued in pool ", say.code(e.pool))
    if e.reason and e.reason != "dispatched":
        say(f" ({e.reason})")
    return "busy"


@_tells(ev.RunStarted)
def _started(say: _Say, e: ev.RunStarted, c: _Context) -> str:
    n = c.narrator
    if n.suspended:
        say("resumed on worker ")
    elif n.failed:
        say(f"attempt {n.failures + 1} started on worker ")
    else:
        say("started on worker ")
    say(say.code(e.worker_id), f", token {e.fencing_token}")
    if e.task_version:
        say(", handler version ", say.code(e.task_version), " (pinned)" if e.pinned else "")
    n.suspended = n.failed = False
    n.started_at = c.at
    return "busy"


def _claim_ended(c: _Context) -> float | None:
    """Seconds since the open claim started (None: unknown); the claim is closed."""
    n = c.narrator
    took = None
    if n.started_at is not None and c.at is not None:
        took = (c.at - n.started_at).total_seconds()
    n.started_at = None
    return took


@_tells(ev.RunSucceeded)
def _succeeded(say: _Say, e: ev.RunSucceeded, c: _Context) -> str:
    took = _claim_ended(c)
    say("succeeded", f" in {duration_words(took)}" if took is not None else "")
    if e.output_bytes:
        say(f", output {e.output_bytes} bytes")
    return "ok"


def _attempt_failed(say: _Say, c: _Context, execution: int) -> None:
    n = c.narrator
    _claim_ended(c)
    n.failed = True
    say(f"attempt {n.failures + 1} (execution {execution}) ")


@_tells(ev.RunFailed)
def _failed(say: _Say, e: ev.RunFailed, c: _Context) -> str:
    _attempt_failed(say, c, e.attempt)
    say("failed")
    _error(say, e.error_type, e.message)
    if not e.retryable:
        say(" (permanent: no retry)")
    return "bad"


@_tells(ev.AttemptTimedOut)
def _timed_out(say: _Say, e: ev.AttemptTimedOut, c: _Context) -> str:
    _attempt_failed(say, c, e.attempt)
    say(f"timed out after {duration_words(e.timeout_seconds)} (found by {e.detected_by})")
    return "bad"


@_tells(ev.LeaseExpired)
def _lease_expired(say: _Say, e: ev.LeaseExpired, c: _Context) -> str:
    _attempt_failed(say, c, e.attempt)
    say("lost its worker ", say.code(e.worker_id), ": ")
    say("it missed its heartbeats and was taken back" if e.cause == "missed_heartbeats"
        else "its lease expired", f", token {e.fencing_token} revoked")
    return "bad"


@_tells(ev.LeaseReleased)
def _released(say: _Say, e: ev.LeaseReleased, c: _Context) -> str:
    _claim_ended(c)
    say("worker ", say.code(e.worker_id), " gave the run back unfinished (shutting down); "
        "no attempt used")
    return "wait"


_RETRY_REASONS = {"retryable": "a retryable failure", "throttled": "throttled",
                  "lease_expired": "its lease expired", "timed_out": "it timed out",
                  "released": "its worker gave it back"}


@_tells(ev.RetryScheduled)
def _retry_scheduled(say: _Say, e: ev.RetryScheduled, c: _Context) -> str:
    c.narrator.failures = e.failures
    say("retry scheduled for ", say.when(e.retry_at),
        f" after {_RETRY_REASONS.get(e.reason, e.reason)}")
    say(f" ({_n(e.failures, 'failure')} counted)" if e.counts else " (not counted as a failure)")
    return "wait"


@_tells(ev.RetryDue)
def _retry_due(say: _Say, e: ev.RetryDue, c: _Context) -> str:
    say("retry due: handed to the dispatcher in pool ", say.code(e.pool))
    return "busy"


@_tells(ev.RunRepublished)
def _republished(say: _Say, e: ev.RunRepublished, c: _Context) -> str:
    say("handed to the dispatcher again by the reconciler")
    _reason(say, e.reason)
    return "wait"


@_tells(ev.RunDeadLettered)
def _dead_lettered(say: _Say, e: ev.RunDeadLettered, c: _Context) -> str:
    _claim_ended(c)
    say(f"dead-lettered after {_n(e.attempts, 'attempt')} ({e.reason})")
    _error(say, e.error_type, e.message)
    return "bad"


@_tells(ev.CancelRequested)
def _cancel_requested(say: _Say, e: ev.CancelRequested, c: _Context) -> str:
    say(f"cancel requested by {c.who(e.by)}")
    return "operator"


@_tells(ev.RunCancelled)
def _cancelled(say: _Say, e: ev.RunCancelled, c: _Context) -> str:
    _claim_ended(c)
    if e.reason == "queue_wait_expired":
        say("cancelled: not started within its queue wait")
    else:
        say(f"cancelled by {c.who(e.by)}")
        if e.reason != "requested":
            _reason(say, e.reason)
    if e.output_ref is not None:
        say("; a result that came after is kept, unused")
    return "operator"


@_tells(ev.QueueWaitExpired)
def _queue_wait(say: _Say, e: ev.QueueWaitExpired, c: _Context) -> str:
    say("not started by its queue-wait deadline ", say.when(e.deadline))
    return "bad"


@_tells(ev.DeadLetterTriaged)
def _triaged(say: _Say, e: ev.DeadLetterTriaged, c: _Context) -> str:
    say(f"dead letter triaged as {e.state} by {c.who(e.by)}")
    _reason(say, e.comment)
    return "operator"


@_tells(ev.DeadLetterReplayed)
def _replayed(say: _Say, e: ev.DeadLetterReplayed, c: _Context) -> str:
    say(f"replayed by {c.who(e.by)} as run ", say.run(e.new_run_id),
        " with an edited payload" if e.payload_changed else " with the same payload")
    return "operator"


@_tells(ev.StaleWriteRejected)
def _stale(say: _Say, e: ev.StaleWriteRejected, c: _Context) -> str:
    say(f"a stale {e.operation} from worker ", say.code(e.worker_id),
        f" refused: it held token {e.presented_token}, token {e.current_token} is current")
    return "bad"


def _tries(tries: int) -> str:
    return f" after {tries} tries" if tries > 1 else ""


@_tells(ev.StepCompleted)
def _step_completed(say: _Say, e: ev.StepCompleted, c: _Context) -> str:
    say("step ", say.code(e.name), f" succeeded in {duration_words(e.duration_ms / 1000)}",
        _tries(e.tries), f" (position {e.seq})")
    if e.compensable:
        say(", with a compensation")
    return "ok"


@_tells(ev.StepFailed)
def _step_failed(say: _Say, e: ev.StepFailed, c: _Context) -> str:
    say("step ", say.code(e.name), f" failed{_tries(e.tries)} (position {e.seq})")
    _error(say, e.error_type, e.message)
    return "bad"


@_tells(ev.AttributesUpserted)
def _attributes(say: _Say, e: ev.AttributesUpserted, c: _Context) -> str:
    say("search attributes set: ", ", ".join(sorted(e.attributes)) or "none")
    return "info"


@_tells(ev.RunSuspended)
def _suspended(say: _Say, e: ev.RunSuspended, c: _Context) -> str:
    _claim_ended(c)
    c.narrator.suspended = True
    if e.reason == "timer":
        say("sleeping until ", say.when(e.wake_at), " (", say.code(e.name), ")")
    elif e.reason == "signal":
        say("waiting for signal ", say.code(e.signal or e.name))
        if e.wake_at is not None:
            say(" until ", say.when(e.wake_at), " at the latest")
    elif e.reason == "child":
        say("waiting for child run ")
        say(say.run(e.child_run_id) if e.child_run_id is not None else say.code(e.name))
    elif e.reason == "fan_out":
        say("waiting for the chunk runs of ", say.code(e.name))
    elif e.reason == "paused":
        say("suspended at ", say.code(e.name), ": paused")
    else:
        say(f"suspended ({e.reason}) at ", say.code(e.name))
    say(f"; no worker held (position {e.seq})")
    return "wait"


_WOKEN = {"timer": "its timer is due", "signal": "the signal it waited for came",
          "signal_timeout": "its signal wait timed out",
          "deadline": "the workflow's deadline passed", "child": "its child run ended",
          "fan_out": "its fan-out's chunk runs ended", "cancel": "to be cancelled",
          "resumed": "resumed after a pause", "intervention": "an operator's intervention"}


@_tells(ev.RunWoken)
def _woken(say: _Say, e: ev.RunWoken, c: _Context) -> str:
    say("woken: ", _WOKEN.get(e.cause, e.cause), "; scheduled again")
    return "busy"


@_tells(ev.TimerFired)
def _timer(say: _Say, e: ev.TimerFired, c: _Context) -> str:
    say("slept until ", say.when(e.due_at), " (", say.code(e.name), f", position {e.seq})")
    return "ok"


@_tells(ev.SignalReceived)
def _signal_received(say: _Say, e: ev.SignalReceived, c: _Context) -> str:
    say("signal ", say.code(e.name), f" received from {c.who(e.by)}")
    _reason(say, e.reason)
    return "info"


@_tells(ev.SignalDelivered)
def _signal_delivered(say: _Say, e: ev.SignalDelivered, c: _Context) -> str:
    say("signal delivered to the wait ", say.code(e.name), f" (position {e.seq})")
    return "ok"


@_tells(ev.SignalTimedOut)
def _signal_timed_out(say: _Say, e: ev.SignalTimedOut, c: _Context) -> str:
    say("no signal came for ", say.code(e.name), " by ", say.when(e.deadline),
        f": the wait (position {e.seq}) timed out")
    return "bad"


@_tells(ev.ChildStarted)
def _child_started(say: _Say, e: ev.ChildStarted, c: _Context) -> str:
    say("child run ", say.run(e.child_run_id), " started: task ", say.code(e.task),
        ", awaited" if e.awaited else ", not awaited", f" (position {e.seq})")
    return "busy"


@_tells(ev.ChildFinished)
def _child_finished(say: _Say, e: ev.ChildFinished, c: _Context) -> str:
    say("child run ", say.run(e.child_run_id), f" {e.state}")
    _error(say, e.error_type, e.message)
    return "ok" if e.state == "succeeded" else "bad"


@_tells(ev.ParentNotified)
def _parent_notified(say: _Say, e: ev.ParentNotified, c: _Context) -> str:
    say("parent run ", say.run(e.parent_run_id), " told of this end",
        " and woken" if e.woke else " (it did not wait for it)")
    return "info"


@_tells(ev.FanOutStarted)
def _fan_out_started(say: _Say, e: ev.FanOutStarted, c: _Context) -> str:
    say("fan-out ", say.code(e.name), f" split into {e.total} chunks of task ", say.code(e.task),
        f", at most {e.max_concurrency} at a time ({e.admitted} started)")
    return "busy"


@_tells(ev.FanOutProgressed)
def _fan_out_progress(say: _Say, e: ev.FanOutProgressed, c: _Context) -> str:
    say(f"fan-out at position {e.seq}: {e.succeeded} more chunks succeeded, {e.failed} failed; "
        f"{e.admitted} started so far")
    return "bad" if e.failed else "busy"


@_tells(ev.FanOutCompleted)
def _fan_out_completed(say: _Say, e: ev.FanOutCompleted, c: _Context) -> str:
    say("fan-out ", say.code(e.name), f" {e.outcome}: {e.succeeded} of {e.total} chunks "
        f"succeeded, {e.failed} failed")
    _error(say, e.error_type, e.message)
    if e.completion_run_id is not None:
        say("; completion run ", say.run(e.completion_run_id))
    return "ok" if e.outcome == "succeeded" else "bad"


@_tells(ev.RunPaused)
def _run_paused(say: _Say, e: ev.RunPaused, c: _Context) -> str:
    say(f"paused by {c.who(e.by)}")
    _reason(say, e.reason)
    if e.frozen_wake_in is not None:
        say(f" (its timer had {duration_words(e.frozen_wake_in)} left)")
    return "operator"


@_tells(ev.RunResumed)
def _run_resumed(say: _Say, e: ev.RunResumed, c: _Context) -> str:
    say(f"resumed by {c.who(e.by)}")
    _reason(say, e.reason)
    if e.wake_at is not None:
        say("; its timer is due ", say.when(e.wake_at))
    return "operator"


@_tells(ev.RunStuck)
def _stuck(say: _Say, e: ev.RunStuck, c: _Context) -> str:
    say(f"stuck ({e.reason.replace('_', ' ')}) since ", say.when(e.since))
    _reason(say, e.detail)
    return "bad"


def _set_aside(n: int) -> str:
    return f" ({_n(n, 'record')} set aside)" if n else ""


@_tells(ev.StepRetried)
def _step_retried(say: _Say, e: ev.StepRetried, c: _Context) -> str:
    say("step ", say.code(e.name) if e.name else None, " " if e.name else "",
        f"at position {e.seq} retried by {c.who(e.by)}")
    _reason(say, e.reason)
    say(_set_aside(e.set_aside))
    return "operator"


@_tells(ev.StepSkipped)
def _step_skipped(say: _Say, e: ev.StepSkipped, c: _Context) -> str:
    say("step ", say.code(e.name), f" at position {e.seq} skipped by {c.who(e.by)} with an "
        "output supplied")
    _reason(say, e.reason)
    say(_set_aside(e.set_aside))
    return "operator"


@_tells(ev.RunRestarted)
def _restarted(say: _Say, e: ev.RunRestarted, c: _Context) -> str:
    say(f"restarted from position {e.from_seq} by {c.who(e.by)}")
    _reason(say, e.reason)
    say(_set_aside(e.set_aside))
    return "operator"


@_tells(ev.RunReopened)
def _reopened(say: _Say, e: ev.RunReopened, c: _Context) -> str:
    c.narrator.failures = 0
    c.narrator.failed = False
    say(f"reopened by {c.who(e.by)} ({e.cause.replace('_', ' ')}) with a fresh retry budget")
    _reason(say, e.reason)
    return "operator"


@_tells(ev.RunMarkedSucceeded)
def _marked_succeeded(say: _Say, e: ev.RunMarkedSucceeded, c: _Context) -> str:
    say(f"marked succeeded by {c.who(e.by)}")
    _reason(say, e.reason)
    return "ok"


@_tells(ev.RunMarkedFailed)
def _marked_failed(say: _Say, e: ev.RunMarkedFailed, c: _Context) -> str:
    say(f"marked failed by {c.who(e.by)}")
    _error(say, e.error_type, e.message)
    _reason(say, e.reason, "; why: ")
    return "bad"


@_tells(ev.RunHeld)
def _held(say: _Say, e: ev.RunHeld, c: _Context) -> str:
    say(f"held by {c.who(e.by)}: kept until released")
    _reason(say, e.reason, "; why: ")
    return "operator"


@_tells(ev.RunReleased)
def _hold_released(say: _Say, e: ev.RunReleased, c: _Context) -> str:
    say(f"hold released by {c.who(e.by)}")
    _reason(say, e.reason)
    return "operator"


# -- DAG streams -------------------------------------------------------------------------------


@_tells(ev.DagDefined)
def _dag_defined(say: _Say, e: ev.DagDefined, c: _Context) -> str:
    nodes = e.definition.get("nodes") if isinstance(e.definition, dict) else None
    say("DAG ", say.code(e.name), f" defined, version {e.version}",
        f" ({_n(len(nodes), 'node')})" if isinstance(nodes, list) else "")
    return "operator"


@_tells(ev.DagRunStarted)
def _dag_run_started(say: _Say, e: ev.DagRunStarted, c: _Context) -> str:
    say(f"DAG run of version {e.dag_version} started ({e.trigger}): {_n(len(e.nodes), 'node')}, "
        "its roots due ", say.when(e.due_at))
    return "busy"


@_tells(ev.DagNodeReady)
def _node_ready(say: _Say, e: ev.DagNodeReady, c: _Context) -> str:
    say("node ", say.code(e.key), " ready: run ", say.run(e.run_id), " scheduled",
        f" (run {e.generation + 1} of this node)" if e.generation else "")
    return "busy"


@_tells(ev.DagNodeFinished)
def _node_finished(say: _Say, e: ev.DagNodeFinished, c: _Context) -> str:
    say("node ", say.code(e.key), f" {e.state}: run ", say.run(e.run_id))
    if e.started_at is not None and e.finished_at is not None:
        say(f", ran {duration_words((e.finished_at - e.started_at).total_seconds())}")
    if e.attempts:
        say(f", {_n(e.attempts, 'attempt')}")
    return "ok" if e.state == "succeeded" else "bad"


@_tells(ev.DagNodeSkipped)
def _node_skipped(say: _Say, e: ev.DagNodeSkipped, c: _Context) -> str:
    say("node ", say.code(e.key), f" will not run: {e.state.replace('_', ' ')}")
    _reason(say, e.cause, " (")
    if e.cause:
        say(")")
    return "bad" if e.state == "upstream_failed" else "info"


@_tells(ev.DagRunCancelled)
def _dag_cancelled(say: _Say, e: ev.DagRunCancelled, c: _Context) -> str:
    say(f"DAG run cancelled by {c.who(e.by)}")
    _reason(say, e.reason)
    return "operator"


@_tells(ev.DagRunRetriedFromNode)
def _dag_retried(say: _Say, e: ev.DagRunRetriedFromNode, c: _Context) -> str:
    say("retried from node ", say.code(e.key), f" by {c.who(e.by)}: "
        f"{_n(len(e.reset), 'node')} waiting again")
    _reason(say, e.reason, "; why: ")
    return "operator"


@_tells(ev.DagRunFinished)
def _dag_finished(say: _Say, e: ev.DagRunFinished, c: _Context) -> str:
    counts = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in sorted(e.counts.items()))
    say(f"DAG run {e.outcome}", f": {counts}" if counts else "")
    return "ok" if e.outcome == "succeeded" else "bad"
